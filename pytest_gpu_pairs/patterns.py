"""Regular expressions written in settings files, compiled for RE2, a linear-time engine: a
pattern a user wrote is matched against lines a job wrote, and no combination of the two may
stall the harness (Python's backtracking ``re`` can take exponential time on ``(a+)+$`` and
holds the GIL while it does)."""
from __future__ import annotations

from typing import Any

import re2

RE2_LIMITS = "RE2 syntax: no backreferences or lookaround"


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message says why in one line."""


def compile_pattern(pattern: str) -> Any:
    """The compiled pattern, or :class:`PatternError` with RE2's reason."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(f"expected a regular expression in {RE2_LIMITS} ({reason})") from None


def group_count(compiled: Any) -> int:
    return int(compiled.groups)
