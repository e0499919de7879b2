"""The record's typed fields: the checked-in ``record/fields.py`` is what the key table makes, the
builders' groups are record keys typed as the record types them, and a type checker refuses a
misspelt attribute or group key, or a figure of the wrong type."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.record.groups import GROUPS, Background, CpuEnergy, InterleavedRound, Timing, merged
from pytest_gpu_pairs.record.keys import KEYS, PER_ROUND
from pytest_gpu_pairs.record.model import KNOWN, Record, Round
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


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g.__name__)
def test_every_field_of_a_group_is_a_record_key_typed_as_the_record_types_it(group):
    for name, field in group.model_fields.items():
        assert name in Record.model_fields, f"{group.__name__}.{name} is not a key of the record"
        assert field.rebuild_annotation() == Record.model_fields[name].rebuild_annotation(), f"{group.__name__}.{name}"


def test_an_interleaved_round_is_typed_as_a_round_of_the_record_is():
    for name, field in InterleavedRound.model_fields.items():
        assert field.rebuild_annotation() == Round.model_fields[name].rebuild_annotation(), name


def test_a_group_gives_the_keys_it_was_given_and_none_it_was_not():
    assert Timing(fg_duration_s=1.5, window_s=None).keys_set() == {"fg_duration_s": 1.5, "window_s": None}
    assert Timing(fg_duration_s=1.5).without(["fg_duration_s", "bg_speed_ratio"]).keys_set() == {"fg_duration_s": None}


@given(st.data())
def test_a_group_gives_exactly_the_keys_it_was_given_in_its_own_order(data):
    group = data.draw(st.sampled_from(GROUPS))
    given_keys = data.draw(st.sets(st.sampled_from(sorted(group.model_fields))))
    found = group(**dict.fromkeys(given_keys)).keys_set()
    assert list(found) == [name for name in group.model_fields if name in given_keys]
    assert merged(group(**dict.fromkeys(given_keys)), {"notes": {}}) == {**found, "notes": {}}


def test_two_groups_that_set_one_key_are_refused_where_the_record_is_put_together():
    assert merged(Timing(window_s=2.0), CpuEnergy(cpu_energy_j=None), {"notes": {}}) == {
        "window_s": 2.0, "cpu_energy_j": None, "notes": {}}
    with pytest.raises(ValueError, match="set by two groups: bg_runs"):
        merged(Background(bg_runs=1), {"bg_runs": 2})


def _mypy(tmp_path: Path, programs: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, text in programs.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # this checkout's package, not an installed copy
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--follow-imports=silent",
         "--cache-dir", str(tmp_path / ".mypy_cache"), *programs],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_type_checker_refuses_a_misspelt_record_attribute_or_group_key_and_accepts_the_right_ones(tmp_path):
    result = _mypy(tmp_path, {
        "misspelt.py": """\
            from typing import Optional

            from pytest_gpu_pairs.record.groups import Sharing, Timing
            from pytest_gpu_pairs.record.model import Record


            def efficiency(record: Record) -> Optional[float]:
                return record.concurrency_eficiency


            def model_name(record: Record) -> int:
                return record.fg_model


            TIMING = Timing(fg_duraton_s=1.5)
            SHARING = Sharing(fg_slowdown="1.5")
        """,
        "spelt.py": """\
            from typing import Optional

            from pytest_gpu_pairs.record.groups import Timing
            from pytest_gpu_pairs.record.model import Record, built


            def efficiency(record: Record) -> Optional[float]:
                return record.concurrency_efficiency


            def model_name(record: Record) -> Optional[str]:
                return record.fg_model


            def notes(record: Record) -> dict[str, str]:
                return built({"fg_slowdown": 1.5}).notes or record.notes or {}


            TIMING = Timing(fg_duration_s=1.5, duration_basis="training")
        """,
    })
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 1, result.stdout + result.stderr
    assert any(line.startswith("misspelt.py:8:") and '"Record" has no attribute "concurrency_eficiency"' in line
               for line in errors), result.stdout
    assert any(line.startswith("misspelt.py:12:") and "Incompatible return value type" in line
               for line in errors), result.stdout
    assert any(line.startswith("misspelt.py:15:") and 'Unexpected keyword argument "fg_duraton_s"' in line
               for line in errors), result.stdout
    assert any(line.startswith("misspelt.py:16:") and 'Argument "fg_slowdown" to "Sharing" has incompatible type'
               in line for line in errors), result.stdout
    assert not [line for line in errors if line.startswith("spelt.py")], result.stdout
    assert len(errors) == 4, result.stdout
