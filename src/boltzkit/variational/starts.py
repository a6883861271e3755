"""Start points of the fixed-point iterations over means (mean-field, TAP): 1/2, the layer-wise
ordered states (each layer with every unit on or every unit off) and random ones.

A model in its ordered phase (a ferromagnet below its critical temperature, a sharply trained
Boltzmann machine) has several fixed points; the symmetric start 1/2 (and random starts around it)
can converge to the disordered one, far below the truth (16 nats on a 10 x 10 lattice at K = 0.6
for TAP). The ordered starts reach the ordered fixed points, and the methods keep the start with
the best value of their own objective.

A layered model orders layer by layer: where the couplings between two layers change sign from
one pair of layers to the next, its modes have some layers on and others off (a 3-3-3 DBM with
``W_0 = +30``, ``W_1 = -30`` has its mode at "visible and first hidden layer on, second off", 28
nats above the mode that the starts "all on", "all off" and 1/2 reach). So the ordered starts are
every one of the ``2^L`` corners of an ``L``-layer model (up to :data:`MAX_CORNER_LAYERS` layers;
beyond, the two uniform ones), "all on" and "all off" first.
"""

from __future__ import annotations

import itertools

import torch

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.state import ChainState

#: The ordered value of a unit: almost on, almost off.
ORDERED = (0.99, 0.01)
#: Models of up to this many layers start at every layer-wise corner (16 for a 4-layer DBM).
MAX_CORNER_LAYERS = 4
#: Random starts of the default set, beside 1/2 and the corners.
N_RANDOM = 2


def ordered_corners(n_layers: int) -> list[tuple[float, ...]]:
    """The ordered starts of an ``n_layers``-layer model, one value per layer: every unit of the
    layer at 0.99 (on) or 0.01 (off). "All on" and "all off" first, then the mixed corners (with
    more layers on first); only those two where ``n_layers`` exceeds :data:`MAX_CORNER_LAYERS`."""
    on, off = ORDERED
    uniform = [(on,) * n_layers, (off,) * n_layers]
    if n_layers > MAX_CORNER_LAYERS:
        return uniform
    mixed = sorted(
        (c for c in itertools.product((on, off), repeat=n_layers) if c not in uniform),
        key=lambda c: -sum(x == on for x in c),
    )
    return uniform + mixed


def default_n_starts(model: BoltzmannMachine) -> int:
    """The default number of starts of ``model``: 1/2, every ordered corner and
    :data:`N_RANDOM` random ones (5 for a single layer, 7 for an RBM, 11 for a 3-layer DBM)."""
    return 1 + len(ordered_corners(model.n_layers)) + N_RANDOM


def start_means(
    model: BoltzmannMachine, n_starts: int | None, seed: int | torch.Generator | None
) -> ChainState:
    """``n_starts`` rows of means per layer, float64 on the model's device: row 0 all 1/2 (the
    start of ALGORITHMS.md's reference numbers), then the ordered corners
    (:func:`ordered_corners`; as many as ``n_starts`` leaves room for), the others uniform on
    (0, 1) from ``seed`` (a CPU generator, or ``seed`` itself if it is a generator on the CPU).
    ``None``: :func:`default_n_starts`."""
    if n_starts is None:
        n_starts = default_n_starts(model)
    if isinstance(n_starts, bool) or not isinstance(n_starts, int) or n_starts < 1:
        raise BoltzkitError("the number of starts must be a positive integer", got=n_starts)
    gen = make_generator(seed, "cpu")  # drawn on the CPU: the same starts on every device
    corners = ordered_corners(model.n_layers)[: n_starts - 1]
    layers = []
    for l, n in enumerate(model.layer_sizes):
        x = torch.rand(n_starts, n, generator=gen, dtype=torch.float64)
        x[0] = 0.5
        for row, corner in enumerate(corners, start=1):
            x[row] = corner[l]
        layers.append(x.to(model.device))
    return ChainState(tuple(layers))


__all__ = ["MAX_CORNER_LAYERS", "N_RANDOM", "ORDERED", "default_n_starts", "ordered_corners", "start_means"]
