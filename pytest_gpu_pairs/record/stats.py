"""Intervals and tests over a case's rounds, in plain Python (the plugin does not depend on scipy).

A figure is reported as the mean of its rounds with a 95 % Student-t interval (for bracketed
rounds, which share a phase with each neighbour, on the values they are worth); the stopping rule
adds rounds until the interval is narrow enough relative to the mean; the comparison gate asks
Welch's test whether two runs' rounds differ. The t distribution comes from the regularised
incomplete beta function (Numerical Recipes' continued fraction), inverted by bisection: exact
to far below what a handful of rounds can resolve.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

CONFIDENCE = 0.95
MIN_VALUES_FOR_RHO = 5  # fewer bracketed rounds than this: their lag-1 correlation taken at its bound
MAX_BRACKET_RHO = 0.5  # the most two bracketed rounds that share one phase can correlate
BETWEEN_LIMITED = 0.75  # the starts' share of the mean's variance past which more rounds narrow it by under 13 %


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < eps:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (0 < p < 1), by bisection on ``t_cdf``."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"expected 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2.0


@dataclass(frozen=True)
class Interval:
    """The mean of ``n`` values with its two-sided ``confidence`` interval (None below 2 values)."""

    mean: Optional[float]
    low: Optional[float]
    high: Optional[float]
    n: int
    confidence: float = CONFIDENCE
    n_effective: Optional[float] = None  # independent values the interval is worth (None: n)
    between_share: float = 0.0  # the share of the mean's variance that is the offset of the pair's starts

    @property
    def half_width(self) -> Optional[float]:
        return None if self.low is None or self.high is None else (self.high - self.low) / 2.0

    @property
    def relative_half_width(self) -> Optional[float]:
        """Half the interval's width over the mean's magnitude: the precision the stopping rule reads."""
        half = self.half_width
        if half is None or self.mean is None or self.mean == 0:
            return None
        return half / abs(self.mean)

    def as_list(self) -> Optional[list[float]]:
        return None if self.low is None or self.high is None else [self.low, self.high]

    def excludes(self, bound: float, above: bool) -> bool:
        """The whole interval lies above (or below) ``bound``."""
        if self.low is None or self.high is None:
            return False
        return self.low > bound if above else self.high < bound


def finite(values: Sequence[Optional[float]]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def interval(values: Sequence[Optional[float]], confidence: float = CONFIDENCE) -> Interval:
    """Mean and Student-t interval of the finite values; a single value has a mean and no interval."""
    xs = finite(values)
    n = len(xs)
    if n == 0:
        return Interval(None, None, None, 0, confidence)
    mean = math.fsum(xs) / n
    if n == 1:
        return Interval(mean, None, None, 1, confidence)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, confidence)


def bracketed_interval(values: Sequence[Optional[float]], confidence: float = CONFIDENCE) -> Interval:
    """Mean and interval of a series in which neighbours share noise and values further apart do
    not: a bracketed round's solo rates are the mean of the solo phases before and after its pair
    phase, and the phases after one pair are the phases before the next. The mean's variance is
    then the lag-1 long-run variance s^2 (1 + 2 rho), rho the lag-1 autocorrelation, which such a
    series bounds to [0, 1/2]; the interval is a Student-t interval on the values it is worth,
    n / (1 + 2 rho). With fewer than five values rho cannot be estimated and the bound 1/2 is taken."""
    xs = finite(values)
    n = len(xs)
    if n < 2:
        return interval(xs, confidence)
    mean = math.fsum(xs) / n
    inflation = bracket_inflation(xs)
    n_eff = n / inflation
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, max(1.0, n_eff - 1.0)) * sd * math.sqrt(inflation / n)
    return Interval(mean, mean - half, mean + half, n, confidence, n_eff)


def bracket_inflation(xs: Sequence[float]) -> float:
    """How much sharing a phase with each neighbour inflates the variance of the mean: 1 + 2 rho."""
    return 1.0 + 2.0 * (lag1_correlation(xs) if len(xs) >= MIN_VALUES_FOR_RHO else MAX_BRACKET_RHO)


def lag1_correlation(xs: Sequence[float]) -> float:
    """The lag-1 autocorrelation of a series, clamped to what sharing one phase with each
    neighbour can give: [0, 1/2]. The sample estimate falls short by about (1 + 3 rho) / n in a
    short series (Kendall), which is added back: uncorrected, 15 bracketed rounds gave intervals
    that held the mean 92 % of the time instead of 95 %."""
    n = len(xs)
    mean = math.fsum(xs) / n
    spread = math.fsum((x - mean) ** 2 for x in xs)
    if spread == 0:
        return 0.0
    rho = math.fsum((a - mean) * (b - mean) for a, b in zip(xs, xs[1:])) / spread
    return min(MAX_BRACKET_RHO, max(0.0, rho + (1.0 + 3.0 * rho) / n))


@dataclass(frozen=True)
class BetweenStarts:
    """What is known of how far independent starts of a pair land apart, relative to the mean: a
    prior (``sd``, worth ``df`` degrees of freedom: the study that measured it) that a case's own
    starts update. A start of a pair lands at an offset of its own (on an H100, four starts of g01
    each to +-1.2-1.6 % read 1.955-2.018: a between-start sd of 1.3 %), so an interval from one
    start's rounds does not cover the next start."""

    sd: float
    df: float
    source: str


def start_interval(values: Sequence[Optional[float]], starts: Sequence[int], prior: Optional[BetweenStarts] = None,
                   confidence: float = CONFIDENCE) -> StartInterval:
    """Mean and interval of bracketed rounds taken over one or more independent starts of a pair.

    The mean is over all rounds. Its variance has two parts: the rounds' own noise (pooled within
    starts, on the values they are worth, as ``bracketed_interval``) and each start's offset, whose
    variance is the prior pooled with what the starts themselves show (a one-way random-effects
    estimate, truncated at zero), weighted by degrees of freedom; the offset's share of the mean's
    variance is sum(n_i^2)/N^2 of it. The t quantile takes the Welch-Satterthwaite degrees of
    freedom of the two parts. Without a prior and with one start this is ``bracketed_interval``."""
    groups = _grouped(values, starts)
    xs = [x for group in groups for x in group]
    n = len(xs)
    if n < 2:
        return StartInterval(interval(xs, confidence), len(groups), None, None)
    mean = math.fsum(xs) / n
    within, inflation, df_within = _within_starts(groups)
    own, own_df = _between_starts(groups, mean, within * inflation)
    between_rel, df_between = _pooled_between(own, own_df, mean, prior)
    weight = math.fsum(len(g) ** 2 for g in groups) / n**2
    part_b = (between_rel * mean) ** 2 * weight
    part_w = within * inflation / n
    variance = part_b + part_w
    if variance == 0:
        return StartInterval(Interval(mean, mean, mean, n, confidence, n / inflation), len(groups), between_rel,
                             df_between)
    df = variance**2 / ((part_b**2 / df_between if df_between else 0.0) + part_w**2 / max(1.0, df_within))
    half = t_quantile(0.5 + confidence / 2.0, max(1.0, df)) * math.sqrt(variance)
    n_eff = (within * inflation / variance) if within > 0 else None
    share = part_b / variance
    return StartInterval(Interval(mean, mean - half, mean + half, n, confidence, n_eff, share), len(groups),
                         between_rel, df_between, share)


@dataclass(frozen=True)
class StartInterval:
    """An interval over starts: ``between_sd`` the relative between-start sd it used (None: none),
    worth ``between_df`` degrees of freedom, and the share of the mean's variance it makes up."""

    interval: Interval
    n_starts: int
    between_sd: Optional[float]
    between_df: Optional[float]
    between_share: float = 0.0


def _grouped(values: Sequence[Optional[float]], starts: Sequence[int]) -> list[list[float]]:
    groups: dict[int, list[float]] = {}
    for value, start in zip(values, starts):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            groups.setdefault(start, []).append(float(value))
    return [g for g in groups.values() if g]


def _within_starts(groups: list[list[float]]) -> tuple[float, float, float]:
    """The pooled within-start variance of one round, the bracket inflation of the rounds' mean
    (lag-1, taken within starts), and the degrees of freedom the pooled variance is worth."""
    resid, lagged, pairs = 0.0, 0.0, 0
    n = sum(len(g) for g in groups)
    for group in groups:
        m = math.fsum(group) / len(group)
        resid += math.fsum((x - m) ** 2 for x in group)
        lagged += math.fsum((a - m) * (b - m) for a, b in zip(group, group[1:]))
        pairs += len(group) - 1
    dof = n - len(groups)
    if dof <= 0:
        return 0.0, 1.0 + 2.0 * MAX_BRACKET_RHO, 0.0
    if n < MIN_VALUES_FOR_RHO or resid == 0:
        rho = MAX_BRACKET_RHO if n < MIN_VALUES_FOR_RHO else 0.0
    else:
        rho = lagged / resid
        rho = min(MAX_BRACKET_RHO, max(0.0, rho + (1.0 + 3.0 * rho) / n))
    inflation = 1.0 + 2.0 * rho
    return resid / dof, inflation, max(1.0, n / inflation - len(groups))


def _between_starts(groups: list[list[float]], mean: float, per_round: float) -> tuple[Optional[float], int]:
    """The starts' own estimate of the between-start variance (absolute), and its degrees of freedom."""
    k = len(groups)
    if k < 2:
        return None, 0
    n = sum(len(g) for g in groups)
    ms_between = math.fsum(len(g) * (math.fsum(g) / len(g) - mean) ** 2 for g in groups) / (k - 1)
    n0 = (n - math.fsum(len(g) ** 2 for g in groups) / n) / (k - 1)
    return max(0.0, (ms_between - per_round) / n0), k - 1


def _pooled_between(own: Optional[float], own_df: int, mean: float,
                    prior: Optional[BetweenStarts]) -> tuple[float, float]:
    """The relative between-start sd: the prior and the starts' own estimate pooled by degrees of freedom."""
    own_rel = (math.sqrt(own) / abs(mean)) if own is not None and mean else None
    if prior is None:
        return (own_rel or 0.0), float(own_df)
    if own_rel is None:
        return prior.sd, prior.df
    pooled = (prior.df * prior.sd**2 + own_df * own_rel**2) / (prior.df + own_df)
    return math.sqrt(pooled), prior.df + own_df


class Estimator(Protocol):
    """An interval function: the values' mean and interval at ``confidence``."""

    def __call__(self, values: Sequence[Optional[float]], confidence: float = CONFIDENCE) -> Interval: ...


INTERVALS: dict[str, Estimator] = {"student_t": interval, "student_t_lag1": bracketed_interval,
                                   "student_t_starts": bracketed_interval}


def interval_by(method: Optional[str]) -> Estimator:
    """The interval function a record names (``interval_method``); plain Student-t if it names none.
    Over starts, this is the rounds' part only: ``start_interval`` takes their starts as well."""
    return INTERVALS.get(method or "student_t", interval)


def welch_p_value(a: Sequence[Optional[float]], b: Sequence[Optional[float]],
                  bracketed: bool = False) -> Optional[float]:
    """Two-sided p-value of Welch's t-test that ``a`` and ``b`` have the same mean; None when
    either side has fewer than two values (nothing can be said). ``bracketed``: rounds that share
    noise with their neighbours, weighed as ``bracketed_interval`` weighs them."""
    xs, ys = finite(a), finite(b)
    if len(xs) < 2 or len(ys) < 2:
        return None
    (mx, vx, nx), (my, vy, ny) = _mean_variance(xs, bracketed), _mean_variance(ys, bracketed)
    if vx + vy == 0:
        return 1.0 if mx == my else 0.0
    t = (mx - my) / math.sqrt(vx + vy)
    share_x, share_y = vx / (vx + vy), vy / (vx + vy)  # Welch-Satterthwaite, in shares: no underflow
    df = 1.0 / (share_x**2 / max(1.0, nx - 1) + share_y**2 / max(1.0, ny - 1))
    return 2.0 * (1.0 - t_cdf(abs(t), df))


def _mean_variance(xs: list[float], bracketed: bool) -> tuple[float, float, float]:
    """The mean, the variance of the mean and the values it is worth."""
    n = len(xs)
    mean = math.fsum(xs) / n
    inflation = bracket_inflation(xs) if bracketed else 1.0
    return mean, math.fsum((x - mean) ** 2 for x in xs) / (n - 1) / n * inflation, n / inflation


@dataclass(frozen=True)
class StoppingRule:
    """When a case has measured enough: the efficiency interval's relative half width at most
    ``precision`` (None: a fixed number of rounds, ``min_rounds``), within ``max_rounds`` rounds
    (None: as many as ``max_seconds`` of device time hold) and ``max_seconds``."""

    precision: Optional[float]
    min_rounds: int = 3
    max_rounds: Optional[int] = None
    max_seconds: float = 180.0

    def verdict(self, values: Sequence[Optional[float]], spent_s: float, round_s: float = 0.0,
                estimate: Callable[[Sequence[Optional[float]]], Interval] = interval,
                more_starts: bool = False) -> tuple[bool, Optional[str]]:
        """(stop, why): why is None while measuring goes on; ``round_s`` is what one more round
        costs; ``estimate`` is the interval the record will report, so the rule reads the same.
        Once every planned start has been measured, rounds stop paying when the starts' offsets
        make up most of the interval's variance (``BETWEEN_LIMITED``): more of them narrow it by
        little, and the time cap would only be spent."""
        n = len(values)
        if n < self.min_rounds:
            if spent_s + round_s > self.max_seconds:
                return True, f"time cap {self.max_seconds:g} s reached after {n} complete round(s)"
            return False, None
        if self.precision is None:
            return True, f"fixed {self.min_rounds} round(s)"
        found = estimate(values)
        precision = found.relative_half_width
        if precision is not None and precision <= self.precision:
            return True, f"precision reached: ±{precision:.1%} after {n} rounds"
        if precision is not None and not more_starts and found.between_share >= BETWEEN_LIMITED:
            return True, (f"the starts' offsets limit the interval: ±{precision:.1%} after {n} rounds, "
                          f"{found.between_share:.0%} of its variance between starts, which more rounds do not narrow")
        if self.max_rounds is not None and n >= self.max_rounds:
            return True, f"--gpu-pairs-max-rounds {self.max_rounds} reached"
        if spent_s + round_s > self.max_seconds:
            return True, f"time cap {self.max_seconds:g} s reached after {n} rounds"
        return False, None
