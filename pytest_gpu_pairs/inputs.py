"""Untrusted JSON in: one clear line naming the file, the JSON path and what was expected."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


class SettingsError(ValueError):
    """A settings file is unusable; the message is one line: file, JSON path, what was expected."""

    def __init__(self, source: Path | str, path: str, message: str):
        self.source, self.json_path, self.reason = str(source), path, message
        super().__init__(f"{source}: {path}: {message}")


def json_path(loc: tuple) -> str:
    """``$.pairs[0].foreground``; a key that is not a plain name (a newline, a dot, a quote in it) is
    written ``["..."]`` with JSON escapes, so the message stays one readable line."""
    path = "$"
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(str(part)):
            path += f".{part}"
        else:
            path += f"[{json.dumps(str(part))}]"
    return path


def first_error(exc: ValidationError, source: str) -> SettingsError:
    errors = exc.errors(include_url=False)
    err = errors[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
    kind, message = err["type"], err["msg"]
    if kind == "missing":
        text = "required key is missing"
    elif kind == "extra_forbidden":
        text = "unexpected key (check its spelling against the settings reference)"
    else:
        text = message.removeprefix("Value error, ")
        text = f"{text[0].lower()}{text[1:]}, got {err.get('input')!r}" if text else repr(err.get("input"))
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return SettingsError(source, json_path(loc), text + more)


MAX_JSON_BYTES = 64 << 20  # a settings or workloads file is kilobytes; more is not one


def read_json(path: Path) -> Any:
    """The parsed file, or one ``SettingsError`` line: unreadable, too big, not UTF-8, not JSON, or
    nested deeper than the parser can follow."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise SettingsError(path, "$", f"expected a readable JSON file ({exc.strerror or exc})") from None
    if len(data) > MAX_JSON_BYTES:
        raise SettingsError(path, "$", f"expected a JSON file of at most {MAX_JSON_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(path, "$", f"expected UTF-8 text, got byte 0x{data[exc.start]:02x} at offset {exc.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(path, "$", f"expected valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise SettingsError(path, "$", "expected JSON nested at most a few hundred levels deep") from None
    except ValueError as exc:  # a number of thousands of digits: Python refuses to convert it
        raise SettingsError(path, "$", f"expected valid JSON ({exc})") from None
