"""The typed record: one model, made from the key table (its fields generated into ``fields.py``),
that every record passes through on its way to disk and on its way back. Values of the wrong type are refused, not coerced: a
``"concurrency_efficiency": "1.2"`` read from disk is a broken record, not the number 1.2.

A key outside the table is refused, naming it and the nearest key that exists: a misspelt key is
an error where the record is made, not a None where it is read. The one exception is a key another
plugin adds through ``pytest_gpu_pairs_record``: the record names those in ``plugin_keys`` and
keeps them as they are. Reading works by attribute (``record.fg_slowdown``) or, for code that
handles keys by name (the gate, the tables), by ``record.get(name)``.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Optional

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    StrictBool,
    StrictInt,
    ValidationError,
    create_model,
    model_validator,
)

from pytest_gpu_pairs.record.fields import RecordFields


class Record(RecordFields):
    """One case's (or one round's) result, every key typed as ``record.keys`` declares it
    (``record/fields.py``, generated from the table)."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)  # plugin_keys only

    rounds: Optional[list[Annotated[dict[str, Any], AfterValidator(lambda entry: _checked_round(entry))]]] = None

    @model_validator(mode="before")
    @classmethod
    def _known_keys_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = unknown_keys(data)
            if unknown:
                raise ValueError(unknown_key_text(unknown[0]))
        return data

    def get(self, name: str, default: Any = None) -> Any:
        value = self.to_dict().get(name)
        return default if value is None else value

    def __getitem__(self, name: str) -> Any:
        if name not in self:
            raise KeyError(name)
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.to_dict()

    def keys(self) -> Iterator[str]:
        return iter(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data: keys that were never set are left out, as on disk."""
        return self.model_dump(exclude_unset=True, by_alias=True)

    def updated(self, **changes: Any) -> Record:
        """A copy with ``changes``, checked as a new record is: ``model_copy(update=...)`` would
        keep a misspelt key unchecked until the record is written."""
        return self.model_validate({**self.to_dict(), **changes})


KNOWN: frozenset[str] = frozenset(Record.model_fields) | {"schema"}

_ROUND_FIELDS: dict[str, Any] = {
    **{name: (field.rebuild_annotation(), None) for name, field in Record.model_fields.items()
       if name not in ("rounds", "schema_version")},
    "round": (Optional[StrictInt], None), "segment": (Optional[StrictInt], None),
    "bracketed": (Optional[StrictBool], None), "phases": (Optional[list[dict[str, Any]]], None)}


class _RoundBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # as RecordFields, built where first checked

    @model_validator(mode="before")
    @classmethod
    def _known_keys_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [key for key in data if key not in cls.model_fields]
            if unknown:
                raise ValueError(f"round: {unknown_key_text(unknown[0], frozenset(cls.model_fields))}")
        return data


Round = create_model("Round", __base__=_RoundBase, **_ROUND_FIELDS)
Round.__doc__ = ("One entry of a record's ``rounds``: a repeat's figures, or an interleaved round's rates, "
                 "energies and phases, each key typed as the record's is (it is only read as a dict).")


def _checked_round(entry: dict[str, Any]) -> dict[str, Any]:
    """A round checked as a record is, and kept as the dict it was: compare scales and filters
    rounds as dicts, and the round clock and the studies' collates index them by name."""
    Round.model_validate(entry)
    return entry


def built(data: Mapping[str, Any]) -> Record:
    """A record a builder put together, checked where it is made: an unknown key raises here, in
    the builder's test, and not as a None in a reader. A number JSON cannot hold stays as it was
    measured (a mean over rounds reads what each round gave); ``store.typed`` turns it into null
    with a note when the record is written."""
    return Record.model_validate(dict(data))


def unknown_keys(data: dict[str, Any]) -> list[str]:
    """The keys of ``data`` the record does not declare, besides those ``plugin_keys`` names."""
    added = data.get("plugin_keys")
    added = set(added) if isinstance(added, list) and all(isinstance(k, str) for k in added) else set()
    return [key for key in data if key not in KNOWN and key not in added]


def unknown_key_text(key: str, known: frozenset[str] = KNOWN) -> str:
    """Why ``key`` is refused, with the declared key it was probably meant to be."""
    near = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"{key!r} is not a key of the record, which record/keys.py declares{hint}"


__all__ = ["KNOWN", "Record", "Round", "ValidationError", "built", "unknown_key_text", "unknown_keys"]
