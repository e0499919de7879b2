"""Generated data is learnable: a short run at the predecessor's default learning rate beats a run at
lr 0 (which leaves the model as initialised). The cheap families are checked here on the CPU;
the archived GPU profile run (reports/archive/workload_profiles/) recorded untrained and trained
metrics of every workload."""
import pytest

torch = pytest.importorskip("torch")

from pytest_gpu_pairs.catalog import builtin  # noqa: E402
from pytest_gpu_pairs.workloads.train import build  # noqa: E402

CASES = [("mnist", 120, {}, "test_accuracy"), ("mnist_ff", 150, {}, "test_accuracy"),
         ("mnist_rnn", 1500, {}, "test_accuracy")]
UNTOUCHED_STEPS = 20  # at lr 0 no step moves a weight: the trained run's length would only cost time


def metric_after(name: str, steps: int, lr: float, hp: dict, metric: str, taken: int | None = None) -> float:
    """A run sized for `steps` (the same data and test set) that takes `taken` of them."""
    torch.set_num_threads(1)
    scale = steps / builtin(name).steps_per_epoch(hp.get("batch_size"))
    workload = build(name, "cpu", scale, epochs=1, learning_rate=lr, **hp)
    batches = workload.batches()
    for _ in range(steps if taken is None else taken):
        workload.train_step(next(batches))
    return workload.evaluate()[metric]


@pytest.mark.parametrize("name, steps, hp, metric", CASES)
def test_default_lr_beats_lr_zero(name, steps, hp, metric, monkeypatch):
    monkeypatch.delenv("GPU_PAIRS_DATA_ROOT", raising=False)
    threads = torch.get_num_threads()
    try:
        default_lr = builtin(name).hyperparameters["learning_rate"].default
        trained = metric_after(name, steps, default_lr, hp, metric)
        untouched = metric_after(name, steps, 0.0, hp, metric, taken=UNTOUCHED_STEPS)
    finally:
        torch.set_num_threads(threads)
    assert untouched < 0.15, "at lr 0 the model must stay at chance (10 classes)"
    assert trained > untouched + 0.05, (trained, untouched)
