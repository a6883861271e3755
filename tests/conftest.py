"""Shared fixtures and model factories of the test suite.

Tiny models use prime-sized layers (3, 5, 7, 11) so that shape mix-ups fail, float64 parameters,
and explicit seeds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

import pytest
import torch

# The suite takes the sparse-state lookup wherever it applies, whatever this host's measurement
# would choose (``_numerics.sparse_products``): the same numbers on every machine and in every
# subprocess, and the lookup's path under test. The measured choice has tests of its own.
os.environ["BOLTZKIT_SPARSE_PRODUCTS"] = "on"

from boltzkit.estimators.exact import exact_log_z
from boltzkit.learning.callbacks import Callback
from boltzkit.models import RBM, BoltzmannMachine

F64 = torch.float64

#: Stochastic estimates must lie within K_SIGMA standard errors of the exact value.
K_SIGMA = 5.0

#: Coupling structures of the family, by kind (two-layer kinds; a DBM has three layers here).
STRUCTURES = {
    "rbm": [(0, 1)],
    "srbm": [(0, 1), (0, 0)],
    "bm": [(0, 1), (0, 0), (1, 1)],
    "dbm": [(0, 1), (1, 2)],
}


def random_rbm(
    n_visible: int,
    n_hidden: int,
    seed: int,
    *,
    scale: float = 1.0,
    vbias_scale: float = 0.5,
    hbias_scale: float = 0.5,
    dtype: torch.dtype = F64,
    draw_dtype: torch.dtype = F64,
) -> RBM:
    """RBM with W ~ N(0, scale^2), b ~ N(0, vbias_scale^2), c ~ N(0, hbias_scale^2), drawn in that
    order from one generator seeded with ``seed``, in ``draw_dtype``, then stored as ``dtype``.

    The numbers drawn depend on ``draw_dtype``: keep float64 unless a test's model was always drawn
    in its own dtype (pass ``draw_dtype=dtype`` there)."""
    g = torch.Generator().manual_seed(seed)
    return RBM(
        n_visible,
        n_hidden,
        weights=scale * torch.randn(n_visible, n_hidden, generator=g, dtype=draw_dtype),
        vbias=vbias_scale * torch.randn(n_visible, generator=g, dtype=draw_dtype),
        hbias=hbias_scale * torch.randn(n_hidden, generator=g, dtype=draw_dtype),
        dtype=dtype,
    )


def unit_rbm(units: str, n_visible: int, n_hidden: int, seed: int, *, scale: float = 1.0):
    """A random float64 RBM with visible units of type ``units`` (``binary``, ``gaussian`` or
    ``categorical:Q``) and binary hidden units: the factory through which tests run over every unit
    type. Binary: :func:`random_rbm`; Gaussian: sigma in [0.5, 1.5); all biases N(0, 1)."""
    from boltzkit.models.unit_rbm import UnitRBM
    from boltzkit.units import Categorical, unit_type

    kind = unit_type(units)
    if kind.name == "binary":
        return random_rbm(n_visible, n_hidden, seed, scale=scale)
    g = torch.Generator().manual_seed(seed)
    q = (kind.n_states,) if isinstance(kind, Categorical) else ()
    weights = scale * torch.randn(n_visible, *q, n_hidden, generator=g, dtype=F64)
    vbias = torch.randn(n_visible, *q, generator=g, dtype=F64)
    hbias = torch.randn(n_hidden, generator=g, dtype=F64)
    sigma = None if q else 0.5 + torch.rand(n_visible, generator=g, dtype=F64)
    return UnitRBM(
        kind, n_visible, n_hidden, weights=weights, vbias=vbias, hbias=hbias, sigma=sigma, dtype=F64
    )


def exact_visible_samples(model, n: int, seed: int) -> torch.Tensor:
    """``n`` exact samples of the visible units of a tiny RBM of any unit type."""
    from boltzkit.estimators import exact_sample
    from boltzkit.estimators.unit_rbm import exact_sample_units
    from boltzkit.models.unit_rbm import UnitRBM

    g = torch.Generator().manual_seed(seed)
    if isinstance(model, UnitRBM):
        return exact_sample_units(model, n, g).visible
    return exact_sample(model, n, generator=g).visible


def random_machine(
    kind: str,
    layer_sizes: tuple[int, ...],
    seed: int,
    *,
    scale: float = 1.0,
    bias_scale: float = 0.5,
    dtype: torch.dtype = F64,
    keys: Iterable[tuple[int, int]] | None = None,
) -> BoltzmannMachine:
    """A member of the family with the structure of ``kind`` (:data:`STRUCTURES`; a DBM of any
    depth couples adjacent layers), couplings ~ N(0, scale^2) (laterals symmetric, zero
    diagonal) and biases ~ N(0, bias_scale^2), drawn in float64.

    ``keys``, where given, are the coupling keys instead of those of ``kind``."""
    if keys is None:
        keys = [(l, l + 1) for l in range(len(layer_sizes) - 1)] if kind == "dbm" else STRUCTURES[kind]
    g = torch.Generator().manual_seed(seed)
    model = BoltzmannMachine.random(
        layer_sizes, keys, scale=scale, bias_scale=bias_scale, generator=g, dtype=F64
    )
    return model.to(dtype) if dtype != F64 else model


def bars_and_stripes() -> torch.Tensor:
    """The 32 patterns of 4x4 bars and stripes (all-off and all-on appear twice), shape (32, 16)."""
    patterns = []
    for code in range(16):
        bits = torch.tensor([(code >> i) & 1 for i in range(4)], dtype=torch.float32)
        patterns.append(bits[:, None].expand(4, 4).reshape(-1))  # horizontal bars
        patterns.append(bits[None, :].expand(4, 4).reshape(-1))  # vertical stripes
    return torch.stack(patterns)


def bit_matrix(n: int) -> torch.Tensor:
    """All ``2^n`` binary vectors of length ``n`` (bit ``j`` of row ``k`` is column ``j``), float64."""
    return ((torch.arange(1 << n)[:, None] >> torch.arange(n)) & 1).to(F64)


def exact_log_z_value(model) -> float:
    """The exact ``log Z`` of a small model, as a float."""
    return float(exact_log_z(model).log_z)


def mean_and_se(x: torch.Tensor) -> tuple[float, float]:
    """Sample mean of ``x`` and its standard error (unbiased standard deviation / sqrt(n))."""
    return float(x.mean()), float(x.std(unbiased=True)) / math.sqrt(x.numel())


def bits_to_index(x: torch.Tensor) -> torch.Tensor:
    """Index of each binary row of ``x``: bit ``j`` of the index is column ``j``."""
    x = x.to(torch.int64)
    return (x << torch.arange(x.shape[1], dtype=torch.int64)).sum(1)


def assert_frequencies_match(index: torch.Tensor, p: torch.Tensor, n_se: float = 5.0) -> None:
    """Empirical frequencies of ``index`` vs the exact ``p``, within ``n_se`` binomial SEs."""
    n = index.numel()
    freq = torch.bincount(index, minlength=p.numel()).to(F64) / n
    se = torch.sqrt(p * (1 - p) / n)
    # states of probability 0 must never be visited; others within n_se standard errors
    bad = (freq - p).abs() > n_se * se
    assert not bool(bad.any()), (
        f"states {bad.nonzero().flatten().tolist()}: freq {freq[bad].tolist()} vs p {p[bad].tolist()}"
    )


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Test tensors are tiny: intra-op threads only add contention on a busy machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class Killed(RuntimeError):
    """Raised by :class:`KillAfter`: a training run killed in the middle."""


class KillAfter(Callback):
    """Kill a training run at the end of epoch ``epoch``, after the checkpointer has run."""

    order = 1000  # after the checkpointer

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_end(self, trainer, record):
        if record["epoch"] == self.epoch:
            raise Killed
