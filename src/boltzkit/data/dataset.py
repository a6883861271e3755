"""The :class:`Dataset` record and the validation shared by every loader.

Every loader in :mod:`boltzkit.data` ends here: the raw array is checked once (2-D, non-empty,
values in {0, 1}, optionally a required width) and turned into a float32 torch tensor of shape
``(n_samples, n_visible)``. The checks report the offending value and its row, so that a bad user
file is fixed in one go (DESIGN.md, "Errors").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from boltzkit.errors import DataError

__all__ = ["Dataset", "as_uint8", "check_binary", "to_tensor"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A binary data set: one sample a row.

    Attributes
    ----------
    name
        Canonical name; passing it back to :func:`boltzkit.data.load_dataset` (with the same
        ``split`` and ``seed``) gives the same data. A file path for user files.
    x
        The samples, float32 tensor of shape ``(n_samples, n_visible)`` with values 0 and 1, on CPU.
    image_shape
        ``(height, width)`` when the rows are row-major images (``(28, 28)`` for MNIST,
        ``(4, 4)`` for the toy sets), else ``None``.
    split
        ``"train"``, ``"valid"`` or ``"test"``.
    """

    name: str
    x: Tensor
    image_shape: tuple[int, int] | None
    split: str

    def __post_init__(self) -> None:
        if not isinstance(self.x, Tensor) or self.x.dim() != 2:
            raise DataError(
                "Dataset.x must be a 2-D tensor (n_samples, n_visible)",
                got=_describe(self.x),
                expected="a 2-D torch.Tensor",
            )
        if self.image_shape is not None:
            h, w = self.image_shape
            if h * w != self.x.shape[1]:
                raise DataError(
                    "image_shape does not match the number of columns of x",
                    got=f"image_shape={self.image_shape} ({h * w} pixels) for {self.x.shape[1]} columns",
                    expected=f"height * width == {self.x.shape[1]}",
                )

    @property
    def n_samples(self) -> int:
        """Number of rows of :attr:`x`."""
        return int(self.x.shape[0])

    @property
    def n_visible(self) -> int:
        """Number of columns of :attr:`x` (the visible layer size a model needs)."""
        return int(self.x.shape[1])

    def __len__(self) -> int:
        return self.n_samples

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, split={self.split!r}, n_samples={self.n_samples}, "
            f"n_visible={self.n_visible}, image_shape={self.image_shape})"
        )


def _describe(a: object) -> str:
    shape = getattr(a, "shape", None)
    dtype = getattr(a, "dtype", None)
    if shape is None:
        return type(a).__name__
    return f"{type(a).__name__} of shape {tuple(shape)} and dtype {dtype}"


def check_matrix_shape(shape: tuple[int, ...], source: str) -> None:
    """Refuse data that is not a non-empty matrix, one sample a row: the one shape check of every
    data set (binary or not).

    A 1-D array is refused rather than guessed at: it may be one sample of ``d`` units or ``d``
    samples of one unit, and reading it either way would be silently wrong half the time.

    Raises
    ------
    DataError
        When ``shape`` is not 2-D (with a hint for each way a 1-D array may be meant) or has no
        row or no column.
    """
    if len(shape) == 1:
        raise DataError(
            f"{source}: data must be a 2-D array, one sample a row; this one is 1-D",
            got=f"shape {shape}",
            expected="shape (n_samples, n_visible)",
            hint="x.reshape(1, -1) if it is one sample, x.reshape(-1, 1) if it is one unit's values.",
        )
    if len(shape) != 2:
        raise DataError(
            f"{source}: data must be a 2-D array, one sample a row",
            got=f"shape {shape}",
            expected="shape (n_samples, n_visible)",
            hint="flatten images row-major, e.g. x.reshape(len(x), -1).",
        )
    if shape[0] == 0 or shape[1] == 0:
        raise DataError(
            f"{source}: data set is empty",
            got=f"shape {shape}",
            expected="at least one row and one column",
        )


def check_binary(
    array: np.ndarray | Tensor | object,
    *,
    source: str = "data",
    n_visible: int | None = None,
) -> Tensor:
    """Validate a 0/1 matrix and return it as a tensor: the one binary-data check of boltzkit.

    Parameters
    ----------
    array
        Tensor, NumPy array or array-like of shape ``(n_samples, n_visible)``: bool, integer or
        float entries, each 0 or 1.
    source
        What the array is (a file name, "training data", ...), used in error messages.
    n_visible
        When given, the required number of columns.

    Returns
    -------
    Tensor
        The data as a tensor of its own dtype and device (not copied when it already is one; a
        NumPy array is wrapped without a copy).

    Raises
    ------
    DataError
        When the array is not numeric, not 2-D, empty, holds a value other than 0 or 1 (the
        first such value is reported with its row and column, counted from 0), or has the wrong
        number of columns.
    """
    if isinstance(array, Tensor):
        x = array
    else:
        a = np.asarray(array) if not isinstance(array, np.ndarray) else array
        if a.dtype.kind not in "biuf":
            raise DataError(
                f"{source}: values must be numbers 0 and 1",
                got=f"an array of dtype {a.dtype}",
                expected="a bool, integer or float array",
            )
        if a.dtype.kind == "f" and a.dtype.itemsize not in (2, 4, 8):
            a = a.astype(np.float64)
        x = torch.from_numpy(
            np.ascontiguousarray(a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("=")))
        )
    if x.is_complex():
        raise DataError(f"{source}: values must be real numbers 0 and 1", got=str(x.dtype))
    check_matrix_shape(tuple(x.shape), source)
    if x.dtype != torch.bool:
        bad = (x != 0) & (x != 1)
        if bool(bad.any()):
            row, col = (int(i) for i in bad.nonzero()[0])
            value = x[row, col].item()
            raise DataError(
                f"{source}: data must be binary (0/1)",
                got=f"value {value!r} at row {row}, column {col} (counted from 0)",
                expected="only 0 and 1",
                hint="binarize grayscale images first, e.g. with boltzkit.data.binarize (stochastic) "
                "or (x > 0.5).",
            )
    if n_visible is not None and x.shape[1] != n_visible:
        raise DataError(
            f"{source}: wrong number of columns (visible units)",
            got=x.shape[1],
            expected=f"{n_visible} (the model's visible units)",
            hint="use data whose width matches the model's n_visible.",
        )
    return x


def as_uint8(x: Tensor) -> np.ndarray:
    """Checked 0/1 data (from :func:`check_binary`) as a C-contiguous ``uint8`` NumPy array."""
    return np.ascontiguousarray(x.detach().cpu().numpy(), dtype=np.uint8)


def to_tensor(a: np.ndarray | Tensor) -> Tensor:
    """Validated 0/1 data as a float32 CPU tensor of the same shape."""
    if isinstance(a, Tensor):
        return a.detach().to(device="cpu", dtype=torch.float32).contiguous()
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def shared_rows(x: Tensor, reference: Tensor) -> int:
    """How many rows of ``x`` (shape ``(n, d)``) equal some row of ``reference`` (shape ``(m, d)``).

    Rows are compared by their values: packed bits where both hold only 0 and 1 (98 bytes for 784
    units), else a 128-bit BLAKE2 digest of each row as float64 (so float32 and float64 copies of
    the same data agree, and -0.0 equals 0.0; two different rows of 60,000 collide with
    probability about 1e-29). Widths that differ, or no rows, share nothing. Used to say how much
    of a held-out set is the model's own training data."""
    for name, t in (("x", x), ("reference", reference)):
        if t.dim() != 2:
            raise DataError(
                f"shared_rows compares rows of two matrices, and {name} is not one",
                got=f"shape {tuple(t.shape)}",
                expected="shape (n_rows, n_units)",
            )
    if x.shape[1] != reference.shape[1] or not len(x) or not len(reference):
        return 0
    a, b = x.detach().cpu(), reference.detach().cpu()
    if all(bool(((t == 0) | (t == 1)).all()) for t in (a, b)):

        def keys(t: Tensor) -> list[bytes]:
            return [bytes(row) for row in np.packbits(t.numpy().astype(np.uint8), axis=1)]

    else:
        import hashlib

        def keys(t: Tensor) -> list[bytes]:
            rows = t.to(torch.float64, copy=True).add_(0.0).numpy()  # + 0.0: -0.0 becomes 0.0
            return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in rows]

    seen = set(keys(b))
    return sum(key in seen for key in keys(a))
