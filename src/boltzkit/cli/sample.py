"""``boltzkit sample MODEL``: run Markov chains on a model and save their final visible states.

``--out FILE.npy`` writes a ``uint8`` array of shape ``(chains, n_visible)``; ``--out FILE.png``
draws the states as a grid of images (needs matplotlib, the ``plot`` extra). The image shape comes
from the model file's metadata, else from a square ``n_visible``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from boltzkit._numerics import make_generator
from boltzkit.atomic import atomic_open
from boltzkit.cli.common import (
    DeviceOpt,
    JsonFlag,
    ModelArg,
    ProgressFlag,
    SamplerOpt,
    SeedOpt,
    device_from,
    emit,
    fmt,
    image_shape_of,
    show_progress,
)
from boltzkit.errors import BoltzkitError
from boltzkit.io import load_model
from boltzkit.samplers import make_operator, sample

#: Width in pixels that a PNG grid is scaled up towards (by whole pixels per unit, at most 16).
GRID_TARGET_WIDTH = 800


def _image_grid(states: np.ndarray, shape: tuple[int, int], n_max: int) -> np.ndarray:
    """Tile the first ``n_max`` rows of ``states`` as ``shape`` images, separated by grey lines."""
    n = min(len(states), n_max)
    h, w = shape
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    grid = np.full((rows * (h + 1) + 1, cols * (w + 1) + 1), 0.5)
    for i in range(n):
        top, left = 1 + (i // cols) * (h + 1), 1 + (i % cols) * (w + 1)
        grid[top : top + h, left : left + w] = states[i].reshape(h, w)
    scale = max(1, min(16, GRID_TARGET_WIDTH // grid.shape[1]))
    return np.kron(grid, np.ones((scale, scale)))


def _png_writer() -> Callable[[Path, np.ndarray], None]:
    """A function that writes a grey-level grid as a PNG; an error when matplotlib is missing."""
    try:
        from matplotlib import image as mpimg
    except ImportError:
        raise BoltzkitError(
            "writing a PNG needs matplotlib, which is not installed",
            hint='pip install "boltzkit[plot]" (or matplotlib), or save the samples to a .npy file.',
        ) from None

    def write(path: Path, grid: np.ndarray) -> None:
        with atomic_open(path, "wb") as f:
            mpimg.imsave(f, grid, cmap="gray", vmin=0.0, vmax=1.0, format="png")

    return write


def command(
    model: ModelArg,
    out: Annotated[Path, typer.Option("--out", help="Output: FILE.npy (states) or FILE.png (image grid).")],
    sampler: SamplerOpt = "gibbs",
    chains: Annotated[int, typer.Option("--chains", min=1, help="Number of independent chains.")] = 100,
    steps: Annotated[
        int, typer.Option("--steps", min=0, help="Sweeps per chain from a uniform start.")
    ] = 1000,
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    max_images: Annotated[
        int, typer.Option("--max-images", min=1, help="Most samples drawn in a PNG.")
    ] = 100,
    as_json: JsonFlag = False,
    progress: ProgressFlag = None,
) -> None:
    """Sample from MODEL with Gibbs, flip-the-state or a blend, and save the final visible states."""
    kind = out.suffix.lower()
    if kind not in (".npy", ".png"):
        raise BoltzkitError("unknown output type", got=str(out), expected="a file ending in .npy or .png")
    operator = make_operator(sampler)
    write_png = _png_writer() if kind == ".png" else None
    dev = device_from(device)
    rbm, metadata = load_model(model, device=dev)
    shape = image_shape_of(metadata, rbm.n_visible) if kind == ".png" else None
    if kind == ".png" and shape is None:
        raise BoltzkitError(
            "cannot draw the samples as images: the image shape is unknown",
            got=f"n_visible={rbm.n_visible} (not a square) and no image_shape in the model file",
            hint="save to a .npy file instead.",
        )
    t0 = time.perf_counter()
    state = sample(
        rbm,
        operator,
        n_chains=chains,
        n_steps=steps,
        generator=make_generator(seed, dev),
        progress=show_progress(progress),
    )
    seconds = time.perf_counter() - t0
    states = state.visible.detach().cpu().numpy().astype(np.uint8)
    if write_png is not None:
        write_png(out, _image_grid(states, shape, max_images))
    else:
        with atomic_open(out, "wb") as f:
            np.save(f, states)
    record: dict[str, Any] = {
        "model": str(model),
        "out": str(out),
        "sampler": sampler,
        "n_chains": chains,
        "n_steps": steps,
        "n_visible": rbm.n_visible,
        "seed": seed,
        "device": str(dev),
        "mean_activation": float(states.mean()),
        "seconds": seconds,
    }
    emit(
        record,
        as_json=as_json,
        human=lambda: (
            f"{chains} chains x {steps} sweeps of {sampler} in {fmt(seconds, 2)} s -> {out} "
            f"(mean visible activation {fmt(record['mean_activation'], 3)})"
        ),
    )
