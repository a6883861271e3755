"""Start points of the fixed-point iterations over means (mean-field, TAP): 1/2, the two ordered
states (every unit on, every unit off) and random ones.

A model in its ordered phase (a ferromagnet below its critical temperature, a sharply trained
Boltzmann machine) has several fixed points; the symmetric start 1/2 (and random starts around it)
can converge to the disordered one, far below the truth (16 nats on a 10 x 10 lattice at K = 0.6
for TAP). The ordered starts reach the ordered fixed points, and the methods keep the start with
the best value of their own objective.
"""

from __future__ import annotations

import torch

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.state import ChainState

#: The ordered starts: every unit almost on, every unit almost off.
ORDERED = (0.99, 0.01)


def start_means(model: BoltzmannMachine, n_starts: int, seed: int | torch.Generator | None) -> ChainState:
    """``n_starts`` rows of means per layer, float64 on the model's device: row 0 all 1/2 (the
    start of ALGORITHMS.md's reference numbers), rows 1 and 2 the ordered states (every unit at
    0.99, every unit at 0.01; as many as ``n_starts`` leaves room for), the others uniform on
    (0, 1) from ``seed`` (a CPU generator, or ``seed`` itself if it is a generator on the CPU)."""
    if isinstance(n_starts, bool) or not isinstance(n_starts, int) or n_starts < 1:
        raise BoltzkitError("the number of starts must be a positive integer", got=n_starts)
    gen = make_generator(seed, "cpu")  # drawn on the CPU: the same starts on every device
    layers = []
    for n in model.layer_sizes:
        x = torch.rand(n_starts, n, generator=gen, dtype=torch.float64)
        x[0] = 0.5
        for row, value in enumerate(ORDERED[: n_starts - 1], start=1):
            x[row] = value
        layers.append(x.to(model.device))
    return ChainState(tuple(layers))


__all__ = ["ORDERED", "start_means"]
