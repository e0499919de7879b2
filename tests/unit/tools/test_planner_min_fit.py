"""tools/planner/min_fit.py's bisection loop with the GPU probe replaced: a probe whose job finished
its training before a steady state stops that workload with no min fit and the reason, and a resumed
run answers from the saved probes without probing again."""
from __future__ import annotations

import math

from pytest_gpu_pairs.run.minfit import ProbeOutcome
from tools.planner import min_fit


def _probe_stub(monkeypatch, need_mb=None, short=False):
    probed = []

    def probe(jobs, size, gpu, work, steps):
        probed.append(size)
        if short:
            return ProbeOutcome(size, False, "job0 finished its training after 4 step reports", (), conclusive=False)
        return ProbeOutcome(size, size >= need_mb, "fits" if size >= need_mb else "job0 ran out of memory")

    monkeypatch.setattr(min_fit, "probe_fits", probe)
    return probed


def _measure(state, tmp_path, hint=3000):
    return min_fit.measure("model", ["mnist"], state, lambda: None, None, tmp_path, hint, 80_000, math.inf)


def test_a_training_shorter_than_the_probe_gives_no_min_fit_and_says_why(monkeypatch, tmp_path):
    probed = _probe_stub(monkeypatch, short=True)
    state = {}
    entry = _measure(state, tmp_path)
    assert entry["min_fit_mb"] is None and entry["done"] and "finished its training" in entry["inconclusive"]
    assert probed == [3000]


def test_a_resumed_run_answers_from_saved_probes_and_stops_at_a_saved_inconclusive_one(monkeypatch, tmp_path):
    _probe_stub(monkeypatch, need_mb=4100)
    state = {}
    entry = _measure(state, tmp_path)
    assert entry["no_fit_mb"] < 4100 <= entry["min_fit_mb"] <= entry["no_fit_mb"] + min_fit.RESOLUTION_MB
    probed_again = _probe_stub(monkeypatch, need_mb=4100)
    state["model"]["done"] = False
    assert _measure(state, tmp_path)["min_fit_mb"] == entry["min_fit_mb"] and probed_again == []
    state["model"] = {"models": ["mnist"], "probes": {"3000": {"card_mb": 3000, "fits": False, "reason": "short",
                                                               "conclusive": False}}}
    assert _measure(state, tmp_path)["inconclusive"] == "short" and probed_again == []
