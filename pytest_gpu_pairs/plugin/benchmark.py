"""What pytest-benchmark sees of a case: JSON-serialisable ``params`` (the case id and its parts),
``group`` = the pair's group, no warnings about a fixture a skipped or interrupted case never
timed, and the options it cannot honour here refused in one line.

What its statistics hold (what ``--benchmark-compare`` and ``--benchmark-compare-fail`` judge): in
an ``interleaved`` case, one value per round of ``pair_s_per_solo_s``, the seconds the pair takes
per second of work one job alone would do (1 / concurrency efficiency: 0.5 when sharing is free,
1.0 when it is no better than one job after the other; lower is better), fed through the
``benchmark`` marker's timer, ``round_clock``; in an ``epoch`` case, each round's foreground run
from its start signal to its exit. ``extra_info`` holds the case's record, its wall time in
``case_wall_s``.

A case resumed from a complete earlier result is not timed again, so pytest-benchmark has no
entry for it; its record goes into the JSON under ``gpu_pairs_resumed`` instead, and when every
case was resumed the plugin writes the JSON itself rather than leave pytest-benchmark to say
"Not saving anything" over an empty file.

pytest-benchmark's habits kept working: ``--benchmark-compare`` compares its own machine info at
configure time, before a case has opened the device, so the GPU's part (``machine_info["gpu_pairs"]``,
which a saved run holds) is set aside for that comparison and checked once the device is open,
on what identifies the GPU; ``--benchmark-compare-fail`` ends in one line and exit status 1
instead of pytest-benchmark's traceback; the JSON file is named by its path.
"""
from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from typing import Any, Optional

import pytest

from pytest_gpu_pairs.record.store import RESUMED_KEY, save_benchmark_json

ROUND_FIGURE = "pair_s_per_solo_s"
ROUND_UNIT = "pair-s per solo-"  # pytest-benchmark's header then reads "Name (time in pair-s per solo-s)"
DEFAULT_COLUMNS = ["min", "max", "mean", "stddev", "median", "iqr", "outliers", "ops", "rounds", "iterations"]
ROUND_NOTE = (f"pytest-benchmark's table above: one value per complete round of {ROUND_FIGURE}, 1 / that round's "
              "efficiency (the pair's seconds per second of one job's work alone: 0.5 when sharing is free, 1.0 when it "
              "is no better than one job after the other; lower is better), so its mean is not 1 / eff of the "
              "gpu-pairs table")
MACHINE_KEY = "gpu_pairs"  # our part of pytest-benchmark's machine_info
_ROUND_CLOCK = [0.0]
_COMPARED_GPUS = pytest.StashKey[list]()  # the gpu_pairs machine info of each run --benchmark-compare loaded


def round_clock() -> float:
    """pytest-benchmark's timer for an interleaved case: it stands still while the case runs and
    moves on by one round's figure as each round is handed over, so that pytest-benchmark's
    min, max, mean, stddev, IQR and outliers are those of the rounds."""
    return _ROUND_CLOCK[0]


def _advance_round_clock(seconds: float) -> None:
    _ROUND_CLOCK[0] += seconds


def benchmark_marks(case) -> list:
    """The ``benchmark`` marker that hands a case's rounds to pytest-benchmark, for a method whose
    rounds are its own (the interleaved one)."""
    from pytest_gpu_pairs.run.methods import method_of

    return [pytest.mark.benchmark(timer=round_clock)] if method_of(case).round_clock else []


def uses_round_clock(node) -> bool:
    marker = node.get_closest_marker("benchmark")
    return marker is not None and marker.kwargs.get("timer") is round_clock


def pair_s_per_solo_s(rounds: list[dict[str, Any]]) -> list[float]:
    """Each complete round's 1 / concurrency efficiency."""
    efficiencies = [r.get("concurrency_efficiency") for r in rounds if r.get("complete")]
    return [1.0 / e for e in efficiencies if isinstance(e, (int, float)) and e > 0]


def time_rounds(benchmark, values: list[float]) -> None:
    """One pytest-benchmark round per value, through its public ``pedantic`` and the round clock."""
    feed = iter(values)
    benchmark.pedantic(_advance_round_clock, setup=lambda: ((next(feed),), {}), rounds=len(values))


def round_timer(node, benchmark) -> Optional[Callable[[list[dict[str, Any]]], Optional[str]]]:
    """What hands a case's rounds to pytest-benchmark, for a test that carries the round clock."""
    if not uses_round_clock(node):
        return None

    def hand_over(rounds: list[dict[str, Any]]) -> Optional[str]:
        values = pair_s_per_solo_s(rounds)
        if not values:
            return None
        time_rounds(benchmark, values)
        return f"{ROUND_FIGURE}: 1 / concurrency_efficiency of each of the {len(values)} complete rounds"
    return hand_over


def times_rounds(entry: dict[str, Any]) -> bool:
    """A benchmark whose statistics are an interleaved case's rounds (``pair_s_per_solo_s``)."""
    params = entry.get("params") if isinstance(entry, dict) else None
    if not (isinstance(params, dict) and "case_id" in params and params.get("mode") == "concurrent"):
        return False
    from pytest_gpu_pairs.run.methods import METHODS

    method = METHODS.get(str(params.get("method")))
    return method is not None and method.round_clock


class RoundFigureTable:
    """pytest-benchmark's table of interleaved cases, in the unit of what it holds: a group of them
    is headed "time in pair-s per solo-s" and shows each round's ``pair_s_per_solo_s`` unscaled
    (1.0417, not "1,041.7" under "time in ms"); its OPS column, 1 / mean, is no rate of anything
    here and is left out unless ``--benchmark-columns`` asks for it."""

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_benchmark_scale_unit(self, config, unit, benchmarks, best, worst, sort):
        if not benchmarks or not all(times_rounds(b) for b in benchmarks):
            return None
        return (ROUND_UNIT, 1.0) if unit == "seconds" else ("", 1.0)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        bench = getattr(session.config, "_benchmarksession", None)
        columns = getattr(bench, "columns", None)
        if isinstance(columns, list) and columns == DEFAULT_COLUMNS:
            columns.remove("ops")

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter, config: pytest.Config) -> None:
        """Under the tables, once, what pytest-benchmark's table holds where it showed a case's rounds."""
        bench = getattr(config, "_benchmarksession", None)
        shown = getattr(bench, "benchmarks", None) or []
        if not getattr(bench, "disabled", False) and any(times_rounds({"params": getattr(b, "params", None)})
                                                         for b in shown):
            terminalreporter.write_line(ROUND_NOTE)


def case_params(case) -> dict[str, Any]:
    return {"case_id": case.id, "group": case.group, "fg": case.fg.model,
            "bg": case.bg.model if case.bg is not None else None, "variant": case.variant, "mode": case.mode,
            "sharing": case.sharing, "method": case.method,
            **({"more_bgs": [job.model for job in case.more_bgs]} if case.more_bgs else {})}


def describe_benchmark(benchmark, case) -> None:
    benchmark.params = case_params(case)
    benchmark.group = case.group


def quiet_when_skipped(benchmark) -> None:
    """pytest-benchmark warns about an unused fixture unless it saw the test skipped; a case
    skipped in its fixture's setup, or stopped before its timed part, is not news to it."""
    benchmark.skipped = True


def never_timed(benchmark) -> bool:
    return getattr(benchmark, "_mode", None) is None


def resumed_entries(results) -> list[dict[str, Any]]:
    """The resumed cases as the benchmark JSON holds them: names, params and group as a timed
    entry has, the record from its ``result.json`` as ``extra_info``, and no timing statistics."""
    return [{"name": f"test_pair[{r.case.id}]", "group": r.case.group, "params": case_params(r.case),
             "extra_info": r.record.to_dict()} for r in results if r.resumed]


def add_resumed(output_json: dict[str, Any], results) -> None:
    entries = resumed_entries(results)
    if entries:
        output_json[RESUMED_KEY] = entries


def save_json_of_resumed_cases(config: pytest.Config, results) -> Optional[str]:
    """With ``--benchmark-json`` and not one case timed in this session, but some resumed: the
    JSON with their records, written through pytest-benchmark's own hooks (machine and commit
    info); the line to print, or None where pytest-benchmark saves the JSON itself."""
    bench = getattr(config, "_benchmarksession", None)
    resumed = sum(1 for r in results if r.resumed)
    if bench is None or not getattr(bench, "json", None) or bench.benchmarks or not resumed:
        return None
    hook = config.hook
    commit_info = hook.pytest_benchmark_generate_commit_info(config=config)
    hook.pytest_benchmark_update_commit_info(config=config, commit_info=commit_info)
    output = hook.pytest_benchmark_generate_json(config=config, benchmarks=[], include_data=True,
                                                 machine_info=bench.get_machine_info(), commit_info=commit_info)
    hook.pytest_benchmark_update_json(config=config, benchmarks=[], output_json=output)
    name = bench.json.name if hasattr(bench.json, "write") else str(bench.json)  # an open file in 5.2, a path in 5.3
    save_benchmark_json(bench, output)
    bench.json = None
    return (f"gpu-pairs: no case was timed in this session ({resumed} resumed from complete earlier results); "
            f"{name} holds their records under {RESUMED_KEY} (no timing statistics)")


class ResumedCases:
    """Registered while gpu-pairs is in use: puts the resumed cases' records into the benchmark
    JSON, and writes that JSON before pytest-benchmark's session end would give up on it."""

    def __init__(self, results_of):
        self._results_of = results_of

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        name_the_json_file(session.config)
        json_written_at_end(session)
        line = save_json_of_resumed_cases(session.config, self._results_of(session.config))
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if line and reporter is not None:
            reporter.write_line(line)
        yield

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_json(self, config: pytest.Config, output_json: dict) -> None:
        add_resumed(output_json, self._results_of(config))


@contextlib.contextmanager
def gpu_info_set_aside(config: pytest.Config, current: dict[str, Any], saved: Any) -> Iterator[None]:
    """pytest-benchmark's comparison of machine info without our part on either side; the saved
    run's part is kept for ``warn_of_another_gpu``."""
    saved = saved if isinstance(saved, dict) else {}
    taken = current.pop(MACHINE_KEY, None), saved.pop(MACHINE_KEY, None)
    if isinstance(taken[1], dict):
        config.stash.setdefault(_COMPARED_GPUS, []).append(taken[1])
    try:
        yield
    finally:
        for info, value in zip((current, saved), taken):
            if value is not None:
                info[MACHINE_KEY] = value


def warn_of_another_gpu(config: pytest.Config, current: dict[str, Any]) -> None:
    """Once the device is open: a run ``--benchmark-compare`` loaded that was measured on another
    GPU, driver, CUDA version or emulated card is one warning line (its numbers do not apply here)."""
    bench = getattr(config, "_benchmarksession", None)
    compared = config.stash.get(_COMPARED_GPUS, [])
    if bench is None or not compared:
        return
    from pytest_gpu_pairs.analysis.compare import machine_differences
    from pytest_gpu_pairs.record.store import Run

    for saved in compared:
        differences = machine_differences(Run("the compared run", {}, saved), Run("this session", {}, current))
        if differences:
            bench.logger.warning(f"--benchmark-compare: the compared run was measured on another machine "
                                 f"({'; '.join(differences)}); its timings do not apply here")


class JsonFileByName:
    """pytest-benchmark 5.2 keeps ``--benchmark-json`` as the file argparse opened and prints it as
    ``<_io.BufferedWriter name='...'>`` when it writes; this one writes to that file and prints as
    its path."""

    def __init__(self, handle) -> None:
        self._handle = handle
        self.name = handle.name

    def __enter__(self):
        return self._handle.__enter__()

    def __exit__(self, *exc_info):
        return self._handle.__exit__(*exc_info)

    def __getattr__(self, name: str):
        return getattr(self._handle, name)

    def __str__(self) -> str:
        return str(self.name)


def json_written_at_end(session: pytest.Session) -> None:
    """pytest-benchmark writes ``--benchmark-json`` as the session ends; a write that fails there (a
    full disk) would end the session in a traceback instead of its results: it becomes one line
    under the results table and exit status 1 (``summary.written_at_end``)."""
    bench: Any = getattr(session.config, "_benchmarksession", None)
    save = getattr(bench, "save_json", None)
    if save is None or getattr(save, "written_at_end", False):
        return
    bench.save_json = _GuardedSave(session, bench, save)


class _GuardedSave:
    """pytest-benchmark's ``save_json`` with a failed write said under the results table."""

    written_at_end = True  # wrapped already: a second session hook leaves it as it is

    def __init__(self, session: pytest.Session, bench: Any, save: Callable[[dict[str, Any]], None]):
        self.session, self.bench, self.save = session, bench, save

    def __call__(self, output_json: dict[str, Any]) -> None:
        from pytest_gpu_pairs.plugin.summary import written_at_end

        name = str(getattr(self.bench, "json", None) or "--benchmark-json")
        written_at_end(self.session, lambda: self.save(output_json), name)


def name_the_json_file(config: pytest.Config) -> None:
    bench: Any = getattr(config, "_benchmarksession", None)
    handle = getattr(bench, "json", None)
    if handle is not None and hasattr(handle, "write") and not isinstance(handle, JsonFileByName):
        bench.json = JsonFileByName(handle)


class ComparisonFailure:
    """``--benchmark-compare-fail``: pytest-benchmark lists the regressions, then raises out of the
    terminal summary (a traceback, as an internal error); here the list stays, the traceback
    becomes one line, and the exit status is 1 even where every test passed."""

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        bench = getattr(session.config, "_benchmarksession", None)
        if getattr(bench, "performance_regressions", None) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(hookwrapper=True)
    def pytest_terminal_summary(self, terminalreporter):
        outcome = yield
        failure = outcome.excinfo[1] if outcome.excinfo else None
        if type(failure).__name__ == "PerformanceRegression":
            outcome.force_result([])
            terminalreporter.write_line(f"--benchmark-compare-fail: {failure} (the regressions are listed above); "
                                        "exit status 1", red=True, bold=True)


def refuse_unsupported(config: pytest.Config) -> None:
    """``--benchmark-histogram`` draws with pygal, which pytest-benchmark does not install."""
    histogram = getattr(config.option, "benchmark_histogram", None)
    if histogram and importlib.util.find_spec("pygal") is None:
        raise pytest.UsageError("--benchmark-histogram needs pygal, which is not installed: "
                                "pip install 'pytest-benchmark[histogram]'")
