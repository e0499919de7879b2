"""The cards the package carries a planning table for, and which one a plan uses.

The same two jobs share a faster card more easily (each keeps it less busy), so a plan judged by
another card's solo profiles errs several times more than one judged by its own. The package
carries each card's table the project measured (solo profiles and measured pairs, made by
``tools/codegen``); a plan uses the one of the GPU it runs on, or the one ``--card`` names, and
falls back to the H100's, saying so, for a card it has none for.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.planning.measured import REFERENCE, Reference, read_reference
from pytest_gpu_pairs.planning.profiles import PACKAGED, Profiles, read_packaged
from pytest_gpu_pairs.run.device import open_device_gpu

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Card:
    name: str  # as NVML names the GPU model
    short: str  # as a row names where a measured pair comes from ("H100 reference")
    profiles: Path
    reference: Path

    def table(self) -> Profiles:
        return read_packaged(self.profiles)

    def pairs(self) -> Reference:
        return read_reference(self.reference)


H100 = Card("NVIDIA H100 80GB HBM3", "H100", PACKAGED, REFERENCE)
H200 = Card("NVIDIA H200", "H200", HERE / "workload_profiles_h200.json", HERE / "reference_pairs_h200.json")
CARDS = (H100, H200)
DEFAULT = H100


class UnknownCard(ValueError):
    """``--card`` names no card the package carries a table for."""


def card_named(text: str) -> Card:
    """The card whose NVML name is ``text``, or holds it (``h200``), ignoring case."""
    wanted = text.strip().lower()
    exact = [c for c in CARDS if c.name.lower() == wanted]
    found = exact or [c for c in CARDS if wanted and wanted in c.name.lower()]
    if len(found) != 1:
        raise UnknownCard(f"--card {text!r}: expected one of {', '.join(c.name for c in CARDS)} (or a part of one name)")
    return found[0]


def card_for_gpu(name: Optional[str]) -> Optional[Card]:
    return next((c for c in CARDS if c.name == name), None)


def reference_name(source: str) -> str:
    """How a row names the package's reference pairs read from ``source``."""
    card = next((c for c in CARDS if str(c.reference) == source), None)
    return f"{card.short} reference" if card else "package reference"


def gpu_here() -> Optional[str]:
    """The model of the GPU the jobs would train on (CUDA_VISIBLE_DEVICES' first, else NVML's
    first), None where NVML sees none."""
    gpu, _ = open_device_gpu("auto")
    return gpu.info.name if gpu is not None else None


def chosen_card(named: Optional[str], detect: bool) -> tuple[Card, Optional[str]]:
    """The card to plan for, and a note where it is not the GPU found here; without ``detect`` (jobs
    on the CPU, or a validation that must read the same on any machine) the GPU here is not asked."""
    if named:
        return card_named(named), None
    if not detect:
        return DEFAULT, None
    gpu = gpu_here()
    card = card_for_gpu(gpu)
    if gpu is None or card is not None:
        return card or DEFAULT, None
    return DEFAULT, (f"this GPU ({gpu}) has no table in the package: planned with the {DEFAULT.name}'s profiles; "
                     "`gpu-pairs profile SETTINGS --out DIR` measures this card's, and `--profiles-here --results DIR` "
                     "plans with them")
