"""The cards the package carries a planning table for: each table is its committed reference
distilled, a plan picks the table of the GPU it runs on (or ``--card``), and a card the package has
no table for is planned with the H100's, saying so."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.fake_nvml import FakeClock, FakeNvml

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.cli import main as gpu_pairs
from pytest_gpu_pairs.devices import nvml
from pytest_gpu_pairs.planning import cards
from pytest_gpu_pairs.planning.cards import CARDS, H100, H200, UnknownCard, card_named, chosen_card, gpu_here
from tools.codegen.reference_pairs import ROOT

H200_REFERENCE = ROOT / "reports/reference/planner_validation/reference"


def test_the_h200_tables_are_its_committed_reference_distilled():
    from tools.codegen.h200_tables import PAIRS_TARGET, PROFILES_TARGET, render

    profiles, pairs = render()
    assert PROFILES_TARGET.read_text() == profiles and PAIRS_TARGET.read_text() == pairs


@pytest.mark.parametrize("card", CARDS, ids=lambda c: c.short)
def test_each_cards_profiles_and_pairs_are_of_that_card(card):
    table, reference = card.table(), card.pairs()
    assert table.device_name == card.name == reference.device
    assert len(table.workloads) >= 16 and set(table.workloads) <= set(BUILTINS)
    assert reference.measured.count("timeslice") >= 5


@pytest.mark.parametrize("text, card", [("NVIDIA H200", H200), ("h200", H200), (" H100 ", H100),
                                        ("nvidia h100 80gb hbm3", H100)])
def test_a_card_is_named_by_its_name_or_a_part_of_it(text, card):
    assert card_named(text) is card


@given(st.text(max_size=30))
def test_a_name_that_is_not_part_of_exactly_one_card_is_refused(text):
    matching = [c for c in CARDS if text.strip() and text.strip().lower() in c.name.lower()]
    if len(matching) == 1:
        assert card_named(text) is matching[0]
    else:
        with pytest.raises(UnknownCard, match="expected one of NVIDIA H100 80GB HBM3, NVIDIA H200"):
            card_named(text)


def test_the_gpu_here_is_read_from_nvml_and_none_without_it(monkeypatch):
    monkeypatch.undo()  # the unit tests' stand-in for gpu_here is what this test checks
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvml, "_load_nvml", lambda: FakeNvml(FakeClock(), name="NVIDIA H200", total_mb=143_771.0))
    assert gpu_here() == "NVIDIA H200"

    def no_nvml():
        raise nvml.NvmlUnavailable("NVML could not start: NVML Shared Library Not Found")

    monkeypatch.setattr(nvml, "_load_nvml", no_nvml)
    assert gpu_here() is None


@pytest.mark.parametrize("gpu, card, noted", [("NVIDIA H200", H200, False), ("NVIDIA H100 80GB HBM3", H100, False),
                                              ("NVIDIA A100-SXM4-40GB", H100, True), (None, H100, False)])
def test_the_plan_takes_the_table_of_the_gpu_here_and_says_when_there_is_none(monkeypatch, gpu, card, noted):
    monkeypatch.setattr(cards, "gpu_here", lambda: gpu)
    chosen, note = chosen_card(None, detect=True)
    assert chosen is card and (note is not None) == noted
    if noted:
        assert gpu in note and "--profiles-here" in note
    assert chosen_card("h200", detect=True) == (H200, None)
    assert chosen_card(None, detect=False) == (H100, None)  # jobs on the CPU, or plan-validate: not asked


def _settings(folder) -> str:
    """Three of the H200's measured reference pairs and one the reference set never holds."""
    reference = json.loads((ROOT / "settings/planner_reference.json").read_text())
    measured = [p for p in reference["pairs"] if p["group"] in ("r03", "r06", "r18")]
    never = {"group": "u01", "foreground": {"model": "mnist", "hyperparameters": {"epochs": 1}},
             "background": {"model": "pcb", "hyperparameters": {"epochs": 1}}}
    path = folder / "pairs.json"
    path.write_text(json.dumps({**reference, "pairs": [*measured, never]}))
    return str(path)


def _plan(capsys, settings, *extra) -> dict:
    code = gpu_pairs(["plan", settings, "--json", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _efficiencies(plan: dict) -> dict:
    """Each pair's time-sliced efficiency and interval bounds."""
    figures = {}
    for p in plan["pairs"]:
        efficiency = p["mechanisms"]["timeslice"]["efficiency"]
        for name, value in zip(("value", "low", "high"), (efficiency["value"], *(efficiency["interval"] or []))):
            figures[f"{'+'.join(p['pair'])} {name}"] = value
    return figures


def test_the_h200_table_plans_as_the_h200s_own_profiles_and_pairs_do(capsys, tmp_path):
    """The packaged table is that folder distilled, with the pairs measured again, its figures to six
    places: the same predictions, the same intervals, on the same card; only where the measured pairs
    come from is named otherwise.
    The GPM profiles' folders come first: they hold profiles alone, and lend their SM and DRAM shares
    to the study's own profiles, which stay the table's."""
    settings = _settings(tmp_path)
    packaged = _plan(capsys, settings, "--card", "h200", "--out", str(tmp_path))
    from tools.codegen.h200_tables import AGAIN

    names = ("gpm/first", "gpm/second", "timeslice", "mps_nolimit", *AGAIN)
    folders = [f for name in names if (f := H200_REFERENCE / name).is_dir()]
    here = _plan(capsys, settings, "--profiles-here", *(a for f in folders for a in ("--results", str(f))))
    assert packaged["card_mb"] == here["card_mb"] == 143_771.0
    assert _efficiencies(packaged) == pytest.approx(_efficiencies(here), abs=1e-5)
    assert packaged["model"]["profiled_device"] == "NVIDIA H200" and packaged["model"]["reference"] == str(H200.reference)
    rests = {"+".join(p["pair"]): p["rests_on"] for p in packaged["pairs"]}
    assert rests["densenet121+hrnet18"] == "measured (H200 reference)" and rests["mnist+pcb"] == "solo profiles"


def test_a_plan_on_an_h200_judges_its_pairs_by_the_h200s_table(capsys, monkeypatch, tmp_path):
    settings = _settings(tmp_path)
    h100 = _plan(capsys, settings, "--out", str(tmp_path))
    monkeypatch.setattr(cards, "gpu_here", lambda: "NVIDIA H200")
    h200 = _plan(capsys, settings, "--out", str(tmp_path))
    assert h100["model"]["profiled_device"].startswith("NVIDIA H100") and h100["card_mb"] == 81_559.0
    assert h200["model"]["profiled_device"] == "NVIDIA H200" and h200["model"]["card_note"] is None
    assert _efficiencies(h200) != _efficiencies(h100)


def test_a_gpu_the_package_has_no_table_for_is_planned_with_the_h100s_and_the_plan_says_so(capsys, monkeypatch,
                                                                                           tmp_path):
    monkeypatch.setattr(cards, "gpu_here", lambda: "NVIDIA L4")
    code = gpu_pairs(["plan", str(ROOT / "settings/planner_reference.json"), "-k", "r06", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "solo profiles of NVIDIA H100 80GB HBM3" in out
    assert "note: this GPU (NVIDIA L4) has no table in the package: planned with the NVIDIA H100 80GB HBM3's" in out


@pytest.mark.parametrize("command", ["plan", "plan-validate"])
@pytest.mark.parametrize("extra, says", [
    (["--card", "a100"], "error: --card 'a100': expected one of"),
    (["--card", "nvidia"], "error: --card 'nvidia': expected one of"),
    (["--card", "h200", "--profiles", "x.json"], "error: give one of --card, --profiles and --profiles-here, not "
                                                  "--card and --profiles"),
])
def test_a_card_that_cannot_be_used_is_refused_in_one_line(capsys, tmp_path, command, extra, says):
    settings = [str(ROOT / "settings/planner_reference.json"), "--out", str(tmp_path)] if command == "plan" else []
    assert gpu_pairs([command, *settings, *extra]) == 2
    out = capsys.readouterr().out
    assert out.startswith(says) and out.count("\n") == 1


def test_plan_validate_judges_the_card_it_is_told_on_its_own_reference(capsys, tmp_path):
    """And writes the H200's committed validation, which the reference folder's README reads from."""
    assert gpu_pairs(["plan-validate", "--card", "h200", "--json", "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    committed = H200_REFERENCE / "validation"
    assert (tmp_path / "validation.md").read_text() == (committed / "validation.md").read_text()
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads((committed / "summary.json").read_text())
    reference = json.loads((ROOT / "pytest_gpu_pairs/planning/reference_pairs_h200.json").read_text())
    pairs = sum(1 for pair in reference["pairs"] if pair["sharing"] == "timeslice")
    mps = sum(1 for pair in reference["pairs"] if pair["sharing"] == "mps")
    assert summary["measured_pairs"] == {"timeslice": pairs, "mps": mps} and pairs >= 5
    assert summary["reference"].endswith("reference_pairs_h200.json")
    held_out = summary["leave_one_workload_out"]["timeslice"]
    assert held_out["n_predictions"] == 2 * pairs and held_out["median_error"] <= held_out["max_error"] < 0.25


LIMITED = "note: 12 measured MPS pair(s) ran each job under an MPS thread limit"
WHOLE_CARD = "note: MPS figures are for MPS with no thread limit"


@pytest.mark.parametrize("card, sharing, says, under_limits", [
    ("h100", "timeslice,mps", LIMITED, 12),  # the H100 table's MPS pairs ran each job at 52 % of the threads
    ("h200", "timeslice,mps", WHOLE_CARD, 0),
    ("h100", "timeslice", None, 0),
])
def test_a_plan_says_what_its_mps_figures_are_against(capsys, card, sharing, says, under_limits):
    settings = str(ROOT / "settings/planner_reference.json")
    code = gpu_pairs(["plan", settings, "--card", card, "--sharing", sharing])
    out = capsys.readouterr().out
    assert code == 0, out
    assert [note for note in (LIMITED, WHOLE_CARD) if note in out] == ([says] if says else [])
    assert _plan(capsys, settings, "--card", card, "--sharing", sharing)["model"]["mps_pairs_under_limits"] == under_limits


def test_a_validation_says_when_its_mps_pairs_ran_under_a_thread_limit(capsys):
    assert gpu_pairs(["plan-validate", "--card", "h100"]) == 0
    assert LIMITED in capsys.readouterr().out
