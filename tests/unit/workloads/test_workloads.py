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
