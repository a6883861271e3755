"""States drawn as images: the image grid, the image shape, and the samples plot.

Binary states are grey levels as they are. Real-valued states (Gaussian units) are mapped to grey by
their 1st and 99th percentiles; categorical states are grey levels ``x / (Q - 1)`` when they form
images (quantised pixels), and otherwise sequences: one row per sample, one coloured cell per
position (:func:`unit_grid`).

:func:`image_grid` tiles visible states as small images separated by grey lines (``boltzkit sample
--out FILE.png`` and ``boltzkit plot samples`` write it pixel for pixel; the AIS course draws it in
its panels). :func:`image_shape_of` finds the shape of one image: a model file's ``image_shape``
metadata, else a square ``n_visible``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from boltzkit.errors import BoltzkitError
from boltzkit.plots._backend import optional_figure, png_writer, save_png
from boltzkit.units import unit_type

#: Width in pixels that a PNG grid is scaled up towards (by whole pixels per unit, at most 16).
GRID_TARGET_WIDTH = 800


def image_shape_of(metadata: Mapping[str, Any] | None, n_visible: int) -> tuple[int, int] | None:
    """Image shape from metadata (``image_shape``), else a square ``sqrt(n_visible)``; or ``None``."""
    shape = (metadata or {}).get("image_shape")
    if isinstance(shape, (list, tuple)) and len(shape) == 2 and int(shape[0]) * int(shape[1]) == n_visible:
        return int(shape[0]), int(shape[1])
    side = math.isqrt(n_visible)
    return (side, side) if side * side == n_visible else None


def parse_image_shape(spec: str | Sequence[int] | None, n_visible: int) -> tuple[int, int] | None:
    """``"28x28"`` (or a pair) checked against ``n_visible``; ``None`` stays ``None``."""
    if spec is None:
        return None
    if isinstance(spec, str):
        parts = spec.lower().replace("*", "x").replace(",", "x").split("x")
        try:
            shape = tuple(int(p) for p in parts)
        except ValueError:
            shape = ()
    else:
        shape = tuple(int(p) for p in spec)
    example = (
        f"{math.isqrt(n_visible)}x{math.isqrt(n_visible)}"
        if math.isqrt(n_visible) ** 2 == n_visible
        else f"1x{n_visible}"
    )
    if len(shape) != 2 or min(shape) < 1:
        raise BoltzkitError(
            "cannot read the image shape",
            got=spec,
            expected="HEIGHTxWIDTH, two positive integers",
            hint=f"for example --image-shape {example}",
        )
    if shape[0] * shape[1] != n_visible:
        raise BoltzkitError(
            "the image shape does not fit the states",
            got=spec,
            expected=f"HEIGHTxWIDTH with HEIGHT * WIDTH = {n_visible}, e.g. {example}",
        )
    return shape[0], shape[1]


def image_grid(
    states: np.ndarray,
    shape: tuple[int, int],
    n_max: int,
    *,
    cols: int | None = None,
    upscale: bool = True,
) -> np.ndarray:
    """Tile the first ``n_max`` rows of ``states`` as ``shape`` images, separated by grey lines.

    ``cols`` images per row (default: a square grid); with ``upscale``, every unit becomes a block
    of whole pixels so that the grid is about :data:`GRID_TARGET_WIDTH` pixels wide (at most 16).
    """
    n = min(len(states), n_max)
    h, w = shape
    cols = cols or max(1, math.ceil(math.sqrt(n)))
    rows = max(1, math.ceil(n / cols))
    grid = np.full((rows * (h + 1) + 1, cols * (w + 1) + 1), 0.5)
    for i in range(n):
        top, left = 1 + (i // cols) * (h + 1), 1 + (i % cols) * (w + 1)
        grid[top : top + h, left : left + w] = states[i].reshape(h, w)
    if not upscale:
        return grid
    scale = max(1, min(16, GRID_TARGET_WIDTH // grid.shape[1]))
    return np.kron(grid, np.ones((scale, scale)))


def grid_layout(n_visible: int, shape: tuple[int, int] | None) -> tuple[tuple[int, int], int | None]:
    """The image shape to draw with and the columns of the grid: states whose shape is unknown are
    drawn as one row of units each, stacked (one column)."""
    if shape is not None:
        return shape, None
    return (1, n_visible), 1


def load_states(source: str | os.PathLike | np.ndarray, *, check_unit_interval: bool = True) -> np.ndarray:
    """A ``(n, n_visible)`` array of values in [0, 1] (any finite values without
    ``check_unit_interval``) from an array or a ``.npy`` file (``boltzkit sample --out FILE.npy``);
    spins in {-1, +1} (an Ising model's samples) become {0, 1}."""
    if isinstance(source, np.ndarray):
        x = source
    else:
        p = Path(source)
        if p.suffix.lower() != ".npy":
            raise BoltzkitError(
                "samples are read from a .npy file", got=str(p), expected="FILE.npy (boltzkit sample --out)"
            )
        try:
            x = np.load(p, allow_pickle=False)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise BoltzkitError("cannot read this .npy file", got=f"{p} ({exc})") from None
    if x.ndim != 2 or x.shape[0] == 0 or x.dtype.kind not in "biuf":
        raise BoltzkitError(
            "samples must be a non-empty numeric matrix (one row per sample)",
            got=f"shape {x.shape}, dtype {x.dtype}",
            expected="(n_samples, n_visible)",
        )
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        raise BoltzkitError("samples must be finite numbers", got="a value that is not finite")
    if check_unit_interval and x.min() < 0 and np.isin(x, (-1.0, 1.0)).all():
        x = (x + 1.0) / 2.0  # spins s in {-1, +1} (an Ising model's samples) drawn as (s + 1) / 2
    if check_unit_interval and (x.min() < 0 or x.max() > 1):
        raise BoltzkitError(
            "samples must hold values in [0, 1] (or spins in {-1, +1})",
            got=f"values in [{x.min()}, {x.max()}]",
            hint="samples of Gaussian or categorical units: pass --units gaussian or categorical:Q "
            "(units= in Python).",
        )
    return x


#: Colours of categories 0.. in a sequence grid (RGB in [0, 1]; cycled beyond their number).
_CATEGORY_COLOURS = np.array(
    [
        [0.12, 0.47, 0.71], [1.00, 0.50, 0.05], [0.17, 0.63, 0.17], [0.84, 0.15, 0.16],
        [0.58, 0.40, 0.74], [0.55, 0.34, 0.29], [0.89, 0.47, 0.76], [0.50, 0.50, 0.50],
        [0.74, 0.74, 0.13], [0.09, 0.75, 0.81], [0.68, 0.78, 0.91], [1.00, 0.73, 0.47],
        [0.60, 0.87, 0.54], [1.00, 0.60, 0.59], [0.77, 0.69, 0.84], [0.77, 0.61, 0.58],
        [0.97, 0.71, 0.82], [0.78, 0.78, 0.78], [0.86, 0.86, 0.55], [0.62, 0.85, 0.90],
        [1.00, 1.00, 1.00],
    ]
)  # fmt: skip


def unit_grid(states: np.ndarray, units: str, shape: tuple[int, int] | None, n_max: int) -> np.ndarray:
    """The PNG array of samples of ``units`` (``binary``, ``gaussian`` or ``categorical:Q``).

    Binary and real-valued states with an image ``shape`` are an :func:`image_grid` (real values
    mapped to grey between their 1st and 99th percentiles, clipped). Categorical states are grey
    levels ``x / (Q - 1)`` in an image grid when ``shape`` is given, else sequences: an RGB array
    with one row per sample and one coloured cell per position (colour ``q`` for category ``q``).
    Real values without a shape are drawn as rows of grey.
    """
    x = np.asarray(states, dtype=np.float64)[: int(n_max)]
    kind = unit_type(units)
    categorical = kind.discrete and kind.n_states > 2
    if categorical and shape is None:
        idx = x.astype(np.int64) % len(_CATEGORY_COLOURS)
        rgb = _CATEGORY_COLOURS[idx]  # (n, n_visible, 3)
        scale = max(1, min(16, GRID_TARGET_WIDTH // max(1, x.shape[1])))
        return np.kron(rgb, np.ones((scale, scale, 1)))
    if categorical:
        x = x / (kind.n_states - 1)
    elif not kind.discrete:
        lo, hi = np.percentile(x, [1, 99]) if x.size else (0.0, 1.0)
        x = np.clip((x - lo) / (hi - lo if hi > lo else 1.0), 0.0, 1.0)
    layout, cols = grid_layout(x.shape[1], shape)
    return image_grid(x, layout, len(x), cols=cols)


def plot_samples(
    samples: str | os.PathLike | np.ndarray,
    out: str | os.PathLike,
    *,
    image_shape: str | Sequence[int] | None = None,
    max_images: int = 100,
    units: str = "binary",
) -> Path:
    """Draw samples (an array or a ``.npy`` file) as a grid of images, one PNG pixel block per unit.

    The image shape is ``image_shape`` (``"28x28"``), else a square ``n_visible``; otherwise each
    sample is drawn as one row of units. ``units``: ``binary`` (values in [0, 1]), ``gaussian``
    (real values) or ``categorical:Q`` (integers 0..Q-1, drawn as sequences without an image
    shape), as :func:`unit_grid` draws them.
    """
    if isinstance(max_images, bool) or int(max_images) < 1:
        raise BoltzkitError("max_images must be at least 1", got=max_images)
    kind = unit_type(units)
    write = png_writer()
    x = load_states(samples, check_unit_interval=kind.name == "binary")
    if kind.name != "binary":  # binary grids also draw probabilities in [0, 1]
        kind.check_data(x, x.shape[1], "the sample array")
    shape = parse_image_shape(image_shape, x.shape[1])
    if shape is None and not (kind.discrete and kind.n_states > 2):  # sequences stay sequences
        shape = image_shape_of(None, x.shape[1])
    p = Path(out)
    write(p, unit_grid(x, kind.name, shape, int(max_images)))
    return p


def plot_image_panels(
    panels: Sequence[tuple[str, Any]],
    out: str | os.PathLike,
    *,
    shape: tuple[int, int] = (28, 28),
    cols: int = 4,
    panel_cols: int | None = None,
    suptitle: str | None = None,
) -> Path | None:
    """Panels of images side by side, each a grid of ``cols`` images a row (:func:`image_grid`)
    under its title: samples of several models beside training images (S1 Fig. 2, S2 Fig. 4).

    ``panels`` holds ``(title, images)`` with images of shape ``(n, h * w)`` in [0, 1] (arrays or
    tensors); ``panel_cols`` panels a row (default: all in one row). Returns the file, or ``None``
    where matplotlib is missing (a report goes on without its figure).
    """
    grids = []
    for _, images in panels:
        x = images.detach().cpu().numpy() if hasattr(images, "detach") else np.asarray(images)
        grids.append(image_grid(x.astype(np.float64), shape, len(x), cols=cols, upscale=False))
    per_row = min(panel_cols or len(panels), len(panels))
    rows = math.ceil(len(panels) / per_row)
    height, width = max(g.shape[0] for g in grids), max(g.shape[1] for g in grids)
    fig = optional_figure(2.4 * per_row, 2.4 * rows * height / width + (0.5 if suptitle else 0.3))
    if fig is None:
        return None
    axes = fig.subplots(rows, per_row, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (title, _), grid in zip(axes.flat, panels, grids, strict=False):
        ax.imshow(grid, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax.set_title(title, fontsize=9)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return save_png(fig, out)


__all__ = [
    "GRID_TARGET_WIDTH",
    "grid_layout",
    "image_grid",
    "image_shape_of",
    "load_states",
    "parse_image_shape",
    "plot_image_panels",
    "plot_samples",
    "unit_grid",
]
