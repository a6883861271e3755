"""``boltzkit plot KIND FILE... --out PNG``: draw a plot from files boltzkit writes.

=============== ==================================================================================
``history``     learning curves of ``train --history PATH`` (``PATH.csv`` or ``PATH.json``); several
                files are drawn on the same axes
``ais-course``  the course of an AIS run, from ``logz --method ais --trace FILE.npz``
``logz-runs``   ``log Z_hat`` against the number of AIS runs with ``±3 sigma`` bars, from records with
                raw log-weights (``logz --out FILE.json --keep-weights``, or an experiment's records);
                one panel per record
``samples``     a grid of sample images, from ``sample --out FILE.npy``
``acf``         energy autocorrelation functions, one line per sampler, from ``mixing --out FILE.npz``;
                one panel per file
=============== ==================================================================================

Each kind is one function of
:mod:`boltzkit.plots`; matplotlib is needed (``pip install "boltzkit[plot]"``).
"""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from boltzkit.cli.common import ForceOpt, JsonFlag, check_output, emit, fmt
from boltzkit.errors import BoltzkitError
from boltzkit.plots import plot_acf, plot_ais_course, plot_history, plot_logz_runs, plot_samples
from boltzkit.plots._backend import FORMATS, require_matplotlib

#: The kinds of plot, as the command line names them.
PlotKind = Enum(
    "PlotKind",
    {k.replace("-", "_"): k for k in ("history", "ais-course", "logz-runs", "samples", "acf")},
    type=str,
)

#: Kinds that draw exactly one input file.
SINGLE_FILE = {"ais-course", "samples"}


def command(
    kind: Annotated[
        PlotKind,
        typer.Argument(
            metavar="KIND",
            help="history, ais-course, logz-runs, samples or acf.",
        ),
    ],
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE...",
            help="Input: history .csv/.json (history), a --trace .npz (ais-course), log Z .json records "
            "with log_weights (logz-runs), a samples .npy (samples), mixing --out .npz files (acf).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="The PNG file to write.")],
    image_shape: Annotated[
        str | None,
        typer.Option(
            "--image-shape",
            help="Shape of one image, HxW (ais-course, samples) [default: recorded, else square, else rows].",
        ),
    ] = None,
    max_images: Annotated[
        int, typer.Option("--max-images", min=1, help="Most samples drawn (samples).")
    ] = 100,
    units: Annotated[
        str,
        typer.Option(
            "--units",
            help="samples: what the values are: binary, gaussian (real values, drawn by percentile) or "
            "categorical:Q (grey levels with --image-shape, else coloured sequences).",
        ),
    ] = "binary",
    max_lag: Annotated[
        int | None,
        typer.Option("--max-lag", min=1, help="Last lag drawn (acf) [default: n_steps / 4, at most 200]."),
    ] = None,
    title: Annotated[str | None, typer.Option("--title", help="Figure title.")] = None,
    force: ForceOpt = False,
    as_json: JsonFlag = False,
) -> None:
    """Draw a plot (learning curves, an AIS run's course, log Z against AIS runs, samples, ACFs) as PNG.

    KIND is one of: history (FILE: train --history PATH.csv or .json; several files overlay),
    ais-course (FILE: logz --method ais --trace FILE.npz), logz-runs (FILE: logz --out FILE.json
    --keep-weights, or experiment records with log_weights; one panel per record), samples (FILE:
    sample --out FILE.npy), acf (FILE: mixing --out FILE.npz; one panel per file).
    """
    name = kind.value
    if out.suffix.lower() not in FORMATS or (name == "samples" and out.suffix.lower() != ".png"):
        raise BoltzkitError(
            "unknown plot format",
            got=str(out),
            expected="a file ending in .png, .svg or .pdf (samples: .png)",
        )
    check_output(out, "--out", force=force)  # an existing plot is kept unless --force
    if name in SINGLE_FILE and len(files) != 1:
        raise BoltzkitError(f"plot {name} draws one file", got=f"{len(files)} files")
    require_matplotlib()
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(2, "No such file", str(f))
    t0 = time.perf_counter()
    if name == "history":
        plot_history(files, out, title=title)
    elif name == "ais-course":
        plot_ais_course(files[0], out, image_shape=image_shape, title=title)
    elif name == "logz-runs":
        plot_logz_runs(files, out, title=title)
    elif name == "acf":
        plot_acf(files, out, max_lag=max_lag)
    else:
        plot_samples(files[0], out, image_shape=image_shape, max_images=max_images, units=units)
    seconds = time.perf_counter() - t0
    record: dict[str, Any] = {
        "kind": name,
        "files": [str(f) for f in files],
        "out": str(out),
        "bytes": out.stat().st_size,
        "seconds": seconds,
    }
    emit(
        record,
        as_json=as_json,
        human=lambda: f"{name} plot of {len(files)} file(s) -> {out} ({fmt(seconds, 2)} s)",
    )
