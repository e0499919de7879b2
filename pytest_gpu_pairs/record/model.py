"""The typed record: one model, made from the key table, that every record passes through on its
way to disk and on its way back. Values of the wrong type are refused, not coerced: a
``"concurrency_efficiency": "1.2"`` read from disk is a broken record, not the number 1.2.

Keys outside the table (other plugins' keys through ``pytest_gpu_pairs_record``, ``<key>_std``
of a figure per round) are kept as they are. Reading works by attribute (``record.fg_slowdown``)
or, for code that handles keys by name (the gate, the tables), by ``record.get(name)``.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Optional, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    create_model,
)

from pytest_gpu_pairs.record.keys import KEYS, PER_ROUND

_TYPES: dict[str, Any] = {"float": Union[StrictInt, StrictFloat], "int": StrictInt, "str": StrictStr,
                          "bool": StrictBool, "dict": dict[str, Any], "list": list[Any]}


class _RecordBase(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

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


def _field(kind: str) -> tuple[Any, None]:
    return (Optional[_TYPES[kind]], None)


_Number = Union[StrictInt, StrictFloat]
_NESTED: dict[str, Any] = {  # keys whose insides the readers format or compute with
    "notes": dict[str, StrictStr],
    "rounds": list[dict[str, Any]],
}
_INTERVAL = Annotated[list[Optional[_Number]], Field(min_length=2, max_length=2)]  # [low, high]: the 95 % interval


def _nested(name: str, kind: str) -> tuple[Any, None]:
    return (Optional[_NESTED[name]], None) if name in _NESTED else _field(kind)


_FIELDS = {name: _nested(name, key.type) for name, key in KEYS.items() if name != "schema"}
_FIELDS["schema_version"] = (Optional[StrictInt], Field(None, alias="schema"))  # "schema" is BaseModel's
_FIELDS.update({f"{name}_std": _field("float") for name in PER_ROUND})
_FIELDS.update({f"{name}_ci": (Optional[_INTERVAL], None) for name in PER_ROUND})

Record = create_model("Record", __base__=_RecordBase, **_FIELDS)
Record.__doc__ = "One case's (or one round's) result, every key typed as ``record.keys`` declares it."

__all__ = ["Record", "ValidationError"]
