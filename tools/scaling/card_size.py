"""The emulated card of the scaling study: the size at which the pilot case's fullest GPU is as full
as the predecessor's cards were (93.5 %), rounded up to 64 MB.

    python -m tools.scaling.card_size PILOT_RESULTS [--case sc02-vulberta_mlp-gpus2] [--fraction 0.935]

The pilot runs the large workload on two whole cards; its record's ``peak_memory_fraction`` times
``card_memory_mb`` is the memory in use on its fullest GPU, the driver's share included, as
nvidia-smi shows it. Prints the size in MB; exit code 1 with the reason when the record has no
memory figure (a CPU run, a failed pilot).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.record.store import StoreError, load_run

PREDECESSOR_FRACTION = 0.935
ROUND_MB = 64
PILOT_CASE = "sc02-vulberta_mlp-gpus2"


def card_mb(record: dict[str, Any], fraction: float = PREDECESSOR_FRACTION) -> Optional[int]:
    """The card size that the record's memory in use fills to ``fraction``; None without the figures."""
    used, card = record.get("peak_memory_fraction"), record.get("card_memory_mb")
    if record.get("failure") or not isinstance(used, (int, float)) or not isinstance(card, (int, float)):
        return None
    return int(math.ceil(used * card / fraction / ROUND_MB) * ROUND_MB)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--case", default=PILOT_CASE)
    parser.add_argument("--fraction", type=float, default=PREDECESSOR_FRACTION)
    args = parser.parse_args(argv)
    try:
        record = load_run(args.results).records.get(args.case)
    except StoreError as exc:
        print(f"card_size: {exc}", file=sys.stderr)
        return 1
    size = card_mb(record.to_dict(), args.fraction) if record is not None else None
    if size is None:
        why = "no such case" if record is None else (record.get("failure") or "no memory figures (a CPU run?)")
        print(f"card_size: {args.results}: {args.case}: {why}", file=sys.stderr)
        return 1
    print(size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
