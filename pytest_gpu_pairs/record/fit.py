"""Whether a pair fits: each job's memory over a whole run, measured once and kept like a profile,
and the pair's verdict from both.

A job's need is the most it holds at any point of a complete run on the card the verdict is about:
start-up with cuDNN's autotuning (which takes workspace in proportion to the memory it finds free,
so it is measured on an emulated card of the named size), training, evaluation, a checkpoint, and
a second start. A built-in reports the caching allocator's peak for each of these parts (exact: no
allocation escapes it, however brief) and NVML supplies what lies outside the allocator (the CUDA
context, loaded kernels, library handles); a command workload is read through NVML alone, densely.
Sampling a pair's memory while it trains steadily, as a case does, sees neither the start-up nor
the evaluation, and catches a transient only when a reading happens to fall on it.

The pair needs the sum of both jobs' needs (one job's start-up can meet the other's evaluation: a
job that ends is started again) plus what running together costs of its own (the MPS server's
memory; any growth of a job's memory beside the other). Everything here is arithmetic on what was
measured: the run layer measures, the record keeps.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

KIND: Final = "gpu-pairs fit profile"
VERSION: Final = 1
ALLOCATOR_RESOLUTION_MB = 2.0  # the caching allocator reserves in 2 MB blocks; NVML counts whole MiB
NVML_RESOLUTION_MB = 1.0
STEADY_PHASE = "train"
PHASE_WORDS = {"setup": "building the model and data", "start": "start-up (first step, cuDNN's autotuning)",
               "train": "training", "eval": "evaluation", "checkpoint": "the checkpoint",
               "end": "after its last step (evaluation, saving)", "gap": "a pause in training (evaluation, saving)"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


_MB = Optional[StrictFloat]


class FitStart(_Strict):
    """One start of the job in its fit profile: each part's peak (context included), how it ended."""

    phases: dict[StrictStr, StrictFloat] = {}
    context_mb: _MB = Field(None, ge=0)
    nvml_peak_mb: _MB = Field(None, ge=0)
    exit_code: Optional[StrictInt] = None
    oom: StrictBool = False
    failure: Optional[StrictStr] = None
    seconds: StrictFloat = Field(0.0, ge=0)

    @property
    def peak(self) -> tuple[Optional[str], Optional[float]]:
        if not self.phases:
            return None, self.nvml_peak_mb
        phase = max(self.phases, key=self.phases.__getitem__)
        return phase, max(self.phases[phase], self.nvml_peak_mb or 0.0)


def _most(values: Sequence[Optional[float]]) -> Optional[float]:
    """The largest of ``values``; None where there are none or one is unknown."""
    known = [v for v in values if v is not None]
    return max(known) if known and len(known) == len(values) else None


class FitProfile(_Strict):
    """A job's memory over whole runs on one card: what every case and the planner reuse."""

    kind: Literal["gpu-pairs fit profile"] = KIND
    version: Literal[1] = VERSION
    key: StrictStr = Field(min_length=1, max_length=200)
    workload: StrictStr = Field(min_length=1, max_length=200)
    builtin: StrictBool
    command: Optional[list[StrictStr]] = None
    hyperparameters: dict[StrictStr, Any] = {}
    device_name: StrictStr
    card_mb: _MB = Field(None, gt=0)  # the emulated card; None: the whole GPU
    basis: Literal["allocator", "nvml", "cpu"]
    starts: list[FitStart] = Field(default_factory=list, max_length=16)
    measured_at: Optional[StrictStr] = None
    unmeasured: dict[StrictStr, StrictStr] = {}

    @property
    def on_gpu(self) -> bool:
        return self.basis != "cpu"

    @property
    def oom(self) -> bool:
        return any(start.oom for start in self.starts)

    @property
    def complete(self) -> bool:
        """Every start ran its whole fit run: a need read from a cut run would be a guess."""
        return bool(self.starts) and all(s.exit_code == 0 and not s.failure for s in self.starts)

    @property
    def settled(self) -> bool:
        """Nothing left to measure: its whole runs were read, it ran out of memory (the job's answer),
        or it trains on the CPU and holds no GPU memory at all."""
        return self.complete or self.oom or not self.on_gpu

    @property
    def need_mb(self) -> Optional[float]:
        """The most the job held at any point of any start; 0 for a job that trains on the CPU."""
        if not self.on_gpu:
            return 0.0
        return _most([start.peak[1] for start in self.starts]) if self.complete else None

    @property
    def peak_phase(self) -> Optional[str]:
        if not self.on_gpu or self.need_mb is None:
            return None
        return max((start.peak for start in self.starts), key=lambda p: p[1] or 0.0)[0]

    @property
    def steady_mb(self) -> Optional[float]:
        """The most it held while training steadily (after its first step)."""
        if not self.on_gpu:
            return 0.0
        return _most([start.phases.get(STEADY_PHASE) for start in self.starts]) if self.complete else None

    @property
    def start_spread_mb(self) -> Optional[float]:
        """How far apart the starts' peaks lay: the need's own uncertainty, beside the resolution."""
        peaks = [start.peak[1] for start in self.starts if start.peak[1] is not None]
        return max(peaks) - min(peaks) if len(peaks) > 1 else None

    @property
    def resolution_mb(self) -> float:
        return ALLOCATOR_RESOLUTION_MB + NVML_RESOLUTION_MB if self.basis == "allocator" else NVML_RESOLUTION_MB


def allocator_start(memory_events: Sequence[Mapping[str, Any]], nvml_at: Any, nvml_peak_mb: Optional[float],
                    exit_code: Optional[int], oom: bool, failure: Optional[str], seconds: float) -> FitStart:
    """A built-in's start: each part's allocator peak plus the memory NVML shows beyond the
    allocator when the run ends (the CUDA context grows as kernels load, so its last size holds for
    every part before). ``nvml_at(t)``: the job's NVML memory at or before time t."""
    last = memory_events[-1] if memory_events else None
    context = None
    if last is not None and (seen := nvml_at(last["t"])) is not None:
        context = max(0.0, seen - float(last["reserved_mb"]))
    phases = {} if context is None else {e["phase"]: float(e["peak_reserved_mb"]) + context for e in memory_events}
    return FitStart(phases=phases, context_mb=context, nvml_peak_mb=nvml_peak_mb, exit_code=exit_code, oom=oom,
                    failure=failure, seconds=seconds)


def nvml_phase(t: float, steps: Sequence[tuple[float, float]], gap_s: float) -> str:
    """Which part of a command workload's run a reading at ``t`` fell in, from its step reports:
    before its second report it was starting, after its last it was ending, in a silence of more
    than ``gap_s`` inside training it was doing something else (evaluating, saving)."""
    if len(steps) < 2 or t < steps[1][0]:
        return "start"
    if t > steps[-1][0]:
        return "end"
    after = next(i for i, (when, _) in enumerate(steps) if when >= t)
    return "gap" if steps[after][0] - steps[after - 1][0] > gap_s else STEADY_PHASE


def nvml_start(readings: Sequence[tuple[float, float]], steps: Sequence[tuple[float, float]], gap_s: float,
               exit_code: Optional[int], oom: bool, failure: Optional[str], seconds: float) -> FitStart:
    """A command workload's start: the densest NVML readings, each put in the part of the run it
    fell in by the job's own step reports."""
    phases: dict[str, float] = {}
    for t, mb in readings:
        phase = nvml_phase(t, steps, gap_s)
        phases[phase] = max(mb, phases.get(phase, 0.0))
    peak = max((mb for _, mb in readings), default=None)
    return FitStart(phases=phases, nvml_peak_mb=peak, exit_code=exit_code, oom=oom, failure=failure, seconds=seconds)


def phase_words(phase: Optional[str]) -> str:
    return PHASE_WORDS.get(phase or "", phase or "an unknown part")


def pair_fit(fg: Optional[FitProfile], bg: Optional[FitProfile], together_mb: Optional[float],
             budget_mb: float) -> dict[str, Any]:
    """A pair's whole-run need and its verdict (``group_fit`` of its two jobs)."""
    return group_fit({"fg": fg, "bg": bg}, together_mb, budget_mb)


def group_fit(profiles: Mapping[str, Optional[FitProfile]], together_mb: Optional[float],
              budget_mb: float) -> dict[str, Any]:
    """The group's whole-run need (every job's need added: any job's start-up can meet another's
    evaluation) and its verdict, as record keys, the first two jobs' needs under their fg_ and bg_
    keys; where a profile is missing or incomplete the need is None and ``notes`` says why (the
    budget check then falls back to the case's own sampled peak, and says so)."""
    missing = [role for role, p in profiles.items() if p is None or p.need_mb is None]
    keyed = {role: p for role, p in profiles.items() if role in ("fg", "bg")}
    figures: dict[str, Any] = {f"{role}_vram_need_mb": p.need_mb if p else None for role, p in keyed.items()}
    figures.update({f"{role}_vram_need_phase": p.peak_phase if p else None for role, p in keyed.items()})
    card = next((p.card_mb for p in profiles.values() if p is not None), None)
    figures.update(vram_card_mb=card, vram_together_mb=together_mb)
    known = {role: p for role, p in profiles.items() if p is not None}
    sums = _summed(list(known.values()), together_mb) if len(known) == len(profiles) else None
    if missing or sums is None:
        oom = next((f"{role} {p.workload}" for role, p in known.items() if p.oom), None)
        return {**figures, "vram_fit_mb": None, "vram_steady_mb": None, "vram_transient_mb": None,
                "vram_peak_phase": f"{oom}: ran out of memory alone on the card" if oom else None,
                "vram_uncertainty_mb": None, "vram_verdict": "no fit" if oom else None}
    need, steady = sums
    lead_role, lead = max(known.items(), key=lambda item: (item[1].need_mb or 0.0) - (item[1].steady_mb or 0.0))
    uncertainty = sum(max(p.resolution_mb, p.start_spread_mb or 0.0) for p in known.values() if p.on_gpu)
    return {**figures, "vram_fit_mb": need, "vram_steady_mb": steady, "vram_transient_mb": need - steady,
            "vram_peak_phase": f"{lead_role} {lead.workload}: {phase_words(lead.peak_phase)}",
            "vram_uncertainty_mb": uncertainty,
            "vram_verdict": verdict(need, steady, budget_mb, card, *known.values())}


def _summed(profiles: Sequence[FitProfile], together_mb: Optional[float]) -> Optional[tuple[float, float]]:
    """The group's whole-run need and its steady need: every job's and what running together
    costs; None where one of them is unknown."""
    if not profiles or together_mb is None:
        return None
    needs = [p.need_mb for p in profiles]
    steadies = [p.steady_mb for p in profiles]
    if any(v is None for v in needs + steadies):
        return None
    need, steady = 0.0, 0.0
    for value in needs:
        need += value  # type: ignore[operator]  # None refused above
    for value in steadies:
        steady += value  # type: ignore[operator]
    return need + together_mb, steady + together_mb


def verdict(need: float, steady: float, budget_mb: float, card_mb: Optional[float], *profiles: FitProfile) -> str:
    """fits: the whole-run need within the budget; over budget: above it, though the card holds the
    group; no fit: a job ran out of memory alone on the card, or the steady need exceeds it."""
    if any(p.oom for p in profiles) or (card_mb is not None and steady > card_mb):
        return "no fit"
    return "fits" if need <= budget_mb else "over budget"


def missing_reason(role: str, profile: Optional[FitProfile], why_absent: Optional[str]) -> str:
    """Why a job's whole-run need is unknown, in one line."""
    if profile is None:
        return why_absent or f"{role}: no fit profile"
    failed = next((s.failure for s in profile.starts if s.failure), None)
    if failed:
        return f"{role} {profile.workload}: its fit run failed ({failed})"
    return f"{role} {profile.workload}: " + (next(iter(profile.unmeasured.values()), None)
                                              or "its fit run reported no memory")


FIT_SOURCE = "whole_run_fit"  # vram_budget_source where the budget is checked against vram_fit_mb
SAMPLED_SOURCE = "nvml_process_memory"


def fit_record(profiles: Mapping[str, Optional[FitProfile]], together_mb: Optional[float], budget_mb: float,
               why_absent: Optional[str], seconds: float) -> tuple[dict[str, Any], dict[str, str]]:
    """The record's memory-verdict keys and the notes that explain a missing one; ``profiles``:
    each job's by role (fg, bg, bg2, ...)."""
    figures = group_fit(profiles, together_mb, budget_mb)
    figures["fit_profile_s"] = seconds
    notes: dict[str, str] = {}
    if figures["vram_fit_mb"] is None:
        reasons = [missing_reason(role, p, why_absent) for role, p in profiles.items()
                   if p is None or p.need_mb is None]
        if together_mb is None:
            reasons.append("the MPS server's memory was not measured")
        notes["vram_fit_mb"] = "; ".join(dict.fromkeys(reasons)) + (
            "; the budget is checked against the case's sampled peak (peak_vram_mb)" if why_absent is None else "")
    figures["vram_budget_source"] = FIT_SOURCE if figures["vram_fit_mb"] is not None else SAMPLED_SOURCE
    return figures, notes
