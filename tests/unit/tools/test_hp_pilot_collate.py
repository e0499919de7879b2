"""The pilot's answer per pair and factor: the interaction of sharing with a hyperparameter, or a
null estimate that says why (never a number made from runs that cannot give one)."""
import pytest

from tools.hp_pilot.collate import pair_answer

LR = {"default": 0.01, "lr_min": 0.002, "lr_max": 0.05}


def _rows(energy, accuracy=lambda variant, mode, repeat: None):
    rows = []
    for variant, lr in LR.items():
        for mode in ("solo", "concurrent"):
            for repeat in range(3):
                rows.append({"pair": "hp02", "variant": variant, "mode": mode, "model": "mrt_oast", "repeat": repeat,
                             "hparams": {"learning_rate": lr}, "energy": energy(variant, mode, repeat),
                             "accuracy": accuracy(variant, mode, repeat), "failure": None})
    return rows


def _slope_energy(solo_slope, concurrent_slope):
    import math

    def energy(variant, mode, repeat):
        x = math.log10(LR[variant] / LR["default"])
        slope = concurrent_slope if mode == "concurrent" else solo_slope
        return 100.0 * (1.0 + slope * x) + (repeat - 1) * 0.5
    return energy


def test_a_steeper_slope_when_shared_is_found_with_its_interval():
    answer = pair_answer(_rows(_slope_energy(0.1, 0.3)), "learning_rate", "energy")
    assert answer["estimate"] == pytest.approx(0.2, abs=0.02)
    assert answer["ci95"][0] < 0.2 < answer["ci95"][1]
    assert answer["p"] < 0.001 and answer["n_runs"] == 18


def test_the_same_slope_in_both_modes_is_no_interaction():
    answer = pair_answer(_rows(_slope_energy(0.2, 0.2)), "learning_rate", "energy")
    assert answer["ci95"][0] < 0 < answer["ci95"][1]


def test_energy_not_recorded_is_null_with_the_reason():
    answer = pair_answer(_rows(lambda *a: None), "learning_rate", "energy")
    assert answer["estimate"] is None and "GPU energy" in answer["reason"]


def test_an_outcome_that_never_moves_is_not_fitted():
    answer = pair_answer(_rows(_slope_energy(0.1, 0.1), lambda *a: 0.465), "learning_rate", "accuracy")
    assert answer["estimate"] is None and "the same" in answer["reason"]


def test_a_factor_whose_bounds_have_not_run_says_so():
    answer = pair_answer(_rows(_slope_energy(0.1, 0.1)), "epochs", "energy")
    assert answer["estimate"] is None and "no run varies epochs" in answer["reason"]


def _with_hp03(rows):
    """hp02's runs, and an hp03 that varies the same model: its concurrent runs only, its solo ones
    being hp02's (a solo job several pairs need is one case, under the first pair)."""
    for row in rows:
        row["case_id"] = f"{row['pair']}-{row['variant']}-{row['mode']}"
    return rows + [{**row, "pair": "hp03", "case_id": "hp03-" + row["case_id"]} for row in rows
                   if row["mode"] == "concurrent"]


def test_a_pair_without_solo_cases_of_its_own_reads_the_solo_runs_of_its_varied_model():
    from tools.hp_pilot.collate import pair_rows

    mine = pair_rows(_with_hp03(_rows(_slope_energy(0.1, 0.1))), "hp03")
    assert {r["pair"] for r in mine if r["mode"] == "solo"} == {"hp02"}
    assert pair_answer(mine, "learning_rate", "energy")["n_runs"] == 18


def test_the_pooled_answer_counts_shared_solo_runs_once():
    from tools.hp_pilot.collate import pooled_answer

    answer = pooled_answer(_with_hp03(_rows(_slope_energy(0.1, 0.3))), ["hp02", "hp03"], "learning_rate", "energy")
    assert answer["n_runs"] == 27 and answer["pairs"] == ["hp02", "hp03"]
    assert answer["ci95"][0] < 0.2 < answer["ci95"][1]
    assert pooled_answer(_with_hp03(_rows(_slope_energy(0.1, 0.3))), ["hp02"], "learning_rate", "energy")["estimate"] is None
