"""What pytest-benchmark sees of gpu-pairs: its machine-info comparison without our part, the GPU
checked once the device is open, and the JSON file named by its path."""
from __future__ import annotations

import pytest

from pytest_gpu_pairs.plugin.benchmark import JsonFileByName, gpu_info_set_aside, warn_of_another_gpu

CPU = {"device": "cpu", "gpu_name": None, "driver": None, "cuda_driver_version": None, "idle_power_w": None,
       "gpu_memory_mb": None}
H100 = {**CPU, "device": "NVIDIA H100 80GB HBM3", "gpu_name": "NVIDIA H100 80GB HBM3", "driver": "550.54",
        "cuda_driver_version": 12040, "idle_power_w": 71.2}


class Logger:
    def __init__(self):
        self.warnings: list[str] = []

    def warning(self, text):
        self.warnings.append(text)


class Config:
    def __init__(self):
        self.stash = pytest.Stash()
        self._benchmarksession = type("Bench", (), {"logger": Logger()})()


def test_the_comparison_at_configure_sees_neither_side_s_gpu_part_and_both_get_it_back():
    config, current, saved = Config(), {"node": "a"}, {"node": "a", "gpu_pairs": dict(H100)}
    with gpu_info_set_aside(config, current, saved):
        assert current == saved == {"node": "a"}
    assert saved["gpu_pairs"] == H100 and "gpu_pairs" not in current


def test_a_compared_run_of_another_gpu_is_one_warning_once_the_device_is_open_and_idle_power_is_no_difference():
    config = Config()
    with gpu_info_set_aside(config, {}, {"gpu_pairs": dict(H100)}):
        pass
    warn_of_another_gpu(config, {**H100, "idle_power_w": 65.0})
    assert config._benchmarksession.logger.warnings == []
    warn_of_another_gpu(config, CPU)
    [line] = config._benchmarksession.logger.warnings
    assert "measured on another machine (device 'NVIDIA H100 80GB HBM3' vs 'cpu')" in line


def test_the_json_file_prints_as_its_path_and_writes_as_the_file(tmp_path):
    path = tmp_path / "b.json"
    named = JsonFileByName(open(path, "wb"))  # noqa: SIM115 - closed by the with below, as pytest-benchmark does
    assert f"{named}" == str(path) and named.name == str(path)
    with named as handle:
        handle.write(b"{}")
    assert path.read_bytes() == b"{}"
