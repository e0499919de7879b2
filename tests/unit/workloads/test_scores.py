"""ROC AUC of scores against binary labels: the pairwise definition, on any scores and ties."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from pytest_gpu_pairs.workloads.scores import roc_auc  # noqa: E402

SCORES = st.lists(st.tuples(st.integers(0, 6).map(lambda v: v / 6), st.booleans()), min_size=1, max_size=60)


def pairwise_auc(rows) -> float:
    positives = [s for s, label in rows if label]
    negatives = [s for s, label in rows if not label]
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def tensors(rows):
    return torch.tensor([s for s, _ in rows]), torch.tensor([float(label) for _, label in rows])


@given(SCORES)
def test_auc_is_the_share_of_positive_negative_pairs_ranked_right_ties_counting_half(rows):
    labels = {label for _, label in rows}
    auc = roc_auc(*tensors(rows))
    if labels == {True, False}:
        assert auc == pytest.approx(pairwise_auc(rows), abs=1e-12)
    else:
        assert math.isnan(auc)


@given(SCORES)
def test_auc_depends_on_the_order_of_the_scores_only(rows):
    scores, labels = tensors(rows)
    first = roc_auc(scores, labels)
    again = roc_auc(torch.exp(3 * scores) - 7, labels)
    assert (math.isnan(first) and math.isnan(again)) or first == pytest.approx(again, abs=1e-12)


def test_perfect_reversed_and_uninformative_scores():
    labels = torch.tensor([0.0, 0.0, 1.0, 1.0])
    assert roc_auc(torch.tensor([0.1, 0.2, 0.8, 0.9]), labels) == 1.0
    assert roc_auc(torch.tensor([0.9, 0.8, 0.2, 0.1]), labels) == 0.0
    assert roc_auc(torch.full((4,), 0.5), labels) == 0.5
