"""Plain ``.npz`` archives as model files, so that weights trained elsewhere can be brought in.

An archive holds one array per parameter, under the names of the model file format
(:mod:`boltzkit.io.model_files`): RBM, SRBM and BM archives ``W`` (n_visible x n_hidden),
``vbias``, ``hbias`` and optionally ``L`` (n_visible x n_visible) and ``J`` (n_hidden x n_hidden);
DBM archives ``W_0, W_1, ...`` (``W_l`` between layers ``l`` and ``l + 1``, layer 0 visible) and
``bias_0, bias_1, ...``. The kind is taken from the metadata that :func:`export_npz` stores in a 0-d
string array named ``"boltzkit"``, or, in an archive from elsewhere, recognised from the names
(``J`` makes a BM, ``L`` alone an SRBM, ``W_0``/``bias_0`` a DBM). Every array must belong to the
kind: an archive with an array the kind does not have is refused, never loaded without it.

Archives are read without pickle (``allow_pickle=False``) and validated like any model file.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from boltzkit.atomic import PathLike, atomic_open
from boltzkit.errors import ModelFileError
from boltzkit.io.model_files import (
    FORMATS_HINT,
    METADATA_KEY,
    NOT_OURS,
    NPY_MAGIC,
    ZIP_MAGIC,
    FileFormat,
    check_names,
    is_npz,
    kind_for,
    model_from_arrays,
    one_hidden_layer,
    parse_metadata_text,
    prepare_save,
    read_bytes,
    register_format,
    stat_model_file,
)

__all__ = ["export_npz", "import_npz", "read_npz"]


def read_npz(raw: bytes, p: Any) -> tuple[dict[str, Tensor], dict[str, Any] | None]:
    """The arrays (as tensors) and the boltzkit metadata (or ``None``) of an ``.npz`` archive.

    The array names are checked against the kind before any array is read, so a missing or
    foreign array is reported by name (with a renaming hint for RBM arrays under other names).

    Raises
    ------
    ModelFileError
        When the bytes are not an ``.npz`` archive, an array is missing, foreign, pickled,
        truncated or not numeric.
    """
    if not raw.startswith((ZIP_MAGIC, EMPTY_ZIP_MAGIC, NPY_MAGIC)):
        # (np.load would take it for a pickle and advise loading it unsafely)
        raise ModelFileError(
            f"{NOT_OURS}: it is not an .npz (zip) archive",
            got=f"{p} (first bytes {raw[:8]!r})",
            hint=FORMATS_HINT,
        )
    try:
        # From memory: np.load leaks its file handle when a file is not a valid zip archive.
        archive = np.load(io.BytesIO(raw), allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ModelFileError(
            f"{NOT_OURS}: it cannot be opened as an .npz archive (truncated or of another format)",
            got=f"{p} ({exc})",
            hint=FORMATS_HINT,
        ) from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ModelFileError(
            f"{NOT_OURS}: it holds a single .npy array, not an .npz archive", got=str(p), hint=FORMATS_HINT
        )
    tensors: dict[str, Tensor] = {}
    md: dict[str, Any] | None = None
    with archive:
        stored = [n for n in archive.files if n != METADATA_KEY]
        if METADATA_KEY in archive.files:
            text = _read_array(archive, METADATA_KEY, p)
            if text.ndim != 0 or text.dtype.kind != "U":
                raise ModelFileError(
                    f"the .npz array {METADATA_KEY!r} is not boltzkit metadata",
                    got=f"{p}: an array of shape {text.shape} and dtype {text.dtype}",
                    expected="a 0-d string array holding JSON, as written by export_npz",
                    hint=f"rename the array: the name {METADATA_KEY!r} is reserved for the metadata.",
                )
            md = parse_metadata_text(str(text), p)
        # a DBM's arrays of one hidden layer are an RBM's (model_from_arrays renames them)
        renaming = one_hidden_layer(stored) if md is None else {}
        names = [renaming.get(n, n) for n in stored]
        check_names(kind_for(md, names), names, p, npz=True, recorded=md is not None)
        for name in stored:
            arr = _read_array(archive, name, p)
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
            # (np.ascontiguousarray would make a 0-d array 1-d: its shape is checked as stored)
            tensors[name] = torch.from_numpy(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))
    return tensors, md


#: The first bytes of an empty zip archive.
EMPTY_ZIP_MAGIC = b"PK\x05\x06"


def _read_array(archive: Any, name: str, p: Any) -> np.ndarray:
    try:
        return archive[name]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise ModelFileError(
            f"the .npz array {name!r} cannot be read (truncated, or a pickled object)",
            got=f"{p} ({exc})",
            expected="plain numeric arrays as written by np.savez",
        ) from exc


def export_npz(model: nn.Module, path: PathLike, *, metadata: Mapping[str, Any] | None = None) -> None:
    """Write a model as an uncompressed ``.npz`` archive, one array per parameter.

    The arrays are named as in the model file format: ``W``, ``vbias``, ``hbias`` (and ``L``,
    ``J``) for two-layer models, ``W_0, W_1, ..., bias_0, bias_1, ...`` for deeper ones. The
    metadata (as in :func:`~boltzkit.io.save_model`) goes in a 0-d string array named
    ``"boltzkit"``, so the archive loads with ``np.load(path)`` and no pickle. ``bfloat16``
    parameters are written as float32 (numpy has no bfloat16).

    Parameters
    ----------
    model
        An RBM, SRBM, BM or DBM (any model of a registered kind).
    path
        Target file (written as given; no ``.npz`` suffix is appended). The directory must exist.
    metadata
        Extra JSON-serializable information, as for :func:`~boltzkit.io.save_model`.

    Raises
    ------
    ModelFileError
        As for :func:`~boltzkit.io.save_model`.
    """
    tensors, md_text = prepare_save(
        model, metadata, stored=lambda t: t.to(torch.float32) if t.dtype == torch.bfloat16 else t
    )
    arrays = {name: t.numpy() for name, t in tensors.items()}
    arrays[METADATA_KEY] = np.array(md_text)
    with atomic_open(path, "wb", error_cls=ModelFileError) as f:
        np.savez(f, **arrays)


def import_npz(
    path: PathLike,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
) -> nn.Module:
    """Load a model from an ``.npz`` archive (see the module docstring for the array names).

    Equivalent to ``load_model(path, device=device, dtype=dtype)[0]`` for an ``.npz`` file;
    validation and errors are the same.

    Parameters
    ----------
    path
        The archive.
    device, dtype
        As for :func:`~boltzkit.io.load_model`.

    Returns
    -------
    BoltzmannMachine
        The model (an :class:`~boltzkit.models.RBM` for an RBM archive), in the stored
        float32/float64 dtype unless ``dtype`` is given.
    """
    p = stat_model_file(path)
    with p.open("rb") as f:
        head = f.read(16)
    if not head.startswith((ZIP_MAGIC, EMPTY_ZIP_MAGIC)):  # an empty archive: read_npz names what it lacks
        raise ModelFileError(
            f"{NOT_OURS}: it is not an .npz (zip) archive",
            got=f"{p} (first bytes {head[:8]!r})",
            hint="use load_model for .safetensors files.",
        )
    tensors, md = read_npz(read_bytes(p), p)
    return model_from_arrays(tensors, md, p, source="npz", dtype=dtype, device=device)[0]


register_format(FileFormat("npz", ".npz", detect=is_npz, read=read_npz, write=export_npz))
