"""A built-in's rank, trained for real: its model wrapped in DDP with the workload's own code
unchanged (word_lm asks its model for init_hidden), parameters without a gradient found before the
wrapping, and every stretch of steps timed in the result event."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from pytest_gpu_pairs.protocol import Progress  # noqa: E402
from pytest_gpu_pairs.run.dataparallel import free_port, rank_variables  # noqa: E402
from pytest_gpu_pairs.workloads.data_parallel import unused_parameters  # noqa: E402


def test_a_single_rank_of_word_lm_trains_wrapped_and_times_each_stretch(tmp_path):
    progress = tmp_path / "rank0.progress.jsonl"
    env = {**os.environ, **rank_variables(0, 1, free_port()), "GPU_PAIRS_PROGRESS": str(progress),
           "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "pytest_gpu_pairs.workloads.data_parallel", "word_lm", "--device", "cpu",
                           "--batch_size", "2", "--warmup-steps", "1", "--steps", "3", "--comm-probe-steps", "2"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = Progress.read(progress).result
    assert len(result["warmup_times_s"]) == 1 and len(result["step_times_s"]) == 3 and len(result["probe_times_s"]) == 2
    assert result["backend"] == "gloo" and result["world_size"] == 1 and result["unused_parameters"] == 0
    assert result["window_mono"][0] < result["window_mono"][1] and result["steps"] == 6
    assert json.loads(progress.read_text().splitlines()[0])["event"] == "setup"


class Headed(torch.nn.Module):
    """A backbone whose own classifier the workload leaves out, as densenet121's and pcb's do."""

    def __init__(self):
        super().__init__()
        self.features, self.classifier, self.head = torch.nn.Linear(4, 3), torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.head(self.features(x))


class Workload:
    def __init__(self):
        self.model = Headed()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def train_step(self, batch):
        self.optimizer.zero_grad(set_to_none=True)
        self.model(batch).sum().backward()
        self.optimizer.step()


def test_parameters_without_a_gradient_are_counted_before_the_wrapping():
    batches = iter([torch.ones(2, 4)] * 2)
    assert unused_parameters(Workload(), batches) == 2  # the classifier's weight and bias
