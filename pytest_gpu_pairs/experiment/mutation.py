"""Random hyperparameter mutation with the predecessor tool's semantics, made reproducible.

A value is drawn from the hyperparameter's ``range``: ``uniform`` (integers inclusive for an int)
or ``log_uniform`` (rounded and clamped for an int), and with ``zero_probability`` it is 0
instead (the predecessor's weight decay). A drawn configuration is kept only if its key (model,
every effective hyperparameter, mode) was never run before; the predecessor normalised floats to six
decimals for that comparison, and so does ``run_key``.

Unlike the predecessor, which drew from the process-wide ``random`` (and so from the clock unless a
seed was given), every pair draws from its own generator seeded by the experiment's
``mutation.seed`` and the pair itself: collecting twice gives the same cases, and case ids stay
comparable across runs.
"""
from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol

FLOAT_PRECISION = 6

RunKey = tuple[str, str, tuple[tuple[str, str], ...]]


class MutableSpec(Protocol):
    """What sampling reads; both the catalog's and a command workload's hyperparameters have it."""

    type: str
    range: Optional[tuple[float, float]]
    distribution: Optional[str]
    zero_probability: float


def int_bounds(low: float, high: float) -> tuple[int, int]:
    """The integers inside a range: an int never lands outside the declared bounds."""
    return math.ceil(low), math.floor(high)


def sample_value(spec: MutableSpec, rng: random.Random) -> Any:
    if spec.zero_probability > 0 and rng.random() < spec.zero_probability:
        return 0 if spec.type == "int" else 0.0
    if spec.range is None:
        raise ValueError("a mutable hyperparameter needs a range to sample from")
    low, high = spec.range
    if spec.distribution == "log_uniform":
        value = math.exp(rng.uniform(math.log(low), math.log(high)))
        if spec.type == "int":
            lo, hi = int_bounds(low, high)
            return max(lo, min(hi, int(round(value))))
        return max(low, min(high, value))
    if spec.type == "int":
        return rng.randint(*int_bounds(low, high))
    return rng.uniform(low, high)


def normalized(value: Any) -> str:
    """One spelling per value: 10, 10.0 and "10" from a CSV are the same run; floats to 6 decimals."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        number = float(value)
        if number.is_integer():
            return str(int(number))
        return f"{number:.{FLOAT_PRECISION}f}"
    return str(value)


def run_key(model: str, hyperparameters: Mapping[str, Any], mode: str) -> RunKey:
    return model, mode, tuple(sorted((name, normalized(value)) for name, value in hyperparameters.items()))


def key_digest(key: RunKey) -> str:
    return hashlib.sha1(repr(key).encode()).hexdigest()[:6]


def pair_rng(seed: int, *parts: str) -> random.Random:
    """A generator of its own per pair, independent of Python's hash randomisation."""
    material = "|".join([str(seed), *parts]).encode()
    return random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))


def mutated_names(requested: Sequence[str], specs: Mapping[str, MutableSpec]) -> list[str]:
    """``all`` is every hyperparameter that has a range, as in the predecessor."""
    if "all" in requested:
        return [name for name, spec in specs.items() if spec.range is not None]
    return list(dict.fromkeys(requested))


def candidates(specs: Mapping[str, MutableSpec], names: Sequence[str], base: Mapping[str, Any],
               rng: random.Random) -> Iterator[dict[str, Any]]:
    """Endless stream of full configurations: ``base`` with ``names`` redrawn."""
    while True:
        yield {**base, **{name: sample_value(specs[name], rng) for name in names}}


@dataclass
class Drawn:
    hyperparameters: dict[str, Any]
    key: RunKey


def draw_unique(stream: Iterator[dict[str, Any]], count: int, max_attempts: int, model: str, mode: str,
                is_taken: Callable[[RunKey], bool]) -> tuple[list[Drawn], int]:
    """Up to ``count`` configurations whose keys ``is_taken`` refuses, within ``max_attempts`` draws."""
    found: list[Drawn] = []
    attempts = 0
    while len(found) < count and attempts < max_attempts:
        attempts += 1
        hyperparameters = next(stream)
        key = run_key(model, hyperparameters, mode)
        if not is_taken(key) and all(key != d.key for d in found):
            found.append(Drawn(hyperparameters, key))
    return found, attempts
