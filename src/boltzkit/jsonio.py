"""The one JSON encoder of boltzkit: settings, results and model metadata as plain JSON.

:func:`to_jsonable` turns the values that appear in settings and results into plain JSON types,
always the same way:

=================================== ===============================================================
tensors, numpy arrays               nested lists (a 0-d one: its number)
numpy scalars                       the Python number or bool
torch and numpy dtypes              their name without prefix: ``"float32"``
torch devices                       ``"cpu"``, ``"cuda:0"``
paths (``os.PathLike``)             the path as a string
enums                               their value
tuples, sets                        lists (sets sorted)
NaN, infinities                     ``None`` (JSON ``null``)
anything else                       ``str(value)``
=================================== ===============================================================

With ``strict=True`` the last two rows raise instead, naming the key path of the offending value;
:func:`dumps` and :func:`save_json` are strict, so nothing that JSON cannot hold is written by
accident. The text is strict JSON (``allow_nan=False``), readable by any JSON parser.

This module is on the ground floor: it imports nothing from boltzkit but :mod:`boltzkit.errors`
and :mod:`boltzkit.atomic`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from enum import Enum
from typing import Any

import numpy as np
import torch

from boltzkit.atomic import PathLike, atomic_write_text
from boltzkit.errors import BoltzkitError

__all__ = ["dumps", "save_json", "save_result_json", "to_json_text", "to_jsonable", "withhold_bands"]

_TOP = "<top level>"


class _Unstorable(Exception):
    """A value JSON cannot hold, found in strict mode: where it is and what it is."""

    def __init__(self, where: str, desc: str) -> None:
        super().__init__(f"{desc} at {where}")
        self.where = where
        self.desc = desc


def _dtype_name(dtype: torch.dtype | np.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _key(key: Any, where: str, strict: bool) -> str:
    """A mapping key as JSON writes it (``json.dumps`` converts the same scalars the same way)."""
    if isinstance(key, str) and not isinstance(key, Enum):
        return str(key)
    if key is None or isinstance(key, (bool, int, float)) and not isinstance(key, Enum):
        return json.dumps(key) if not isinstance(key, float) or math.isfinite(key) else repr(key)
    if strict:
        raise _Unstorable(f"{where}[{key!r}]" if where else repr(key), f"a key of type {type(key).__name__}")
    converted = _convert(key, where, False)
    return converted if isinstance(converted, str) else json.dumps(converted)


def _convert(value: Any, where: str, strict: bool) -> Any:
    # enums first: a str or int enum is an instance of str or int too
    if isinstance(value, Enum):
        return _convert(value.value, where, strict)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        if strict:
            raise _Unstorable(where or _TOP, repr(float(value)))
        return None
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            name = _key(k, where, strict)
            out[name] = _convert(v, f"{where}.{name}" if where else name, strict)
        return out
    if isinstance(value, (list, tuple)):
        return [_convert(v, f"{where}[{i}]", strict) for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        return [_convert(v, f"{where}[{i}]", strict) for i, v in enumerate(sorted(value, key=repr))]
    if isinstance(value, (torch.dtype, np.dtype)):
        return _dtype_name(value)
    if isinstance(value, type) and issubclass(value, np.generic):  # np.float32, the scalar type
        return np.dtype(value).name
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, torch.Tensor):
        return _convert(value.detach().cpu().tolist(), where, strict)
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind in "OV":
            if strict:
                raise _Unstorable(where or _TOP, f"a numpy array of dtype {value.dtype}")
            return str(value)
        return _convert(value.tolist(), where, strict)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if strict:
        raise _Unstorable(where or _TOP, f"a value of type {type(value).__name__}")
    return str(value)


def to_jsonable(value: Any, *, strict: bool = False) -> Any:
    """``value`` as plain JSON types (dict, list, str, int, float, bool, None).

    Parameters
    ----------
    value
        Nested mappings, lists and scalars, with tensors, numpy values, dtypes, devices, paths and
        enums anywhere in them (see the module docstring for how each is written).
    strict
        Raise on values JSON cannot hold (NaN, infinities, objects of other types, mapping keys
        that are not scalars) instead of writing ``None`` or ``str(value)``.

    Returns
    -------
    Any
        A new structure of plain types; mapping keys become strings.

    Raises
    ------
    BoltzkitError
        In strict mode, naming the key path of the first value JSON cannot hold.

    Examples
    --------
    >>> to_jsonable({"dtype": torch.float32, "log_z": float("nan"), "x": torch.tensor([1.5])})
    {'dtype': 'float32', 'log_z': None, 'x': [1.5]}
    """
    try:
        return _convert(value, "", strict)
    except _Unstorable as exc:
        raise _error(exc.desc, exc.where, "value") from None


def _error(desc: str, where: str, what: str) -> BoltzkitError:
    return BoltzkitError(
        f"the {what} cannot be stored as JSON",
        got=f"{desc} at {where}",
        expected="finite numbers, strings, booleans, None, lists and dicts with string keys",
        hint="store a missing or undefined number as None, and convert other objects to strings.",
    )


def dumps(obj: Any, *, indent: int | None = None, what: str = "value") -> str:
    """``obj`` as strict JSON text (no NaN or infinity), converted by :func:`to_jsonable`.

    Parameters
    ----------
    obj
        Nested mappings, lists and scalars (tensors, numpy values, dtypes, paths... allowed).
    indent
        As for :func:`json.dumps`; ``None`` gives one compact line.
    what
        What ``obj`` is, for the error message (e.g. ``"model metadata"``).

    Returns
    -------
    str
        The JSON text.

    Raises
    ------
    BoltzkitError
        When a value is NaN, infinite or of a type JSON cannot hold; the message names its key
        path (e.g. ``training.lr`` or ``bands[1]``).
    """
    try:
        plain = _convert(obj, "", True)
    except _Unstorable as exc:
        raise _error(exc.desc, exc.where, what) from None
    return json.dumps(plain, indent=indent, allow_nan=False)


def to_json_text(obj: Any, *, indent: int | None = 2, what: str = "value") -> str:
    """:func:`dumps`, indented by default (the historical name, kept for ``boltzkit.io``)."""
    return dumps(obj, indent=indent, what=what)


def save_json(obj: Any, path: PathLike, *, indent: int | None = 2, what: str = "value") -> None:
    """Write ``obj`` to ``path`` as strict JSON (see :func:`dumps`) plus a newline, atomically.

    Parameters
    ----------
    obj
        What to write.
    path
        Target file; its directory must exist.
    indent
        JSON indentation.
    what
        What ``obj`` is, for the error message.

    Raises
    ------
    BoltzkitError
        When a value cannot be stored as JSON (the message names its key) or the file cannot be
        written; the previous file, if any, is then unchanged.
    """
    atomic_write_text(path, dumps(obj, indent=indent, what=what) + "\n")


def save_result_json(result: Mapping[str, Any] | Any, path: PathLike, *, indent: int = 2) -> None:
    """Write an estimator result (or any mapping) to ``path`` as strict JSON, atomically.

    Parameters
    ----------
    result
        A mapping, or an object with a ``to_dict()`` method (such as ``LogZResult``).
    path
        Target ``.json`` file; its directory must exist.
    indent
        JSON indentation.

    Raises
    ------
    BoltzkitError
        When a value is NaN/infinite or not representable in JSON (the message names its key),
        or the file cannot be written.
    """
    if not isinstance(result, Mapping) and callable(getattr(result, "to_dict", None)):
        result = result.to_dict()
    if not isinstance(result, Mapping):
        raise BoltzkitError(
            "save_result_json needs a mapping or an object with to_dict()",
            got=type(result).__name__,
        )
    save_json(dict(result), path, indent=indent, what="result")


#: The band of an estimate: ``KEY_minus_sigma``, ``KEY_plus_3sigma``, ..., and the half-widths
#: that hold log Z's error (a DBN bound's ``total_error_3std``)
_BAND_KEY = re.compile(r".+_(minus|plus)_(3)?sigma|total_error_3std(_pooled)?")


def withhold_bands(record: Any, reliable: bool | None = None) -> Any:
    """``record`` with the bands of every estimate it calls unreliable as ``null`` (and
    ``band_withheld`` saying so): an unreliable estimate supports no band, in the records of
    Python (``LogZResult.to_dict``, ``LogProbResult.to_dict``) as in the command line's JSON and
    text. A sub-record without a verdict of its own is judged by the record around it."""
    if isinstance(record, Mapping):
        own = record.get("reliable")
        verdict = own if isinstance(own, bool) else reliable
        out = {k: withhold_bands(v, verdict) for k, v in record.items()}
        if verdict is False:
            banded = [k for k in out if isinstance(k, str) and _BAND_KEY.fullmatch(k) and out[k] is not None]
            for key in banded:
                out[key] = None
            if banded and isinstance(own, bool):
                out["band_withheld"] = (
                    "the estimate is unreliable: it supports no band (see reliability_reason)"
                )
        return out
    if isinstance(record, list):
        return [withhold_bands(v, reliable) for v in record]
    return record
