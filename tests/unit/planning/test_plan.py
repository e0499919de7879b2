"""`gpu-pairs plan`: the memory headroom from earlier H100 records, and `-k` selecting as pytest does."""
from __future__ import annotations

import json

import pytest
from support.helpers import H100_DATA, REPO

from pytest_gpu_pairs.cli import main as gpu_pairs
from pytest_gpu_pairs.planning.plan import select

SETTINGS = [str(REPO / "settings" / "parallel_feasibility_test.json"), str(REPO / "settings" / "slice_pairs.json")]


def test_headroom_is_the_card_less_the_largest_peak_of_a_gpus_cases(capsys):
    assert gpu_pairs(["plan", *SETTINGS, "-k", "g01 or s01", "--results", str(H100_DATA / "run"),
                      "--gpus", "1,2", "--json"]) == 0
    rows = {row["gpus"]: row for row in json.loads(capsys.readouterr().out)["predictions"]}
    total = json.loads((H100_DATA / "run" / "session.json").read_text())["gpu"]["memory_total_mb"]
    peaks = {path.parent.name: json.loads(path.read_text())["peak_vram_mb"]
             for path in (H100_DATA / "run").glob("*/result.json")}
    assert rows[1]["memory"]["headroom_mb"] == total - max(peaks.values())
    assert rows[1]["memory"]["unknown"] == []
    worst_two = max(peaks[i] for ids in rows[2]["cases_per_gpu"] for i in ids)
    assert rows[2]["memory"]["headroom_mb"] == total - worst_two


@pytest.mark.parametrize("expression, kept", [
    ("g01", ["g01-a+b"]), ("g01 or s01", ["g01-a+b", "s01-c+d"]), ("not g01", ["s01-c+d", "g02-a+d"]),
    ("A+B", ["g01-a+b"]), ("d and not s01", ["g02-a+d"]), (None, ["g01-a+b", "s01-c+d", "g02-a+d"]),
])
def test_k_selects_by_case_id_as_pytest_does(expression, kept):
    assert select(["g01-a+b", "s01-c+d", "g02-a+d"], expression) == kept


def test_a_bad_k_expression_is_one_line(capsys):
    assert gpu_pairs(["plan", *SETTINGS, "-k", "g01 or ("]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error: -k 'g01 or (': ") and out.count("\n") == 1


@pytest.mark.parametrize("gpus", ["100000000", "1," * 64 + "2", "9" * 5000, "0", "\u00b2"])
def test_a_gpu_count_past_the_bounds_is_a_usage_error(capsys, gpus):
    with pytest.raises(SystemExit) as info:
        gpu_pairs(["plan", *SETTINGS, "--gpus", gpus])
    assert info.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]  # after argparse's usage lines
    assert last.startswith("gpu-pairs plan: error: argument --gpus: expected at most 64 GPU counts from 1 to 10000 "
                           "such as 1,2,4, got ")
    assert len(last) < 250
