"""``gpu-pairs workloads``, without torch."""
import json
import subprocess
import sys


def test_workloads_listing_shows_every_builtin_without_importing_torch():
    code = ("import sys; from pytest_gpu_pairs.cli import main; rc = main(['workloads', '--json']); "
            "print('TORCH', 'torch' in sys.modules, file=sys.stderr); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "TORCH False" in done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["builtin"]}
    assert len(rows) == 17
    assert rows["dense_aspp"]["input_shape"] == [3, 600, 600] and rows["dense_aspp"]["defaults"]["batch_size"] == 1
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
