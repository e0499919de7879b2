"""Where the session object lives in pytest's config, shared by the hooks and the fixtures.

The session is built on first use (an option or ini value that asks for gpu-pairs, or the suite's
fixture), so a pytest run that never asks pays nothing for the plugin being installed.
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

import pytest

if TYPE_CHECKING:
    from pytest_gpu_pairs.run.session import GpuPairsSession

SESSION_KEY = pytest.StashKey["GpuPairsSession"]()


def existing_session(config: pytest.Config) -> Optional[GpuPairsSession]:
    """The session if something has asked for it, else None (and nothing is imported)."""
    return config.stash.get(SESSION_KEY, None)


def gpu_pairs_session(config: pytest.Config) -> GpuPairsSession:
    session = existing_session(config)
    if session is None:
        from pytest_gpu_pairs.plugin.options import options_from_config
        from pytest_gpu_pairs.run.options import OptionsError
        from pytest_gpu_pairs.run.session import GpuPairsSession

        try:
            session = GpuPairsSession(options_from_config(config))
        except OptionsError as exc:
            raise pytest.UsageError(str(exc)) from None
        session.record_extensions = lambda case, record: config.hook.pytest_gpu_pairs_record(case=case, record=record)
        config.stash[SESSION_KEY] = session
        _install_interrupt_handlers(config)
        config.add_cleanup(lambda: _closed(session))  # cleanups run last-in first-out: closed before SIGTERM is restored
    return session


def _closed(session: GpuPairsSession) -> None:
    session.close()


def _restorer(signum: signal.Signals, handler: signal.Handlers) -> Callable[[], None]:
    def restore() -> None:
        signal.signal(signum, handler)
    return restore


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _install_interrupt_handlers(config: pytest.Config) -> None:
    """SIGTERM ends the session like Ctrl-C does, so every fixture and job is torn down; and the
    first Ctrl-C (SIGINT) does, also where pytest was started with SIGINT ignored (a command put in
    the background by a script, which is how a runner or a shell loop starts it): the jobs it runs
    hold a device for hours, and a session that cannot be stopped but by SIGKILL leaves them
    running."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, ours, replaced in ((signal.SIGTERM, _raise_keyboard_interrupt, signal.SIG_DFL),
                                   (signal.SIGINT, signal.default_int_handler, signal.SIG_IGN)):
        if signal.getsignal(signum) is replaced:
            signal.signal(signum, ours)
            config.add_cleanup(_restorer(signum, replaced))
