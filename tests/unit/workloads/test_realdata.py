"""The real-dataset readers without training: the IDX format, and the fallback to generated data
when no dataset is found (e2e/test_realdata.py trains on small files in each format)."""
import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
from support.dataset_files import write_idx  # noqa: E402

from pytest_gpu_pairs.workloads import realdata  # noqa: E402
from pytest_gpu_pairs.workloads.train import build  # noqa: E402


def test_idx_reader_reads_shape_and_bytes(tmp_path):
    array = np.arange(2 * 3 * 4).reshape(2, 3, 4) % 256
    write_idx(tmp_path / "x-idx3-ubyte", array, compress=False)
    assert (realdata.read_idx(tmp_path / "x-idx3-ubyte") == array).all()


def test_missing_dataset_falls_back_to_generated_data(tmp_path, monkeypatch):
    monkeypatch.setenv(realdata.ENV_VAR, str(tmp_path))
    assert build("mnist_rnn", "cpu", 1e-9, epochs=1).data_kind == "generated"
