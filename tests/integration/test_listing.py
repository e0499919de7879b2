"""``gpu-pairs workloads`` and the profile report converter, without torch."""
import json
import subprocess
import sys

from support.helpers import REPO


def test_workloads_listing_shows_every_builtin_without_importing_torch():
    code = ("import sys; from pytest_gpu_pairs.cli import main; rc = main(['workloads', '--json']); "
            "print('TORCH', 'torch' in sys.modules, file=sys.stderr); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "TORCH False" in done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["builtin"]}
    assert len(rows) == 16
    assert rows["resnet20"]["params"] == 269722 and rows["resnet20"]["steps_per_epoch"] == 391
    assert rows["pcb"]["input_shape"] == [3, 384, 192] and rows["pcb"]["steps_per_epoch"] == 12936 // 32
    assert rows["vulberta_mlp"]["defaults"]["batch_size"] == 2 and rows["bug_localization"]["cpu_only"]


def test_parameters_are_counted_in_a_job_process_and_the_listing_process_stays_torch_free():
    code = ("import sys; from pytest_gpu_pairs.experiment.listing import measure_params; "
            "print(measure_params(['resnet20'])); print('TORCH', 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["{'resnet20': 269722}", "TORCH False"]


def test_workloads_listing_table_and_command_workloads(tmp_path):
    (tmp_path / "w.json").write_text(json.dumps({"workloads": {"mine": {"command": ["python", "train.py"]}}}))
    done = subprocess.run([sys.executable, "-m", "pytest_gpu_pairs.cli", "workloads", "--workloads-file",
                           str(tmp_path / "w.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[:3] == ["workload", "family", "params"]
    assert "densenet121" in done.stdout and "mine: python train.py" in done.stdout


def test_profile_report_converter_writes_json_and_markdown(tmp_path):
    raw = {"device": {"name": "NVIDIA H100", "memory_total_mb": 81559, "driver": "x"}, "idle_power_w": 70.0,
           "seconds": 8, "warmup_s": 2, "total_s": 300, "method": "solo",
           "workloads": [{"model": "mnist", "ok": True, "device": "cuda", "step_time_s": 0.002,
                          "samples_per_s": 16000, "util_avg_pct": 40, "power_avg_w": 150, "energy_per_step_j": 0.3,
                          "energy_per_epoch_j": 562, "epoch_time_s": 3.7, "peak_vram_nvml_mb": 600,
                          "torch_peak_reserved_mb": 90, "seed_vram_mb": 450,
                          "metrics_untrained": {"test_accuracy": 9.8}, "metrics_trained": {"test_accuracy": 40.1}},
                         {"model": "pcb", "ok": False, "error": "CUDA out of memory"}]}
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(raw))
    done = subprocess.run([sys.executable, str(REPO / "tools" / "workload_profiles" / "collate.py"), str(path), "--out-dir",
                           str(tmp_path / "ref")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "ref" / "workload_profiles.md").read_text()
    assert "| mnist | 2.0 | 16,000 |" in md and "failed: CUDA out of memory" in md
    assert "median 1.33x" in md
    assert json.loads((tmp_path / "ref" / "workload_profiles.json").read_text())["workloads"][0]["model"] == "mnist"
