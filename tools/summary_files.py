"""The end every study's collate shares: a record it cannot read is one line on stderr and exit 2;
otherwise summary.json and summary.md land in the output folder and the table is printed."""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.store import StoreError, atomic_write_json, atomic_write_text


def write_collated(make: Callable[[], dict[str, Any]], render: Callable[[dict[str, Any]], str], out: Path) -> int:
    try:
        summary = make()
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "summary.json", summary)
    text = render(summary)
    atomic_write_text(out / "summary.md", text)
    print(text, end="")
    return 0
