"""The MRT-OAST probe: a configuration parses, trains as the job would and scores each epoch."""
import pytest

pytest.importorskip("torch")

from tools.hp_pilot.probe_mrt_oast import parse_config, probe  # noqa: E402


def test_a_configuration_is_names_and_numbers():
    assert parse_config("scale=0.5 epochs=2 learning_rate=1e-4") == {"scale": 0.5, "epochs": 2.0,
                                                                     "learning_rate": 1e-4}


def test_one_epoch_of_a_tiny_run_scores_the_test_pairs():
    rows = probe({"scale": 0.0002, "epochs": 1, "learning_rate": 1e-4, "edit": 0.1, "batch_size": 4})
    assert [row["step"] for row in rows] == [2]
    row = rows[0]
    assert row["edit"] == 0.1 and row["learning_rate"] == 1e-4 and row["batch_size"] == 4
    for name in ("accuracy_0.9", "accuracy_0.5", "auc", "clone_mean", "nonclone_mean"):
        assert 0.0 <= row[name] <= 1.0, name
