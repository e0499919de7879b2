"""DNN+rVSM bug localization (emredogan7/bug-localization-by-dnn-and-rvsm) as the predecessor's
train_wrapper.py runs it: a CPU-only job, the GPU job's partner that loads the CPU.

Each bug report is paired with candidate source files; a sample holds five features (rVSM text
similarity, collaborative-filter score, class-name similarity, bug-fixing recency and frequency)
and whether the file was fixed for the report. k-fold cross-validation over reports (``kfold``,
10), the folds trained in parallel by all cores but one (joblib's ``n_jobs=-2``); each fold
oversamples its positive samples and fits scikit-learn's MLPRegressor as the predecessor configures it:
one hidden layer of 300 ReLU units, squared loss plus ``alpha`` L2, SGD with lr 0.001, momentum
0.9, Nesterov, minibatches of 200, at most ``max_iter`` passes, stopping after 30 passes without
a 1e-4 improvement of the training loss. Top-k accuracy (k = 1, 5, 10, 20) counts test reports
with a fixed file among their k highest-scored candidates, averaged over folds.

Written in numpy (no scikit-learn here); ``--device`` is ignored: the predecessor's job never used the
GPU. The Eclipse UI dataset has 6 495 reports; the generated candidates are 1-3 fixed files and
50 others per report, with features drawn so that fixed files score higher on a nonlinear mix of
them. ``--scale`` thins every pass to that share of its fold's minibatches (a fresh random subset
each pass), as it shortens other workloads' epochs, while ``max_iter`` and early stopping stay the
predecessor's: a scaled job does about that share of the real job's minibatches. (Capping the passes at
``max_iter * scale`` instead would not scale it: the real job stops early, long before
``max_iter``.) ``epochs`` repeats the whole cross-validation. A step in the progress protocol is one
SGD minibatch of any fold.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

REPORTS, NEGATIVES, FEATURES, BATCH, HIDDEN = 6495, 50, 5, 200, 300
LEARNING_RATE, MOMENTUM, TOL, NO_CHANGE = 0.001, 0.9, 1e-4, 30
TOP_K = (1, 5, 10, 20)
DATA_SEED = 20251118


@dataclass
class Samples:
    report: np.ndarray
    features: np.ndarray
    label: np.ndarray


def generate(reports: int = REPORTS, seed: int = DATA_SEED) -> Samples:
    """Candidates per report: 1-3 fixed files and ``NEGATIVES`` others. A fixed file's features
    are shifted along a direction that matters only jointly (the rVSM score counts when the
    class name also matches, recency when frequency is high), so a linear score is not enough."""
    rng = np.random.default_rng(seed)
    positives = rng.integers(1, 4, reports)
    per_report = positives + NEGATIVES
    report = np.repeat(np.arange(reports), per_report)
    label = np.concatenate([np.r_[np.ones(p), np.zeros(NEGATIVES)] for p in positives])
    x = rng.random((len(label), FEATURES))
    fixed = label == 1
    lift = rng.random(int(fixed.sum()))
    x[fixed, 0] = np.clip(x[fixed, 0] + 0.35 * lift, 0, 1)
    x[fixed, 2] = np.clip(x[fixed, 2] + 0.35 * (1 - lift), 0, 1)
    x[fixed, 3] = np.clip(x[fixed, 3] * 0.6 + 0.4 * x[fixed, 4], 0, 1)
    return Samples(report, x.astype(np.float64), label)


def fold_bounds(reports: int, folds: int) -> list[tuple[int, int]]:
    step = math.ceil(reports / folds)
    return [(start, min(reports, start + step)) for start in range(0, reports, step)][:folds]


def oversample(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Repeat the positive samples until they are as many as the negatives (the predecessor's oversample)."""
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    extra = rng.choice(pos, size=max(0, len(neg) - len(pos)), replace=True) if len(pos) else pos
    index = np.concatenate([neg, pos, extra])
    rng.shuffle(index)
    return x[index], y[index]


class MlpRegressor:
    """scikit-learn's MLPRegressor(hidden_layer_sizes=(300,), solver='sgd', alpha, ...) in numpy."""

    def __init__(self, alpha: float, seed: int = 1):
        rng = np.random.default_rng(seed)
        bound1, bound2 = math.sqrt(6 / (FEATURES + HIDDEN)), math.sqrt(6 / (HIDDEN + 1))
        self.params = [rng.uniform(-bound1, bound1, (FEATURES, HIDDEN)), rng.uniform(-bound1, bound1, HIDDEN),
                       rng.uniform(-bound2, bound2, (HIDDEN, 1)), rng.uniform(-bound2, bound2, 1)]
        self.velocity = [np.zeros_like(p) for p in self.params]
        self.alpha = alpha

    def predict(self, x: np.ndarray) -> np.ndarray:
        w1, b1, w2, b2 = self.params
        return (np.maximum(x @ w1 + b1, 0) @ w2 + b2).ravel()

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        w1, b1, w2, b2 = self.params
        n = len(x)
        hidden = np.maximum(x @ w1 + b1, 0)
        out = (hidden @ w2 + b2).ravel()
        error = out - y
        loss = 0.5 * float(np.mean(error ** 2)) + 0.5 * self.alpha * (np.sum(w1 ** 2) + np.sum(w2 ** 2)) / n
        d_out = (error / n).reshape(-1, 1)
        d_hidden = (d_out @ w2.T) * (hidden > 0)
        grads = [x.T @ d_hidden + self.alpha * w1 / n, d_hidden.sum(0), hidden.T @ d_out + self.alpha * w2 / n,
                 d_out.sum(0)]
        for p, v, g in zip(self.params, self.velocity, grads):
            v *= MOMENTUM
            v -= LEARNING_RATE * g
            p += MOMENTUM * v - LEARNING_RATE * g
        return loss


def top_k_accuracy(scores: np.ndarray, report: np.ndarray, label: np.ndarray) -> dict[int, float]:
    hits = {k: 0 for k in TOP_K}
    reports = np.unique(report)
    for r in reports:
        mine = report == r
        order = np.argsort(-scores[mine], kind="stable")
        fixed = label[mine][order]
        for k in TOP_K:
            hits[k] += bool(fixed[:k].any())
    return {k: hits[k] / max(1, len(reports)) for k in TOP_K}


_STEPS: Any = None  # a multiprocessing.Value, set in each worker by the pool initializer


def _share_counter(counter) -> None:
    """Pool initializer: the workers count their minibatches into one shared integer."""
    global _STEPS
    _STEPS = counter


def train_fold(args) -> dict[int, float]:
    """One fold, in a worker process: oversampled training, early stopping, top-k on held-out reports."""
    samples, start, end, alpha, max_passes, scale, seed = args
    test = (samples.report >= start) & (samples.report < end)
    rng = np.random.default_rng(seed)
    x, y = oversample(samples.features[~test], samples.label[~test], rng)
    model = MlpRegressor(alpha)
    seen_per_pass = min(len(x), minibatches_per_pass(len(x), scale) * BATCH)
    best, stale = math.inf, 0
    for _ in range(max_passes):
        order = rng.permutation(len(x))[:seen_per_pass]
        total = 0.0
        for begin in range(0, len(order), BATCH):
            batch = order[begin:begin + BATCH]
            total += model.step(x[batch], y[batch]) * len(batch)
            with _STEPS.get_lock():
                _STEPS.value += 1
        loss = total / len(order)
        stale = stale + 1 if loss > best - TOL else 0
        best = min(best, loss)
        if stale >= NO_CHANGE:
            break
    return top_k_accuracy(model.predict(samples.features[test]), samples.report[test], samples.label[test])


def minibatches_per_pass(samples: int, scale: float) -> int:
    return max(1, math.ceil(math.ceil(samples / BATCH) * scale))


def workers() -> int:
    return max(1, (os.cpu_count() or 2) - 1)


class BugLocalization:
    """Not a torch ``Workload``: it brings its own ``train`` (parallel folds) and metrics."""

    def __init__(self, info, hp, device, scale=1.0):
        self.info, self.hp, self.scale = info, hp, scale
        self.data_kind = "generated"
        self.samples = generate()
        self.results: list[dict[int, float]] = []

    def steps_per_epoch(self) -> int:
        """Minibatches of one pass over every fold's oversampled training set."""
        per_report = NEGATIVES * 2 * (1 - 1 / max(2, int(self.hp["kfold"])))
        return math.ceil(REPORTS * per_report / BATCH) * int(self.hp["kfold"])

    def train(self, progress, total: int, scaled_epoch: int) -> int:
        folds = int(self.hp["kfold"])
        context = mp.get_context("spawn")
        counter = context.Value("q", 0)
        reported = 0
        with context.Pool(min(folds, workers()), initializer=_share_counter, initargs=(counter,)) as pool:
            try:
                for repeat in range(int(self.hp.get("epochs", 1))):
                    jobs = [(self.samples, start, end, float(self.hp["alpha"]), int(self.hp["max_iter"]), self.scale,
                             int(self.hp["seed"]) + 1000 * repeat + i)
                            for i, (start, end) in enumerate(fold_bounds(REPORTS, folds))]
                    pending = pool.map_async(train_fold, jobs)
                    while not pending.ready():
                        pending.wait(0.1)
                        reported = self._report(progress, counter.value, reported, scaled_epoch)
                    self.results.extend(pending.get())
            finally:
                pool.terminate()
                pool.join()
        return self._report(progress, counter.value, reported, scaled_epoch)

    def _report(self, progress, done: int, reported: int, scaled_epoch: int) -> int:
        if done > 0 and reported == 0:
            progress.ready()
        if done > reported:
            progress.step(done, done / max(1, self.steps_per_epoch()))
        return max(done, reported)

    def final_metrics(self) -> dict[str, float]:
        return {f"top{k}_accuracy": float(np.mean([r[k] for r in self.results])) for k in TOP_K}


def make(info, hp, device, scale=1.0):
    return BugLocalization(info, hp, device, scale)
