"""The scaling study's steps: the run's facts before its sessions, and after the pilot the emulated
card, the size at which the pilot's fullest GPU is as full as the predecessor's cards were (93.5 %),
rounded up to 64 MB.

    python -m pytest_gpu_pairs.studies.steps.scaling facts RUN_DIR DEVICE
    python -m pytest_gpu_pairs.studies.steps.scaling card RUN_DIR

The pilot runs the large workload on two whole cards; its record's ``peak_memory_fraction`` times
``card_memory_mb`` is the memory in use on its fullest GPU, the driver's share included, as
nvidia-smi shows it. Where the pilot left no such figure (a CPU run, a failed pilot) the study runs on
the whole cards and ``card.txt`` says ``none``; why is printed.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import StoreError, atomic_write_json, atomic_write_text, load_run

PREDECESSOR_FRACTION = 0.935
ROUND_MB = 64
PILOT_CASE = "sc02-vulberta_mlp-gpus2"
RESTART_MIN = 30  # the predecessor's minutes per restart, as its question put it


def card_mb(record: Record, fraction: float = PREDECESSOR_FRACTION) -> Optional[int]:
    """The card size that the record's memory in use fills to ``fraction``; None without the figures."""
    data = record.to_dict()
    used, card = data.get("peak_memory_fraction"), data.get("card_memory_mb")
    if data.get("failure") or not isinstance(used, (int, float)) or not isinstance(card, (int, float)):
        return None
    return int(math.ceil(used * card / fraction / ROUND_MB) * ROUND_MB)


def pilot_card(pilot: Path) -> tuple[Optional[int], str]:
    """The emulated card from the pilot's results folder, or None and why not."""
    if not pilot.is_dir():
        return None, f"no pilot in {pilot} (it runs on a GPU only)"
    try:
        record = load_run(pilot).records.get(PILOT_CASE)
    except StoreError as exc:
        return None, str(exc)
    if record is None:
        return None, f"{pilot}: no record of {PILOT_CASE}"
    size = card_mb(record)
    return (size, f"{size} MB") if size is not None else (None, f"{PILOT_CASE}: {record.failure or 'no memory figures'}")


def card(run_dir: Path) -> int:
    size, why = pilot_card(run_dir / "pilot")
    print(f"emulated card: {why}" + ("" if size is not None else "; the study runs on the whole cards"))
    atomic_write_text(run_dir / "card.txt", f"{size if size is not None else 'none'}\n")
    options = ["--gpu-pairs-gpu-memory-mb", str(size)] if size is not None else []
    atomic_write_json(run_dir / "card.json", {"options": options})
    return 0


def _commit(root: Path) -> str:
    git = shutil.which("git")
    if git is None:
        return os.environ.get("COMMIT", "unknown")
    found = subprocess.run([git, "rev-parse", "--short=7", "HEAD"], cwd=root, capture_output=True, text=True, timeout=30)
    return found.stdout.strip() or os.environ.get("COMMIT", "unknown")


def _devices(device: str) -> str:
    smi = shutil.which("nvidia-smi")
    if device == "cpu" or smi is None:
        return f"cpu ({os.cpu_count()} CPUs), gloo"
    found = subprocess.run([smi, "--query-gpu=index,name,memory.total,driver_version,uuid", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=60)
    return found.stdout.strip() or f"nvidia-smi said nothing ({found.stderr.strip()[:200]})"


def facts(run_dir: Path, device: str) -> int:
    atomic_write_text(run_dir / "commit.txt", _commit(Path.cwd()) + "\n")
    atomic_write_text(run_dir / "restart_min.txt", f"{RESTART_MIN}\n")
    atomic_write_text(run_dir / "device.txt", _devices(device) + "\n")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True)
    facts_parser = actions.add_parser("facts")
    facts_parser.add_argument("run_dir", type=Path)
    facts_parser.add_argument("device")
    actions.add_parser("card").add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    return facts(args.run_dir, args.device) if args.action == "facts" else card(args.run_dir)


if __name__ == "__main__":
    sys.exit(main())
