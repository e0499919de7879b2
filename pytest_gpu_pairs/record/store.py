"""The only reader and writer of results folders, session files and benchmark JSON."""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


class StoreError(ValueError):
    """A results file or folder is unusable; the message is one line: file, JSON path, what was expected."""


SCHEMA_VERSION = 1


def atomic_write_json(path: str | Path, data: Any) -> None:
    """Write to a temporary file in the same folder and rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True, default=str)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_result(out_dir: str | Path, record: dict[str, Any]) -> Path:
    """A complete result: the case ran to its end, passing or failing (an OOM, a timeout, a crash
    loop is what the pair does, and a rerun with ``--gpu-pairs-resume`` keeps it)."""
    path = Path(out_dir) / "result.json"
    atomic_write_json(path, {"schema": SCHEMA_VERSION, **record, "complete": True})
    return path


def save_incomplete(out_dir: str | Path, record: dict[str, Any], reason: str) -> Path:
    """Marks a case that did not run to its end (Ctrl-C, SIGTERM, an error of the harness):
    ``complete`` is false, so a resumed run measures it again."""
    path = Path(out_dir) / "result.json"
    atomic_write_json(path, {"schema": SCHEMA_VERSION, **record, "complete": False, "interrupted": reason})
    return path


def load_result(out_dir: str | Path) -> Optional[dict[str, Any]]:
    """A complete earlier result of a case, or None (missing, unreadable or incomplete)."""
    try:
        data = json.loads((Path(out_dir) / "result.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("complete") is True else None


@dataclass
class Run:
    """The records of one run, by case id, and the machine they were measured on."""

    source: str
    records: dict[str, dict[str, Any]]
    machine: dict[str, Any] = field(default_factory=dict)


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StoreError(f"{path}: $: expected a readable {what} ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}: $: expected {what}, got invalid JSON ({exc.msg} at line {exc.lineno})") from None


def machine_from_session(session: dict[str, Any]) -> dict[str, Any]:
    """The machine of a run directory, from its ``session.json``."""
    gpu = session.get("gpu") or {}
    return {"device": session.get("device"), "gpu_name": gpu.get("name"), "driver": gpu.get("driver"),
            "cuda_driver_version": gpu.get("cuda_driver_version"), "gpu_memory_mb": session.get("gpu_memory_mb")}


def _session_machine(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "session.json"
    return machine_from_session(_read_json(path, "gpu-pairs session.json")) if path.exists() else {}


def _add_record(records: dict[str, dict], record: Any, path: Path, where: str) -> None:
    if not isinstance(record, dict) or not isinstance(record.get("case_id"), str):
        raise StoreError(f"{path}: {where}: expected a gpu-pairs result record with a case_id")
    records[record["case_id"]] = record


def _load_benchmark_json(path: Path, data: dict[str, Any]) -> Run:
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise StoreError(f"{path}: $.benchmarks: expected a list (pytest-benchmark JSON)")
    records: dict[str, dict] = {}
    for index, bench in enumerate(benchmarks):
        info = bench.get("extra_info") if isinstance(bench, dict) else None
        if isinstance(info, dict) and "case_id" in info:
            _add_record(records, info, path, f"$.benchmarks[{index}].extra_info")
    machine = (data.get("machine_info") or {}).get("gpu_pairs") or {}
    return Run(str(path), records, dict(machine))


def _load_run_dir(path: Path) -> Run:
    records: dict[str, dict] = {}
    for result in sorted(path.glob("*/result.json")):
        if result.parent.name.startswith("_"):
            continue
        _add_record(records, _read_json(result, "gpu-pairs result.json"), result, "$")
    if not records:
        raise StoreError(f"{path}: $: expected a gpu-pairs run directory with <case-id>/result.json files")
    return Run(str(path), records, _session_machine(path))


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
        _add_record(run.records, data, path, "$")
    else:
        raise StoreError(f"{path}: $: expected pytest-benchmark JSON (with 'benchmarks') or a gpu-pairs result.json")
    if not run.records:
        raise StoreError(f"{path}: $.benchmarks[*].extra_info: expected gpu-pairs records (none has a case_id)")
    return run
