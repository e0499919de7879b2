"""pytest-xdist: one worker per GPU, and one set of results from all of them.

**The GPUs.** ``-n auto`` starts one worker per GPU; ``--gpu-pairs-gpus 0,1,3`` names them (NVML
indices or UUIDs); without it the GPUs are the entries of ``CUDA_VISIBLE_DEVICES`` where that is
set (a Slurm allocation), else every GPU NVML sees. Worker ``gwI`` owns the I-th: its jobs see only
that GPU (``CUDA_VISIBLE_DEVICES`` set to its UUID) and its monitors open it by the same UUID in
NVML, which ignores ``CUDA_VISIBLE_DEVICES``. More workers than GPUs is refused. On the CPU
(``--gpu-pairs-device cpu``, or ``auto`` without a GPU) ``-n N`` runs N workers side by side.

**The folders.** The controller locks the output folder for the whole run; a worker does not lock
(its controller holds the lock) and writes its cases' folders into the shared output folder (each
case runs in one worker), its solo baselines as ``_solo/<job>-<digest>-gwI`` and its own files
(session.json, the MPS daemon's logs) under ``_workers/gwI``. Each worker is a session of its own:
its idle baseline, ballast, MPS daemon and solo-baseline cache.

**The hand-out.** Every worker sorts the cases longest-estimated-first (the same order in each:
the estimates are read before any case runs, as xdist starts no test until every worker has
collected), and ``--dist load`` hands them out in that order: longest-processing-time-first list
scheduling, the rule ``gpu-pairs plan`` predicts with. This is an item order rather than a
scheduler of our own, because xdist's load scheduler already gives a free worker the next pending
item; it queues two items per worker (pytest needs a test's successor to tear down), so a worker
may hold one case ahead of the strict rule.

**The results.** Each worker sends its records, its pytest-benchmark timings (re-enabled in the
worker: each worker times its own GPU's jobs, so xdist's reason for disabling does not hold) and its
machine info to the controller through ``workeroutput``; the controller prints the one gpu-pairs
summary, writes ``<out>/session.json`` (the workers' sessions inside) and ``--benchmark-json`` in
pytest-benchmark's schema with every case.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Optional

import pytest

WORKER_KEY = "gpu_pairs"
GPU_KEY = "gpu_pairs_gpu"


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """xdist's controller of workers (``-n``/``--dist`` given), not a worker."""
    if is_worker(config) or not config.pluginmanager.hasplugin("xdist"):
        return False
    workers = getattr(config.option, "numprocesses", None)
    return bool(workers) or getattr(config.option, "dist", "no") != "no"


def _visible_devices() -> Optional[list[str]]:
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None or not text.strip():
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def worker_gpus(config: pytest.Config) -> Optional[list[str]]:
    """The GPUs the workers own, in worker order, or None where jobs train on the CPU."""
    from pytest_gpu_pairs.plugin.stash import gpu_pairs_session

    options = gpu_pairs_session(config).options  # a bad option value is one usage line from there
    given = config.getoption("gpu_pairs_gpus")
    if options.device == "cpu":
        if given:
            raise pytest.UsageError("--gpu-pairs-gpus names GPUs, and --gpu-pairs-device cpu trains on the CPU")
        return None
    if given:
        return [str(index) for index in given]
    visible = _visible_devices()
    if visible is not None:
        return visible
    from pytest_gpu_pairs.devices.nvml import NvmlUnavailable, gpu_count

    try:
        count = gpu_count()
    except NvmlUnavailable as exc:
        if options.device == "cuda":
            raise pytest.UsageError(f"--gpu-pairs-device cuda under -n, but no GPU is usable: {exc}") from None
        return None
    return [str(index) for index in range(count)]


def auto_workers(config: pytest.Config) -> Optional[int]:
    """``-n auto``: one worker per GPU; on the CPU xdist's own count (None)."""
    gpus = worker_gpus(config)
    if gpus is not None and not gpus:
        raise pytest.UsageError("-n auto: no GPU to start a worker for")
    return len(gpus) if gpus is not None else None


def check_workers(config: pytest.Config) -> Optional[list[str]]:
    """At the controller's configure: the GPUs for the workers, one each, or a usage error."""
    gpus = worker_gpus(config)
    workers = config.option.numprocesses
    if gpus is not None and isinstance(workers, int) and workers > len(gpus):
        raise pytest.UsageError(f"-n {workers} asks for more workers than GPUs ({', '.join(gpus) or 'none'}): "
                                "each worker owns one GPU; lower -n or name the GPUs with --gpu-pairs-gpus")
    return gpus


def crowded_cpu(workers: int, cores: int) -> Optional[str]:
    """What ``workers`` xdist workers running pairs on the CPU do to each other where ``cores``
    physical cores cannot give each worker one for its harness and one for each of its two jobs:
    their jobs compete for cores, a job alone and the same job in a pair run at different host
    loads, and the figures can pass any bound (efficiencies above 2, slowdowns below 1). A group of
    more jobs needs a core more for each; this warns for pairs, the common case."""
    from pytest_gpu_pairs.run.cpus import ROLES  # a project that never uses gpu-pairs never loads it

    per_worker = 1 + len(ROLES)
    if workers < 2 or cores >= workers * per_worker:
        return None
    fits = max(1, cores // per_worker)
    return (f"gpu-pairs: -n {workers} on the CPU, and {cores} physical core(s) here: each worker's pair needs "
            f"{per_worker} (the harness and each job), so the workers' jobs will compete for cores and the "
            f"figures cannot be trusted (efficiencies above 2, slowdowns below 1); run with -n {fits}"
            + (" or without -n" if fits == 1 else ""))


def cpu_workers_note(config: pytest.Config, gpus: Optional[list[str]]) -> Optional[str]:
    """At the controller's configure, on the CPU only: ``crowded_cpu`` for this host and ``-n``."""
    if gpus is not None:
        return None
    from pytest_gpu_pairs.devices.cpus import physical_cores, usable_cpus

    usable = usable_cpus()
    return crowded_cpu(len(config.getoption("tx") or ()), len(physical_cores(usable))) if usable else None


def configure_node(node, gpus: Optional[list[str]]) -> None:
    """Worker ``gwI`` gets the I-th GPU."""
    if gpus is None:
        return
    index = int(str(node.gateway.id).removeprefix("gw"))
    node.workerinput[GPU_KEY] = gpus[index]


def collected_cases(node_ids: Sequence[str], case_ids: set[str]) -> list[str]:
    """The case ids among a worker's collected test ids (``path::test_pair[<case id>]``, under
    ``--dist loadgroup`` with its group after an ``@``: ``path::test_pair[<case id>]@<group>``)."""
    found = []
    for node_id in node_ids:
        test = node_id.rsplit("@", 1)[0] if "]@" in node_id else node_id
        param = test.rsplit("[", 1)[-1][:-1] if test.endswith("]") else None
        if param in case_ids:
            found.append(param)
    return found


def enable_worker_benchmarks(config: pytest.Config) -> None:
    """pytest-benchmark switches itself off in workers; a worker owning its GPU times as one process
    does. It saves nothing itself: the controller writes the one ``--benchmark-json``."""
    bench = getattr(config, "_benchmarksession", None)
    if bench is None:
        return
    if not (config.getoption("benchmark_disable") and not config.getoption("benchmark_enable")):
        bench.disabled = False
    bench.json, bench.save, bench.autosave = None, None, None


def _plain(data: Any) -> Any:
    return json.loads(json.dumps(data, default=str))


def worker_output(config: pytest.Config, session) -> None:
    """What the controller needs of this worker, in plain JSON types (execnet sends those)."""
    bench = getattr(config, "_benchmarksession", None)
    benchmarks: list[dict[str, Any]] = []
    machine: dict[str, Any] = {}
    if bench is not None:
        benchmarks = [b.as_dict(include_data=True) for b in bench.benchmarks if b and not b.has_error]
        machine = bench.get_machine_info() if benchmarks else {}
    results = [{"case_id": r.case.id, "record": r.record.to_dict(), "resumed": r.resumed,
                "enforce_efficiency": r.enforce_efficiency, "enforce_vram": r.enforce_vram} for r in session.results]
    session_file = session.own_dir / "session.json"
    config.workeroutput[WORKER_KEY] = _plain({  # type: ignore[attr-defined]  # pytest-xdist gives a worker's config it
        "results": results, "interrupted": session.interrupted, "orphans_killed": session.orphans_killed,
        "benchmarks": benchmarks, "machine_info": machine,
        "session": str(session_file) if session_file.is_file() else None})


class Gathered:
    """The workers' outputs at the controller, as they come down."""

    def __init__(self) -> None:
        self.outputs: dict[str, dict[str, Any]] = {}

    def add(self, node) -> None:
        output = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if output is not None:
            self.outputs[str(node.gateway.id)] = output

    def ordered(self) -> list[tuple[str, dict[str, Any]]]:
        return sorted(self.outputs.items(), key=lambda item: int(item[0].removeprefix("gw") or 0))


def adopt_results(session, gathered: Gathered, collected: Sequence[str] = ()) -> None:
    """The workers' case results become the controller session's, as if it had run them; a
    collected case without a result whose folder holds an incomplete one (a worker stopped by
    Ctrl-C or SIGTERM before it could report) is named as interrupted, as one process would."""
    from pytest_gpu_pairs.record.checks import CaseResult

    by_id = {case.id: case for case in session.cases()}
    for _, output in gathered.ordered():
        for result in output["results"]:
            case = by_id.get(result["case_id"])
            if case is not None:
                session.results.append(CaseResult(case, result["record"], result["enforce_efficiency"],
                                                  resumed=result["resumed"], enforce_vram=result["enforce_vram"]))
        session.interrupted.extend(output["interrupted"])
        session.orphans_killed.extend(output["orphans_killed"])
    order = {case_id: index for index, case_id in enumerate(by_id)}
    session.results.sort(key=lambda r: order[r.case.id])  # the settings' order, as one process runs them
    for case_id in collected:
        if case_id in by_id and case_id not in session.interrupted:
            session.note_unfinished(by_id[case_id])
    session.plan([r.case.id for r in session.results])


def write_session_file(session, gathered: Gathered) -> None:
    """``<out>/session.json``: the first worker's session (device, scale, ...) with every worker's."""
    from pytest_gpu_pairs.record.store import StoreError, read_session, write_session

    sessions: dict[str, dict[str, Any]] = {}
    for worker, output in gathered.ordered():
        if output.get("session"):
            try:
                found = read_session(os.path.dirname(output["session"]))
            except StoreError:
                continue
            if found is not None:
                sessions[worker] = found
    if sessions:
        first = next(iter(sessions.values()))
        write_session(session.options.out_dir, {**first, "worker": None, "workers": sessions})


def write_benchmark_json(config: pytest.Config, gathered: Gathered) -> None:
    """``--benchmark-json`` with every worker's benchmarks, in pytest-benchmark's own schema (its
    ``pytest_benchmark_generate_json`` hook makes the frame, the workers' entries fill it)."""
    from pytest_gpu_pairs.record.store import save_benchmark_json

    bench = getattr(config, "_benchmarksession", None)
    if bench is None or not bench.json:
        return
    outputs = [output for _, output in gathered.ordered()]
    benchmarks = sorted((b for output in outputs for b in output["benchmarks"]), key=lambda b: b["fullname"])
    machine = next((o["machine_info"] for o in outputs if o["machine_info"]), None) or bench.get_machine_info()
    commit = config.hook.pytest_benchmark_generate_commit_info(config=config)
    output_json = config.hook.pytest_benchmark_generate_json(config=config, benchmarks=[], include_data=True,
                                                             machine_info=machine, commit_info=commit)
    output_json["benchmarks"] = benchmarks
    save_benchmark_json(bench, output_json)


def longest_first(config: pytest.Config, items: list, case_fixture: str) -> None:
    """A worker's items in the hand-out order (``handout_rank``); other tests after them, in their order."""
    from pytest_gpu_pairs.planning.estimate import case_costs
    from pytest_gpu_pairs.plugin.plan import own_profiles, planned_device
    from pytest_gpu_pairs.plugin.stash import gpu_pairs_session

    session = gpu_pairs_session(config)
    options = session.options
    cases = {item.callspec.params[case_fixture].id: item.callspec.params[case_fixture] for item in items
             if hasattr(item, "callspec") and case_fixture in item.callspec.params}
    device = "cpu" if options.device == "cpu" else ("cuda" if options.gpu is not None else planned_device(options.device))
    own = own_profiles(session, strict=False)
    cost = {c.case_id: c.fresh_s for c in case_costs(list(cases.values()), options, device, own=own)}
    rank = handout_rank(list(cases.values()), cost)

    def key(pair):
        position, item = pair
        params = getattr(getattr(item, "callspec", None), "params", {})
        case = params.get(case_fixture)
        return (0, *rank[case.id], position) if case is not None else (1, 0.0, "", position)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


def handout_rank(cases: Sequence[Any], cost: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Each case's place in the hand-out: by its estimate in a fresh session, longest first, ties by
    case id. Cases of one dependency group (``experiment.cases.dependency_group``, which ``--dist
    loadgroup`` gives to one worker) share their group's place, its whole estimate, and keep their
    settings order among themselves (the caller breaks the tie by position)."""
    from pytest_gpu_pairs.experiment.cases import dependency_group

    unit = {case.id: dependency_group(case) or case.id for case in cases}
    unit_cost: dict[str, float] = {}
    for case_id, name in unit.items():
        unit_cost[name] = unit_cost.get(name, 0.0) + cost[case_id]
    return {case_id: (-unit_cost[name], name) for case_id, name in unit.items()}
