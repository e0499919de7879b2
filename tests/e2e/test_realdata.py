"""Real datasets in their standard on-disk formats are used instead of generated data; the
workloads train a step on small files written here (and by support/dataset_files.py) in those formats."""
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support.dataset_files import make_mnist  # noqa: E402

from pytest_gpu_pairs.workloads import realdata  # noqa: E402
from pytest_gpu_pairs.workloads.train import build  # noqa: E402


@pytest.mark.parametrize("name", ["mnist", "mnist_ff", "siamese"])
def test_mnist_workloads_train_on_real_mnist(name, tmp_path, monkeypatch):
    make_mnist(tmp_path)
    monkeypatch.setenv(realdata.ENV_VAR, str(tmp_path))
    workload = build(name, "cpu", 1e-9, epochs=1, batch_size=8)
    assert workload.data_kind == "real"
    batch = next(workload.batches())
    assert batch[0].shape[1:] == (1, 28, 28)
    workload.train_step(batch)
    assert "test_accuracy" in workload.evaluate()


def test_cifar10_batches_feed_the_resnets(tmp_path, monkeypatch):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        entry = {"data": rng.integers(0, 256, (20, 3072), dtype=np.uint8), "labels": list(range(10)) * 2}
        (folder / name).write_bytes(pickle.dumps(entry))
    monkeypatch.setenv(realdata.ENV_VAR, str(tmp_path))
    workload = build("resnet20", "cpu", 1e-9, epochs=1, batch_size=16)
    assert workload.data_kind == "real" and workload.data.train_x.shape == (100, 3, 32, 32)
    x, y = next(workload.batches())
    assert x.shape == (16, 3, 32, 32) and int(y.max()) <= 9
    workload.train_step((x, y))
    assert 0.0 <= workload.evaluate()["test_accuracy"] <= 1.0


def test_market_1501_folders_give_train_query_and_gallery(tmp_path, monkeypatch):
    from PIL import Image
    base = tmp_path / "Market-1501-v15.09.15" / "pytorch"
    rng = np.random.default_rng(2)

    def image(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (128, 64, 3), dtype=np.uint8)).save(path)

    for pid in (2, 7):
        for cam in (1, 2):
            image(base / "train_all" / f"{pid:04d}" / f"{pid:04d}_c{cam}s1_000151_01.jpg")
    for pid in (11, 12):
        image(base / "query" / f"{pid:04d}" / f"{pid:04d}_c1s1_000451_00.jpg")
        image(base / "gallery" / f"{pid:04d}" / f"{pid:04d}_c3s1_000551_02.jpg")
    image(base / "gallery" / "-1" / "-1_c2s1_000001_00.jpg")
    assert realdata.market_id_camera("-1_c2s1_000001_00.jpg") == (-1, 2)
    monkeypatch.setenv(realdata.ENV_VAR, str(tmp_path))
    workload = build("densenet121", "cpu", 1.0, epochs=1, batch_size=2)
    assert workload.data_kind == "real" and workload.classes == 2
    x, y = next(workload.batches())
    assert x.shape == (2, 3, 256, 128)
    workload.train_step((x, y))
    metrics = workload.evaluate()
    assert metrics["rank1"] in (0.0, 0.5, 1.0) and 0.0 <= metrics["map"] <= 1.0


def test_wikitext2_is_tokenised_like_pytorch_examples(tmp_path, monkeypatch):
    folder = tmp_path / "wikitext-2"
    folder.mkdir()
    words = " ".join(f"w{i % 50}" for i in range(400))
    for part in ("train", "valid", "test"):
        (folder / f"{part}.txt").write_text(f" = Title = \n {words} \n")
    train, valid, test, vocab = realdata.load_wikitext2(tmp_path)
    assert vocab == 53 and len(train) == 3 + 1 + 400 + 1
    monkeypatch.setenv(realdata.ENV_VAR, str(tmp_path))
    workload = build("word_lm", "cpu", 1e-9, epochs=1, batch_size=4)
    assert workload.data_kind == "real" and workload.model.ntoken == 53
    workload.train_step(next(workload.batches()))
    assert workload.evaluate()["test_loss"] > 0
