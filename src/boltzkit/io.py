"""Model files and atomic writes.

An RBM is stored as one `safetensors <https://huggingface.co/docs/safetensors>`_ file: the tensors
``W`` (``n_visible x n_hidden``), ``vbias`` (``n_visible``) and ``hbias`` (``n_hidden``), and, in the
header's string metadata under the key ``"boltzkit"``, a JSON object describing the model::

    {"format": "boltzkit.model", "format_version": 1, "kind": "rbm", "n_visible": 784,
     "n_hidden": 500, "dtype": "float32", "boltzkit_version": "0.1.0",
     "created": "2024-05-01T12:00:00+00:00", "training": {...}, "data": "mnist", ...}

No pickle is involved anywhere. Plain ``.npz`` archives holding arrays named ``W``, ``vbias`` and
``hbias`` can be read and written too (:func:`import_npz`, :func:`export_npz`), so weights trained
elsewhere can be brought in.

Every file is written atomically (:func:`atomic_open`): the bytes go to a temporary file in the
target's directory, which is flushed, fsynced and then renamed over the target with
:func:`os.replace`. A crash or an error midway leaves the old file untouched and no temporary file
behind. Checkpoints and result files (JSON, CSV) reuse the same helpers.

Everything read is validated at this boundary; bad input raises
:class:`~boltzkit.errors.ModelFileError` with what was wrong, what was found and what was expected.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import secrets
import struct
import zipfile
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
from torch import Tensor

from boltzkit._numerics import resolve_device
from boltzkit.errors import BoltzkitError, ModelFileError
from boltzkit.models.rbm import RBM

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "PARAMETER_NAMES",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "export_npz",
    "import_npz",
    "load_model",
    "read_metadata",
    "save_model",
    "save_result_json",
    "to_json_text",
]

PathLike = str | os.PathLike[str]

METADATA_KEY = "boltzkit"
"""Key of the JSON metadata in the safetensors header (and name of its array in an ``.npz``)."""

FORMAT_NAME = "boltzkit.model"
FORMAT_VERSION = 1
PARAMETER_NAMES = ("W", "vbias", "hbias")

_EXPECTED_ARRAYS = "arrays W (n_visible x n_hidden), vbias (n_visible,) and hbias (n_hidden,)"
_NOT_OURS = "not a boltzkit model file"
_FORMATS_HINT = (
    "load_model reads boltzkit .safetensors files (written by save_model) and .npz archives with "
    "arrays W, vbias and hbias."
)
_MAX_HEADER_BYTES = 100 * 1024 * 1024
_ZIP_MAGIC = b"PK\x03\x04"
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Names other tools commonly use for the three arrays; used only to suggest a renaming.
_ALTERNATIVE_NAMES = {
    "W": ("weights", "weight", "w", "vishid", "vis_hid", "visible_hidden", "components_", "coef_"),
    "vbias": ("visbiases", "visbias", "vb", "b", "bv", "visible_bias", "vis_bias", "intercept_visible_"),
    "hbias": ("hidbiases", "hidbias", "hb", "c", "bh", "hidden_bias", "hid_bias", "intercept_hidden_"),
}


# ------------------------------------------------------------------------------------------------
# Atomic writes
# ------------------------------------------------------------------------------------------------
def _create_temp(target: Path, error_cls: type[BoltzkitError], parents: bool) -> tuple[Path, int]:
    """Create a fresh temporary file next to ``target``; return its path and an open descriptor.

    The file is created with mode ``0o666`` minus the umask (as an ordinary new file would be),
    so the renamed file has the usual permissions.
    """
    directory = target.parent
    if parents and not directory.exists():
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise error_cls(
                "cannot create the directory for the file",
                got=f"{directory} ({exc.strerror or exc})",
            ) from exc
    if not directory.is_dir():
        raise error_cls(
            "cannot write the file: its directory does not exist",
            got=str(target),
            hint=f"create the directory first (mkdir -p {directory}).",
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = directory / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise error_cls(
                "cannot create a file in the target directory",
                got=f"{target} ({exc.strerror or exc})",
                hint="check that the directory is writable and the disk is not full.",
            ) from exc
    raise error_cls("could not find a free temporary file name", got=str(directory))


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _fsync_directory(directory: Path) -> None:
    """Make a rename durable on POSIX; a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def _atomic_open(
    path: PathLike,
    mode: str,
    *,
    encoding: str | None,
    newline: str | None,
    error_cls: type[BoltzkitError],
    parents: bool = False,
) -> Iterator[IO[Any]]:
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open supports modes 'w' and 'wb', got {mode!r}")
    target = Path(path)
    if target.is_dir():
        raise error_cls("cannot write the file: the path is a directory", got=str(target))
    tmp, fd = _create_temp(target, error_cls, parents)
    try:
        if mode == "wb":
            handle: IO[Any] = os.fdopen(fd, "wb")
        else:
            handle = os.fdopen(fd, "w", encoding=encoding, newline=newline)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    committed = False
    try:
        yield handle
        try:
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        except OSError as exc:
            raise error_cls(
                "could not write the file to disk",
                got=f"{target} ({exc.strerror or exc})",
                hint="check free disk space and permissions; the previous file, if any, is unchanged.",
            ) from exc
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise error_cls(
                "could not move the finished file into place",
                got=f"{target} ({exc.strerror or exc})",
                hint="check permissions on the target; the previous file, if any, is unchanged.",
            ) from exc
        committed = True
    finally:
        if not committed:
            with contextlib.suppress(OSError):
                handle.close()
            _unlink_quietly(tmp)
    _fsync_directory(target.parent)


def atomic_open(
    path: PathLike,
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    newline: str | None = None,
    parents: bool = False,
) -> contextlib.AbstractContextManager[IO[Any]]:
    """Open ``path`` for writing so that it is replaced atomically when the block ends.

    Writes go to a temporary file in the same directory. On normal exit the file is flushed,
    fsynced and renamed over ``path`` with :func:`os.replace`; if the block raises (or the
    process dies), ``path`` keeps its previous content and the temporary file is removed.

    Parameters
    ----------
    path
        The file to (re)write.
    mode
        ``"w"`` (text) or ``"wb"`` (binary).
    encoding, newline
        As for :func:`open`, text mode only. Use ``newline=""`` for :mod:`csv` writers.
    parents
        Create missing parent directories; otherwise a missing directory is an error.

    Returns
    -------
    contextlib.AbstractContextManager
        Yields the open file object.

    Raises
    ------
    BoltzkitError
        When the directory is missing or not writable, or the data cannot be flushed, synced or
        renamed into place. An exception raised inside the block propagates unchanged.

    Examples
    --------
    >>> import csv, tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "table.csv"
    >>> with atomic_open(out, newline="") as f:
    ...     _ = csv.writer(f).writerow(["beta", "log_w"])
    >>> out.read_text().strip()
    'beta,log_w'
    """
    return _atomic_open(
        path,
        mode,
        encoding=encoding if mode == "w" else None,
        newline=newline if mode == "w" else None,
        error_cls=BoltzkitError,
        parents=parents,
    )


def atomic_write_bytes(path: PathLike, data: bytes, *, parents: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_open`).

    Parameters
    ----------
    path
        Target file.
    data
        The complete new content.
    parents
        Create missing parent directories; otherwise a missing directory is an error.

    Returns
    -------
    Path
        ``path``.
    """
    with atomic_open(path, "wb", parents=parents) as f:
        f.write(data)
    return Path(path)


def atomic_write_text(path: PathLike, text: str, *, encoding: str = "utf-8", parents: bool = False) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`).

    Parameters
    ----------
    path
        Target file.
    text
        The complete new content, written as is (no newline translation).
    encoding
        Text encoding.
    parents
        Create missing parent directories; otherwise a missing directory is an error.

    Returns
    -------
    Path
        ``path``.
    """
    with atomic_open(path, "w", encoding=encoding, newline="", parents=parents) as f:
        f.write(text)
    return Path(path)


# ------------------------------------------------------------------------------------------------
# JSON
# ------------------------------------------------------------------------------------------------
def _json_default(obj: Any) -> Any:
    """Convert the non-JSON types that commonly appear in settings and results."""
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, (torch.dtype, torch.device)):
        return str(obj).removeprefix("torch.")
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Tensor):
        return obj.detach().cpu().tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _find_unstorable(obj: Any, where: str = "") -> tuple[str, str] | None:
    """Locate the first value that JSON cannot hold; return ``(key path, description)``."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (where or "<top level>", repr(obj))
    if obj is None or isinstance(obj, (str, int, bool)):
        return None
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                return (f"{where}[{key!r}]" if where else repr(key), f"a key of type {type(key).__name__}")
            found = _find_unstorable(value, f"{where}.{key}" if where else str(key))
            if found:
                return found
        return None
    if isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            found = _find_unstorable(value, f"{where}[{i}]")
            if found:
                return found
        return None
    try:
        converted = _json_default(obj)
    except TypeError:
        return (where or "<top level>", f"a value of type {type(obj).__name__}")
    return _find_unstorable(converted, where)


def to_json_text(obj: Any, *, indent: int | None = 2, what: str = "value") -> str:
    """Serialize ``obj`` as strict JSON (no NaN or infinity).

    Paths, torch dtypes/devices, numpy scalars/arrays, tensors and sets are converted; anything
    else that JSON cannot hold raises with the key path of the offending value.

    Parameters
    ----------
    obj
        Nested dicts, lists and scalars.
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
        When a value is NaN, infinite or of a type JSON cannot hold.
    """
    try:
        return json.dumps(obj, indent=indent, allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        found = _find_unstorable(obj)
        where, desc = found if found else ("<unknown>", str(exc))
        raise BoltzkitError(
            f"the {what} cannot be stored as JSON",
            got=f"{desc} at {where}",
            expected="finite numbers, strings, booleans, None, lists and dicts with string keys",
            hint="store a missing or undefined number as None, and convert other objects to strings.",
        ) from exc


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
    atomic_write_text(path, to_json_text(dict(result), indent=indent, what="result") + "\n")


# ------------------------------------------------------------------------------------------------
# Saving models
# ------------------------------------------------------------------------------------------------
def _boltzkit_version() -> str:
    # Looked up at call time so that boltzkit/__init__ may import this module.
    import boltzkit

    return str(getattr(boltzkit, "__version__", "unknown"))


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _model_tensors(model: RBM) -> dict[str, Tensor]:
    if not isinstance(model, RBM):
        raise ModelFileError(
            "only RBMs can be saved as model files",
            got=type(model).__name__,
            expected="a boltzkit.RBM",
        )
    tensors = {name: getattr(model, name).detach().cpu().contiguous() for name in PARAMETER_NAMES}
    _check_finite(tensors, saving=True)
    return tensors


def _build_metadata(model: RBM, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ModelFileError("metadata must be a dict", got=type(metadata).__name__)
    md: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "kind": "rbm",
        "n_visible": int(model.n_visible),
        "n_hidden": int(model.n_hidden),
        "dtype": _dtype_name(model.dtype),
        "boltzkit_version": _boltzkit_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "training": {},
        "data": None,
    }
    # Facts about the model itself always come from the model; "source_format" is added by load_model.
    derived = ("format", "format_version", "kind", "n_visible", "n_hidden", "dtype", "boltzkit_version")
    for key, value in (metadata or {}).items():
        if key not in derived and key != "source_format":
            md[str(key)] = value
    return md


def save_model(model: RBM, path: PathLike, *, metadata: Mapping[str, Any] | None = None) -> None:
    """Save an RBM with its metadata to one ``.safetensors`` file, atomically.

    Parameters
    ----------
    model
        The RBM. Its parameters are stored in their own dtype.
    path
        Target file, conventionally ``*.safetensors``. A path ending in ``.npz`` is written with
        :func:`export_npz` instead. The directory must exist.
    metadata
        Extra JSON-serializable information, stored next to what is derived from the model
        (``kind``, ``n_visible``, ``n_hidden``, ``dtype``, ``boltzkit_version``, which cannot be
        overridden). Conventional keys: ``"training"`` (dict of training settings, default
        ``{}``), ``"data"`` (training data name, default ``None``), ``"created"`` (ISO time; now
        when not given, so a round-tripped dict keeps the original time).

    Raises
    ------
    ModelFileError
        When the model is not an RBM, holds NaN/inf parameters, the metadata cannot be stored as
        JSON, or the file cannot be written. The previous file, if any, is then unchanged.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "rbm.safetensors"
    >>> save_model(RBM(7, 3), path, metadata={"data": "bars-and-stripes"})
    >>> model, md = load_model(path)
    >>> md["n_visible"], md["data"]
    (7, 'bars-and-stripes')
    """
    if Path(path).suffix.lower() == ".npz":
        export_npz(model, path, metadata=metadata)
        return
    tensors = _model_tensors(model)
    md = _build_metadata(model, metadata)
    try:
        md_text = to_json_text(md, indent=None, what="model metadata")
    except BoltzkitError as exc:
        raise ModelFileError(exc.what, got=exc.got, expected=exc.expected, hint=exc.hint) from exc
    from safetensors.torch import save as safetensors_save

    data = safetensors_save(tensors, metadata={METADATA_KEY: md_text})
    with _atomic_open(path, "wb", encoding=None, newline=None, error_cls=ModelFileError) as f:
        f.write(data)


def export_npz(model: RBM, path: PathLike, *, metadata: Mapping[str, Any] | None = None) -> None:
    """Write an RBM as an uncompressed ``.npz`` archive with arrays ``W``, ``vbias``, ``hbias``.

    The metadata (as in :func:`save_model`) goes in a 0-d string array named ``"boltzkit"``, so
    the archive loads with ``np.load(path)`` and no pickle. ``bfloat16`` parameters are written as
    float32 (numpy has no bfloat16).

    Parameters
    ----------
    model
        The RBM.
    path
        Target file (written as given; no ``.npz`` suffix is appended). The directory must exist.
    metadata
        Extra JSON-serializable information, as for :func:`save_model`.

    Raises
    ------
    ModelFileError
        As for :func:`save_model`.
    """
    tensors = _model_tensors(model)
    md = _build_metadata(model, metadata)
    try:
        md_text = to_json_text(md, indent=None, what="model metadata")
    except BoltzkitError as exc:
        raise ModelFileError(exc.what, got=exc.got, expected=exc.expected, hint=exc.hint) from exc
    arrays = {
        name: (t.to(torch.float32) if t.dtype == torch.bfloat16 else t).numpy() for name, t in tensors.items()
    }
    arrays[METADATA_KEY] = np.array(md_text)
    with _atomic_open(path, "wb", encoding=None, newline=None, error_cls=ModelFileError) as f:
        np.savez(f, **arrays)


# ------------------------------------------------------------------------------------------------
# Reading and validating
# ------------------------------------------------------------------------------------------------
def _stat_model_file(path: PathLike) -> Path:
    p = Path(path)
    if not p.exists():
        parent_hint = "" if p.parent.is_dir() else f" (the directory {p.parent} does not exist either)"
        raise ModelFileError(
            f"model file not found{parent_hint}",
            got=str(p),
            hint="check the path; model files are written by `save_model` or `boltzkit train`.",
        )
    if p.is_dir():
        raise ModelFileError("the model path is a directory, not a file", got=str(p))
    return p


def _read_bytes(p: Path) -> bytes:
    try:
        return p.read_bytes()
    except OSError as exc:
        raise ModelFileError("cannot read the model file", got=f"{p} ({exc.strerror or exc})") from exc


def _parse_safetensors_header(raw: bytes, p: Path) -> dict[str, Any]:
    """Check the framing of a safetensors file and return its JSON header."""
    size = len(raw)
    if size == 0:
        raise ModelFileError(f"{_NOT_OURS}: the file is empty", got=str(p), hint=_FORMATS_HINT)
    if size < 8:
        raise ModelFileError(
            f"{_NOT_OURS}: the file is truncated or of another format",
            got=f"{p} ({size} bytes)",
            hint=_FORMATS_HINT,
        )
    (n_header,) = struct.unpack("<Q", raw[:8])
    looks_like_header = raw[8:9] == b"{"
    if not looks_like_header or n_header < 2 or n_header > _MAX_HEADER_BYTES:
        raise ModelFileError(
            f"{_NOT_OURS}: it does not start with a safetensors header",
            got=f"{p} (first bytes {raw[:8]!r})",
            hint=_FORMATS_HINT,
        )
    if 8 + n_header > size:
        raise ModelFileError(
            f"{_NOT_OURS}: the file is truncated inside its header",
            got=f"{p}: {size} bytes",
            expected=f"at least {8 + n_header} bytes",
            hint="the file was cut short (an interrupted copy or download?); copy it again.",
        )
    try:
        header = json.loads(raw[8 : 8 + n_header].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelFileError(
            f"{_NOT_OURS}: its safetensors header is not valid JSON", got=str(p), hint=_FORMATS_HINT
        ) from exc
    if not isinstance(header, dict):
        raise ModelFileError(f"{_NOT_OURS}: its safetensors header is not a JSON object", got=str(p))
    data_len = size - 8 - n_header
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and o >= 0 for o in offsets)
        ):
            raise ModelFileError(
                f"{_NOT_OURS}: the safetensors header entry {name!r} is malformed", got=str(p)
            )
        end = max(end, offsets[1])
    if end > data_len:
        raise ModelFileError(
            "the model file is truncated",
            got=f"{p}: {data_len} bytes of tensor data",
            expected=f"{end} bytes, as its header says",
            hint="the file was cut short (an interrupted save, copy or download?); copy or save it again.",
        )
    return header


def _header_metadata(header: Mapping[str, Any], p: Path) -> dict[str, Any] | None:
    """The boltzkit JSON metadata of a safetensors header, or ``None`` when there is none."""
    strings = header.get("__metadata__")
    if not isinstance(strings, dict) or METADATA_KEY not in strings:
        return None
    return _parse_metadata_text(strings[METADATA_KEY], p)


def _parse_metadata_text(text: Any, p: Path) -> dict[str, Any]:
    try:
        md = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ModelFileError(
            "the model file's boltzkit metadata is corrupt (not valid JSON)",
            got=str(p),
            hint="the tensors may still be intact; re-save the model with save_model.",
        ) from exc
    if not isinstance(md, dict):
        raise ModelFileError(
            "the model file's boltzkit metadata is not a JSON object", got=f"{type(md).__name__} in {p}"
        )
    kind = md.get("kind", "rbm")
    if kind != "rbm":
        raise ModelFileError(
            "the model file holds a model of another kind",
            got=repr(kind),
            expected="'rbm'",
            hint="load_model reads RBMs; use the loader for that model kind.",
        )
    return md


def _load_safetensors(raw: bytes, p: Path) -> tuple[dict[str, Tensor], dict[str, Any] | None]:
    header = _parse_safetensors_header(raw, p)
    md = _header_metadata(header, p)
    from safetensors.torch import load as safetensors_load

    try:
        tensors = safetensors_load(raw)
    except Exception as exc:  # the Rust parser's own error type; turn it into ours
        raise ModelFileError(
            f"{_NOT_OURS}: the safetensors data cannot be decoded",
            got=f"{p} ({exc})",
            hint=_FORMATS_HINT,
        ) from exc
    return tensors, md


def _load_npz(raw: bytes, p: Path) -> tuple[dict[str, Tensor], dict[str, Any] | None]:
    try:
        # From memory: np.load leaks its file handle when a file is not a valid zip archive.
        archive = np.load(io.BytesIO(raw), allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ModelFileError(
            f"{_NOT_OURS}: it cannot be opened as an .npz archive (truncated or of another format)",
            got=f"{p} ({exc})",
            hint=_FORMATS_HINT,
        ) from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ModelFileError(
            f"{_NOT_OURS}: it holds a single .npy array, not an .npz archive", got=str(p), hint=_FORMATS_HINT
        )
    tensors: dict[str, Tensor] = {}
    md: dict[str, Any] | None = None
    with archive:
        names = list(archive.files)
        missing = [n for n in PARAMETER_NAMES if n not in names]
        if missing:
            _raise_missing(missing, names, p, npz=True)
        wanted = [*PARAMETER_NAMES, *([METADATA_KEY] if METADATA_KEY in names else [])]
        for name in wanted:
            try:
                arr = archive[name]
            except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
                raise ModelFileError(
                    f"the .npz array {name!r} cannot be read (truncated, or a pickled object)",
                    got=f"{p} ({exc})",
                    expected="plain numeric arrays as written by np.savez",
                ) from exc
            if name == METADATA_KEY:
                if arr.ndim == 0 and arr.dtype.kind == "U":
                    md = _parse_metadata_text(str(arr), p)
                continue
            if arr.dtype.kind not in "fiub":
                raise ModelFileError(
                    f"the model array {name} is not numeric",
                    got=f"dtype {arr.dtype}",
                    expected="a floating-point dtype (float32 or float64)",
                )
            if arr.dtype.kind == "f" and arr.dtype.itemsize not in (2, 4, 8):
                arr = arr.astype(np.float64)  # e.g. float128
            elif not arr.dtype.isnative:
                arr = arr.astype(arr.dtype.newbyteorder("="))
            tensors[name] = torch.from_numpy(np.ascontiguousarray(arr))
    return tensors, md


def _guess_renaming(found: list[str]) -> dict[str, str]:
    lowered = {n.lower(): n for n in found}
    guess = {}
    for target, alternatives in _ALTERNATIVE_NAMES.items():
        if target in found:
            continue
        for alt in alternatives:
            if alt.lower() in lowered:
                guess[target] = lowered[alt.lower()]
                break
    return guess


def _raise_missing(missing: list[str], found: list[str], p: Path, *, npz: bool) -> None:
    which = "array" if len(missing) == 1 else "arrays"
    listed = ", ".join(repr(n) for n in missing)
    hint = "save the parameters under the expected names"
    guess = _guess_renaming(found)
    if guess and npz:
        args = ", ".join(f"{t}=a[{s!r}]" for t, s in guess.items())
        keep = ", ".join(f"{n}=a[{n!r}]" for n in PARAMETER_NAMES if n in found)
        args = ", ".join(x for x in (keep, args) if x)
        hint = (
            f"the file seems to use other names; rename them, e.g. a = np.load({str(p)!r}); "
            f"np.savez('renamed.npz', {args}) (check that W is n_visible x n_hidden)."
        )
    elif guess:
        hint = "the file seems to use other names (" + ", ".join(f"{s!r} for {t}" for t, s in guess.items())
        hint += "); save the parameters under the expected names."
    raise ModelFileError(
        f"the model file lacks the {which} {listed}",
        got="arrays " + (", ".join(repr(n) for n in found) if found else "(none)"),
        expected=_EXPECTED_ARRAYS,
        hint=hint,
    )


def _check_finite(tensors: Mapping[str, Tensor], *, saving: bool = False) -> None:
    bad = []
    for name in PARAMETER_NAMES:
        t = tensors[name]
        n_nan = int(torch.isnan(t).sum())
        n_inf = int(torch.isinf(t).sum())
        if n_nan or n_inf:
            bad.append(f"{name} has {n_nan} NaN and {n_inf} inf values (of {t.numel()})")
    if bad:
        raise ModelFileError(
            ("refusing to save a model with" if saving else "the model file holds")
            + " non-finite parameters",
            got="; ".join(bad),
            expected="finite values in W, vbias and hbias",
            hint="the training diverged; lower the learning rate (and check momentum and weight decay), "
            "then train again or resume from an earlier checkpoint.",
        )


def _validate_tensors(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, int]:
    found = list(tensors)
    missing = [n for n in PARAMETER_NAMES if n not in tensors]
    if missing:
        _raise_missing(missing, found, p, npz=False)
    W, vb, hb = (tensors[n] for n in PARAMETER_NAMES)
    for name, t in zip(PARAMETER_NAMES, (W, vb, hb), strict=True):
        if t.dtype not in _FLOAT_DTYPES:
            raise ModelFileError(
                f"the model array {name} is not floating point",
                got=f"dtype {_dtype_name(t.dtype)}",
                expected="float32 or float64 (float16 and bfloat16 are accepted too)",
                hint="convert the arrays with .astype(np.float32) before saving.",
            )
    shapes = f"W {tuple(W.shape)}, vbias {tuple(vb.shape)}, hbias {tuple(hb.shape)}"
    if W.dim() != 2 or vb.dim() != 1 or hb.dim() != 1:
        raise ModelFileError(
            "the model arrays have the wrong number of dimensions",
            got=shapes,
            expected="W (n_visible, n_hidden), vbias (n_visible,), hbias (n_hidden,)",
        )
    n_visible, n_hidden = int(W.shape[0]), int(W.shape[1])
    if vb.shape[0] != n_visible or hb.shape[0] != n_hidden:
        transposed = vb.shape[0] == n_hidden and hb.shape[0] == n_visible
        raise ModelFileError(
            "the model arrays have inconsistent shapes",
            got=shapes,
            expected=f"W (n_visible, n_hidden), vbias (n_visible,), hbias (n_hidden,); from W: "
            f"vbias ({n_visible},), hbias ({n_hidden},)",
            hint="W looks transposed: it must be n_visible x n_hidden; store W.T instead."
            if transposed
            else "the arrays do not belong to one model; check where they came from.",
        )
    if n_visible < 1:
        raise ModelFileError("the model has no visible units", got=shapes)
    return n_visible, n_hidden


def _resolve_dtype(dtype: torch.dtype | str | None, stored: torch.dtype) -> torch.dtype:
    if dtype is None:
        # half precision is fine for storage but too coarse for sampling and log Z
        return stored if stored in (torch.float32, torch.float64) else torch.float32
    if isinstance(dtype, str):
        resolved = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(resolved, torch.dtype):
            raise BoltzkitError("unknown dtype", got=repr(dtype), expected="'float32' or 'float64'")
        dtype = resolved
    if dtype not in _FLOAT_DTYPES:
        raise BoltzkitError(
            "a model's parameters must be floating point", got=str(dtype), expected="float32 or float64"
        )
    return dtype


def _resolve_load_device(device: torch.device | str | None) -> torch.device:
    if device is None:
        return torch.device("cpu")
    return resolve_device(device)


def _is_npz(raw_head: bytes, p: Path) -> bool:
    if raw_head.startswith(_ZIP_MAGIC):
        return True
    # An .npz-named file that is not a zip archive is reported by the npz reader.
    return p.suffix.lower() == ".npz" and raw_head[8:9] != b"{"


def load_model(
    path: PathLike,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
) -> tuple[RBM, dict[str, Any]]:
    """Load an RBM from a boltzkit ``.safetensors`` file or an ``.npz`` archive.

    The format is recognized by content (a zip archive is read as ``.npz``), falling back to the
    extension. Everything is validated: the file exists and is complete, it holds the arrays
    ``W`` (``n_visible x n_hidden``), ``vbias`` (``n_visible``) and ``hbias`` (``n_hidden``) with
    consistent shapes, a floating dtype and finite values.

    Parameters
    ----------
    path
        The model file.
    device
        Where to put the parameters: ``None`` (CPU), ``"auto"`` (CUDA when present), or a device.
    dtype
        Parameter dtype; ``None`` keeps the stored float32/float64 (half precision is widened to
        float32).

    Returns
    -------
    model : RBM
        The model.
    metadata : dict
        The stored metadata (see :func:`save_model`), or, for files without boltzkit metadata
        (plain ``.npz`` archives), one describing the arrays. ``"source_format"`` is
        ``"safetensors"`` or ``"npz"``; ``"dtype"`` is the stored dtype.

    Raises
    ------
    ModelFileError
        When the file is missing, empty, truncated or of another format ("not a boltzkit model
        file"), lacks an array (all arrays found are listed), has inconsistent shapes, a
        non-floating dtype or NaN/inf values (counted per array).
    """
    p = _stat_model_file(path)
    raw = _read_bytes(p)
    if _is_npz(raw[:16], p):
        tensors, md = _load_npz(raw, p)
        source = "npz"
    else:
        tensors, md = _load_safetensors(raw, p)
        source = "safetensors"
    n_visible, n_hidden = _validate_tensors(tensors, p)
    stored = tensors["W"].dtype
    if md is not None:
        claimed = (md.get("n_visible", n_visible), md.get("n_hidden", n_hidden))
        if claimed != (n_visible, n_hidden):
            raise ModelFileError(
                "the model file's metadata disagrees with its arrays",
                got=f"metadata n_visible={claimed[0]}, n_hidden={claimed[1]}; W {n_visible} x {n_hidden}",
                hint="the file was edited or corrupted; re-save the model.",
            )
    _check_finite(tensors)
    target = _resolve_dtype(dtype, stored)
    converted = {n: tensors[n].to(target) for n in PARAMETER_NAMES}
    if any(not bool(torch.isfinite(t).all()) for t in converted.values()):
        raise ModelFileError(
            f"the model's parameters overflow {_dtype_name(target)}",
            got=f"stored as {_dtype_name(stored)}, largest |value| "
            f"{max(float(tensors[n].abs().max()) for n in PARAMETER_NAMES if tensors[n].numel()):.3g}",
            hint="load with dtype=torch.float64.",
        )
    model = RBM(
        n_visible,
        n_hidden,
        weights=converted["W"],
        vbias=converted["vbias"],
        hbias=converted["hbias"],
        dtype=target,
        device=_resolve_load_device(device),
    )
    out: dict[str, Any] = dict(md) if md is not None else {"kind": "rbm"}
    out.setdefault("n_visible", n_visible)
    out.setdefault("n_hidden", n_hidden)
    out["dtype"] = _dtype_name(stored)
    out["source_format"] = source
    return model, out


def import_npz(path: PathLike, *, device: torch.device | str | None = None) -> RBM:
    """Load an RBM from an ``.npz`` archive with arrays ``W``, ``vbias``, ``hbias``.

    Equivalent to ``load_model(path, device=device)[0]`` for an ``.npz`` file; validation and
    errors are the same.

    Parameters
    ----------
    path
        The archive.
    device
        As for :func:`load_model`.

    Returns
    -------
    RBM
        The model, in the stored float32/float64 dtype.
    """
    p = _stat_model_file(path)
    with p.open("rb") as f:
        head = f.read(16)
    if not head.startswith(_ZIP_MAGIC):
        raise ModelFileError(
            f"{_NOT_OURS}: it is not an .npz (zip) archive",
            got=f"{p} (first bytes {head[:8]!r})",
            hint="use load_model for .safetensors files.",
        )
    return load_model(p, device=device)[0]


def read_metadata(path: PathLike) -> dict[str, Any]:
    """The metadata of a model file, as returned by :func:`load_model` (the file is fully validated).

    Parameters
    ----------
    path
        A boltzkit ``.safetensors`` file or an ``.npz`` archive.

    Returns
    -------
    dict
        The metadata; validation is as thorough as in :func:`load_model`.
    """
    return load_model(path)[1]
