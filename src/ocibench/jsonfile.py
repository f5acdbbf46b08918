"""Read a JSON input file bounded: its size, its nesting, its numbers, and what is not
a file; and check the type of each field a reader uses.

The report's inputs and ``--preflight`` reports come from users and from other
machines.  Python's reader takes any size (``/dev/zero`` never ends), waits forever on
a FIFO with no writer, raises a RecursionError on deep nesting and a ValueError on an
integer of more than 4,300 digits (its int-parsing limit), and reads ``1e999`` as
infinity; every reader of such files goes through here and gets one
:class:`JsonFileError` line instead.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from ocibench import metrics

#: Far above any run report or evaluation (a sweep's ReFrame report is a few MB).
MAX_BYTES = 64 * 2**20
#: Far above the deepest input read (a ReFrame report: about 8 levels).
MAX_DEPTH = 64
#: Digits of the longest integer read: 2**64 has 20.  A longer one is no count, size
#: or time of any input here (and Python refuses one of 4,300 with a ValueError).
MAX_INT_DIGITS = 24


class JsonFileError(ValueError):
    """A JSON input that cannot be used; the message is one line naming the file."""


def read(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``, at most ``limit``: a larger input (or an endless one,
    a device) is refused, never read to its end.  Opened without blocking: a FIFO or
    a socket in place of a file is refused, never waited on (a FIFO with no writer
    blocks an ordinary open forever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise JsonFileError(f"{path}: cannot read: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
                raise JsonFileError(f"{path}: {kind}, not a file: not an input this reads")
            raw = handle.read(limit + 1)
        except OSError as err:
            raise JsonFileError(f"{path}: cannot read: {err.strerror or err}") from None
    if raw is None:     # a device with nothing to read yet (non-blocking)
        raise JsonFileError(f"{path}: nothing to read without waiting: not a file")
    if len(raw) > limit:
        raise JsonFileError(f"{path}: larger than {limit} bytes: not an input this reads")
    return raw


class _NumberError(ValueError):
    """A number JSON allows and no input here has; caught in :func:`parse`."""


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _NumberError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):   # 1e999: a literal beyond any float (NaN and Infinity are
        # words of their own, which the fields' readers refuse where they read a number)
        raise _NumberError(f"the number {text[:40]}{'...' if len(text) > 40 else ''} "
                           "is beyond a float's range")
    return value


def parse(raw: bytes, where: str, max_depth: int = MAX_DEPTH) -> Any:
    """JSON from ``raw``, nested at most ``max_depth`` deep, its integers at most
    :data:`MAX_INT_DIGITS` digits long and its numbers within a float's range."""
    try:
        data = json.loads(raw.decode("utf-8"), parse_int=_bounded_int,
                          parse_float=_finite_float)
    except UnicodeDecodeError as err:
        raise JsonFileError(f"{where}: not JSON (not UTF-8 at byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise JsonFileError(f"{where}: not JSON ({err.msg}, line {err.lineno})") from None
    except _NumberError as err:
        raise JsonFileError(f"{where}: {err}: not an input this reads") from None
    except RecursionError:
        raise JsonFileError(f"{where}: nested deeper than JSON can be read") from None
    if depth(data, max_depth) > max_depth:
        raise JsonFileError(f"{where}: nested deeper than {max_depth} levels: not an input "
                            "this reads")
    return data


def load(path: Path, limit: int = MAX_BYTES) -> Any:
    return parse(read(path, limit), str(path))


def depth(data: Any, stop: int) -> int:
    """How deep ``data`` nests (a scalar is 0), counted without recursion; counting
    stops once past ``stop``."""
    deepest = 0
    pending = [(data, 1)]
    while pending:
        value, level = pending.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, level)
            if deepest > stop:
                return deepest
            children = value.values() if isinstance(value, dict) else value
            pending.extend((child, level + 1) for child in children)
    return deepest


# --- Fields ------------------------------------------------------------------------
# A reader checks the type of every field it uses before it uses one: a wrong one is a
# JsonFileError naming the file and the field (as a path into the JSON document:
# rows[0].measured), never a traceback further on.  These say nothing about whether a
# value is right.

def number(path: Path, where: str, value: Any) -> float:
    """A finite number: NaN, infinities, booleans and strings are refused."""
    if not metrics.is_number(value):
        raise JsonFileError(f"{path}: {where}: {value!r} is not a finite number")
    return float(value)


def text(path: Path, where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise JsonFileError(f"{path}: {where}: {value!r} is not a string")
    return value


def optional_text(path: Path, where: str, value: Any) -> str | None:
    return None if value is None else text(path, where, value)


def text_list(path: Path, where: str, value: Any) -> list[str]:
    """A list of strings, or nothing (None)."""
    items = sequence(path, where, value if value is not None else [])
    return [text(path, f"{where}[{index}]", item) for index, item in enumerate(items)]


def choice(path: Path, where: str, value: Any, choices: Any) -> str:
    choices = list(choices)
    if not isinstance(value, str) or value not in choices:
        raise JsonFileError(f"{path}: {where}: {value!r} is not one of {', '.join(choices)}")
    return value


def mapping(path: Path, where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise JsonFileError(f"{path}: {where}: {json_type(value)} where an object is expected")
    return value


def sequence(path: Path, where: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise JsonFileError(f"{path}: {where}: {json_type(value)} where a list is expected")
    return value


def json_type(value: Any) -> str:
    """How JSON calls the value's type, with the value where it is short."""
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")
    shown = json.dumps(value)
    return f"{kind} ({shown})" if kind != "null" and len(shown) <= 40 else kind
