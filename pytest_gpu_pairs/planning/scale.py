"""The scale of an error in a pair's efficiency, which the planner's learning, its intervals and the
spread between measured sessions share: least where a bound pins the pair, most between."""
from __future__ import annotations

MAX_EFFICIENCY = 2.0
ERROR_FLOOR = 0.1  # the scale of an error where a bound pins the pair: light pairs read 1.9-2.1 across sessions and hosts


def efficiency_scale(value: float) -> float:
    """How large an error in the efficiency is expected to be at ``value``: least where a bound pins the
    pair (2, jobs that barely touch the card; 1, two that keep it busy), most between, where how the
    jobs interleave decides. A prediction's interval is this times a quantile calibrated on held-out
    workloads (``fit``); sessions of one pair on other hosts disagree in the same shape (on the H200,
    mnist_ff + mnist_rnn 1.99 on both, resnet20 + resnet32 1.80 and 1.61)."""
    return ERROR_FLOOR + max(0.0, (MAX_EFFICIENCY - value) * (value - 1.0))
