"""The pilot's answer per pair and factor: the interaction of sharing with a hyperparameter, or a
null estimate that says why (never a number made from runs that cannot give one)."""
import json
import math

import pytest

from pytest_gpu_pairs.record.keys import SCHEMA_VERSION
from pytest_gpu_pairs.studies.collates.hp_pilot import collate, markdown, observations, pair_answer

LR = {"default": 0.01, "lr_min": 0.002, "lr_max": 0.05}


def _rows(energy, accuracy=lambda variant, mode, repeat: None):
    rows = []
    for variant, lr in LR.items():
        for mode in ("solo", "concurrent"):
            for repeat in range(3):
                rows.append({"pair": "hp02", "variant": variant, "mode": mode, "model": "mrt_oast", "repeat": repeat,
                             "hparams": {"learning_rate": lr}, "energy": energy(variant, mode, repeat),
                             "accuracy": accuracy(variant, mode, repeat), "metric": "auc", "failure": None})
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
    from pytest_gpu_pairs.studies.collates.hp_pilot import pair_rows

    mine = pair_rows(_with_hp03(_rows(_slope_energy(0.1, 0.1))), "hp03")
    assert {r["pair"] for r in mine if r["mode"] == "solo"} == {"hp02"}
    assert pair_answer(mine, "learning_rate", "energy")["n_runs"] == 18


def test_the_pooled_answer_counts_shared_solo_runs_once():
    from pytest_gpu_pairs.studies.collates.hp_pilot import pooled_answer

    answer = pooled_answer(_with_hp03(_rows(_slope_energy(0.1, 0.3))), ["hp02", "hp03"], "learning_rate", "energy")
    assert answer["n_runs"] == 27 and answer["pairs"] == ["hp02", "hp03"]
    assert answer["ci95"][0] < 0.2 < answer["ci95"][1]
    assert pooled_answer(_with_hp03(_rows(_slope_energy(0.1, 0.3))), ["hp02"], "learning_rate", "energy")["estimate"] is None


def _written_pair(root, pair, model, metric, perf):
    """A pair's cases as the pilot writes them: each case's record, and a round folder per repeat."""
    for variant, lr in LR.items():
        for mode in ("solo", "concurrent"):
            case = root / f"{pair}-{model}+{'none' if mode == 'solo' else 'mnist'}-{variant}-{mode}"
            for repeat in range(3):
                record = {"schema": SCHEMA_VERSION, "case_id": case.name, "variant": variant, "mode": mode,
                          "fg_model": model, "fg_hparams": {"learning_rate": lr, "epochs": 2}, "perf_metric": metric,
                          "perf": perf(variant, mode, repeat), "fg_gpu_energy_j": 1000.0 + repeat,
                          "gpu_energy_j": 1500.0 + repeat, "failure": None}
                (case / f"round-0{repeat + 1}").mkdir(parents=True)
                (case / f"round-0{repeat + 1}" / "result.json").write_text(json.dumps(record))
            (case / "result.json").write_text(json.dumps(record))
    return root


def _learning(solo_slope, concurrent_slope, level=0.6):
    """A metric that moves with log10 of the learning rate, by a slope that depends on the mode."""
    def value(variant, mode, repeat):
        slope = concurrent_slope if mode == "concurrent" else solo_slope
        return level + slope * math.log10(LR[variant] / LR["default"]) + (repeat - 1) * 0.005
    return value


def _mrt_oast_perf(variant, mode, repeat):
    """The thresholded accuracy moving alike in both modes, the AUC steeper when shared."""
    return {"accuracy": _learning(0.05, 0.05, 0.5)(variant, mode, repeat),
            "auc": _learning(0.1, 0.3)(variant, mode, repeat)}


def _mnist_perf(variant, mode, repeat):
    """Its primary metric steeper when shared; an AUC beside it that never moves, which it must not read."""
    return {"test_accuracy": _learning(0.1, 0.3)(variant, mode, repeat), "auc": 0.5}


def test_mrt_oast_accuracy_is_its_auc(tmp_path):
    run = _written_pair(tmp_path / "run", "hp02", "mrt_oast", "accuracy", _mrt_oast_perf)
    rows = observations([run])
    assert {r["metric"] for r in rows} == {"auc"}
    repeats = [(variant, mode, repeat) for variant in LR for mode in ("solo", "concurrent") for repeat in range(3)]
    assert sorted(r["accuracy"] for r in rows) == sorted(_mrt_oast_perf(*key)["auc"] for key in repeats)
    answer = collate([run])["pairs"]["hp02"]["learning_rate"]["accuracy"]
    assert answer["metric"] == "auc" and answer["estimate"] == pytest.approx(0.2, abs=0.02)


def test_mrt_oast_records_without_an_auc_give_no_accuracy_and_say_so(tmp_path):
    run = _written_pair(tmp_path / "run", "hp02", "mrt_oast", "accuracy",
                        lambda *key: {"accuracy": _mrt_oast_perf(*key)["accuracy"]})
    answer = collate([run])["pairs"]["hp02"]["learning_rate"]["accuracy"]
    assert answer["estimate"] is None and answer["metric"] == "auc"
    assert answer["reason"] == "no run of this factor recorded auc"


def test_mnist_accuracy_is_its_primary_metric_and_the_pooled_answer_names_both(tmp_path):
    run = _written_pair(tmp_path / "run", "hp01", "mnist", "test_accuracy", _mnist_perf)
    run = _written_pair(run, "hp02", "mrt_oast", "accuracy", _mrt_oast_perf)
    summary = collate([run])
    answer = summary["pairs"]["hp01"]["learning_rate"]["accuracy"]
    assert answer["metric"] == "test_accuracy" and answer["estimate"] == pytest.approx(0.2, abs=0.02)
    pooled = summary["pooled"]["learning_rate"]["accuracy"]
    assert pooled["metrics"] == {"hp01": "test_accuracy", "hp02": "auc"} and pooled["n_runs"] == 36
    assert "| hp01 test_accuracy, hp02 auc: +0.2" in markdown(summary)
