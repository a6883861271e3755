"""One entry point for every data set: :func:`load_dataset`.

A data set is named by a *spec* string, used alike by the command line and the learning code:

==================================== =========================================================
spec                                 data
==================================== =========================================================
``mnist``                            binarized MNIST, splits train / valid / test
                                     (50,000 / 10,000 / 10,000 x 784)
``mnist:train+valid``                the same with the 60,000 train + valid images as the
                                     training split (the 60,000 training images of S&M 2008 and
                                     Salakhutdinov 2008, Sec. 5); no valid split
``mnist-patches[:SIZE]``             one SIZE x SIZE patch (default 4) at a random position of
                                     each MNIST image; train: 60,000 (MNIST train + valid),
                                     test: 10,000 (MNIST test)
``bars-and-stripes[:all|distinct]``  4 x 4 Bars and Stripes: all 32 patterns (default, Shark
                                     convention, two duplicates) or the 30 distinct ones;
                                     ``size=N`` for N x N
``artificial-modes[:P]``             Artificial Modes with flip probability P (default 0.01);
                                     ``n=N`` samples (default 10,000)
any other string                     a file path (``.npy .npz .mat .amat .txt .csv``);
                                     ``file.npz:NAME`` names an array in an archive; an
                                     archive of arrays named ``train``, ``valid``, ``test``
                                     holds those splits
==================================== =========================================================

Parameters follow a colon as comma-separated ``key=value`` pairs; the first may be given without
its key: ``artificial-modes:0.1``, ``artificial-modes:p=0.1,n=2000``,
``bars-and-stripes:distinct,size=3``.

Seeds: random data sets draw each split from its own seed, derived from ``seed``, the data set
name and the split, so ``train`` and ``test`` are independent draws and each is reproducible.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from boltzkit.data.dataset import Dataset, check_matrix_shape, to_tensor
from boltzkit.data.fasta import is_fasta, read_fasta
from boltzkit.data.files import (
    FILE_EXTENSIONS,
    FILE_SPLITS,
    load_binary_file,
    lone_split_name,
    read_matrix,
    split_key,
    split_path_and_key,
)
from boltzkit.data.mnist import MNIST_IMAGE_SHAPE, MNIST_SPLITS, load_mnist
from boltzkit.data.synthetic import (
    ARTIFICIAL_MODES_DEFAULT_N,
    ARTIFICIAL_MODES_DEFAULT_P,
    artificial_modes,
    bars_and_stripes,
)
from boltzkit.data.transforms import extract_patches
from boltzkit.errors import DataError, warn

__all__ = ["DATASET_NAMES", "DATASET_SPLITS", "derive_seed", "load_dataset", "parse_spec"]

#: Names of the built-in data sets (anything else given to :func:`load_dataset` is a file path).
DATASET_NAMES = ("mnist", "mnist-patches", "bars-and-stripes", "artificial-modes")

#: Splits each built-in data set accepts; files accept all of ``train``, ``valid``, ``test``.
DATASET_SPLITS: dict[str, tuple[str, ...]] = {
    "mnist": MNIST_SPLITS,
    "mnist-patches": ("train", "test"),
    "bars-and-stripes": ("train", "valid", "test"),
    "artificial-modes": ("train", "valid", "test"),
}

_FILE_SPLITS = FILE_SPLITS

#: Built-in data sets that give the same rows for every split.
_SPLITLESS = ("bars-and-stripes",)


@dataclass(frozen=True)
class _Param:
    name: str
    parse: Callable[[str], object]
    default: object
    expected: str


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(text)
    return value


def _mnist_train(text: str) -> str:
    value = text.strip().lower()
    if value not in ("train", "train+valid"):
        raise ValueError(text)
    return value


def _patterns(text: str) -> str:
    value = text.strip().lower()
    if value not in ("all", "distinct"):
        raise ValueError(text)
    return value


# The first parameter of each data set may be given without its key.
_PARAMS: dict[str, tuple[_Param, ...]] = {
    "mnist": (_Param("train", _mnist_train, "train", "'train' (50,000 images) or 'train+valid' (60,000)"),),
    "mnist-patches": (_Param("size", _positive_int, 4, "an integer 1..28"),),
    "bars-and-stripes": (
        _Param("patterns", _patterns, "all", "'all' (32 patterns) or 'distinct' (30)"),
        _Param("size", _positive_int, 4, "an integer 1..12"),
    ),
    "artificial-modes": (
        _Param("p", _probability, ARTIFICIAL_MODES_DEFAULT_P, "a probability in [0, 1]"),
        _Param("n", _positive_int, ARTIFICIAL_MODES_DEFAULT_N, "a positive integer"),
    ),
}
_ALIASES = {"p_mut": "p", "p-mut": "p"}


def derive_seed(seed: int, *keys: str) -> int:
    """A 63-bit seed derived from ``seed`` and string ``keys``, stable across platforms and runs.

    Different keys give (practically) independent streams, e.g. ``derive_seed(0, "train")`` and
    ``derive_seed(0, "test")``.
    """
    text = ":".join([str(int(seed)), *keys]).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def parse_spec(spec: str) -> tuple[str, dict[str, object]]:
    """Split a built-in data set spec into its name and parameters (defaults filled in).

    Parameters
    ----------
    spec
        E.g. ``"artificial-modes:0.1"`` or ``"bars-and-stripes:patterns=distinct,size=3"``.

    Returns
    -------
    (str, dict)
        The data set name (one of :data:`DATASET_NAMES`) and every parameter's value.

    Raises
    ------
    DataError
        Unknown name, unknown parameter, a parameter given twice, or a value of the wrong kind.
    """
    name, _, rest = spec.strip().partition(":")
    name = name.strip().lower().replace("_", "-")
    if name not in _PARAMS:
        raise DataError("unknown data set", got=repr(spec), expected=f"one of {', '.join(DATASET_NAMES)}")
    declared = _PARAMS[name]
    values: dict[str, object] = {p.name: p.default for p in declared}
    tokens = [t.strip() for t in rest.split(",") if t.strip()] if rest else []
    given: set[str] = set()
    for position, token in enumerate(tokens):
        key, eq, text = token.partition("=")
        if not eq:
            if position != 0 or not declared:
                raise DataError(
                    f"{name}: only the first parameter may be given without 'key='",
                    got=repr(spec),
                    expected=_usage(name),
                )
            key, text = declared[0].name, token
        key = _ALIASES.get(key.strip().lower(), key.strip().lower())
        param = next((p for p in declared if p.name == key), None)
        if param is None:
            raise DataError(f"{name}: unknown parameter {key!r}", got=repr(spec), expected=_usage(name))
        if key in given:
            raise DataError(
                f"{name}: parameter {key!r} is given twice",
                got=repr(spec),
                expected=_usage(name),
                hint="give each parameter once; to run several values, name the data set once per value "
                "(e.g. 'artificial-modes:0.01' and 'artificial-modes:0.1')",
            )
        given.add(key)
        try:
            values[key] = param.parse(text.strip())
        except ValueError as err:
            raise DataError(
                f"{name}: bad value for {key!r}", got=repr(text.strip()), expected=param.expected
            ) from err
    return name, values


def _usage(name: str) -> str:
    params = _PARAMS[name]
    if not params:
        return f"'{name}' takes no parameters"
    return f"'{name}:" + ",".join(f"{p.name}=..." for p in params) + "'"


def _canonical_name(name: str, values: dict[str, object]) -> str:
    changed = [f"{p.name}={values[p.name]}" for p in _PARAMS[name] if values[p.name] != p.default]
    return name if not changed else f"{name}:{','.join(changed)}"


def _check_split(split: str, valid: tuple[str, ...], what: str) -> None:
    if split not in valid:
        known = split in ("train", "valid", "test")
        raise DataError(
            f"{what} has no {split!r} split" if known else f"unknown split for {what}",
            got=repr(split),
            expected=" or ".join(repr(s) for s in valid),
            hint="on the command line the option picks the split (train's --data: train, --valid-data: "
            "valid, --test-data: test; evaluate's --split): give it a data set with that split."
            if known
            else None,
        )


def _warn_whole(name: str, split: str, n_rows: int, *, file: bool = True, lone: str | None = None) -> None:
    """Say that a data set asked for its ``split`` by name (or a file whose one array is named
    ``lone``, another split) has none of its own, and all of it is used."""
    tip = " (an .npz file of arrays named train, valid and test holds its splits)" if file else ""
    named = f" (its one array is named {lone!r})" if lone is not None else ""
    warn(
        f"{name} has no {split!r} split of its own{named}: all of its {n_rows} rows are used as the "
        f"{split} data" + tip,
    )


def _mislabelled(path: Path, split: str) -> str | None:
    """The name of ``path``'s one array when it names another split than ``split``."""
    lone = lone_split_name(path)
    return lone if lone is not None and lone != split else None


def _is_builtin(spec: str) -> bool:
    head = spec.strip().partition(":")[0].strip().lower().replace("_", "-")
    return head in _PARAMS


def load_dataset(
    spec: str | os.PathLike[str],
    *,
    split: str = "train",
    data_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    n_visible: int | None = None,
    named_split: bool = False,
) -> Dataset:
    """Load a built-in data set or a data file as a :class:`~boltzkit.data.dataset.Dataset`.

    Parameters
    ----------
    spec
        A built-in name with optional parameters (see the module docstring and
        :data:`DATASET_NAMES`), or a file path.
    split
        ``"train"``, ``"valid"`` or ``"test"``; the choices per data set are
        :data:`DATASET_SPLITS`. ``mnist-patches`` has ``train`` (patches of the 60,000 MNIST
        train + valid images, matching the 60,000 training images of Salakhutdinov 2008, Sec. 5)
        and ``test`` (patches of the 10,000 test images). ``bars-and-stripes`` returns the full
        pattern list for every split. ``artificial-modes`` draws each split independently. An
        ``.npz`` or ``.mat`` file of arrays named ``train``, ``valid``, ``test`` gives the array of
        the split (:func:`~boltzkit.data.files.split_key`; one it lacks is refused); any other
        file gives its contents for any split, which is then only recorded (the option the file
        came with, such as ``train --test-data FILE``, says which split it is).
    data_dir
        Directory with the MNIST files (see :mod:`boltzkit.data.mnist` for the search order).
    seed
        Base seed of the random data sets (patch positions, mode samples); the seed of a split
        is :func:`derive_seed` ``(seed, name, split)``. Unused by ``mnist``, ``bars-and-stripes``
        and files.
    n_visible
        When given, the required number of columns (the model's visible layer size).
    named_split
        Whether ``split`` was asked for by name (``evaluate --split``) rather than given by the
        option the data came with (``train --test-data FILE``): a data set with no such split of
        its own (a file without split-named arrays, ``bars-and-stripes``) then warns that all of
        its rows are used. An array named in the spec (``file.npz:NAME``) is never warned of.

    Returns
    -------
    Dataset
        ``x`` float32 ``(n_samples, n_visible)`` with values 0/1, on CPU.

    Raises
    ------
    DataError
        Unknown name or split, bad parameters, missing or invalid files, wrong width.

    Examples
    --------
    >>> ds = load_dataset("bars-and-stripes")
    >>> ds.x.shape, ds.image_shape
    (torch.Size([32, 16]), (4, 4))
    >>> load_dataset("artificial-modes:0.1", split="test", seed=3).n_samples
    10000
    """
    if not isinstance(spec, str | os.PathLike):
        raise DataError(
            "data set spec must be a string", got=type(spec).__name__, expected="a name or a path"
        )
    spec = os.fspath(spec)
    if not _is_builtin(spec):
        return _load_file(spec, split=split, n_visible=n_visible, named_split=named_split)

    name, values = parse_spec(spec)
    _check_split(split, DATASET_SPLITS[name], f"data set {name!r}")
    canonical = _canonical_name(name, values)
    split_seed = derive_seed(seed, canonical, split)
    image_shape: tuple[int, int] | None
    if name == "mnist":
        if values["train"] == "train+valid" and split != "test":
            if split == "valid":
                raise DataError(
                    "mnist:train+valid has no valid split: its training split holds the validation images",
                    hint="use --data mnist (50,000 training images) to keep a validation split.",
                )
            x = torch.cat([to_tensor(load_mnist(s, data_dir)) for s in ("train", "valid")])
        else:
            x = to_tensor(load_mnist(split, data_dir))
        image_shape = MNIST_IMAGE_SHAPE
    elif name == "mnist-patches":
        size = int(values["size"])  # type: ignore[call-overload]
        if size > min(MNIST_IMAGE_SHAPE):
            raise DataError("mnist-patches: patch size too large", got=size, expected="1..28")
        if split == "train":
            images = torch.cat([to_tensor(load_mnist(s, data_dir)) for s in ("train", "valid")])
        else:
            images = to_tensor(load_mnist("test", data_dir))
        x = extract_patches(images, MNIST_IMAGE_SHAPE, size=size, seed=split_seed)
        image_shape = (size, size)
    elif name == "bars-and-stripes":
        size = int(values["size"])  # type: ignore[call-overload]
        x = bars_and_stripes(size, distinct=values["patterns"] == "distinct")
        image_shape = (size, size)
    else:  # artificial-modes
        x = artificial_modes(int(values["n"]), float(values["p"]), seed=split_seed)  # type: ignore[arg-type]
        image_shape = (4, 4)
    if n_visible is not None and x.shape[1] != n_visible:
        raise DataError(
            f"{canonical}: wrong number of columns (visible units)",
            got=int(x.shape[1]),
            expected=n_visible,
            hint="use a model whose n_visible matches the data.",
        )
    if named_split and name in _SPLITLESS:
        _warn_whole(canonical, split, int(x.shape[0]), file=False)
    return Dataset(name=canonical, x=x, image_shape=image_shape, split=split)


def load_values(
    spec: str | os.PathLike[str],
    *,
    split: str = "train",
    data_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    alphabet: str | None = None,
    named_split: bool = False,
) -> tuple[str, Tensor]:
    """The values of a data set for units that are not binary: a file's array as stored (real
    values for Gaussian units, category indices for categorical units; float64, not yet checked:
    the model's unit type checks them), aligned sequences of a FASTA file as category indices of
    ``alphabet`` (:mod:`boltzkit.data.fasta`), or a built-in data set's 0/1 matrix. ``split`` and
    ``named_split`` are as in :func:`load_dataset` (a FASTA file has no splits).

    Returns
    -------
    (name, x)
        The data's name and its values, shape ``(n_samples, n_columns)``, on the CPU.
    """
    spec = os.fspath(spec)
    if _is_builtin(spec):
        ds = load_dataset(spec, split=split, data_dir=data_dir, seed=seed, named_split=named_split)
        return ds.name, ds.x.to(torch.float64)
    if is_fasta(spec):
        _check_split(split, _FILE_SPLITS, f"data file {spec!r}")
        if alphabet is None:
            raise DataError(
                f"{spec}: a FASTA file needs an alphabet to turn letters into categories",
                hint="give --alphabet protein (20 amino acids and the gap, Q = 21), dna, rna, or the "
                "letters (train, evaluate and sample take it; a model trained with it records it).",
            )
        indices, _ = read_fasta(spec, alphabet)
        if named_split:
            _warn_whole(str(spec), split, int(indices.shape[0]))
        return str(spec), torch.from_numpy(indices.astype(np.float64))
    path, key, whole = _file_key(spec, split)
    array = read_matrix(path, key=key)
    if array.dtype.kind not in "fiub":
        raise DataError(f"{path}: the array is not numeric", got=f"dtype {array.dtype}", expected="numbers")
    name = str(path) if key is None else f"{path}:{key}"
    check_matrix_shape(tuple(array.shape), name)
    lone = _mislabelled(path, split) if whole else None
    if whole and (named_split or lone is not None):
        _warn_whole(name, split, int(array.shape[0]), lone=lone)
    return name, torch.from_numpy(np.asarray(array, dtype=np.float64))


def _file_key(spec: str, split: str) -> tuple[Path, str | None, bool]:
    """A data file's path, the array to read (named in ``spec``, else the archive's array of
    ``split``) and whether the whole file stands for the split (no array named by either)."""
    path, key = split_path_and_key(spec)
    _check_split(split, _FILE_SPLITS, f"data file {spec!r}")
    if key is not None:
        return path, key, False
    key = split_key(path, split)
    return path, key, key is None


def _load_file(spec: str, *, split: str, n_visible: int | None, named_split: bool) -> Dataset:
    path, _ = split_path_and_key(spec)
    if not path.exists() and path.suffix.lower() not in FILE_EXTENSIONS:
        head = spec.strip().partition(":")[0].lower()
        close = difflib.get_close_matches(head, DATASET_NAMES, n=1)
        raise DataError(
            "unknown data set, and no file of that name",
            got=repr(spec),
            expected=f"one of {', '.join(DATASET_NAMES)}, or the path of a data file "
            f"({' '.join(FILE_EXTENSIONS)})",
            hint=f"did you mean {close[0]!r}?" if close else "check the name or the path.",
        )
    path, key, whole = _file_key(spec, split)
    x = load_binary_file(path, key=key, n_visible=n_visible)
    name = str(path) if key is None else f"{path}:{key}"
    lone = _mislabelled(path, split) if whole else None
    if whole and (named_split or lone is not None):
        _warn_whole(name, split, int(x.shape[0]), lone=lone)
    return Dataset(name=name, x=to_tensor(x), image_shape=None, split=split)
