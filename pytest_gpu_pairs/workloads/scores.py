"""Metric arithmetic the workload families share (binary precision/recall/F1, ROC AUC, top-k)."""
from __future__ import annotations

import torch


def binary_scores(predicted: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """Accuracy, precision, recall and F1 of 0/1 predictions; an undefined ratio counts as 0."""
    predicted, target = predicted.bool(), target.bool()
    tp = (predicted & target).sum().item()
    fp = (predicted & ~target).sum().item()
    fn = (~predicted & target).sum().item()
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = (predicted == target).float().mean().item()
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1}


def roc_auc(scores: torch.Tensor, target: torch.Tensor) -> float:
    """The probability that a random positive scores above a random negative, ties counting half
    (Mann-Whitney): how well the scores rank, whatever threshold a test applies. A model whose
    scores have not yet crossed a strict threshold shows here whether it has learned. NaN when
    one class is absent."""
    scores, positive = scores.detach().double().flatten(), target.bool().flatten()
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = _average_ranks(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks, tied values sharing the mean of their ranks."""
    unique, inverse, counts = torch.unique(values, return_inverse=True, return_counts=True)
    last = torch.cumsum(counts, 0).double()
    return (last - (counts.double() - 1) / 2)[inverse]
