"""pytest hooks only: the work lives in ``run``, ``record`` and the other plugin modules.

pytest loads this module in every session of every project where the package is installed, so it
imports only pytest and the options: the settings schema, the run layer and pydantic load when a
gpu-pairs option or ini value is given or the suite's fixture is used (``stash.gpu_pairs_session``),
and never torch.
"""
from __future__ import annotations

import pytest

from pytest_gpu_pairs.plugin import options as gpu_options
from pytest_gpu_pairs.plugin.fixtures import background_load, gpu_monitor, gpu_pairs, pair_run, solo_baseline  # noqa: F401
from pytest_gpu_pairs.plugin.stash import existing_session, gpu_pairs_session
from pytest_gpu_pairs.plugin.xdist import is_controller, is_worker

CASE_FIXTURE = "gpu_pair_case"
XDIST_KEY = pytest.StashKey[dict]()  # the controller's: the workers' GPUs, a refusal, their outputs


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_gpu_pairs.plugin import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    gpu_options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu_pairs: a case generated from a gpu-pairs settings file")
    if not config.pluginmanager.has_plugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): cases that run in one process, in their order")
    if not gpu_options.in_use(config):
        return
    if is_controller(config):
        _configure_controller(config)
    elif not is_worker(config) and len(config.getoption("gpu_pairs_gpus") or ()) > 1:
        raise pytest.UsageError("--gpu-pairs-gpus names several GPUs: run one worker per GPU with -n "
                                f"{len(config.getoption('gpu_pairs_gpus'))} (pytest-xdist)")
    gpu_options.warn_renamed(config)
    from pytest_gpu_pairs.plugin import benchmark, gate

    benchmark.refuse_unsupported(config)
    if config.pluginmanager.has_plugin("benchmark"):
        config.pluginmanager.register(benchmark.ResumedCases(_results), "gpu-pairs-resumed-cases")
        config.pluginmanager.register(benchmark.ComparisonFailure(), "gpu-pairs-benchmark-compare-fail")
        config.pluginmanager.register(benchmark.RoundFigureTable(), "gpu-pairs-round-figure-table")
    gate.configure(config)  # a worker refuses a foreign baseline before its first case; the controller compares


def _configure_controller(config: pytest.Config) -> None:
    """The workers' GPUs, one each; where the settings came from the ini alone (they may belong to
    the project's other tests) a refusal waits for a worker that collects the suite."""
    from pytest_gpu_pairs.plugin.xdist import Gathered, check_workers, cpu_workers_note

    if gpu_options.planning(config):
        raise pytest.UsageError("--gpu-pairs-plan estimates one session and does not combine with -n; "
                                "for several GPUs run: gpu-pairs plan SETTINGS --gpus 1,2,4")
    state: dict = {"gpus": None, "refusal": None, "gathered": Gathered(), "claimed": False, "collected": [],
                   "crowded": None}
    try:
        state["gpus"] = check_workers(config)
    except pytest.UsageError as exc:
        if gpu_options.asked_by_option(config):
            raise
        state["refusal"] = str(exc)
    else:
        state["crowded"] = cpu_workers_note(config, state["gpus"])
    config.stash[XDIST_KEY] = state


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config):
    """``-n auto`` with a gpu-pairs option: one worker per GPU (on the CPU, xdist's own count)."""
    if not gpu_options.asked_by_option(config):
        return None
    from pytest_gpu_pairs.plugin.xdist import auto_workers

    return auto_workers(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    state = node.config.stash.get(XDIST_KEY, None)
    if state is None:
        return
    if state["refusal"]:
        node.workerinput["gpu_pairs_refusal"] = state["refusal"]
        return
    from pytest_gpu_pairs.plugin.xdist import configure_node

    configure_node(node, state["gpus"])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    """The controller locks the output folder once a worker has collected cases, before any runs,
    and says then where its workers are more than the host's cores allow."""
    state = node.config.stash.get(XDIST_KEY, None)
    if state is None or state["claimed"]:
        return
    session = existing_session(node.config)
    if session is None or not session.options.settings:
        return
    from pytest_gpu_pairs.plugin.xdist import collected_cases
    from pytest_gpu_pairs.run.outdir import OutputFolderUnavailable

    state["collected"] = collected_cases(ids, {case.id for case in _load_cases(node.config)})
    if not state["collected"]:
        return
    state["claimed"] = True
    _say_crowded(node.config, state)
    try:
        session.claim_output_folder()
    except OutputFolderUnavailable as exc:
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    state = node.config.stash.get(XDIST_KEY, None)
    if state is not None:
        state["gathered"].add(node)


def _results(config: pytest.Config) -> list:
    session = existing_session(config)
    return session.results if session is not None else []


def _load_cases(config: pytest.Config):
    from pytest_gpu_pairs.experiment.cases import DuplicateCaseError
    from pytest_gpu_pairs.inputs import SettingsError

    try:
        return gpu_pairs_session(config).cases()
    except (SettingsError, DuplicateCaseError) as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Validate the experiment files before collecting: a bad file is one ERROR line, exit code 4."""
    if gpu_options.in_use(session.config) and gpu_pairs_session(session.config).options.settings:
        _load_cases(session.config)
        if is_worker(session.config):
            from pytest_gpu_pairs.plugin.xdist import enable_worker_benchmarks

            enable_worker_benchmarks(session.config)


def _say_crowded(config: pytest.Config, state: dict) -> None:
    """Once, before any case runs: xdist's workers are more than the host's cores allow."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if state["crowded"] and reporter is not None:
        reporter.write_line(state["crowded"], yellow=True, bold=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if CASE_FIXTURE not in metafunc.fixturenames:
        return
    refusal = getattr(metafunc.config, "workerinput", {}).get("gpu_pairs_refusal")
    if refusal:
        pytest.fail(refusal, pytrace=False)
    cases = _load_cases(metafunc.config)
    if not cases:
        raise pytest.UsageError("no gpu-pairs settings: pass --gpu-pairs-settings PATH or set gpu_pairs_settings in the ini")
    params = [pytest.param(case, id=case.id, marks=_marks(case)) for case in cases]
    metafunc.parametrize(CASE_FIXTURE, params)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """After ``-k`` and ``-m`` have selected: ``--gpu-pairs-shard`` keeps this machine's share."""
    if not gpu_options.in_use(config) or existing_session(config) is None:
        return
    if config.getoption("gpu_pairs_shard") is not None:
        from pytest_gpu_pairs.plugin.shard import shard_items

        shard_items(config, items, CASE_FIXTURE)
    if is_worker(config):
        from pytest_gpu_pairs.plugin.xdist import longest_first

        longest_first(config, items, CASE_FIXTURE)


def _selected_cases(session: pytest.Session) -> list:
    return [item.callspec.params[CASE_FIXTURE] for item in session.items
            if hasattr(item, "callspec") and CASE_FIXTURE in item.callspec.params]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Tell the session which cases will run, in order (the MPS daemon stops after the last MPS
    case; the live line counts case i of N); with ``--gpu-pairs-plan``, print their estimate."""
    state = existing_session(session.config)
    if state is None:
        return
    cases = _selected_cases(session)
    state.plan([case.id for case in cases])
    from pytest_gpu_pairs.plugin.plan import estimate_session, write_plan

    if gpu_options.planning(session.config):
        write_plan(session.config, state, cases)
    elif cases:
        estimate_session(state, cases)
        if not session.config.option.collectonly:
            _claim_output_folder(state)


def _claim_output_folder(state) -> None:
    """A session that will run cases claims the output folder before the first one: another
    session holding it is one ERROR line, exit code 4. A session without cases (collect-only, a
    plan, or a test run that selects none) leaves the folder and the process alone."""
    from pytest_gpu_pairs.run.outdir import OutputFolderUnavailable

    try:
        state.claim_output_folder()
    except OutputFolderUnavailable as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    """``--gpu-pairs-plan`` stops after the estimate, as ``--collect-only`` stops after the list."""
    if gpu_options.planning(session.config) and existing_session(session.config) is not None:
        return True
    return None


def _marks(case) -> list:
    from pytest_gpu_pairs.experiment.cases import dependency_group, unavailable_reason
    from pytest_gpu_pairs.plugin.benchmark import benchmark_marks

    marks = [pytest.mark.gpu_pairs, *benchmark_marks(case)]
    group = dependency_group(case)
    if group is not None:
        marks.append(pytest.mark.xdist_group(group))  # with --dist loadgroup: one worker, in order
    reason = unavailable_reason(case)
    if reason:
        marks.append(pytest.mark.skip(reason=reason))
    return marks


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """GPU name, driver and CUDA version beside pytest-benchmark's CPU info, for comparisons."""
    session = existing_session(config)
    env = session.opened_environment if session is not None else None
    if session is not None and env is not None:
        from pytest_gpu_pairs.plugin import gate

        machine_info["gpu_pairs"] = gate.machine_info(env, session.options.gpu_memory_mb)
        config.hook.pytest_gpu_pairs_machine_info(config=config, machine_info=machine_info)


@pytest.hookimpl(hookwrapper=True, optionalhook=True)
def pytest_benchmark_compare_machine_info(config: pytest.Config, benchmarksession, machine_info: dict,
                                          compared_benchmark: dict):
    """pytest-benchmark compares machine info at configure, before a case opened the device: the
    saved run's ``gpu_pairs`` part is set aside there and checked once the device is open."""
    from pytest_gpu_pairs.plugin.benchmark import gpu_info_set_aside

    with gpu_info_set_aside(config, machine_info, compared_benchmark.get("machine_info")):
        yield


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    """The comparison gate and the summary's files run here, inside the terminal reporter's wrapper,
    so a regression, a recorded failure or a file that could not be written both shows in the
    summary and sets the exit status."""
    state = existing_session(session.config)
    if state is not None and is_worker(session.config):
        from pytest_gpu_pairs.plugin.xdist import worker_output

        worker_output(session.config, state)
        return
    xdist_state = session.config.stash.get(XDIST_KEY, None)
    if state is not None and xdist_state is not None:
        from pytest_gpu_pairs.plugin import xdist
        from pytest_gpu_pairs.plugin.summary import written_at_end

        xdist.adopt_results(state, xdist_state["gathered"], xdist_state["collected"])
        written_at_end(session, lambda: xdist.write_session_file(state, xdist_state["gathered"]))
        written_at_end(session, lambda: xdist.write_benchmark_json(session.config, xdist_state["gathered"]))
    if state is not None:
        from pytest_gpu_pairs.plugin import gate, time_limit
        from pytest_gpu_pairs.plugin.summary import end_of_session

        gate.session_finish(session, [r.record for r in state.results], state.opened_environment, state.planned)
        end_of_session(session, state)
        time_limit.end_of_session(session)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    session = existing_session(config)
    if session is None or is_worker(config):
        return
    from pytest_gpu_pairs.plugin import gate
    from pytest_gpu_pairs.plugin.summary import terminal_summary
    from pytest_gpu_pairs.plugin.time_limit import LEFT_OUT_KEY

    if session.results or session.interrupted or config.stash.get(LEFT_OUT_KEY, []):
        terminal_summary(terminalreporter, session, list(config.invocation_params.args))
    gate.terminal_summary(terminalreporter, config)
