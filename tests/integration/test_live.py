"""The live status line with real processes: a round that starts its jobs tells the line, a pytest
session without a tty draws nothing, and a session in a real pseudo-terminal draws and erases it."""
import os
import pty
import sys
from types import SimpleNamespace

from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.plugin.live import ERASE_TO_END, RESTORE_CURSOR, SAVE_CURSOR
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.round import Round, Supervision


def test_a_round_tells_the_live_line_when_it_starts_and_ends(tmp_path):
    calls = []
    live = SimpleNamespace(round_started=lambda r: calls.append(("start", r)),
                           round_ended=lambda r: calls.append(("end", r)))
    env = Environment(device="cpu", scale=0.01, sample_hz=10, live=live)
    round_ = Round(JobConfig("mnist", (("epochs", 1),)), None, env, tmp_path,
                   Supervision(timeout_s=10, restart_delay_s=0))
    round_.start()
    round_.abort()
    round_.abort()
    assert calls == [("start", round_), ("end", round_)]


def test_no_live_line_when_output_is_not_a_terminal(pytester):
    pytester.makepyfile(test_live="def test_live(gpu_pairs):\n"
                                  "    print('LIVE', gpu_pairs.environment().live)\n")
    result = pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", pytester.path / "out", "-s")
    result.stdout.fnmatch_lines(["*LIVE None*"])
    assert SAVE_CURSOR not in result.stdout.str()


TTY_SUITE = """
import json, time
from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.run.round import Round, Supervision

def test_tty(gpu_pairs, tmp_path):
    round_ = Round(JobConfig("mnist", (("epochs", 1),)), None, gpu_pairs.environment(), tmp_path,
                   Supervision(timeout_s=10, restart_delay_s=0))
    round_.start()
    (tmp_path / "fg.progress.jsonl").write_text(json.dumps({"event": "step", "step": 7, "epoch": 0.5, "t": 0}) + "\\n")
    time.sleep(2.5)
    round_.abort()
"""


def _run_in_a_terminal(args: list[str], cwd) -> str:
    """Run a command with a pseudo-terminal as its controlling terminal; everything it showed."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execvpe(sys.executable, [sys.executable, *args], {**os.environ, "COLUMNS": "160"})
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(pid, 0)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def test_in_a_real_terminal_the_line_is_drawn_and_erased(tmp_path, standalone_pytest):
    (tmp_path / "test_tty.py").write_text(TTY_SUITE)
    shown = _run_in_a_terminal(["-m", "pytest", "-p", "no:cacheprovider", "--gpu-pairs-device", "cpu",
                                "--gpu-pairs-out", str(tmp_path / "out"), "test_tty.py"], tmp_path)
    assert "1 passed" in shown
    assert SAVE_CURSOR + " [mnist solo 0:0" in shown and "fg epoch 0.50 step 7" in shown
    assert RESTORE_CURSOR + ERASE_TO_END in shown


def _protocol_job(step_s: float) -> dict:
    from support.helpers import FAKE_JOB

    return {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--steps", "100000", "--step-s", str(step_s)]}


def test_an_interleaved_case_draws_the_line_with_its_round_and_phase(tmp_path, standalone_pytest):
    """The default method's case, in a real terminal: the line names the case, its round and what runs."""
    import json

    from support.helpers import SUITE

    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "s.json").write_text(json.dumps({
        "name": "live", "defaults": {"phase_s": 1.0, "settle_s": 0.2, "warmup_s": 0.5, "min_efficiency": 0.0},
        "workloads": {"trainer": _protocol_job(0.01), "loader": _protocol_job(0.02)},
        "pairs": [{"group": "p1", "foreground": {"model": "trainer"}, "background": {"model": "loader"}}]}))
    shown = _run_in_a_terminal(["-m", "pytest", "-p", "no:cacheprovider", "--gpu-pairs-device", "cpu",
                                "--gpu-pairs-settings", "s.json", "--gpu-pairs-out", str(tmp_path / "out"),
                                "test_suite.py"], tmp_path)
    assert "1 passed" in shown
    assert SAVE_CURSOR + " [case 1/1 trainer+loader round " in shown
    assert ": pair " in shown and "alone " in shown and "fg epoch " in shown
    assert RESTORE_CURSOR + ERASE_TO_END in shown
