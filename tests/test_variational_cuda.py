"""Variational log Z on a GPU: the same numbers as on the CPU, for every method and kind.

Marked ``cuda`` and skipped where no CUDA device is available (run with ``-m cuda`` on a GPU).
"""

from __future__ import annotations

import pytest
import torch
from conftest import random_machine, random_rbm

from boltzkit.variational import BlockGraph, frank_wolfe, propagate, uniform_rho, variational_log_z

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
CUDA = torch.device("cuda")


def _model(kind, sizes, seed=1, scale=1.0):
    return (
        random_rbm(*sizes, seed=seed, scale=scale)
        if kind == "rbm"
        else random_machine(kind, sizes, seed, scale=scale)
    )


@pytest.mark.parametrize(
    ("kind", "sizes"), [("rbm", (11, 7)), ("srbm", (9, 5)), ("bm", (7, 4)), ("dbm", (6, 4, 5))]
)
@pytest.mark.parametrize("method", ["mean-field", "bethe", "trw", "tap"])
def test_variational_on_cuda_equals_the_cpu(kind, sizes, method):
    model = _model(kind, sizes)
    kw = {"rho": "uniform"} if method == "trw" else {}
    cpu = variational_log_z(model, method, **kw)
    gpu = variational_log_z(model.detached_copy(device=CUDA), method, **kw)
    assert gpu.settings["device"].startswith("cuda")
    assert gpu.bound == cpu.bound and gpu.converged == cpu.converged
    assert gpu.log_z == pytest.approx(cpu.log_z, abs=1e-7)


def test_trw_frank_wolfe_on_cuda_equals_the_cpu():
    model = _model("srbm", (6, 4), seed=3, scale=1.5)
    cpu = frank_wolfe(BlockGraph.from_model(model), steps=3)
    gpu = frank_wolfe(BlockGraph.from_model(model.detached_copy(device=CUDA)), steps=3)
    assert gpu.history == pytest.approx(cpu.history, abs=1e-6)


def test_bp_on_a_784x500_rbm_on_cuda_equals_the_cpu():
    g = torch.Generator().manual_seed(0)
    w = 0.02 * torch.randn(784, 500, generator=g, dtype=torch.float64)
    model = random_rbm(784, 500, seed=0)
    with torch.no_grad():
        model.W.copy_(w)
    graph_cpu = BlockGraph.from_model(model)
    graph_gpu = BlockGraph.from_model(model.detached_copy(device=CUDA))
    for rho in (None, uniform_rho(graph_cpu)):
        cpu = propagate(graph_cpu, rho, max_iter=30)
        gpu = propagate(graph_gpu, rho, max_iter=30)
        assert gpu.log_z == pytest.approx(cpu.log_z, rel=1e-10)
        assert gpu.iterations == cpu.iterations
