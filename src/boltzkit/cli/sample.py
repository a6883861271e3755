"""``boltzkit sample MODEL``: run Markov chains on a model and save their final visible states.

``--out FILE.npy`` writes a ``uint8`` array of shape ``(chains, n_visible)``; ``--out FILE.png``
draws the states as a grid of images (needs matplotlib, the ``plot`` extra). The image shape comes
from the model file's metadata, else from a square ``n_visible``. A DBN runs its chains in the top
RBM and then draws one directed pass down; a mixture draws ancestral samples (``--steps`` unused).
"""

from __future__ import annotations

import time
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
from boltzkit.cli.stack import draw_visible
from boltzkit.errors import BoltzkitError
from boltzkit.io import load_model
from boltzkit.plots._backend import png_writer
from boltzkit.plots.images import image_grid
from boltzkit.samplers import make_operator


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
    write_png = png_writer("or save the samples to a .npy file.") if kind == ".png" else None
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
    # a DBN: chains in its top RBM, then a directed pass down; a mixture: ancestral samples
    visible = draw_visible(
        rbm,
        operator,
        chains=chains,
        steps=steps,
        generator=make_generator(seed, dev),
        progress=show_progress(progress),
    )
    seconds = time.perf_counter() - t0
    states = visible.detach().cpu().numpy().astype(np.uint8)
    if write_png is not None:
        write_png(out, image_grid(states, shape, max_images))
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
