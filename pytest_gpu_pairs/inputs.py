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


def read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(path, "$", f"expected a readable JSON file ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(path, "$", f"expected valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
