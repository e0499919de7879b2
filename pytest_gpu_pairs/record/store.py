"""The only reader and writer of results folders, session files and benchmark JSON.

pytest-benchmark writes the benchmark JSON; the records in it are handed over by ``record_benchmark``,
and the files gpu-pairs writes itself (every case resumed, the workers' gathered) go through
``save_benchmark_json``.

Everything is written atomically (a temporary file in the same folder, then a rename), so a
reader never sees half a file, and every result record is written and read through the typed
``Record``: a record on disk that does not fit it is reported in one line, never half-trusted.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic_core import ErrorDetails

from pytest_gpu_pairs.compat import record_v1
from pytest_gpu_pairs.inputs import (
    MAX_JSON_BYTES,
    JsonProblem,
    describe_number,
    finite_or_none,
    json_path,
    optional_problem,
    parse_json,
    read_capped,
)
from pytest_gpu_pairs.monitor.samples import DEVICE_COLUMNS, GpuSample
from pytest_gpu_pairs.record.fields import JobFigures
from pytest_gpu_pairs.record.fit import FitProfile
from pytest_gpu_pairs.record.keys import KEYS, SCHEMA_VERSION
from pytest_gpu_pairs.record.model import Record, ValidationError, unknown_key_text, unknown_keys

RESULT = "result.json"
ROUND_FOLDER = re.compile(r"round-\d+")
SESSION = "session.json"
RESUMED_KEY = "gpu_pairs_resumed"  # benchmark JSON: the records of cases resumed, not timed, in its session
SOLO_FOLDER = "_solo"
PROFILES_FOLDER = "_profiles"  # gpu-pairs profile's records, one file per workload and device
FIT_FOLDER = "_fit"  # whole-run fit profiles, one file per workload, hyperparameters, card and GPU model
_PROFILE_NAME = re.compile(r"[^A-Za-z0-9_.+-]")
_EXPECTED = {"float": "a number or null", "int": "a whole number or null", "str": "a string or null",
             "bool": "true, false or null", "dict": "an object or null", "list": "a list or null"}


_NESTED_EXPECTED = {"notes": "an object of key -> reason texts or null", "rounds": "a list of objects or null",
                    "ci": "[low, high] or null"}


class StoreError(ValueError):
    """A results file or folder is unusable; the message is one line: file, JSON path, what was expected."""


def atomic_write_json(path: str | Path, data: Any) -> None:
    """JSON every reader can read back: a number JSON cannot hold is written as null, never as a bare
    ``Infinity`` or ``NaN`` (records say which in their notes: ``typed``)."""
    clean = finite_or_none(data)[0]
    _atomic_write(Path(path), lambda handle: json.dump(clean, handle, indent=2, sort_keys=True, default=str,
                                                       allow_nan=False))


def json_text(data: Any) -> str:
    """``data`` as indented JSON for a command's output: a number JSON cannot hold is null."""
    return json.dumps(finite_or_none(data)[0], indent=2, default=str, allow_nan=False)


def atomic_write_text(path: str | Path, text: str) -> None:
    _atomic_write(Path(path), lambda handle: handle.write(text))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """A binary file (a report's PNG) written as every results file is."""
    _atomic_write(Path(path), lambda handle: handle.write(data), binary=True)


def atomic_write_csv(path: str | Path, header: tuple[str, ...], rows: Iterable) -> None:
    def write(handle) -> None:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)

    _atomic_write(Path(path), write)


class StoreWriteError(OSError):
    """A results file could not be written (disk full, no permission); the file it would have
    replaced is left as it was. The message is one line: which file, and why."""


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, which races with
    threads creating files); where ``/proc`` does not say, the common 022."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _atomic_write(path: Path, write, binary: bool = False) -> None:
    """A temporary file in the same folder, renamed over ``path``: a reader never sees half a file,
    and a failed write leaves the earlier file. The file gets the umask's mode like the logs
    beside it (``mkstemp`` alone would make it 0600: colleagues could not read the results)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise StoreWriteError(f"could not write {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise StoreWriteError(f"could not write {path}: {exc.strerror or exc}; "
                              "the earlier file, if any, is unchanged") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def typed(record: Mapping[str, Any] | Record, source: str | Path = "<record>", at: str = "$") -> Record:
    """The record as the typed model; ``StoreError`` naming the first key that does not fit, or that
    the record does not declare (a misspelt key must not read back as a missing figure). A number
    JSON cannot hold (NaN, Infinity, an integer beyond a float's range: a job's metric, a ratio over
    a zero duration) becomes null with a note saying what it was."""
    data = _finite_record(record.to_dict() if isinstance(record, Record) else dict(record))
    unknown = unknown_keys(data)
    if unknown:
        raise StoreError(f"{source}: {at}{json_path((unknown[0],))[1:]}: expected a gpu-pairs result record "
                         f"({unknown_key_text(unknown[0])})")
    try:
        return Record.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = str(error["loc"][0]) if error["loc"] else ""
        if (key == "rounds" and len(error["loc"]) > 2) or error["msg"].startswith("Value error, round: "):
            loc, text = _round_problem(error)
            raise StoreError(f"{source}: {at}{json_path(loc)[1:]}: expected a gpu-pairs result record "
                             f"({text}, got {error.get('input')!r})") from None
        if key == "jobs" and len(error["loc"]) > 1:
            raise StoreError(f"{source}: {at}{json_path(tuple(error['loc'][:3]))[1:]}: expected a gpu-pairs result "
                             f"record (an entry of jobs: {_job_problem(error)}, got {error.get('input')!r})") from None
        expected = _NESTED_EXPECTED.get(key.rsplit("_", 1)[-1] if key.endswith("_ci") else key) \
            or _EXPECTED.get(KEYS[key].type if key in KEYS else "", "a valid value")
        raise StoreError(f"{source}: {at}{json_path((key,))[1:] if key else ''}: expected a gpu-pairs result record "
                         f"({key or 'the record'} must be {expected}, got {error.get('input')!r})") from None


def _round_problem(error: ErrorDetails) -> tuple[tuple[int | str, ...], str]:
    """Where in ``rounds`` a round does not fit, and why: a key of the wrong type is said as the
    record's own key is, past the union's member names in pydantic's location."""
    loc = tuple(error["loc"][:3])
    name = loc[2] if len(loc) == 3 else None
    if name == "jobs" and len(error["loc"]) > 3:
        return tuple(error["loc"][:5]), f"an entry of a round's jobs: {_job_problem(error)}"
    if isinstance(name, str) and name in KEYS:
        return loc, f"{name} must be {_EXPECTED.get(KEYS[name].type, 'a valid value')}"
    return loc, error["msg"].removeprefix("Value error, ")


def _job_problem(error: ErrorDetails) -> str:
    """Why an entry of ``jobs`` does not fit: its field and what the field holds."""
    field = next((part for part in reversed(error["loc"]) if isinstance(part, str) and part in JobFigures.model_fields),
                 None)
    if field is None:
        return error["msg"].removeprefix("Value error, ").lower()
    text = field in ("role", "model", "vram_need_phase")
    return f"{field} must be {'a string' if text else 'a number'}{'' if field == 'role' else ' or null'}"


def _finite_record(data: dict[str, Any]) -> dict[str, Any]:
    clean, replaced = finite_or_none(data)
    if not replaced:
        return data
    notes = clean.get("notes") if isinstance(clean.get("notes"), dict) else {}
    for loc, value in replaced:
        notes.setdefault(str(loc[0]), f"{json_path(loc)} was {describe_number(value)}, not a finite number; "
                                      "recorded as null")
    return {**clean, "notes": notes}


def save_result(out_dir: str | Path, record: Mapping[str, Any] | Record) -> Path:
    """A complete result: the case ran to its end, passing or failing (an OOM, a timeout, a crash
    loop is what the pair does, and a rerun with ``--gpu-pairs-resume`` keeps it)."""
    path = Path(out_dir) / RESULT
    atomic_write_json(path, typed({"schema": SCHEMA_VERSION, **_plain(record), "complete": True}, path).to_dict())
    return path


def save_incomplete(out_dir: str | Path, record: Mapping[str, Any] | Record, reason: str) -> Path:
    """Marks a case that did not run to its end (Ctrl-C, SIGTERM, an error of the harness):
    ``complete`` is false, so a resumed run measures it again."""
    path = Path(out_dir) / RESULT
    data = {"schema": SCHEMA_VERSION, **_plain(record), "complete": False, "interrupted": reason}
    atomic_write_json(path, typed(data, path).to_dict())
    return path


def write_record(out_dir: str | Path, record: Record) -> Path:
    """A record as it is (complete or not), typed again on the way out: ``gpu-pairs merge`` copies
    records between results folders through here."""
    path = Path(out_dir) / RESULT
    atomic_write_json(path, typed(record, path).to_dict())
    return path


def record_benchmark(benchmark: Any, record: Record) -> None:
    """A case's record as pytest-benchmark's ``extra_info`` (its public place for a test's own
    data), typed as ``result.json`` is: the benchmark JSON's copy of the record is this one."""
    benchmark.extra_info.update(typed(record).to_dict())


def benchmark_entries_typed(output_json: dict[str, Any], source: str = "--benchmark-json") -> dict[str, Any]:
    """``output_json`` with the record of every entry (timed or resumed) typed in place."""
    for where in ("benchmarks", RESUMED_KEY):
        for index, entry in enumerate(output_json.get(where) or []):
            info = entry.get("extra_info") if isinstance(entry, dict) else None
            if isinstance(info, dict) and "case_id" in info:
                entry["extra_info"] = typed(info, source, f"$.{where}[{index}].extra_info").to_dict()
    return output_json


def save_benchmark_json(bench: Any, output_json: dict[str, Any]) -> None:
    """The benchmark JSON gpu-pairs writes itself (every case resumed, or the workers' gathered),
    its records typed, written by pytest-benchmark's own ``save_json`` (an open file in 5.2, a path
    in 5.3), so the file is pytest-benchmark's in every other respect."""
    bench.save_json(benchmark_entries_typed(output_json, str(getattr(bench.json, "name", bench.json))))


def _plain(record: Mapping[str, Any] | Record) -> dict[str, Any]:
    return record.to_dict() if isinstance(record, Record) else json.loads(json.dumps(dict(record), default=str))


def read_record(path: str | Path) -> Record:
    """One ``result.json``, typed; ``StoreError`` when it is unreadable or does not fit."""
    path = Path(path)
    data = _read_json(path, "gpu-pairs result.json")
    if not isinstance(data, dict):
        raise StoreError(f"{path}: $: expected a gpu-pairs result record (a JSON object)")
    return _read_layout(data, path, "$")


def _read_layout(data: dict[str, Any], path: str | Path, where: str) -> Record:
    """A record read from disk in today's layout, typed: layout 1 upgraded, a layout newer than
    this version knows refused (its keys may mean other things, and read as this layout its figures
    would be judged as if they were these)."""
    layout = data.get("schema")
    if isinstance(layout, int) and not isinstance(layout, bool) and not 1 <= layout <= SCHEMA_VERSION:
        newer = layout > SCHEMA_VERSION
        raise StoreError(f"{path}: {where}.schema: expected a record of layout 1 to {SCHEMA_VERSION}, got "
                         f"{describe_number(layout)}" + ("; it was written by a newer gpu-pairs: read it with "
                                                         "that version, or upgrade this one" if newer else ""))
    return typed(record_v1.upgrade(data), path, where)


def load_result(out_dir: str | Path) -> Optional[Record]:
    """A complete earlier result of a case, or None (missing, unreadable, not a record, or incomplete)."""
    try:
        record = read_record(Path(out_dir) / RESULT)
    except StoreError:
        return None
    return record if record.complete is True else None


def case_result_paths(out_dir: str | Path, solo: bool = False, nested: bool = False) -> list[Path]:
    """``<out>/<case-id>/result.json`` of every case (not the round folders of repeats); with
    ``solo`` also the session's solo baselines under ``_solo``; ``nested`` finds the case folders
    of results folders anywhere below ``out_dir`` (an unpacked archive of several runs)."""
    out_dir = Path(out_dir)
    if nested:
        return [p for p in sorted(out_dir.rglob(RESULT))
                if SOLO_FOLDER not in p.parts and not ROUND_FOLDER.fullmatch(p.parent.name)]
    paths = [p for p in sorted(out_dir.glob(f"*/{RESULT}")) if not p.parent.name.startswith("_")]
    return paths + (sorted(out_dir.glob(f"{SOLO_FOLDER}/*/{RESULT}")) if solo else [])


def case_records(out_dir: str | Path, solo: bool = False,
                 nested: bool = False) -> tuple[list[tuple[Path, Record]], list[str]]:
    """The records of a results folder, and one line for each file that could not be read or that
    claims the case id of a record found before it (a stale copy must not stand in for the case)."""
    found, problems = [], []
    claimed: dict[str, Path] = {}
    for path in case_result_paths(out_dir, solo, nested):
        try:
            record = read_record(path)
        except StoreError as exc:
            problems.append(str(exc))
            continue
        first = claimed.setdefault(record.case_id, path) if isinstance(record.case_id, str) else path
        if first != path:
            problems.append(duplicate_case_message(path, "$", record.case_id, str(first)))
            continue
        found.append((path, record))
    return found, problems


def duplicate_case_message(path: str | Path, where: str, case_id: Optional[str], first: str) -> str:
    return (f"{path}: {where}.case_id: expected one record per case, but case {case_id!r} is also recorded in "
            f"{first}; remove the stale copy")


def profile_path(out_dir: str | Path, workload: str, device: str) -> Path:
    """Where a workload's profile on ``device`` (cpu or cuda) lives: ``<out>/_profiles/<workload>.<device>.json``,
    the name made safe for any file system."""
    return Path(out_dir) / PROFILES_FOLDER / f"{_PROFILE_NAME.sub('_', workload)[:100]}.{device}.json"


def save_profile(out_dir: str | Path, workload: str, device: str, profile: Mapping[str, Any]) -> Path:
    path = profile_path(out_dir, workload, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, profile)
    return path


def profile_paths(out_dir: Optional[str | Path]) -> list[Path]:
    """Every stored profile of a results folder, in name order (none where there is no folder)."""
    if out_dir is None or not (Path(out_dir) / PROFILES_FOLDER).is_dir():
        return []
    return sorted((Path(out_dir) / PROFILES_FOLDER).glob("*.json"))


def holds_profiles_only(out_dir: str | Path) -> bool:
    """A folder ``gpu-pairs profile --out`` wrote and no session: profiles, no case."""
    return bool(profile_paths(out_dir)) and not case_result_paths(out_dir)


def fit_profile_path(out_dir: str | Path, key: str) -> Path:
    return Path(out_dir) / FIT_FOLDER / f"{_PROFILE_NAME.sub('_', key)[:120]}.json"


def save_fit_profile(out_dir: str | Path, profile: FitProfile) -> Path:
    path = fit_profile_path(out_dir, profile.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, profile.model_dump(mode="json"))
    return path


def read_fit_profile(path: str | Path) -> FitProfile:
    """A stored fit profile, read as untrusted: one ``StoreError`` line for a file that is not one."""
    data = _read_json(Path(path), "a gpu-pairs fit profile")
    try:
        return FitProfile.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        raise StoreError(f"{path}: {json_path(tuple(error['loc']))}: expected a gpu-pairs fit profile "
                         f"({error['msg']}, got {str(error.get('input'))[:80]!r})") from None


def fit_profiles(out_dir: Optional[str | Path]) -> list[FitProfile]:
    """Every readable fit profile of a results folder (one that is not is left out: it is measured again)."""
    folder = Path(out_dir) / FIT_FOLDER if out_dir is not None else None
    found = []
    for path in sorted(folder.glob("*.json")) if folder is not None and folder.is_dir() else []:
        try:
            found.append(read_fit_profile(path))
        except StoreError:
            continue
    return found


def complete_records(out_dir: str | Path) -> list[Record]:
    """The complete records of a results folder, solo baselines included; unreadable ones are left out."""
    found, _ = case_records(out_dir, solo=True)
    return [record for _, record in found if record.complete]


def write_session(out_dir: str | Path, info: Mapping[str, Any]) -> Path:
    path = Path(out_dir) / SESSION
    atomic_write_json(path, dict(info))
    return path


def read_session(out_dir: str | Path) -> Optional[dict[str, Any]]:
    """A results folder's ``session.json``, or None where there is none."""
    path = Path(out_dir) / SESSION
    if not path.exists():
        return None
    data = _read_json(path, "gpu-pairs session.json")
    if not isinstance(data, dict):
        raise StoreError(f"{path}: $: expected a gpu-pairs session.json (a JSON object)")
    _check_session(path, data)
    return data


_SESSION_SHAPE = {"device": "string", "gpu": "object", "scale": "number", "gpu_memory_mb": "number",
                  "sample_hz": "number", "idle_power_w": "number", "worker": "string"}
_GPU_SHAPE = {"name": "string", "driver": "string", "memory_total_mb": "number", "power_limit_w": "number"}


def _check_session(path: Path, data: dict[str, Any]) -> None:
    """The keys the readers use are of the kind they expect (or null): a ``"gpu": []`` must be one
    line naming it, not an AttributeError in ``compare`` or ``plan``."""
    for key, kind in _SESSION_SHAPE.items():
        problem = optional_problem(data.get(key), kind)
        if problem:
            raise StoreError(f"{path}: {json_path((key,))}: {problem}")
    for key, kind in _GPU_SHAPE.items():
        problem = optional_problem((data.get("gpu") or {}).get(key), kind)
        if problem:
            raise StoreError(f"{path}: {json_path(('gpu', key))}: {problem}")


@dataclass
class Run:
    """The records of one run, by case id, and the machine they were measured on. A record handed
    in as a plain dict (a session's own, a test's) is typed here, so readers can rely on attributes."""

    source: str
    records: dict[str, Record]
    machine: dict[str, Any] = field(default_factory=dict)
    places: dict[str, tuple[str, str]] = field(default_factory=dict)  # case id -> (file, JSON path) it was read from

    def place(self, case_id: str) -> tuple[str, str]:
        """The file and JSON path of a case's record, for a message that names them."""
        return self.places.get(case_id, (self.source, f"$[{case_id!r}]"))

    def __post_init__(self) -> None:
        self.records = {case_id: r if isinstance(r, Record) else typed(r, self.source, f"$[{case_id!r}]")
                        for case_id, r in self.records.items()}


def _read_json(path: Path, what: str) -> Any:
    """A file the suite wrote, read back as untrusted: a regular file (a FIFO or a device in its
    place is refused unopened), at most ``MAX_JSON_BYTES``, JSON nested at most ``MAX_JSON_DEPTH``
    deep, every number finite; anything else is one ``StoreError`` line."""
    try:
        data = read_capped(path)
    except OSError as exc:
        raise StoreError(f"{path}: $: expected a readable {what} ({exc.strerror or exc})") from None
    if len(data) > MAX_JSON_BYTES:
        raise StoreError(f"{path}: $: expected {what} of at most {MAX_JSON_BYTES >> 20} MiB")
    try:
        return parse_json(data)
    except JsonProblem as problem:
        raise StoreError(f"{path}: {problem.path}: {_store_reason(problem, what)}") from None


def _store_reason(problem: JsonProblem, what: str) -> str:
    if problem.kind == "utf8":
        return problem.reason.replace("expected UTF-8 text", f"expected {what} in UTF-8")
    if problem.kind == "syntax":
        return f"expected {what}, got invalid JSON ({problem.reason.removeprefix('expected valid JSON (')}"
    return problem.reason


def machine_from_session(session: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies the measuring machine, from a ``session.json`` or the same facts of the
    running session: the one builder of benchmark ``machine_info["gpu_pairs"]``, of the gate's
    machines and of a run directory's. ``gpu_memory_mb`` is the card size emulated with
    ``--gpu-pairs-gpu-memory-mb`` (None: the whole card)."""
    gpu = session.get("gpu") or {}
    return {"device": session.get("device"), "gpu_name": gpu.get("name"), "driver": gpu.get("driver"),
            "cuda_driver_version": gpu.get("cuda_driver_version"), "memory_total_mb": gpu.get("memory_total_mb"),
            "power_limit_w": gpu.get("power_limit_w"), "idle_power_w": session.get("idle_power_w"),
            "gpu_memory_mb": session.get("gpu_memory_mb")}


def _session_machine(run_dir: Path) -> dict[str, Any]:
    session = read_session(run_dir)
    return machine_from_session(session) if session is not None else {}


def _add_record(records: dict[str, Record], record: Any, path: Path, where: str,
                claimed: dict[str, str], places: Optional[dict[str, tuple[str, str]]] = None) -> None:
    """One more record of a run; a second record of a case id already read is refused, naming both
    places: whichever came last would otherwise silently stand for the case."""
    if not isinstance(record, dict) or not isinstance(record.get("case_id"), str):
        raise StoreError(f"{path}: {where}: expected a gpu-pairs result record with a case_id")
    case_id = record["case_id"]
    if case_id in records:
        raise StoreError(duplicate_case_message(path, where, case_id, claimed[case_id]))
    records[case_id] = _read_layout(record, path, where)
    claimed[case_id] = f"{path}" if where == "$" else f"{path} at {where}"
    if places is not None:
        places[case_id] = (str(path), where)


def _load_benchmark_json(path: Path, data: dict[str, Any]) -> Run:
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise StoreError(f"{path}: $.benchmarks: expected a list (pytest-benchmark JSON)")
    resumed = data.get(RESUMED_KEY, [])
    if not isinstance(resumed, list):
        raise StoreError(f"{path}: $.{RESUMED_KEY}: expected a list of resumed cases' entries")
    records: dict[str, Record] = {}
    claimed: dict[str, str] = {}
    places: dict[str, tuple[str, str]] = {}
    for where, entries in (("benchmarks", benchmarks), (RESUMED_KEY, resumed)):
        for index, bench in enumerate(entries):
            info = bench.get("extra_info") if isinstance(bench, dict) else None
            if isinstance(info, dict) and "case_id" in info:
                _add_record(records, info, path, f"$.{where}[{index}].extra_info", claimed, places)
    return Run(str(path), records, _benchmark_machine(path, data), places)


def _benchmark_machine(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    machine_info = data.get("machine_info") or {}
    machine = machine_info.get("gpu_pairs") if isinstance(machine_info, dict) else machine_info
    if machine is not None and not isinstance(machine, dict):
        where = "$.machine_info" + (".gpu_pairs" if isinstance(machine_info, dict) else "")
        raise StoreError(f"{path}: {where}: expected an object, got {type(machine).__name__}")
    for key, kind in (("device", "string"), ("gpu_name", "string"), ("driver", "string"),
                      ("gpu_memory_mb", "number")):
        problem = optional_problem((machine or {}).get(key), kind)
        if problem:
            raise StoreError(f"{path}: $.machine_info.gpu_pairs.{key}: {problem}")
    return dict(machine or {})


def _load_run_dir(path: Path) -> Run:
    records: dict[str, Record] = {}
    claimed: dict[str, str] = {}
    places: dict[str, tuple[str, str]] = {}
    for result in case_result_paths(path):
        _add_record(records, _read_json(result, "gpu-pairs result.json"), result, "$", claimed, places)
    if not records:
        raise StoreError(f"{path}: $: expected a gpu-pairs run directory with <case-id>/result.json files")
    return Run(str(path), records, _session_machine(path), places)


def load_run(path: str | Path) -> Run:
    """A benchmark JSON file, a run directory, or a single ``result.json``."""
    path = Path(path)
    if path.is_dir():
        return _load_run_dir(path)
    data = _read_json(path, "pytest-benchmark JSON or gpu-pairs result.json")
    if isinstance(data, dict) and "benchmarks" in data:
        run = _load_benchmark_json(path, data)
    elif isinstance(data, dict) and "case_id" in data:
        run = Run(str(path), {}, _session_machine(path.parent.parent))
        _add_record(run.records, data, path, "$", {}, run.places)
    else:
        raise StoreError(f"{path}: $: expected pytest-benchmark JSON (with 'benchmarks') or a gpu-pairs result.json")
    if not run.records:
        raise StoreError(f"{path}: $.benchmarks[*].extra_info: expected gpu-pairs records (none has a case_id)")
    return run


def save_samples(samples: list[GpuSample], out_dir: str | Path) -> list[Path]:
    """``gpu_samples.csv`` (device) and ``gpu_process_samples.csv`` (one row per process and sample)."""
    out_dir = Path(out_dir)
    device_path, process_path = out_dir / "gpu_samples.csv", out_dir / "gpu_process_samples.csv"
    atomic_write_csv(device_path, DEVICE_COLUMNS,
                     ([getattr(s, c) for c in DEVICE_COLUMNS] for s in samples))
    atomic_write_csv(process_path, ("t", "pid", "role", "mem_mb", "sm_pct"),
                     ((s.t, pid, s.roles.get(pid, "other"), s.proc_mem_mb.get(pid), s.proc_sm_pct.get(pid))
                      for s in samples for pid in sorted(set(s.proc_mem_mb) | set(s.proc_sm_pct))))
    return [device_path, process_path]


MAX_SAMPLES_BYTES = 64 << 20  # a day of a case's readings at 10 a second is about 30 MiB


def _reading(path: Path, line: int, column: str, text: Optional[str], low: float, high: float) -> float:
    try:
        value = float(text or "nan")
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise StoreError(f"{path}: row {line}, column {column}: expected a number from {low:g} to {high:g}, "
                         f"got {(text or '')[:40]!r}")
    return value


def load_utilisation(case_dir: str | Path) -> Optional[tuple[GpuSample, ...]]:
    """A case's utilisation readings from its ``gpu_samples.csv`` (``t``, ``util_pct``), in time order,
    read back as untrusted; None where the case kept no such file. A reading left empty stays None;
    anything else unusable is one ``StoreError`` line naming the file, the row and the column."""
    path = Path(case_dir) / "gpu_samples.csv"
    if not os.path.lexists(path):
        return None
    try:
        data = read_capped(path, MAX_SAMPLES_BYTES)
    except OSError as exc:
        raise StoreError(f"{path}: expected a readable gpu_samples.csv ({exc.strerror or exc})") from None
    if len(data) > MAX_SAMPLES_BYTES:
        raise StoreError(f"{path}: expected gpu_samples.csv of at most {MAX_SAMPLES_BYTES >> 20} MiB")
    try:
        rows = csv.DictReader(io.StringIO(data.decode("utf-8"), newline=""))
        if not {"t", "util_pct"} <= set(rows.fieldnames or ()):
            raise StoreError(f"{path}: row 1: expected a header naming the columns t and util_pct")
        samples = [GpuSample(t=_reading(path, line, "t", row["t"], 0.0, math.inf),
                             util_pct=None if not row["util_pct"] else
                             _reading(path, line, "util_pct", row["util_pct"], 0.0, 100.0))
                   for line, row in enumerate(rows, start=2)]
    except UnicodeDecodeError:
        raise StoreError(f"{path}: expected gpu_samples.csv in UTF-8") from None
    except csv.Error as exc:
        raise StoreError(f"{path}: expected CSV ({exc})") from None
    return tuple(sorted(samples, key=lambda s: s.t))


def save_cpu_readings(readings: list[tuple[float, float]], out_dir: str | Path) -> Path:
    """``cpu_energy.csv``: RAPL package energy, unwrapped and summed over packages, in joules."""
    path = Path(out_dir) / "cpu_energy.csv"
    atomic_write_csv(path, ("t", "energy_j"), readings)
    return path
