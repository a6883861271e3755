"""Shared fixtures and model factories of the test suite.

Tiny models use prime-sized layers (3, 5, 7, 11) so that shape mix-ups fail, float64 parameters,
and explicit seeds.
"""

from __future__ import annotations

import pytest
import torch

from boltzkit.models import RBM, BoltzmannMachine

F64 = torch.float64

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
) -> RBM:
    """RBM with W ~ N(0, scale^2), b ~ N(0, vbias_scale^2), c ~ N(0, hbias_scale^2), drawn in float64."""
    g = torch.Generator().manual_seed(seed)
    return RBM(
        n_visible,
        n_hidden,
        weights=scale * torch.randn(n_visible, n_hidden, generator=g, dtype=F64),
        vbias=vbias_scale * torch.randn(n_visible, generator=g, dtype=F64),
        hbias=hbias_scale * torch.randn(n_hidden, generator=g, dtype=F64),
        dtype=dtype,
    )


def random_machine(
    kind: str,
    layer_sizes: tuple[int, ...],
    seed: int,
    *,
    scale: float = 1.0,
    bias_scale: float = 0.5,
    dtype: torch.dtype = F64,
) -> BoltzmannMachine:
    """A member of the family with the structure of ``kind`` (:data:`STRUCTURES`; a DBM of any
    depth couples adjacent layers), couplings ~ N(0, scale^2) (laterals symmetric, zero
    diagonal) and biases ~ N(0, bias_scale^2)."""
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


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Test tensors are tiny: intra-op threads only add contention on a busy machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
