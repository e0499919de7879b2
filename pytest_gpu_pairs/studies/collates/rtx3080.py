"""The predecessor's own foreground slowdown of a pair on its RTX 3080: its parallel runs' durations
over the same workload's solo runs (``fg_slowdown`` of its table in ``reports/reference/predecessor``),
2 to 11 whole runs a pair. It recorded nothing of the background's progress, so this one figure is
all a study here can hold its H100 readings against."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.compat.raw_data import workload_name

PREDECESSOR = "reports/reference/predecessor/summary.csv"
DEVICE = "NVIDIA GeForce RTX 3080"

Slowdowns = dict[tuple[str, str], list[float]]


def slowdowns(path: Path) -> Slowdowns:
    """(foreground, background) -> each parallel run's foreground slowdown."""
    import pandas as pd

    frame = pd.read_csv(path, low_memory=False)
    frame = frame[frame["mode"] == "parallel"]
    out: Slowdowns = {}
    for row in frame.itertuples():
        fg, bg = workload_name(row.repository, row.model), workload_name(row.bg_repository, row.bg_model)
        if fg and bg and isinstance(row.fg_slowdown, float) and row.fg_slowdown == row.fg_slowdown:
            out.setdefault((fg, bg), []).append(row.fg_slowdown)
    return out


def pair_slowdown(found: Slowdowns, fg: str, bg: str) -> Optional[dict[str, Any]]:
    """The median and quartiles of the pair's runs, with ``roles`` "swapped" where the predecessor
    ran ``bg`` as the foreground; None where it never ran the pair."""
    for roles, key in (("same", (fg, bg)), ("swapped", (bg, fg))):
        values = found.get(key)
        if values:
            quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
            return {"roles": roles, "n": len(values), "fg_slowdown_median": statistics.median(values),
                    "fg_slowdown_iqr": [quartiles[0], quartiles[2]], "device": DEVICE}
    return None


def cell(figure: Optional[dict[str, Any]]) -> str:
    if figure is None:
        return "no run"
    swapped = ", roles swapped" if figure["roles"] == "swapped" else ""
    return f"{figure['fg_slowdown_median']:.2f} (n {figure['n']}{swapped})"
