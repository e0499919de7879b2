"""Metric arithmetic the workload families share (binary precision/recall/F1, top-k)."""
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
