"""pytest hooks only: the work lives in ``run``, ``record`` and the other plugin modules.

Importing this module must stay cheap: pytest loads it in every session of every project where
the package is installed, and it must never import torch.
"""
from __future__ import annotations

import signal
import threading

import pytest

from pytest_gpu_pairs.experiment.cases import DuplicateCaseError, unavailable_reason
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.plugin import gate
from pytest_gpu_pairs.plugin.fixtures import background_load, gpu_monitor, gpu_pairs, pair_run, solo_baseline  # noqa: F401
from pytest_gpu_pairs.plugin.options import add_options, options_from_config
from pytest_gpu_pairs.plugin.stash import SESSION_KEY
from pytest_gpu_pairs.plugin.summary import terminal_summary
from pytest_gpu_pairs.run.options import OptionsError
from pytest_gpu_pairs.run.session import GpuPairsSession, OutputFolderUnavailable

_PREVIOUS_SIGTERM = pytest.StashKey[object]()
CASE_FIXTURE = "gpu_pair_case"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_gpu_pairs.plugin import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu_pairs: a case generated from a gpu-pairs settings file")
    try:
        session = GpuPairsSession(options_from_config(config))
    except OptionsError as exc:
        raise pytest.UsageError(str(exc)) from None
    session.record_extensions = lambda case, record: config.hook.pytest_gpu_pairs_record(case=case, record=record)
    config.stash[SESSION_KEY] = session
    gate.configure(config)
    _install_sigterm_handler(config)


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _install_sigterm_handler(config: pytest.Config) -> None:
    """SIGTERM ends the session like Ctrl-C does, so every fixture and job is torn down."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        config.stash[_PREVIOUS_SIGTERM] = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()
    previous = config.stash.get(_PREVIOUS_SIGTERM, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def _load_cases(session: GpuPairsSession):
    try:
        return session.cases()
    except (SettingsError, DuplicateCaseError) as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Validate the experiment files before collecting: a bad file is one ERROR line, exit code 4."""
    state = session.config.stash[SESSION_KEY]
    if state.options.settings:
        _load_cases(state)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if CASE_FIXTURE not in metafunc.fixturenames:
        return
    cases = _load_cases(metafunc.config.stash[SESSION_KEY])
    if not cases:
        raise pytest.UsageError("no gpu-pairs settings: pass --gpu-pairs-settings PATH or set gpu_pairs_settings in the ini")
    params = [pytest.param(case, id=case.id, marks=_marks(case)) for case in cases]
    metafunc.parametrize(CASE_FIXTURE, params)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Tell the session which cases will run, in order: the MPS daemon stops after the last MPS case.

    A session that will run cases claims the output folder here, before the first one: another
    session holding it is one ERROR line, exit code 4. A session without cases (collect-only, or
    a test run that selects none) leaves the folder and the process alone."""
    ids = [item.callspec.params[CASE_FIXTURE].id for item in session.items
           if hasattr(item, "callspec") and CASE_FIXTURE in item.callspec.params]
    state = session.config.stash[SESSION_KEY]
    state.plan(ids)
    if ids and not session.config.option.collectonly:
        try:
            state.claim_output_folder()
        except OutputFolderUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None


def _marks(case) -> list:
    marks = [pytest.mark.gpu_pairs]
    reason = unavailable_reason(case)
    if reason:
        marks.append(pytest.mark.skip(reason=reason))
    return marks


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """GPU name, driver and CUDA version beside pytest-benchmark's CPU info, for comparisons."""
    session = config.stash.get(SESSION_KEY, None)
    env = session.opened_environment if session is not None else None
    if env is not None:
        machine_info["gpu_pairs"] = gate.machine_info(env, session.options.gpu_memory_mb)
        config.hook.pytest_gpu_pairs_machine_info(config=config, machine_info=machine_info)


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    """The comparison gate runs here, inside the terminal reporter's wrapper, so a regression both
    shows in the summary and sets the exit status."""
    state = session.config.stash.get(SESSION_KEY, None)
    if state is not None:
        gate.session_finish(session, [r.record for r in state.results], state.opened_environment, state.planned)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None and session.results:
        terminal_summary(terminalreporter, session)
    gate.terminal_summary(terminalreporter, config)
