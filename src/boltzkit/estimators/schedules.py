"""Inverse-temperature schedules ``0 = beta_0 <= beta_1 <= ... <= beta_K = 1`` for AIS.

* :func:`paper_betas` -- Salakhutdinov & Murray (2008), Sec. 5.1: 500 betas uniform on [0, 0.5],
  4,000 on [0.5, 0.9] and 10,000 on [0.9, 1.0]: 14,500 steps (14,501 betas, no duplicates).
* :func:`s2_betas` -- Salakhutdinov (2008), Sec. 5.1: 1,000 betas uniform on [0, 0.5], 4,000 on
  [0.5, 0.9] and 5,000 on [0.9, 1.0]: 10,000 steps (the toy and MNIST models of Tables 1-2).
* :func:`linear_betas` -- ``n_points`` uniform betas (two points, ``[0, 1]``, is simple importance
  sampling).
* :func:`load_betas` -- a user file.
* :func:`adaptive_betas` -- a pilot run measures ``sd_{p_beta}(d log p*_beta / d beta)`` along the
  path and places the betas at equal thermodynamic length, so that every step adds about the same
  log-weight variance (``Var(Delta_k) ~ Delta beta_k^2 Var(d log p* / d beta)``; Neal 2001,
  Grosse et al. 2013). The estimate itself then comes from a fresh run with that fixed schedule,
  which keeps it unbiased.

A schedule is a float64 tensor of betas; its number of steps is ``len(betas) - 1``.
"""

from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError

PAPER_SEGMENTS = ((0.0, 0.5, 500), (0.5, 0.9, 4000), (0.9, 1.0, 10000))
S2_SEGMENTS = ((0.0, 0.5, 1000), (0.5, 0.9, 4000), (0.9, 1.0, 5000))


def segmented_betas(segments: tuple[tuple[float, float, int], ...]) -> Tensor:
    """Concatenate uniform segments ``(start, stop, n_steps)`` without repeating the joints."""
    parts = [torch.tensor([segments[0][0]], dtype=torch.float64)]
    for start, stop, n in segments:
        parts.append(torch.linspace(start, stop, n + 1, dtype=torch.float64)[1:])
    return torch.cat(parts)


def paper_betas(scale: float = 1.0) -> Tensor:
    """The schedule of S&M (2008), Sec. 5.1 (14,500 steps); ``scale`` multiplies every segment's
    number of steps (e.g. 0.1 for a quick run with the same shape)."""
    segs = tuple((a, b, max(1, round(n * scale))) for a, b, n in PAPER_SEGMENTS)
    return segmented_betas(segs)


def s2_betas(scale: float = 1.0) -> Tensor:
    """The schedule of Salakhutdinov (2008), Sec. 5.1 (10,000 steps); ``scale`` multiplies every
    segment's number of steps."""
    segs = tuple((a, b, max(1, round(n * scale))) for a, b, n in S2_SEGMENTS)
    return segmented_betas(segs)


def linear_betas(n_points: int) -> Tensor:
    """``n_points`` uniformly spaced betas from 0 to 1 inclusive (``n_points - 1`` steps)."""
    if int(n_points) < 2:
        raise BoltzkitError(
            "a linear beta schedule needs at least two points (0 and 1)",
            got=n_points,
            hint="--betas 2 is simple importance sampling; --betas 1000 gives 999 steps.",
        )
    return torch.linspace(0.0, 1.0, int(n_points), dtype=torch.float64)


def validate_betas(betas: Tensor, *, source: str = "schedule") -> Tensor:
    """Check that ``betas`` runs monotonically from exactly 0 to exactly 1."""
    betas = torch.as_tensor(betas, dtype=torch.float64).flatten()
    problem = None
    if betas.numel() < 2:
        problem = f"it has {betas.numel()} value(s)"
    elif not torch.isfinite(betas).all():
        problem = "it holds NaN or infinite values"
    elif betas[0] != 0.0 or betas[-1] != 1.0:
        problem = f"it runs from {float(betas[0])} to {float(betas[-1])}"
    elif (betas[1:] < betas[:-1]).any():
        i = int(torch.nonzero(betas[1:] < betas[:-1])[0])
        problem = f"it decreases at position {i + 1} ({float(betas[i])} -> {float(betas[i + 1])})"
    if problem:
        raise BoltzkitError(
            f"invalid beta {source}: {problem}",
            expected="a non-decreasing sequence from 0 to 1 (at least 2 values)",
            hint="write one beta per line, starting with 0 and ending with 1.",
        )
    return betas


#: What a ``--betas`` file may be, for the error messages.
_BETAS_FILE_FORMATS = (
    "a text file of numbers (whitespace- or comma-separated, '#' comments), a 1-D .npy array "
    "(numpy.save), or an .npz archive holding one such array"
)


def load_betas(path: str | Path) -> Tensor:
    """Read a beta schedule from a file.

    Parameters
    ----------
    path
        A text file of numbers (whitespace- or comma-separated, ``#`` starts a comment), a
        ``.npy`` file of one 1-D array (:func:`numpy.save`), or an ``.npz`` archive holding one
        such array. The format is told by the file's content, not its name.

    Returns
    -------
    torch.Tensor
        The betas, float64, checked by :func:`validate_betas` (finite, non-decreasing from 0 to 1).

    Raises
    ------
    BoltzkitError
        Missing file; a binary file that is no readable ``.npy``/``.npz`` array of numbers, an
        array that is not 1-D, an archive of several arrays; a non-number in a text file; betas
        that are not a schedule.
    """
    path = Path(path)
    if not path.is_file():
        raise BoltzkitError("beta schedule file not found", got=str(path))
    source = f"schedule in {path}"
    raw = path.read_bytes()
    if raw.startswith((b"\x93NUMPY", b"PK\x03\x04")):  # numpy.save / numpy.savez
        return validate_betas(torch.from_numpy(_betas_array(path)), source=source)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        raise BoltzkitError(
            f"beta schedule file {path} is binary and not a numpy array file",
            got=f"first bytes {raw[:8]!r}",
            expected=_BETAS_FILE_FORMATS,
            hint="save betas with numpy.save(path, betas) or write one beta per line.",
        )
    values = []
    for line_no, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].replace(",", " ")
        for token in line.split():
            try:
                values.append(float(token))
            except ValueError:
                raise BoltzkitError(
                    f"beta schedule file {path} has a non-number on line {line_no}", got=token
                ) from None
    return validate_betas(torch.tensor(values, dtype=torch.float64), source=source)


def _betas_array(path: Path) -> np.ndarray:
    """The one 1-D array of numbers in a ``.npy`` file or ``.npz`` archive of betas, as float64."""
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded:
                arrays = {name: loaded[name] for name in loaded.files}
            if len(arrays) != 1:
                raise BoltzkitError(
                    f"beta schedule file {path} holds {len(arrays)} arrays",
                    got=sorted(arrays),
                    expected="an .npz archive of exactly one 1-D array of betas",
                    hint="save the betas alone: numpy.save(path, betas) or numpy.savez(path, betas).",
                )
            (array,) = arrays.values()
        else:
            array = loaded
    except BoltzkitError:
        raise
    except Exception as err:  # numpy raises many types for corrupt files and pickled arrays
        raise BoltzkitError(
            f"could not read the beta schedule file {path}",
            got=f"{type(err).__name__}: {err}",
            expected=_BETAS_FILE_FORMATS,
            hint="check that the file is complete (an array of objects is refused: save numbers).",
        ) from err
    if array.dtype.kind not in "iuf" or array.ndim != 1:
        raise BoltzkitError(
            f"beta schedule file {path} does not hold a 1-D array of numbers",
            got=f"shape {tuple(array.shape)}, dtype {array.dtype}",
            expected="a 1-D array of betas from 0 to 1",
            hint="flatten it first: numpy.save(path, betas.ravel()).",
        )
    return array.astype(np.float64)


def equal_length_betas(grid: Tensor, speed: Tensor, n_steps: int) -> Tensor:
    """Place ``n_steps + 1`` betas at equal thermodynamic length.

    Parameters
    ----------
    grid
        Betas at which the speed was measured, increasing from 0 to 1, shape ``(G,)``.
    speed
        ``sd_{p_beta}(d log p* / d beta)`` at those betas, shape ``(G,)``.
    n_steps
        Number of steps of the returned schedule.
    """
    grid = grid.to(torch.float64)
    speed = speed.to(torch.float64).clamp_min(1e-12)
    seg = 0.5 * (speed[1:] + speed[:-1]) * (grid[1:] - grid[:-1])
    length = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(seg, 0)])
    targets = torch.linspace(0.0, float(length[-1]), n_steps + 1, dtype=torch.float64)
    idx = torch.searchsorted(length, targets).clamp(1, grid.numel() - 1)
    l0, l1 = length[idx - 1], length[idx]
    g0, g1 = grid[idx - 1], grid[idx]
    frac = torch.where(l1 > l0, (targets - l0) / (l1 - l0), torch.zeros_like(targets))
    betas = g0 + frac * (g1 - g0)
    betas[0], betas[-1] = 0.0, 1.0
    return torch.cummax(betas, 0).values


def parse_schedule(spec: str | int | Tensor) -> tuple[Tensor | None, str]:
    """Turn ``"paper"``, ``N``, ``"adaptive"``, ``"adaptive:N"``, a file path or the betas
    themselves (a tensor, a numpy array, a list or tuple of numbers) into betas (``None`` for
    adaptive, resolved by the caller's pilot run) and a name for the record."""
    if isinstance(spec, (np.ndarray, list, tuple)):
        try:
            spec = torch.as_tensor(np.asarray(spec, dtype=np.float64))
        except (TypeError, ValueError):
            raise BoltzkitError("betas must be numbers", got=repr(spec)[:80]) from None
    if isinstance(spec, Tensor):
        return validate_betas(spec), f"custom ({spec.numel() - 1} steps)"
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        spec = int(spec)
    text = str(spec).strip()
    if text == "paper":
        return paper_betas(), "paper (500/4,000/10,000)"
    if text == "s2":
        return s2_betas(), "s2 (1,000/4,000/5,000)"
    if text == "adaptive" or text.startswith("adaptive:"):
        tail = text.partition(":")[2].strip()
        if text != "adaptive" and not (tail.isdigit() and int(tail) >= 1):
            raise BoltzkitError(
                "an adaptive beta schedule needs a positive whole number of steps",
                got=spec,
                expected="'adaptive' (14,500 steps) or 'adaptive:N' with N >= 1",
                hint="for example --betas adaptive:10000",
            )
        return None, text
    if text.isdigit():
        return linear_betas(int(text)), f"linear ({text} points)"
    if Path(text).is_file():
        return load_betas(text), f"file {text}"
    if Path(text).suffix.lower() in (".txt", ".npy", ".csv", ".npz") or "/" in text:
        raise BoltzkitError(
            "the file of betas does not exist",
            got=text,
            expected="a text, .npy or .npz file of betas from 0 to 1",
            hint="check the path (or give a schedule: 'paper', 's2', N, 'adaptive:N').",
        )
    raise BoltzkitError(
        "unknown beta schedule",
        got=spec,
        expected="'paper', 's2', a number of linear points N, 'adaptive' / 'adaptive:N', a file of betas, "
        "or the betas themselves (a tensor, array or list from 0 to 1)",
        hint="for example --betas paper or --betas 10000",
    )
