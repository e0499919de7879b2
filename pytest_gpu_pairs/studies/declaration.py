"""A reference study declared as data: which suite, settings, selection and options its pytest
sessions take, how many sessions of which variants, where each one's results folder lies, and
which collate turns those folders into the study's summary.

One JSON file per study in ``studies/declared/``; it is read like any settings file (one line
naming the file, the JSON path and what was expected), so a declaration is checked the way a
user's settings are and no study hides its recipe in a shell header.
"""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pytest_gpu_pairs.inputs import JsonProblem, SettingsError, first_error, parse_json

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_FOLDER = re.compile(r"[A-Za-z0-9_.{}-]+(/[A-Za-z0-9_.{}-]+)*")
_PACKAGE_MODULE = re.compile(r"pytest_gpu_pairs(\.[a-z_][a-z0-9_]*)+")
PLACEHOLDERS = ("{out}", "{root}", "{device}", "{scale}")


def _plain_name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError("expected a lower-case name of letters, digits and underscores")
    return value


def _inside(value: str) -> str:
    if not _FOLDER.fullmatch(value) or ".." in value.split("/"):
        raise ValueError("expected a relative path inside the study's output, e.g. 'session-{n}'")
    return value


PlainName = Annotated[str, AfterValidator(_plain_name)]
InsidePath = Annotated[str, AfterValidator(_inside)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Variant(_Strict):
    """One way the study's cases are run (time-sliced, under MPS, ...), in ``sessions`` pytest
    sessions whose results folders are ``folder`` with ``{n}`` the session's number."""

    name: PlainName
    folder: InsidePath = "session-{n}"
    sessions: int = Field(default=1, ge=1, le=20)
    options: tuple[str, ...] = ()
    gpu_options: tuple[str, ...] = ()
    select: Optional[str] = None
    settings: Optional[tuple[str, ...]] = None
    scale: Optional[float] = Field(default=None, gt=0, description="this variant's scale instead of the study's "
                                   "(a pair whose runs need another length); one asked for on the command line wins")
    needs_gpu: Optional[str] = None
    options_from: Optional[InsidePath] = Field(
        default=None, description="a step's SessionOptions file in the study's output; the declared ones without it")

    @model_validator(mode="after")
    def _one_folder_per_session(self) -> Variant:
        if self.sessions > 1 and "{n}" not in self.folder:
            raise ValueError(f"{self.sessions} sessions need '{{n}}' in folder {self.folder!r}")
        return self

    def folders(self) -> list[str]:
        return [self.folder.replace("{n}", str(n)) for n in range(1, self.sessions + 1)]


class SessionOptions(_Strict):
    """What a step decided for the sessions after it (the card it sized, the settings and scale it
    calibrated): these settings and scale instead of the declared ones, and these options added."""

    settings: Optional[tuple[str, ...]] = None
    scale: Optional[float] = Field(default=None, gt=0)
    options: tuple[str, ...] = ()


class Step(_Strict):
    """A command of the package run before the study's sessions or after a variant's: the product's
    own ``gpu-pairs`` subcommands or ``python -m pytest_gpu_pairs.<module>``, with ``{out}``, ``{root}``,
    ``{device}`` and ``{scale}`` filled in. Done once ``writes`` exists in the study's output (its
    standard output, where ``stdout`` says so, written whole or not at all)."""

    name: PlainName
    argv: tuple[str, ...] = Field(min_length=1)
    after: Optional[PlainName] = Field(default=None, description="the variant it follows; none: before every session")
    writes: InsidePath
    stdout: bool = False
    needs_gpu: Optional[str] = None

    @field_validator("argv")
    @classmethod
    def _the_packages_own(cls, argv: tuple[str, ...]) -> tuple[str, ...]:
        if argv[0] == "gpu-pairs" and len(argv) > 1:
            return argv
        if argv[0] == "python" and len(argv) > 2 and argv[1] == "-m" and _PACKAGE_MODULE.fullmatch(argv[2]):
            return argv
        raise ValueError("expected a command of the package: ['gpu-pairs', SUBCOMMAND, ...] or "
                         "['python', '-m', 'pytest_gpu_pairs.MODULE', ...]")


class Study(_Strict):
    """A study: what its pytest sessions run, and how its summary is made from what they leave."""

    name: PlainName
    about: str
    reference: str
    suite: str = "benchmarks"
    settings: tuple[str, ...] = ()
    select: Optional[str] = None
    options: tuple[str, ...] = ()
    gpu_options: tuple[str, ...] = Field(default=(), description="dropped, and said so, on --device cpu")
    scale: Optional[float] = Field(default=None, gt=0)
    plan: Optional[tuple[str, ...]] = Field(default=None, description="gpu-pairs plan's options: plan.json first")
    variants: tuple[Variant, ...] = Field(default=(Variant(name="main"),), description=(
        "none where a step starts and signals the study's pytest itself (teardown)"))
    steps: tuple[Step, ...] = ()
    env: dict[str, str] = Field(default_factory=dict, description="set for its sessions and steps, e.g. cudnn.benchmark off")
    share_fit_profiles: bool = Field(default=False, description="every session starts with the fit profiles "
                                     "measured by the sessions before it (fit-profiles/ of the study's output)")
    collate: Optional[str] = None
    summary_files: tuple[str, ...] = ("summary.json", "table.md")
    not_rebuilt: Optional[str] = Field(default=None, description="why collect cannot rebuild the committed summary")
    not_run: Optional[str] = Field(default=None, description="why `study run` cannot run this study")
    run_gaps: Optional[str] = Field(default=None, description="steps of the study `study run` does not take")

    @model_validator(mode="after")
    def _distinct(self) -> Study:
        names = [v.name for v in self.variants]
        folders = [f for v in self.variants for f in v.folders()]
        if len(set(names)) != len(names) or len(set(folders)) != len(folders):
            raise ValueError("expected variants with distinct names and results folders")
        if not self.variants and not self.steps:
            raise ValueError("expected at least one variant, or the steps that run the study's pytest themselves")
        steps = [s.name for s in self.steps]
        if len(set(steps)) != len(steps):
            raise ValueError("expected steps with distinct names")
        strays = [s.after for s in self.steps if s.after is not None and s.after not in names]
        if strays:
            raise ValueError(f"step after {strays[0]!r}: expected one of the variants {', '.join(names)}")
        if (self.collate is None) == (self.not_rebuilt is None):
            raise ValueError("expected either a collate or, where none can rebuild the summary, not_rebuilt")
        if self.not_run is None and not self.settings and not all(v.settings for v in self.variants):
            raise ValueError("expected settings for every variant, or not_run saying why the study is not run")
        return self


def _declared() -> Path:
    return Path(str(resources.files("pytest_gpu_pairs.studies") / "declared"))


def read_study(path: Path) -> Study:
    """The declaration at ``path``, or one ``SettingsError`` line."""
    try:
        data = parse_json(path.read_bytes())
    except OSError as exc:
        raise SettingsError(path, "$", f"expected a readable study declaration ({exc.strerror or exc})") from None
    except JsonProblem as problem:
        raise SettingsError(path, problem.path, problem.reason) from None
    try:
        study = Study.model_validate(data)
    except ValidationError as exc:
        raise first_error(exc, str(path)) from None
    if study.name != path.stem:
        raise SettingsError(path, "$.name", f"expected the file's own name {path.stem!r}, got {study.name!r}")
    return study


def all_studies(folder: Optional[Path] = None) -> dict[str, Study]:
    """Every declared study by name, in name order."""
    paths = sorted((folder or _declared()).glob("*.json"))
    return {p.stem: read_study(p) for p in paths}


def find_study(name: str, folder: Optional[Path] = None) -> Study:
    studies = all_studies(folder)
    if name not in studies:
        raise SettingsError(name, "$", f"expected a declared study, one of: {', '.join(studies)}")
    return studies[name]
