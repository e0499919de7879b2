"""The fixtures a benchmark test uses: ``pair_run`` for a whole case, and the building blocks
(``solo_baseline``, ``gpu_monitor``, ``background_load``) for tests of one's own.

pytest registers these in every session where the package is installed, so the run layer is
imported inside the fixtures, when a test asks for one, and not when this module loads.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_gpu_pairs.plugin.stash import gpu_pairs_session

if TYPE_CHECKING:
    from pytest_gpu_pairs.experiment.cases import Case
    from pytest_gpu_pairs.run.background import BackgroundLoop
    from pytest_gpu_pairs.run.session import GpuPairsSession


@pytest.fixture(scope="session")
def gpu_pairs(request) -> GpuPairsSession:
    """The session: options, device, solo baselines and results so far."""
    from pytest_gpu_pairs.plugin import live
    from pytest_gpu_pairs.plugin.benchmark import warn_of_another_gpu
    from pytest_gpu_pairs.plugin.gate import machine_info, refuse_foreign_baseline
    from pytest_gpu_pairs.record.store import StoreWriteError
    from pytest_gpu_pairs.run.device import DeviceRequestError

    session = gpu_pairs_session(request.config)
    try:
        env = session.environment()
    except DeviceRequestError as exc:
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
    except StoreWriteError as exc:
        pytest.exit(f"gpu-pairs: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)
    refuse_foreign_baseline(request.config, env, {case.id: case.method for case in session.cases()
                                                  if case.id in session.planned})
    warn_of_another_gpu(request.config, machine_info(env, session.options.gpu_memory_mb))
    live.attach(request.config, env, session)
    return session


@pytest.fixture
def pair_run(request, gpu_pair_case: Case, gpu_pairs: GpuPairsSession, benchmark):
    """``pair_run()`` measures the parametrised case and returns its ``CaseResult``; with
    ``--gpu-pairs-resume`` a case with a complete earlier result that passes this session's checks
    is skipped (and still reported), and one that fails them is not measured again: ``pair_run()``
    returns its recorded result, whose ``check()`` fails the test as a measured failure would, so
    a resumed session ends as the session that measured everything would have."""
    from pytest_gpu_pairs.plugin.benchmark import describe_benchmark, never_timed, quiet_when_skipped

    describe_benchmark(benchmark, gpu_pair_case)
    recorded = gpu_pairs.resumable(gpu_pair_case)
    if recorded is not None:
        quiet_when_skipped(benchmark)
        yield _resumed(gpu_pair_case, gpu_pairs, recorded)
        return
    left_out = gpu_pairs.left_out_for_time(gpu_pair_case)
    if left_out is not None:
        from pytest_gpu_pairs.plugin.time_limit import skip_reason

        quiet_when_skipped(benchmark)
        pytest.skip(skip_reason(left_out))
    run = _runner(gpu_pair_case, gpu_pairs, benchmark, request.node)
    live_line = gpu_pairs.environment().live
    if live_line is not None:
        live_line.case_started(*_place(gpu_pairs, gpu_pair_case.id))
    yield run
    run.close()
    if live_line is not None:
        live_line.case_ended(gpu_pairs.estimates.get(gpu_pair_case.id))
    if never_timed(benchmark):
        quiet_when_skipped(benchmark)
    gpu_pairs.note_unfinished(gpu_pair_case)
    gpu_pairs.after_case(gpu_pair_case)


def _resumed(case: Case, session: GpuPairsSession, recorded):
    """The skip of a resumed case that passes this session's checks; for one that fails them, what
    ``pair_run`` hands the test in place of a runner: the recorded result."""
    from pytest_gpu_pairs.record.checks import CaseResult

    result = CaseResult(case, recorded, session.device.enforce_efficiency, resumed=True,
                        enforce_vram=session.device.enforce_vram)
    session.results.append(result)
    if not result.problems():
        pytest.skip(f"complete result in {session.case_dir(case)}")
    return lambda: result


def _runner(case: Case, session: GpuPairsSession, benchmark, node):
    """The runner of a case's method, given the session's parts (an interleaved case's rounds are
    handed to pytest-benchmark through the round timer)."""
    from pytest_gpu_pairs.plugin.benchmark import round_timer
    from pytest_gpu_pairs.run.methods import method_of

    return method_of(case).runner(case, session.context, benchmark, round_timer(node, benchmark))


def _place(session: GpuPairsSession, case_id: str) -> tuple[int, int, float, float]:
    """(i, N, estimated seconds of the cases after this one, of this one) for the live line."""
    planned = session.planned or [case_id]
    index = planned.index(case_id) + 1 if case_id in planned else 1
    return (index, len(planned), sum(session.estimates.get(i, 0.0) for i in planned[index:]),
            session.estimates.get(case_id, 0.0))


@pytest.fixture(scope="session")
def solo_baseline(gpu_pairs: GpuPairsSession):
    """``solo_baseline(job_config)``: the job alone on the device, measured once per session."""
    from pytest_gpu_pairs.experiment.schema import DEFAULTS

    return lambda job, timeout_s=DEFAULTS.timeout_s: gpu_pairs.solos.measure(job, timeout_s)


@pytest.fixture
def gpu_monitor(gpu_pairs: GpuPairsSession):
    """A GPU sampler running for the test; None where there is no GPU to sample."""
    from pytest_gpu_pairs.monitor.gpu import PidRoles, Sampler

    env = gpu_pairs.environment()
    if env.gpu is None or env.device != "cuda":
        yield None
        return
    sampler = Sampler(env.gpu, env.sample_hz, PidRoles()).start()
    yield sampler
    sampler.stop()


@pytest.fixture
def background_load(gpu_pairs: GpuPairsSession, tmp_path):
    """``background_load("resnet20", epochs=1)`` starts a ready background loop, stopped at teardown."""
    from pytest_gpu_pairs.catalog import builtin
    from pytest_gpu_pairs.experiment.cases import JobConfig
    from pytest_gpu_pairs.experiment.schema import DEFAULTS
    from pytest_gpu_pairs.run.background import BackgroundLoop
    from pytest_gpu_pairs.run.jobs import build_spec
    from pytest_gpu_pairs.run.round import BackgroundNotReady

    loops: list[BackgroundLoop] = []
    env = gpu_pairs.environment()

    def start(model: str, timeout_s: float = DEFAULTS.ready_timeout_s, restart_delay_s: float = 0.0, **hparams) -> BackgroundLoop:
        job = JobConfig(model, tuple(sorted({**builtin(model).defaults(), **hparams}.items())))
        spec = build_spec(job, "bg", env.device, env.scale, timeout_s, env.extra_env, env.job_cpus("bg", builtin=True))
        loop = BackgroundLoop(spec, tmp_path / f"bg-{model}-{len(loops)}", restart_delay_s).start()
        loops.append(loop)
        if not loop.wait_ready(timeout_s):
            raise BackgroundNotReady(loop.not_ready_reason(timeout_s))
        return loop

    yield start
    for loop in loops:
        loop.stop()
