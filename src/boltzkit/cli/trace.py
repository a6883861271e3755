"""``boltzkit logz --trace FILE.npz``: run AIS while recording its course.

The estimate is the one ``logz --method ais`` gives with the same options (same seed, same
log-weights); the trace adds the states of ``--trace-chains`` chains at ``--trace-betas`` and the
log-weight variance along beta, written to ``FILE.npz`` for ``boltzkit plot ais-course``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from boltzkit.cli.common import LogZOptions, base_rate_data
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import LogZResult, ais_trace, base_rate_path
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.plots.images import image_shape_of


def parse_betas(spec: str) -> list[float]:
    """``"0,0.5,0.9,1"`` -> betas in [0, 1]."""
    try:
        values = [float(x) for x in spec.replace(" ", "").split(",") if x]
    except ValueError:
        values = []
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise BoltzkitError(
            "--trace-betas must be a list of numbers in [0, 1]", got=spec, expected="e.g. 0,0.5,0.9,1"
        )
    return values


def traced_log_z(
    model: BoltzmannMachine,
    opts: LogZOptions,
    out: Path,
    *,
    at: str,
    n_show: int,
    device: torch.device,
    progress: bool,
    data_dir: Path | None,
    metadata: dict[str, Any],
    model_path: Path,
) -> LogZResult:
    """AIS along the base-rate path of ``model`` with its course written to ``out``; the estimate."""
    if opts.method.value != "ais":
        raise BoltzkitError(
            "--trace records the course of an AIS run",
            got=f"--method {opts.method.value}",
            expected="--method ais",
        )
    if out.suffix.lower() != ".npz":
        raise BoltzkitError(
            "the AIS trace is an .npz archive", got=str(out), expected="a file ending in .npz"
        )
    betas = parse_betas(at)
    data, source = base_rate_data(model, opts, data_dir=data_dir, metadata=metadata)
    path = base_rate_path(model, data=data, device=device)
    trace = ais_trace(
        path,
        n_chains=opts.chains,
        betas=opts.betas,
        sweeps=opts.sweeps,
        sampler=opts.sampler,
        seed=opts.seed,
        at=betas,
        n_show=n_show,
        progress=progress,
        check=True,  # judged as `logz --method ais` judges its estimate
    )
    if source:
        trace = dataclasses.replace(trace, result=trace.result.with_settings(base_data=source))
    shape = image_shape_of(metadata, model.n_visible)
    trace = trace.with_metadata(model=str(model_path), image_shape=list(shape) if shape else None)
    trace.save(out)
    return trace.result


__all__ = ["parse_betas", "traced_log_z"]
