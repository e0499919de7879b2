"""``pytest_gpu_pairs/record/fields.py``, written from the key table ``record/keys.py``: every key of
the record as a typed pydantic field, so that type checkers and editors see the record's attributes
(a ``create_model`` made at run time shows them none).

    python -m tools.codegen.record_fields      # rewrites pytest_gpu_pairs/record/fields.py

``tests/unit/record/test_record_fields.py`` compares the checked-in module with this one, so the
table and the typed fields cannot drift apart.
"""
from __future__ import annotations

from pathlib import Path

from pytest_gpu_pairs.record.keys import KEYS, PER_ROUND, Key

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "pytest_gpu_pairs" / "record" / "fields.py"

TYPES = {"float": "Number", "int": "StrictInt", "str": "StrictStr", "bool": "StrictBool",
         "dict": "dict[str, Any]", "list": "list[Any]"}
NESTED = {  # keys whose insides the readers format or compute with
    "notes": "dict[str, StrictStr]",
    "rounds": "list[dict[str, Any]]",  # record/model.py checks each entry as a round
    "bg_cycle_perf": "list[dict[str, Any]]",  # each of a kept-running background's runs: metrics and shared
    "jobs": "list[JobFigures]",
}

HEADER = '''"""Every key of the result record as a typed field, generated from ``record/keys.py`` by
``python -m tools.codegen.record_fields``: do not edit by hand (a test compares this module with
the table). ``record/model.py`` makes the record from these fields; type checkers and editors read
its attributes here, so a misspelt ``record.<key>`` is an error before anything runs.

Every field is optional: a figure that could not be measured is None (its reason under the same
key in ``notes``), and a key that was never set is left out of the record on disk.
"""
from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

Number = Union[StrictInt, StrictFloat]
Interval = Annotated[list[Optional[Number]], Field(min_length=2, max_length=2)]  # [low, high]: the 95 % interval


class JobFigures(BaseModel):
    """One job of a case (an entry of ``jobs``): its role and workload, its paces alone and shared,
    its share of the energy and its whole-run memory need; the means over the case's rounds, or
    one round's figures under ``rounds``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: StrictStr
    model: Optional[StrictStr] = None
    solo_steps_per_s: Optional[Number] = None
    steps_per_s: Optional[Number] = None
    progress_ratio: Optional[Number] = None
    gpu_energy_j: Optional[Number] = None
    gpu_energy_per_step_j: Optional[Number] = None
    alone_energy_j: Optional[Number] = None
    solo_gpu_busy: Optional[Number] = None
    vram_need_mb: Optional[Number] = None
    vram_need_phase: Optional[StrictStr] = None


class RecordFields(BaseModel):
    """One case's (or one round's) result, every key typed as ``record.keys`` declares it."""

    # built where a record is first checked, not at import: only the record made from these fields is ever
    # checked, and a process that checks none (a collection, a CLI refusing its input) skips the work
    model_config = ConfigDict(defer_build=True)

'''


def _docstring(text: str) -> str:
    return '"""' + text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '"""'


def _field(name: str, annotation: str, text: str, default: str = "None") -> list[str]:
    return [f"    {name}: Optional[{annotation}] = {default}", f"    {_docstring(text)}"]


def _key_field(key: Key) -> list[str]:
    if key.name == "schema":  # BaseModel has a ``schema``: the field takes another name and keeps the key
        return []
    return _field(key.name, NESTED.get(key.name, TYPES[key.type]), key.text)


def source() -> str:
    """The module's text, as ``MODULE`` must hold it."""
    lines = HEADER.splitlines()
    for key in KEYS.values():
        lines += _key_field(key)
    lines += _field("schema_version", TYPES[KEYS["schema"].type], KEYS["schema"].text,
                    default='Field(None, alias="schema")')
    for name in PER_ROUND:
        lines += _field(f"{name}_std", "Number", f"the standard deviation of {name} over the rounds")
    for name in PER_ROUND:
        lines += _field(f"{name}_ci", "Interval", f"the 95 % interval of {name} ([low, high])")
    return "\n".join(lines) + "\n"


def main() -> int:
    MODULE.write_text(source(), encoding="utf-8")
    print(f"wrote {MODULE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
