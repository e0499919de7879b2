"""The words settings and options share (sharing mechanisms, measuring methods), in a module that
imports nothing of the package, so the pytest options and the command line can name them without
loading the settings schema."""
from __future__ import annotations

import argparse

SHARING_MODES = ("timeslice", "mps")
METHODS = ("interleaved", "epoch")


def job_roles(count: int) -> tuple[str, ...]:
    """The roles of a group's jobs, as logs, samples and the record name them: the foreground ``fg``,
    the first background ``bg`` (a pair's two keep the names they always had), then ``bg2``, ``bg3``, ..."""
    return ("fg", "bg", *(f"bg{i}" for i in range(2, count)))[:count]


def sharing_modes(text: str) -> tuple[str, ...]:
    """A comma-separated list of sharing mechanisms, as an option's value: each once, in order."""
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",")))
    if not modes or any(m not in SHARING_MODES for m in modes):
        raise argparse.ArgumentTypeError(f"expected timeslice, mps or timeslice,mps, got {text!r}")
    return modes


def pin_cpus(text: str) -> str:
    """How jobs are pinned to CPUs, as an option's value (a session's and a profile's alike): auto,
    off, or a number of CPUs per job."""
    value = text.strip().lower()
    if value in ("auto", "off") or (value.isdigit() and int(value) > 0):
        return value
    raise argparse.ArgumentTypeError(f"expected auto, off or a number of CPUs per job, got {text!r}")
