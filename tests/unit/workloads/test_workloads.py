"""The built-in workloads without training: every one is implemented, model sizes match the published
models, and the cudnn.benchmark setting (e2e/test_workloads.py trains each of them)."""
import pytest

torch = pytest.importorskip("torch")

from pytest_gpu_pairs.catalog import BUILTINS, builtin  # noqa: E402
from pytest_gpu_pairs.workloads.train import build, parameter_count  # noqa: E402


def test_every_builtin_is_implemented():
    assert [name for name, info in BUILTINS.items() if not info.implemented] == []


def _published_model(name: str):
    from pytest_gpu_pairs.workloads import backbones
    trunk = {"siamese": backbones.resnet18, "densenet121": backbones.DenseNet121, "hrnet18": backbones.HRNetW18,
             "pcb": backbones.resnet50}
    if name in trunk:
        return trunk[name]()
    if name == "vulberta_mlp":
        from pytest_gpu_pairs.workloads.roberta import RobertaForSequenceClassification
        return RobertaForSequenceClassification()
    return build(name, "cpu", 1e-9, epochs=1).model


@pytest.mark.parametrize("name", sorted(n for n, i in BUILTINS.items() if i.published_params))
def test_parameter_count_within_2_percent_of_the_published_model(name):
    info = builtin(name)
    measured = parameter_count(_published_model(name))
    assert abs(measured - info.published_params) <= 0.02 * info.published_params, (measured, info.published_what)


def test_cudnn_benchmark_follows_the_original_unless_the_environment_says_otherwise(monkeypatch):
    from pytest_gpu_pairs.workloads.train import CUDNN_BENCHMARK_VAR, resolve_cudnn_benchmark

    monkeypatch.delenv(CUDNN_BENCHMARK_VAR, raising=False)
    assert resolve_cudnn_benchmark(True) is True and resolve_cudnn_benchmark(False) is False
    monkeypatch.setenv(CUDNN_BENCHMARK_VAR, "0")
    assert resolve_cudnn_benchmark(True) is False
    monkeypatch.setenv(CUDNN_BENCHMARK_VAR, "1")
    assert resolve_cudnn_benchmark(False) is True


@pytest.mark.parametrize("steady", [False, True])
def test_per_epoch_evaluation_is_left_out_only_when_the_harness_measures_steady_state(monkeypatch, steady):
    from pytest_gpu_pairs.protocol import STEADY_STATE_VAR

    monkeypatch.setenv(STEADY_STATE_VAR, "1") if steady else monkeypatch.delenv(STEADY_STATE_VAR, raising=False)
    workload = build("resnet20", "cpu", 1e-9, epochs=1)
    assert workload.eval_every_epoch
    evaluated = []
    monkeypatch.setattr(workload, "evaluate", lambda: evaluated.append(1) or {})
    workload.end_epoch()
    assert evaluated == ([] if steady else [1])


@pytest.mark.parametrize("name, kind, evaluates", [("mnist_ff", "6", True), ("mnist_ff", "6:restart", False),
                                                    ("word_lm", "6", True)])
def test_a_fit_run_trains_its_steps_evaluates_once_and_leaves_no_checkpoint(tmp_path, monkeypatch, name, kind,
                                                                             evaluates):
    """On the CPU a fit run has no allocator to read, so it reports no memory, but it runs its parts:
    its steps, and (a whole run) the evaluation and a checkpoint written and removed beside its
    progress file, whatever the workload's optimiser: one per layer (mnist_ff) or none, its SGD
    written by hand (word_lm)."""
    from pytest_gpu_pairs.catalog import builtin
    from pytest_gpu_pairs.protocol import ENV_VAR, FIT_RUN_VAR, Progress
    from pytest_gpu_pairs.workloads.train import build, run

    progress = tmp_path / "p.jsonl"
    monkeypatch.setenv(ENV_VAR, str(progress))
    monkeypatch.setenv(FIT_RUN_VAR, kind)
    assert run(builtin(name), build(name, "cpu", 0.01, epochs=50), "cpu", 0.01) == 0
    read = Progress.read(progress)
    assert read.total_steps == 6 and read.memory == []
    assert bool(read.result["metrics"]) is evaluates
    assert not list(tmp_path.glob("fit-checkpoint-*"))
