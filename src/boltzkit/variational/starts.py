"""Start points of the fixed-point iterations over means (mean-field, TAP): 1/2 and random."""

from __future__ import annotations

import torch

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.state import ChainState


def start_means(model: BoltzmannMachine, n_starts: int, seed: int | torch.Generator | None) -> ChainState:
    """``n_starts`` rows of means per layer, float64 on the model's device: row 0 all 1/2 (the
    start of ALGORITHMS.md's reference numbers), the others uniform on (0, 1) from ``seed`` (a
    CPU generator, or ``seed`` itself if it is a generator on the CPU)."""
    if isinstance(n_starts, bool) or not isinstance(n_starts, int) or n_starts < 1:
        raise BoltzkitError("the number of starts must be a positive integer", got=n_starts)
    gen = make_generator(seed, "cpu")  # drawn on the CPU: the same starts on every device
    layers = []
    for n in model.layer_sizes:
        x = torch.rand(n_starts, n, generator=gen, dtype=torch.float64)
        x[0] = 0.5
        layers.append(x.to(model.device))
    return ChainState(tuple(layers))


__all__ = ["start_means"]
