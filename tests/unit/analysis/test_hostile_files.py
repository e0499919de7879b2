"""What may lie in a results folder besides good records, read by every command that reads one
(compare, report, merge, plan, dead-time, sharing-report): a FIFO or a link to a device where a
record or session.json should be, a record nested hundreds of levels deep or holding numbers of
hundreds of digits, a session.json of the wrong shape, two records of one case. Each is one line
naming the file, or a record left out with that line: never a hang, a traceback or memory
exhaustion."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.helpers import H100_DATA

from pytest_gpu_pairs import cli
from pytest_gpu_pairs.record.store import StoreError, case_records, load_result, load_run

RUN = H100_DATA / "run"
G01 = "g01-mnist_ff+resnet20-default-concurrent"
SETTINGS = {"name": "p", "pairs": [{"group": "g01", "foreground": {"model": "mnist_ff", "hyperparameters": {"epochs": 1}},
                                    "background": {"model": "resnet20", "hyperparameters": {"epochs": 1}}}]}


def results(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(RUN, out)
    return out


def replace_with_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def replace_with_device_link(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def nested(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def replace_in_record(out: Path, text: str) -> None:
    path = out / G01 / "result.json"
    path.write_text(path.read_text().replace('"fg_duration_s": ', f'"fg_duration_s": {text}, "was": ', 1))


HOSTILE = {  # what is planted, whether it is in session.json, what the line says
    "a FIFO for a record": (lambda out: replace_with_fifo(out / G01 / "result.json"), False, "got a FIFO"),
    "a link to /dev/zero for a record": (lambda out: replace_with_device_link(out / G01 / "result.json"), False,
                                         "got a character device"),
    "a FIFO for session.json": (lambda out: replace_with_fifo(out / "session.json"), True, "got a FIFO"),
    "a link to /dev/zero for session.json": (lambda out: replace_with_device_link(out / "session.json"), True,
                                             "got a character device"),
    "a record nested 500 deep": (lambda out: edit_json(out / G01 / "result.json",
                                                       lambda r: r.update(perf={"accuracy": nested(500)})),
                                 False, "nested at most 64 levels deep"),
    "a number of 400 digits in a record": (lambda out: replace_in_record(out, "9" * 400), False,
                                           "expected a finite number, got an integer of 400 digits"),
    "1e400 in a record": (lambda out: replace_in_record(out, "1e400"), False, "expected a finite number, got inf"),
    "session.json with gpu a list": (lambda out: edit_json(out / "session.json", lambda s: s.update(gpu=[1])),
                                     True, "$.gpu: expected an object or null, got list"),
    "session.json with a gpu name of numbers": (lambda out: edit_json(out / "session.json",
                                                                      lambda s: s["gpu"].update(name=[1, 2])),
                                                True, "$.gpu.name: expected a string or null"),
    "two records of one case": (lambda out: shutil.copytree(out / G01, out / "zz-stale"), False,
                                "expected one record per case, but case"),
}

COMMANDS = {
    "compare": lambda out, tmp: ["compare", str(RUN), str(out)],
    "report": lambda out, tmp: ["report", str(out), "-o", str(tmp / "report")],
    "merge": lambda out, tmp: ["merge", str(out), "-o", str(tmp / "merged")],
    "plan": lambda out, tmp: ["plan", str(tmp / "settings.json"), "--results", str(out), "--gpus", "1,2"],
    "dead-time": lambda out, tmp: ["dead-time", str(out)],
    "sharing-report": lambda out, tmp: ["sharing-report", str(out), "--out", str(tmp / "sharing")],
}
READS_NO_SESSION = {"dead-time", "sharing-report"}  # case records only


def merge_line(name: str, expected: str) -> str:
    """merge follows no link (a linked record is skipped with a note, a linked session.json refused),
    and refuses a record whose case id is not its folder's name."""
    if "link to" in name:
        return "symbolic link"
    return "expected the folder's name" if name == "two records of one case" else expected


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", HOSTILE)
def test_every_command_answers_in_one_line_naming_the_file(tmp_path, capfd, name, command):
    make, in_session, expected = HOSTILE[name]
    expected = merge_line(name, expected) if command == "merge" else expected
    out = results(tmp_path)
    make(out)
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    code = cli.main(COMMANDS[command](out, tmp_path))
    captured = capfd.readouterr()
    text = captured.out + captured.err
    assert "Traceback" not in text
    if in_session and command in READS_NO_SESSION:
        return
    lines = [line for line in text.splitlines() if expected in line]
    assert len(lines) == 1 and str(out) in lines[0], text
    assert code == 2 or lines[0].startswith(("left out: ", "note: skipped "))


def test_a_record_that_is_a_fifo_is_measured_again_on_resume(tmp_path):
    out = results(tmp_path)
    replace_with_fifo(out / G01 / "result.json")
    assert load_result(out / G01) is None
    found, problems = case_records(out)
    assert [p.parent.name for p, _ in found] == ["s01-mnist+resnet20-default-concurrent"]
    assert problems == [f"{out / G01 / 'result.json'}: $: expected a readable gpu-pairs result.json "
                        "(expected a regular file, got a FIFO)"]


def test_a_stale_copy_of_a_case_is_refused_naming_both_files(tmp_path):
    out = results(tmp_path)
    shutil.copytree(out / G01, out / "zz-stale")
    with pytest.raises(StoreError) as info:
        load_run(out)
    message = str(info.value)
    assert message.startswith(f"{out / 'zz-stale' / 'result.json'}: $.case_id: expected one record per case")
    assert f"also recorded in {out / G01 / 'result.json'}" in message and "\n" not in message


def test_two_benchmark_entries_of_one_case_are_refused_naming_both(tmp_path):
    record = json.loads((RUN / G01 / "result.json").read_text())
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"benchmarks": [{"extra_info": record}, {"extra_info": {**record, "gpu_energy_j": 1.0}}]}))
    with pytest.raises(StoreError, match=r"\$\.benchmarks\[1\]\.extra_info\.case_id: expected one record per case.*"
                                         r"also recorded in .*bench\.json at \$\.benchmarks\[0\]\.extra_info"):
        load_run(path)
