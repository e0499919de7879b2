"""Records on disk are untrusted input: a ``result.json`` edited by hand, truncated, written by an
older version or by an attacker gives every reader one line (or leaves the record out with one
line), never a traceback: the resumed session's fixture and summary, compare, report,
sharing-report and dead-time."""
from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.helpers import H100_DATA

from pytest_gpu_pairs import cli
from pytest_gpu_pairs.plugin.summary import format_table, unmeasured
from pytest_gpu_pairs.record.store import case_records, load_result

RUN = H100_DATA / "run"
GOOD = sorted(RUN.glob("*/result.json"))[0]


def _corrupted(tmp_path, change) -> tuple:
    out = tmp_path / "out"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(RUN, out)
    target = out / GOOD.parent.name / "result.json"
    data = json.loads(target.read_text())
    change(data)
    target.write_text(json.dumps(data))
    return out, target


BAD = {
    "efficiency as text": lambda r: r.update(concurrency_efficiency="1.2"),
    "notes as a list": lambda r: r.update(notes=["x"]),
    "a note that is a list": lambda r: r.update(notes={"gpu_energy_j": ["x"]}, gpu_energy_j=None),
    "an interval of texts": lambda r: r.update(concurrency_efficiency_ci=["a", "b"]),
    "rounds of numbers": lambda r: r.update(rounds=[1, 2]),
}


@pytest.mark.parametrize("change", BAD.values(), ids=BAD.keys())
def test_a_record_of_wrong_types_is_refused_in_one_line_and_rerun(tmp_path, change):
    out, target = _corrupted(tmp_path, change)
    assert load_result(target.parent) is None  # --gpu-pairs-resume measures the case again
    found, problems = case_records(out)
    assert target not in [path for path, _ in found]
    assert len(problems) == 1 and "\n" not in problems[0] and problems[0].startswith(f"{target}: $.")


def test_a_record_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    out, target = _corrupted(tmp_path, lambda r: None)
    target.write_bytes(b'{"case_id": "\xff"}')
    assert load_result(target.parent) is None
    _, problems = case_records(out)
    assert problems == [f"{target}: $: expected gpu-pairs result.json in UTF-8, got byte 0xff at offset 13"]


def test_the_summary_formats_whatever_a_valid_record_holds():
    records = [r for _, r in case_records(RUN)[0]]
    assert format_table([r.to_dict() for r in records]) and isinstance(unmeasured(records), dict)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda children: st.lists(children, max_size=3)
                           | st.dictionaries(st.text(max_size=5), children, max_size=3), max_leaves=8)
TIMELINE_KEYS = ["case_start_t", "case_end_t", "cool_down_s", "rounds", "solo"]


@st.composite
def corruption(draw):
    record = json.loads(GOOD.read_text())
    key = draw(st.sampled_from(sorted(record) + ["timeline." + k for k in TIMELINE_KEYS]))
    value = draw(json_values)

    def change(data):
        if key.startswith("timeline."):
            data.setdefault("timeline", {})[key.split(".", 1)[1]] = value
        else:
            data[key] = value
    return key, change


COMMANDS = {"compare": lambda out, tmp: ["compare", str(RUN), str(out), "--fail", "gpu_energy_j:5%"],
            "sharing-report": lambda out, tmp: ["sharing-report", str(out), "--out", str(tmp / "sharing")],
            "dead-time": lambda out, tmp: ["dead-time", str(out)]}


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corrupt=corruption(), command=st.sampled_from(sorted(COMMANDS)))
def test_the_analysis_commands_never_raise_on_a_corrupted_record(tmp_path, capsys, corrupt, command):
    _, change = corrupt
    out, _ = _corrupted(tmp_path, change)
    assert cli.main(COMMANDS[command](out, tmp_path)) in (0, 1, 2)
    capsys.readouterr()


@hsettings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corrupt=corruption())
def test_the_report_never_raises_on_a_corrupted_record(tmp_path, capsys, corrupt):
    _, change = corrupt
    out, _ = _corrupted(tmp_path, change)
    assert cli.main(["report", str(out), "-o", str(tmp_path / "report")]) in (0, 1, 2)
    capsys.readouterr()


@pytest.mark.parametrize("key, value", [("peak_vram_mb", -1e30), ("concurrency_efficiency", -1e5),
                                        ("concurrency_efficiency", 1e40), ("gpu_energy_j", 1e16)])
def test_a_figure_no_measurement_gives_is_one_line_not_a_broken_plot(tmp_path, capsys, key, value):
    """Negative memory or efficiency, or magnitudes past any run, would overflow the plots' transforms
    or ask for a figure of more pixels than exist: the report refuses the record, naming file and path."""
    out, _ = _corrupted(tmp_path, lambda data: data.update({key: value}))
    assert cli.main(["report", str(out), "-o", str(tmp_path / "report")]) == 2
    assert f".{key}: expected" in capsys.readouterr().err
