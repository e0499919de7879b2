"""The record's typed fields: the checked-in ``record/fields.py`` is what the key table makes, and a
type checker reading it refuses a misspelt attribute or a figure used as the wrong type."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pytest_gpu_pairs.record.keys import KEYS, PER_ROUND
from pytest_gpu_pairs.record.model import KNOWN, Record
from tools.codegen.record_fields import MODULE, source

ROOT = Path(__file__).resolve().parents[3]


def test_the_checked_in_fields_are_what_the_key_table_makes():
    assert MODULE.read_text(encoding="utf-8") == source(), (
        "pytest_gpu_pairs/record/fields.py differs from record/keys.py: python -m tools.codegen.record_fields "
        "rewrites it")


def test_every_key_of_the_table_is_a_field_and_nothing_else_is():
    expected = set(KEYS) | {f"{name}_{part}" for name in PER_ROUND for part in ("std", "ci")}
    assert KNOWN - {"schema_version"} == expected
    assert Record.model_fields["schema_version"].alias == "schema"


def _mypy(tmp_path: Path, programs: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, text in programs.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # this checkout's package, not an installed copy
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--follow-imports=silent",
         "--cache-dir", str(tmp_path / ".mypy_cache"), *programs],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_type_checker_refuses_a_misspelt_record_attribute_and_accepts_the_right_one(tmp_path):
    result = _mypy(tmp_path, {
        "misspelt.py": """\
            from typing import Optional

            from pytest_gpu_pairs.record.model import Record


            def efficiency(record: Record) -> Optional[float]:
                return record.concurrency_eficiency


            def model_name(record: Record) -> int:
                return record.fg_model
        """,
        "spelt.py": """\
            from typing import Optional

            from pytest_gpu_pairs.record.model import Record, built


            def efficiency(record: Record) -> Optional[float]:
                return record.concurrency_efficiency


            def model_name(record: Record) -> Optional[str]:
                return record.fg_model


            def notes(record: Record) -> dict[str, str]:
                return built({"fg_slowdown": 1.5}).notes or record.notes or {}
        """,
    })
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 1, result.stdout + result.stderr
    assert any(line.startswith("misspelt.py:7:") and '"Record" has no attribute "concurrency_eficiency"' in line
               for line in errors), result.stdout
    assert any(line.startswith("misspelt.py:11:") and "Incompatible return value type" in line
               for line in errors), result.stdout
    assert not [line for line in errors if line.startswith("spelt.py")], result.stdout
    assert len(errors) == 2, result.stdout
