"""The built-in workloads: each trains two steps on the CPU and reports its family's metrics, each
in the range of its stated unit (accuracy-like ones fractions), through the progress protocol, with
the model size of the catalog; the job and profile modules run."""
import math

import pytest

torch = pytest.importorskip("torch")

from pytest_gpu_pairs.catalog import BUILTINS, builtin, metric_unit  # noqa: E402
from pytest_gpu_pairs.protocol import Progress  # noqa: E402
from pytest_gpu_pairs.workloads.train import build, parameter_count, run  # noqa: E402

# Tiny batches keep the heavy models fast on two CPU cores; input shapes stay the real ones.
SMALL = {"densenet121": {"batch_size": 2}, "hrnet18": {"batch_size": 2}, "pcb": {"batch_size": 2},
         "vulberta_mlp": {"batch_size": 1}, "vulberta_cnn": {"batch_size": 4}, "mrt_oast": {"batch_size": 4},
         "siamese": {"batch_size": 8}, "word_lm": {"batch_size": 8}, "resnet20": {"batch_size": 16},
         "resnet32": {"batch_size": 16}, "resnet44": {"batch_size": 16}, "resnet56": {"batch_size": 16},
         "bug_localization": {"kfold": 2, "max_iter": 1}, "dense_aspp": {"image_size": 32}}
# except VulBERTa's sequences, 256 tokens of 1 024: RoBERTa-base's two steps at 1 024 took 30 of the suite's
# CPU-seconds on one thread and 80 s of wall time under CI's load; its parameters do not depend on the length
SHORT_SEQUENCE = {"vulberta_mlp": 256, "vulberta_cnn": 256}


def two_step_scale(name: str, hp: dict) -> float:
    info = builtin(name)
    if info.cpu_only:
        return 1e-9
    return 2 / info.steps_per_epoch(hp.get("batch_size"))


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_two_steps_on_cpu_report_the_family_metrics(name, tmp_path, monkeypatch):
    progress_file = tmp_path / "progress.jsonl"
    monkeypatch.setenv("GPU_PAIRS_PROGRESS", str(progress_file))
    monkeypatch.delenv("GPU_PAIRS_DATA_ROOT", raising=False)
    if name in SHORT_SEQUENCE:
        monkeypatch.setattr("pytest_gpu_pairs.workloads.vulberta.SEQUENCE", SHORT_SEQUENCE[name])
    hp = {"epochs": 1, **SMALL.get(name, {})}
    scale = two_step_scale(name, hp)
    workload = build(name, "cpu", scale, **hp)
    info = builtin(name)
    if hasattr(workload, "model"):
        assert parameter_count(workload.model) == info.param_count
    assert run(info, workload, "cpu", scale) == 0
    progress = Progress.read(progress_file)
    assert progress.ready_t is not None and progress.error is None
    assert progress.total_steps == 2 or (info.cpu_only and progress.total_steps >= 1)
    metrics = progress.result["metrics"]
    assert set(info.metrics) <= set(metrics)
    assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
    outside = {m: v for m, v in metrics.items() if not metric_unit(m).low <= v <= metric_unit(m).high}
    assert outside == {}, {m: metric_unit(m).describe() for m in outside}
    assert progress.result["data"] == "generated"


def test_cpu_only_workload_ignores_the_cuda_device(tmp_path, monkeypatch):
    import subprocess
    import sys
    progress_file = tmp_path / "p.jsonl"
    env = {**__import__("os").environ, "GPU_PAIRS_PROGRESS": str(progress_file)}
    done = subprocess.run([sys.executable, "-m", "pytest_gpu_pairs.workloads", "bug_localization", "--device", "cuda",
                           "--scale", "1e-9", "--kfold", "2", "--max_iter", "1"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "device cpu" in done.stdout and "top1_accuracy" in done.stdout
    assert Progress.read(progress_file).result["peak_mem_reserved_mb"] is None


def test_bug_localization_scale_thins_each_pass_rather_than_capping_the_passes():
    """The job early-stops (one fold: after ~98 of its 10 000 passes), so a pass cap of
    max_iter * scale left a 1 % run as long as the real one."""
    import multiprocessing as mp

    from pytest_gpu_pairs.workloads import bug_localization as bl

    samples = bl.generate(reports=60)
    start, end = bl.fold_bounds(60, 2)[0]

    def minibatches(scale):
        bl._share_counter(mp.get_context("spawn").Value("q", 0))
        bl.train_fold((samples, start, end, 1e-5, 2, scale, 7))
        return bl._STEPS.value

    full = minibatches(1.0)
    assert full % 2 == 0 and full > 2
    assert minibatches(0.1) == 2 * math.ceil(full // 2 * 0.1)
    assert minibatches(1e-9) == 2


def test_profile_module_reports_window_steps_and_metrics(tmp_path):
    import json
    import subprocess
    import sys
    out = tmp_path / "p.json"
    done = subprocess.run([sys.executable, "-m", "pytest_gpu_pairs.workloads.profile", "mnist_ff", "--device", "cpu",
                           "--seconds", "0.5", "--warmup", "0.1", "--out", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["ok"] and record["steps"] >= 1 and record["window_end"] > record["window_start"]
    assert record["steps_per_epoch"] == 1563 and "test_accuracy" in record["metrics_trained"]


def test_a_built_in_asked_for_several_runs_trains_them_in_one_process_and_reads_a_warm_pace(tmp_path, monkeypatch):
    from pytest_gpu_pairs.protocol import RUNS_VAR

    progress_file = tmp_path / "progress.jsonl"
    monkeypatch.setenv("GPU_PAIRS_PROGRESS", str(progress_file))
    monkeypatch.setenv(RUNS_VAR, "3")
    info = builtin("mnist")
    scale = 12 / info.steps_per_epoch(16)
    assert run(info, build("mnist", "cpu", scale, epochs=1, batch_size=16), "cpu", scale) == 0
    progress = Progress.read(progress_file)
    assert len(progress.cycles) == 2 and progress.total_steps == 3 * 12
    assert [c["steps"] for c in progress.cycles] == [12, 24]
    assert progress.warm_rate() is not None and progress.result["steps"] == 36
