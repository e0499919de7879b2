"""Which GPU each xdist worker owns: named GPUs, a Slurm allocation's CUDA_VISIBLE_DEVICES, every
GPU NVML sees; opened in NVML by UUID and handed to the jobs as CUDA_VISIBLE_DEVICES."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from support.fake_nvml import FakeClock, FakeNvml

from pytest_gpu_pairs.devices import nvml as nvml_module
from pytest_gpu_pairs.devices.nvml import Gpu, NvmlUnavailable, open_gpu
from pytest_gpu_pairs.plugin import xdist
from pytest_gpu_pairs.run import device as device_module
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.run.session import GpuPairsSession


def fake(count=3) -> FakeNvml:
    return FakeNvml(FakeClock(), count=count)


class Config:
    """The few pieces of pytest's config the GPU assignment reads."""

    def __init__(self, device="auto", gpus=None, workers=2):
        self.values = {"gpu_pairs_gpus": gpus, "gpu_pairs_device": device}
        self.option = SimpleNamespace(numprocesses=workers)

    def getoption(self, name):
        return self.values.get(name)


@pytest.fixture
def nvml(monkeypatch):
    found = fake()
    monkeypatch.setattr(nvml_module, "_load_nvml", lambda: found)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return found


def _gpus(monkeypatch, config):
    monkeypatch.setattr("pytest_gpu_pairs.plugin.stash.gpu_pairs_session",
                        lambda c: SimpleNamespace(options=SimpleNamespace(device=c.values["gpu_pairs_device"])))
    return xdist.check_workers(config)


def test_every_gpu_nvml_sees_without_a_list(monkeypatch, nvml):
    assert _gpus(monkeypatch, Config()) == ["0", "1", "2"]


def test_named_gpus_win(monkeypatch, nvml):
    assert _gpus(monkeypatch, Config(gpus=("0", "2"))) == ["0", "2"]


def test_a_slurm_allocation_names_the_gpus(monkeypatch, nvml):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-2,GPU-fake")
    assert _gpus(monkeypatch, Config()) == ["GPU-fake-2", "GPU-fake"]


def test_more_workers_than_gpus_is_refused(monkeypatch, nvml):
    with pytest.raises(pytest.UsageError, match=r"-n 4 asks for more workers than GPUs \(0, 1, 2\)"):
        _gpus(monkeypatch, Config(workers=4))


def test_cpu_workers_own_no_gpu_and_a_gpu_list_with_cpu_is_refused(monkeypatch, nvml):
    assert _gpus(monkeypatch, Config(device="cpu", workers=8)) is None
    with pytest.raises(pytest.UsageError, match="--gpu-pairs-gpus names GPUs"):
        _gpus(monkeypatch, Config(device="cpu", gpus=("0",)))


def test_worker_i_gets_the_ith_gpu():
    node = SimpleNamespace(gateway=SimpleNamespace(id="gw1"), workerinput={})
    xdist.configure_node(node, ["0", "GPU-fake-2"])
    assert node.workerinput[xdist.GPU_KEY] == "GPU-fake-2"


def test_a_gpu_opens_by_uuid_or_nvml_index(nvml):
    assert open_gpu("GPU-fake-2", nvml).info.index == 2
    assert open_gpu("1", nvml).info.uuid == "GPU-fake-1"
    with pytest.raises(NvmlUnavailable, match="NVML has no GPU GPU-nope"):
        Gpu(nvml=nvml, uuid="GPU-nope")


def test_a_pinned_session_monitors_its_gpu_and_hands_its_uuid_to_the_jobs(tmp_path, monkeypatch, nvml):
    monkeypatch.setattr(device_module, "_idle_power", lambda gpu: (None, "not measured in this test"))
    options = GpuPairsOptions(settings=(), device="cuda", scale=1.0, vram_budget_mb=None, min_efficiency=None,
                              sample_hz=10.0, out_dir=tmp_path / "out", worker="gw1", gpu="2")
    session = GpuPairsSession(options)
    env = session.environment()
    assert env.gpu.info.index == 2 and env.extra_env == {"CUDA_VISIBLE_DEVICES": "GPU-fake-2"}
    assert session.sharing.device_env == env.extra_env  # its MPS daemon sees that GPU alone too
    assert (tmp_path / "out" / "_workers" / "gw1" / "session.json").is_file()
    assert not (tmp_path / "out" / "session.json").exists()  # the controller writes that one
    session.close()


def test_an_unpinned_session_is_as_before(tmp_path, monkeypatch, nvml):
    monkeypatch.setattr(device_module, "_idle_power", lambda gpu: (None, "not measured in this test"))
    options = GpuPairsOptions(settings=(), device="cuda", scale=1.0, vram_budget_mb=None, min_efficiency=None,
                              sample_hz=10.0, out_dir=tmp_path / "out")
    env = GpuPairsSession(options).environment()
    assert env.gpu.info.index == 0 and "CUDA_VISIBLE_DEVICES" not in env.extra_env


@pytest.mark.parametrize("text", ["0,0", "a,b", "", "1,,2"])
def test_a_bad_gpu_list_names_what_was_expected(text):
    import argparse

    from pytest_gpu_pairs.plugin.options import _gpu_list

    with pytest.raises(argparse.ArgumentTypeError, match="expected distinct GPU indices or UUIDs"):
        _gpu_list(text)


def test_gpu_lists_take_indices_and_uuids():
    from pytest_gpu_pairs.plugin.options import _gpu_list

    assert _gpu_list("0, GPU-abc,3") == ("0", "GPU-abc", "3")


def test_the_controller_finds_the_cases_among_a_workers_test_ids():
    ids = ["benchmarks/test_pairs.py::test_pair[g01-a+b-default-concurrent]", "tests/test_x.py::test_y",
           "tests/test_x.py::test_p[g01-a+b-default-concurrent]", "b/test_pairs.py::test_pair[other]"]
    assert xdist.collected_cases(ids, {"g01-a+b-default-concurrent"}) == ["g01-a+b-default-concurrent"] * 2
    grouped = ["benchmarks/test_pairs.py::test_pair[hp01-a+b-lr_max_s1-concurrent]@hp01-s1",
               "benchmarks/test_pairs.py::test_pair[hp01-a+none-default_s1-solo]@hp01-s1", "t.py::test_q[x]@g"]
    assert xdist.collected_cases(grouped, {"hp01-a+b-lr_max_s1-concurrent", "hp01-a+none-default_s1-solo"}) == \
        ["hp01-a+b-lr_max_s1-concurrent", "hp01-a+none-default_s1-solo"]


def test_a_gpu_opens_by_a_unique_uuid_prefix_as_cuda_accepts_it(nvml, monkeypatch):
    monkeypatch.setattr(nvml, "nvmlDeviceGetUUID", lambda handle: f"GPU-{handle[1]}e2a-77c1-{handle[1]}")
    assert open_gpu("GPU-2e", nvml).info.index == 2
    with pytest.raises(NvmlUnavailable):
        open_gpu("GPU-", nvml)  # names every GPU: which one the jobs see cannot be told


def test_an_unpinned_session_monitors_the_gpu_cuda_visible_devices_gives_its_jobs(tmp_path, monkeypatch, nvml):
    monkeypatch.setattr(device_module, "_idle_power", lambda gpu: (None, "not measured in this test"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    options = GpuPairsOptions(settings=(), device="cuda", scale=1.0, vram_budget_mb=None, min_efficiency=None,
                              sample_hz=10.0, out_dir=tmp_path / "out")
    env = GpuPairsSession(options).environment()
    assert env.gpu.info.index == 2 and env.extra_env == {}  # the jobs inherit the variable as it is
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-1")
    assert GpuPairsSession(options).environment().gpu.info.index == 1
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert GpuPairsSession(options).environment().gpu.info.index == 0


def test_an_entry_nvml_cannot_open_as_a_gpu_leaves_gpu_0(tmp_path, monkeypatch, nvml):
    monkeypatch.setattr(device_module, "_idle_power", lambda gpu: (None, "not measured in this test"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4f1c0d2e-0000-0000-0000-000000000000")
    options = GpuPairsOptions(settings=(), device="cuda", scale=1.0, vram_budget_mb=None, min_efficiency=None,
                              sample_hz=10.0, out_dir=tmp_path / "out")
    assert GpuPairsSession(options).environment().gpu.info.index == 0


def test_each_worker_takes_its_own_block_of_cores_and_a_session_without_workers_all_of_them():
    from pytest_gpu_pairs.plugin.options import cpu_share

    assert [cpu_share({"workerid": f"gw{i}", "workercount": 3}) for i in range(3)] == [(0, 3), (1, 3), (2, 3)]
    assert cpu_share(None) == (0, 1)
    assert cpu_share({"workerid": "gw5", "workercount": 2}) == (0, 1)  # not a worker of this count: no share
    assert cpu_share({"workerid": "node-a"}) == (0, 1)


def test_cpu_workers_that_cannot_each_have_a_core_per_job_and_the_harness_are_named():
    assert xdist.crowded_cpu(1, 1) is None  # one session: its two jobs share the CPU, which is what it measures
    assert xdist.crowded_cpu(2, 6) is None and xdist.crowded_cpu(4, 16) is None
    note = xdist.crowded_cpu(2, 2)
    assert note.startswith("gpu-pairs: -n 2 on the CPU, and 2 physical core(s) here") and "run with -n 1 or without -n" in note
    assert "run with -n 2" in xdist.crowded_cpu(3, 8)


def test_the_note_is_for_the_cpu_only():
    assert xdist.cpu_workers_note(Config(workers=8), ["0", "1"]) is None
