"""Untrusted JSON in: one clear line naming the file, the JSON path and what was expected."""
from __future__ import annotations

import difflib
import json
import math
import os
import re
import stat
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional, TypeGuard

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails

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


def _misspelt(errors: list[ErrorDetails], data: Any = None,
              needed: Optional[Mapping[str, Collection[str]]] = None) -> Optional[tuple[ErrorDetails, str]]:
    """An unexpected key that is a near miss of a required key missing beside it ("foregound" for
    "foreground"): that error and the key it meant, which says more than "required key is missing".
    ``needed``: a top-level list's name -> keys its entries need in one of their forms (a group's
    ``foreground``, or its ``jobs``), which no "missing" error names; one absent from the entry in
    ``data`` counts as missing there."""
    missing: dict[tuple, list[str]] = {}
    for err in errors:
        if err["type"] == "missing" and err["loc"] and isinstance(err["loc"][-1], str):
            missing.setdefault(tuple(err["loc"][:-1]), []).append(err["loc"][-1])
        elif err["type"] == "extra_forbidden" and needed and len(_shown(err["loc"])) == 3:
            keys, entry = needed.get(str(err["loc"][0]), ()), _at(data, err["loc"][:-1])
            if isinstance(entry, dict):
                missing.setdefault(tuple(err["loc"][:-1]), []).extend(k for k in keys if k not in entry)
    for err in errors:
        key = err["loc"][-1] if err["type"] == "extra_forbidden" and err["loc"] else None
        near = difflib.get_close_matches(key, missing.get(tuple(err["loc"][:-1]), []), n=1, cutoff=0.75) \
            if isinstance(key, str) else []
        if near:
            return err, near[0]
    return None


def _at(data: Any, loc: tuple) -> Any:
    """What ``data`` holds at a validation error's location, or None where it holds nothing there."""
    for part in _shown(loc):
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if not (in_list or (isinstance(data, dict) and part in data)):
            return None
        data = data[part]
    return data


def _shown(loc: tuple) -> tuple:
    """An error's location without pydantic's union and validator tags."""
    return tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))


def first_error(exc: ValidationError, source: str, data: Any = None,
                needed: Optional[Mapping[str, Collection[str]]] = None) -> SettingsError:
    """The first of a validation's errors as one line; ``data`` and ``needed``: see ``_misspelt``."""
    errors = exc.errors(include_url=False)
    misspelt = _misspelt(errors, data, needed)
    if misspelt is not None:
        err, meant = misspelt
        more = f" (and {len(errors) - 2} more problem{'s' if len(errors) > 3 else ''})" if len(errors) > 2 else ""
        return SettingsError(source, json_path(_shown(err["loc"])), f"unexpected key {err['loc'][-1]!r}; did you mean "
                                                            f"{meant!r}? (a required key, missing here){more}")
    err = errors[0]
    loc = _shown(err["loc"])
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


MAX_JSON_BYTES = 64 << 20  # a settings, workloads, result or session file is kilobytes; more is not one
MAX_JSON_DEPTH = 64  # settings and records nest a few levels; deeper is not one of them
FLOAT_MAX = sys.float_info.max
_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotARegularFile(OSError):
    """A path the suite reads back is a FIFO, a device, a socket or a folder: opening a FIFO waits
    for a writer that may never come, and ``/dev/zero`` never ends."""


def _kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def open_regular(path: str | Path) -> IO[bytes]:
    """``path`` opened for reading in binary, refused with ``NotARegularFile`` unless it is (or a
    link leads to) a regular file. Checked before opening, and again on the open file (which is
    opened without blocking, so a FIFO swapped in between cannot stall the open)."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotARegularFile(0, f"expected a regular file, got {_kind(mode)}", str(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(0, f"expected a regular file, got {_kind(mode)}", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(path: str | Path, limit: int = MAX_JSON_BYTES) -> bytes:
    """At most ``limit`` + 1 bytes of a regular file (one more than allowed tells a caller it is too
    big); ``OSError`` (``NotARegularFile`` among them) when it cannot be read."""
    with open_regular(path) as handle:
        return handle.read(limit + 1)


def is_finite_number(value: Any) -> TypeGuard[float]:
    """A number Python computes with safely: not a bool, not NaN or Infinity (Python's JSON reader
    accepts both, and ``1e400`` becomes Infinity), and an integer no larger than the largest float
    (``float()`` of a 400-digit integer raises OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return -FLOAT_MAX <= value <= FLOAT_MAX if isinstance(value, int) else math.isfinite(value)


def describe_number(value: Any) -> str:
    """A number for a message: a huge integer by its size (``str`` of one is slow, or refused)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        try:
            return f"an integer of {len(str(abs(value)))} digits"
        except ValueError:  # past Python's limit on converting integers to text
            return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    return repr(value)


class JsonProblem(ValueError):
    """Parsed data that the suite cannot use; ``path`` is where (``$`` for the whole file), ``reason``
    what was expected and what came, ``kind`` which check refused it (utf8, syntax, depth, number)."""

    def __init__(self, path: str, reason: str, kind: str):
        self.path, self.reason, self.kind = path, reason, kind
        super().__init__(f"{path}: {reason}")


def parse_json(data: bytes) -> Any:
    """Bytes of an untrusted file as JSON: UTF-8, valid, nested at most ``MAX_JSON_DEPTH`` deep, and
    every number finite and within a float's range; ``JsonProblem`` naming the first violation."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonProblem("$", f"expected UTF-8 text, got byte 0x{data[exc.start]:02x} at offset {exc.start}",
                          "utf8") from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonProblem("$", f"expected valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                          "syntax") from None
    except RecursionError:
        raise JsonProblem("$", f"expected JSON nested at most {MAX_JSON_DEPTH} levels deep", "depth") from None
    except ValueError as exc:  # a number of thousands of digits: Python refuses to convert it
        raise JsonProblem("$", f"expected valid JSON ({exc})", "syntax") from None
    check_plain_data(parsed)
    return parsed


def check_plain_data(data: Any) -> None:
    """``JsonProblem`` at the first place where ``data`` nests deeper than ``MAX_JSON_DEPTH`` or holds
    a number that is not finite (or too large for a float). Walked without recursion."""
    pending: list[tuple[tuple, Any]] = [((), data)]
    while pending:
        loc, value = pending.pop()
        if len(loc) > MAX_JSON_DEPTH:
            raise JsonProblem(json_path(loc[:MAX_JSON_DEPTH]),
                              f"expected JSON nested at most {MAX_JSON_DEPTH} levels deep", "depth")
        if isinstance(value, dict):
            pending.extend(((*loc, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            pending.extend(((*loc, index), item) for index, item in reversed(list(enumerate(value))))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not is_finite_number(value):
            raise JsonProblem(json_path(loc), f"expected a finite number, got {describe_number(value)}", "number")


def read_json(path: Path) -> Any:
    """The parsed file, or one ``SettingsError`` line: unreadable, not a regular file, too big, not
    UTF-8, not JSON, nested too deep, or holding a number that is not finite."""
    try:
        data = read_capped(path)
    except OSError as exc:
        raise SettingsError(path, "$", f"expected a readable JSON file ({exc.strerror or exc})") from None
    if len(data) > MAX_JSON_BYTES:
        raise SettingsError(path, "$", f"expected a JSON file of at most {MAX_JSON_BYTES >> 20} MiB")
    try:
        return parse_json(data)
    except JsonProblem as problem:
        raise SettingsError(path, problem.path, problem.reason) from None


def finite_or_none(data: Any) -> tuple[Any, list[tuple[tuple, Any]]]:
    """``data`` with every number that JSON cannot hold as a finite number (NaN, Infinity, an integer
    too large for a float) replaced by None, and where each one was: what is written is then
    valid JSON that every reader can compute with, never a bare ``Infinity``."""
    replaced: list[tuple[tuple, Any]] = []

    def clean(value: Any, loc: tuple) -> Any:
        if isinstance(value, dict):
            return {key: clean(item, (*loc, key)) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(item, (*loc, index)) for index, item in enumerate(value)]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not is_finite_number(value):
            replaced.append((loc, value))
            return None
        return value

    return clean(data, ()), replaced


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def printable(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\r``, ``\\u202e``),
    tab and newline aside: a job's output quoted in a failure, a summary or a record must not set a
    terminal's title, write its clipboard, clear its screen or reorder the text shown around it."""
    return _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)


def optional_problem(value: Any, kind: str) -> Optional[str]:
    """Why ``value`` is not of the JSON ``kind`` (object, string, number) or null, else None."""
    ok = {"object": isinstance(value, dict), "string": isinstance(value, str),
          "number": is_finite_number(value), "list": isinstance(value, list)}[kind]
    return None if value is None or ok else f"expected {'an' if kind == 'object' else 'a'} {kind} or null, got " \
                                                 f"{type(value).__name__} {describe_number(value)[:60]}"
