"""matplotlib, imported only when a plot is drawn, and atomic PNG writing.

matplotlib is an optional extra (``pip install "boltzkit[plot]"``): importing :mod:`boltzkit.plots`
never imports it, and drawing without it raises a :class:`~boltzkit.errors.BoltzkitError` that says
how to install it. Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot,
no global backend or figure state), so plotting works in scripts, notebooks and servers alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from boltzkit.atomic import atomic_open
from boltzkit.errors import BoltzkitError

#: What to run when matplotlib is missing.
INSTALL_HINT = 'pip install "boltzkit[plot]" (or pip install matplotlib)'


def _missing(what: str) -> BoltzkitError:
    return BoltzkitError(f"{what} needs matplotlib, which is not installed", hint=INSTALL_HINT + ".")


def new_figure(width: float, height: float) -> Any:
    """A fresh ``matplotlib.figure.Figure`` of ``width`` x ``height`` inches."""
    try:
        import matplotlib  # noqa: F401 (fails first when matplotlib is missing or blocked)
        from matplotlib.figure import Figure
    except ImportError:
        raise _missing("drawing a plot") from None
    return Figure(figsize=(width, height), layout="constrained")


def optional_figure(width: float, height: float) -> Any | None:
    """A fresh figure as :func:`new_figure`, or ``None`` where matplotlib is missing: for the
    figures of a report, which goes on without them."""
    try:
        return new_figure(width, height)
    except BoltzkitError:
        return None


#: The formats a plot is written in, by the file's extension.
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def save_png(fig: Any, path: str | os.PathLike, *, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` atomically (a failed draw leaves no partial file), as PNG, SVG or
    PDF by the file's extension (:data:`FORMATS`)."""
    p = Path(path)
    fmt = FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise BoltzkitError(
            "unknown plot format", got=str(p), expected="a file ending in " + ", ".join(FORMATS)
        )
    with atomic_open(p, "wb") as f:
        fig.savefig(f, format=fmt, dpi=dpi)
    return p


def png_writer(hint: str | None = None) -> Callable[[Path, np.ndarray], None]:
    """A function ``write(path, grid)`` that saves a grey-level array in [0, 1] as a PNG, one
    pixel per entry; an error at once (before any work) when matplotlib is missing."""
    try:
        from matplotlib import image as mpimg
    except ImportError:
        raise BoltzkitError(
            "writing a PNG needs matplotlib, which is not installed",
            hint=INSTALL_HINT + (f", {hint}" if hint else "."),
        ) from None

    def write(path: Path, grid: np.ndarray) -> None:
        with atomic_open(path, "wb") as f:
            mpimg.imsave(f, grid, cmap="gray", vmin=0.0, vmax=1.0, format="png")

    return write


def require_matplotlib(what: str = "drawing a plot") -> None:
    """Fail early, with the install hint, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise _missing(what) from None


__all__ = [
    "FORMATS",
    "INSTALL_HINT",
    "new_figure",
    "optional_figure",
    "png_writer",
    "require_matplotlib",
    "save_png",
]
