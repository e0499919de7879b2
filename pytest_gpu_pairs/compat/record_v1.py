"""Result records of layout 1, read as today's layout.

Layout 1 recorded the test accuracy of the pytorch/examples and CIFAR ResNet built-ins, and the
Rank@1/Rank@5 of the re-identification ones, in percent, next to fractions for every other
accuracy-like metric. Layout 2 records them all as fractions (0-1), so a comparison of an old
run with a new one, or a report over both, must see the old percents divided by 100; energy per
unit of such a metric grows by the same factor.

Layout 1's benchmark entries also carried ``learning_rate`` (the foreground's, as in
``fg_hparams``) and ``perf_value`` (``perf[perf_metric]``, in layout 1's units): both repeat what
the record holds, so they are dropped rather than declared.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_gpu_pairs.catalog import BUILTINS

_RESNETS = ("resnet20", "resnet32", "resnet44", "resnet56")
PERCENT_METRICS: Mapping[str, tuple[str, ...]] = {
    **{name: ("test_accuracy",) for name in ("mnist", "mnist_rnn", "mnist_ff", "siamese")},
    **{name: ("test_accuracy", "best_val_accuracy") for name in _RESNETS},
    **{name: ("rank1", "rank5") for name in ("densenet121", "hrnet18", "pcb")},
}
"""Built-in -> its metrics that layout 1 recorded in percent."""
PER_PERF = ("fg_energy_per_perf_j", "fg_energy_per_perf_j_std")
REPEATED = ("learning_rate", "perf_value")  # layout 1's copies of fg_hparams.learning_rate and perf[perf_metric]
LAYOUT = 2


def _scaled(value: Any, factor: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return value
    return value * factor


def _percent_metrics(model: Any) -> tuple[str, ...]:
    """A corrupted record's model may be any JSON value: only a built-in's name has percents."""
    return PERCENT_METRICS.get(model, ()) if isinstance(model, str) and model in BUILTINS else ()


def _fractions(perf: Any, model: Any) -> Any:
    percent = _percent_metrics(model)
    if not isinstance(perf, dict) or not percent:
        return perf
    return {name: _scaled(value, 0.01) if name in percent else value for name, value in perf.items()}


def _figures(data: dict[str, Any], model: Any, percent_metric: bool) -> dict[str, Any]:
    out = dict(data)
    if "perf" in out:
        out["perf"] = _fractions(out["perf"], model)
    if percent_metric:
        for key in PER_PERF:
            if key in out:
                out[key] = _scaled(out[key], 100.0)
        if isinstance(out.get("fg_energy_per_perf_j_ci"), list):
            out["fg_energy_per_perf_j_ci"] = [_scaled(v, 100.0) for v in out["fg_energy_per_perf_j_ci"]]
    return out


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A record read from disk, of layout 1 or older (``schema`` 1 or none: a benchmark JSON's
    ``extra_info`` carried no ``schema`` before layout 2), in layout 2; any other as it is."""
    if data.get("schema") not in (None, 1):
        return data
    model = data.get("fg_model")
    percent_metric = data.get("perf_metric") in _percent_metrics(model)
    out = _figures({k: v for k, v in data.items() if k not in REPEATED}, model, percent_metric)
    if "bg_perf" in out:
        out["bg_perf"] = _fractions(out["bg_perf"], data.get("bg_model"))
    if isinstance(out.get("rounds"), list):
        out["rounds"] = [_figures(r, model, percent_metric) if isinstance(r, dict) else r for r in out["rounds"]]
    out["schema"] = LAYOUT
    return out
