"""How a scaling case's ranks are started, without starting them: torchrun's variables, the NCCL
settings every rank keeps, a built-in rank's and a command workload's command lines, each rank's
CPUs and GPUs."""
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_gpu_pairs.experiment.cases import JobConfig, ScalingPlan
from pytest_gpu_pairs.experiment.schema import CommandWorkload
from pytest_gpu_pairs.run import scaling
from pytest_gpu_pairs.run.cpus import CpuPlan, unpinned
from pytest_gpu_pairs.run.dataparallel import (
    NCCL_ENV,
    RankSetup,
    builtin_rank_spec,
    free_port,
    launcher_spec,
    rank_variables,
)
from pytest_gpu_pairs.run.environment import Environment

PLAN = ScalingPlan(gpus=2, warmup_steps=3, steps=10, comm_probe_steps=4)
BUILTIN = JobConfig("resnet20", (("batch_size", 16), ("seed", 1)))


def setup(job=BUILTIN, device="cpu", cpus=()):
    return RankSetup(job, PLAN, device, 1.0, 60.0, {"OMP_NUM_THREADS": "1"}, cpus)


def test_each_rank_gets_torchruns_variables_on_the_loopback():
    assert rank_variables(1, 2, 29500) == {
        "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
        "ROLE_RANK": "1", "ROLE_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert 0 < free_port() < 65536


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_built_in_rank_runs_the_data_parallel_entry_with_its_steps_and_nvlink_multicast_off(device):
    spec = builtin_rank_spec(setup(device=device), 1, 29500)
    assert spec.argv[:4] == [sys.executable, "-m", "pytest_gpu_pairs.workloads.data_parallel", "resnet20"]
    assert spec.argv[-8:] == ["--warmup-steps", "3", "--steps", "10", "--comm-probe-steps", "4", "--val-samples", "0"]
    assert ["--device", device] == spec.argv[4:6] and "--batch_size" in spec.argv
    assert all(spec.env[name] == value for name, value in NCCL_ENV.items())
    assert spec.env["RANK"] == "1" and spec.env["OMP_NUM_THREADS"] == "1" and spec.role == "rank1"
    assert spec.protocol is True


def test_a_command_workload_is_started_by_torchrun_each_rank_through_its_own_output(tmp_path):
    command = CommandWorkload(command=["python", "train.py"], env={"DATA": "/d"}, progress_pattern=r"step (?P<step>\d+)")
    job = JobConfig("mine", (("lr", 0.1),), command=command, base_dir=str(tmp_path))
    spec = launcher_spec(setup(job), tmp_path / "case")
    assert spec.argv[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert spec.argv[spec.argv.index("--nproc-per-node") + 1] == "2"
    tail = spec.argv[spec.argv.index("-m", 3):]
    assert tail == ["-m", "pytest_gpu_pairs.workloads.rank_output", str((tmp_path / "case").resolve()), "--",
                    "python", "train.py", "--lr", "0.1"]
    assert spec.env["DATA"] == "/d" and spec.env["NCCL_NVLS_ENABLE"] == "0" and spec.progress_pattern is None


def test_ranks_split_the_jobs_cores_and_a_gpu_loop_keeps_two():
    plan = CpuPlan({"fg": ((1,), (2,), (3,)), "bg": ((4,), (5,), (6,))}, frozenset({0}))
    assert scaling.rank_cpus(plan, 2, one_loop=False) == (frozenset({1, 2, 3}), frozenset({4, 5, 6}))
    assert scaling.rank_cpus(plan, 2, one_loop=True) == (frozenset({1, 2}), frozenset({4, 5}))
    assert scaling.rank_cpus(plan, 7, one_loop=True) == (None,) * 7
    assert scaling.rank_cpus(unpinned("no"), 2, one_loop=True) == (None, None)


@dataclass
class FakeInfo:
    index: int
    uuid: str


class FakeGpu:
    def __init__(self, index=0, uuid=None, clock=None):
        self.info = FakeInfo(index, uuid or f"GPU-{index}")


def test_the_ranks_gpus_are_the_pinned_one_the_visible_ones_or_all(monkeypatch):
    monkeypatch.setattr(scaling, "Gpu", FakeGpu)
    monkeypatch.setattr(scaling, "gpu_count", lambda: 3)
    monkeypatch.setattr(scaling, "open_gpu", lambda spec, clock=None: FakeGpu(int(spec[-1]), spec))
    own = FakeGpu(5)
    assert scaling.usable_gpus(Environment("cpu", 1.0, 10.0)) == []
    assert scaling.usable_gpus(Environment("cuda", 1.0, 10.0, gpu=own, extra_env={"CUDA_VISIBLE_DEVICES": "GPU-5"})) == [own]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [g.info.index for g in scaling.usable_gpus(Environment("cuda", 1.0, 10.0, gpu=own))] == [0, 1, 2]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-2,GPU-1")
    gpus = scaling.usable_gpus(Environment("cuda", 1.0, 10.0, gpu=own))
    assert scaling.visible_devices(gpus) == "GPU-2,GPU-1"


def test_a_rank_names_its_progress_file_and_log_by_its_rank(tmp_path):
    from pytest_gpu_pairs.run.dataparallel import rank_files
    from pytest_gpu_pairs.workloads import rank_output

    assert rank_files(tmp_path, 3) == rank_output.rank_files(tmp_path, 3)
    assert rank_files(Path("x"), 0) == (Path("x/rank0.progress.jsonl"), Path("x/rank0.log"))
