"""TRW on sharp couplings: kink ties, the dual certificate, and TAP's safeguarded iteration.

Large ``|W / rho|`` make the TRW objective over node marginals almost non-differentiable at its
kinks (boltzkit.variational.ties); the plain first-order certificate then stays nats above the
optimum, and the dual certificate (boltzkit.variational.certificate) must close that gap without
ever dropping below the TRW optimum (S2 Sec. 2.5: the TRW value bounds log Z from above).
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import F64, exact_log_z_value, random_machine, random_rbm

from boltzkit.models import RBM, BoltzmannMachine
from boltzkit.state import ChainState
from boltzkit.variational import BlockGraph, tap_log_z, uniform_rho
from boltzkit.variational.certificate import certify
from boltzkit.variational.node_objective import evaluate
from boltzkit.variational.tap import _minimise_layer, tap_free_energy
from boltzkit.variational.ties import Groups, groups_from_ties
from boltzkit.variational.trw import solve


# ------------------------------------------------------------------------------ the certificate
@pytest.mark.parametrize(("kind", "sizes", "seed"), [("bm", (4, 3), 0), ("dbm", (3, 3, 2), 0)])
def test_dual_certificate_never_drops_below_the_best_objective_value(kind, sizes, seed):
    """An upper bound on the TRW optimum at *any* mu: never below F at the solved optimum (a lower
    bound on that optimum) nor below exact log Z, and never above the plain first-order bound."""
    model = random_machine(kind, sizes, seed, scale=60.0)
    graph = BlockGraph.from_model(model)
    rho = uniform_rho(graph)
    solution = solve(graph, rho)
    best_value, start = solution.value, solution.logits
    exact = exact_log_z_value(model)
    g = torch.Generator().manual_seed(seed)
    shifted = 0
    for eps in (1e-9, 1e-6, 1e-3, 1e-1, 3.0):
        for _ in range(4):
            z = tuple(x + eps * torch.randn(x.shape, generator=g, dtype=F64) for x in start)
            ev = evaluate(graph, rho, z)
            cert = certify(graph, rho, z, ev)
            assert cert.bound >= best_value - 1e-9
            assert cert.bound >= exact - 1e-9
            assert cert.bound <= ev.bound + 1e-9
            assert cert.gap == pytest.approx(cert.balance + cert.allowance, rel=1e-12, abs=1e-12)
            shifted += cert.shifted > 0
    assert shifted >= 10  # the shifts were exercised, not only the plain bound


def test_dual_certificate_is_tight_where_the_plain_gap_is_not():
    model = random_machine("bm", (4, 3), 0, scale=60.0)
    graph = BlockGraph.from_model(model)
    rho = uniform_rho(graph)
    sol = solve(graph, rho)
    plain = evaluate(graph, rho, sol.logits)
    assert plain.gap > 10.0  # the optimum sits on kinks: one-sided gradients
    assert sol.converged and sol.ties > 0 and sol.certificate is not None
    assert sol.gap <= sol.tolerance
    assert sol.bound >= exact_log_z_value(model) - 1e-9


def test_trw_on_a_tree_with_sharp_couplings_is_exact():
    """On a tree with rho = 1 the TRW bound is log Z itself (S2 Sec. 2.5), whatever the couplings."""
    g = torch.Generator().manual_seed(0)
    weights = torch.tensor([[150.0], [-200.0], [120.0], [-90.0], [300.0]], dtype=F64)
    model = RBM(
        5,
        1,
        weights=weights,
        vbias=3.0 * torch.randn(5, generator=g, dtype=F64),
        hbias=torch.tensor([-0.5], dtype=F64),
        dtype=F64,
    )
    graph = BlockGraph.from_model(model)
    rho = uniform_rho(graph)
    assert rho == (1.0,)
    sol = solve(graph, rho)
    assert sol.converged
    assert sol.bound == pytest.approx(exact_log_z_value(model), abs=1e-8)


# ----------------------------------------------------------------------------------- the ties
def _triangle(sign: float) -> BlockGraph:
    """Three visible units with laterals ``sign * 100`` on every pair and one hidden unit."""
    lateral = sign * 100.0 * (torch.ones(3, 3, dtype=F64) - torch.eye(3, dtype=F64))
    model = BoltzmannMachine(
        (3, 1),
        {(0, 1): torch.tensor([[1.0], [2.0], [-1.0]], dtype=F64), (0, 0): lateral},
        dtype=F64,
    )
    return BlockGraph.from_model(model)


def _lateral_ties(graph: BlockGraph) -> list[torch.Tensor]:
    return [
        (torch.ones_like(b.weights, dtype=torch.bool) & ~torch.eye(3, dtype=torch.bool))
        if b.lateral
        else torch.zeros_like(b.weights, dtype=torch.bool)
        for b in graph.blocks
    ]


def test_ties_of_equal_units_form_one_group_and_reduce_like_the_explicit_projection():
    graph = _triangle(+1.0)
    groups = groups_from_ties(graph, _lateral_ties(graph))
    assert groups.n_groups == 2 and not bool(groups.fixed.any())
    assert len(set(groups.label[:3].tolist())) == 1 and groups.label[3] != groups.label[0]
    # P[i, label_i] = sign_i: reduce is P^T g and P^T H P, expand is P d
    p = torch.zeros(graph.n_nodes, groups.n_groups, dtype=F64)
    p[torch.arange(graph.n_nodes), groups.label] = groups.sign
    g = torch.Generator().manual_seed(0)
    grad = torch.randn(graph.n_nodes, generator=g, dtype=F64)
    a = torch.randn(graph.n_nodes, graph.n_nodes, generator=g, dtype=F64)
    hess = a + a.T
    g_red, h_red = groups.reduce(grad, hess)
    torch.testing.assert_close(g_red, p.T @ grad)
    torch.testing.assert_close(h_red, p.T @ hess @ p)
    step = torch.randn(groups.n_groups, generator=g, dtype=F64)
    torch.testing.assert_close(groups.expand(step), p @ step)
    z = groups.project(torch.tensor([0.2, 0.3, 0.7, 0.9], dtype=F64))
    assert z[0] == z[1] == z[2] and float(torch.sigmoid(z[0])) == pytest.approx(0.4, abs=1e-15)
    assert float(torch.sigmoid(z[3])) == pytest.approx(0.9, abs=1e-15)


def test_an_odd_cycle_of_complementary_ties_is_frustrated_and_fixed_at_one_half():
    graph = _triangle(-1.0)  # mu_i = 1 - mu_j on every pair of a triangle: only mu = 1/2 fits
    groups = groups_from_ties(graph, _lateral_ties(graph))
    assert groups.fixed[:3].all() and not bool(groups.fixed[3]) and groups.n_groups == 1
    z = groups.project(torch.tensor([0.2, 0.3, 0.7, 0.9], dtype=F64))
    torch.testing.assert_close(z[:3], torch.zeros(3, dtype=F64))


def test_singletons_leave_gradient_and_hessian_unchanged():
    graph = _triangle(+1.0)
    groups = Groups.singletons(graph)
    g = torch.Generator().manual_seed(1)
    grad = torch.randn(graph.n_nodes, generator=g, dtype=F64)
    hess = torch.randn(graph.n_nodes, graph.n_nodes, generator=g, dtype=F64)
    g_red, h_red = groups.reduce(grad, hess)
    torch.testing.assert_close(g_red, grad)
    torch.testing.assert_close(h_red, hess)


# ------------------------------------------------------------------------------------ TAP
def test_layer_minimiser_solves_its_stationarity_equation_also_for_huge_fields():
    g = torch.Generator().manual_seed(0)
    field = torch.cat([60.0 * torch.randn(2000, generator=g, dtype=F64), torch.tensor([0.0, 700.0, -700.0])])
    onsager = torch.cat([300.0 * torch.rand(2000, generator=g, dtype=F64), torch.tensor([0.0, 1e3, 1e3])])
    m = _minimise_layer(field, onsager)
    inner = (m > 1e-6) & (m < 1.0 - 1e-6)  # logit(m) is accurate to ~1e-10 there
    u = torch.logit(m[inner])
    residual = u - field[inner] + (m[inner] - 0.5) * onsager[inner]
    assert int(inner.sum()) > 500
    assert float(residual.abs().max()) <= 1e-9
    # saturated units sit on the side of their root: u in [h - c/2, h + c/2] has the sign of h there
    sat = ~inner & (field.abs() > 0.5 * onsager)
    assert bool(((m[sat] > 0.5) == (field[sat] > 0)).all())


def test_tap_converges_where_the_damped_iteration_cycles_and_lands_on_a_stationary_point():
    model = random_rbm(40, 20, seed=0, scale=3.0)
    res = tap_log_z(model)
    assert res.converged and res.settings["safeguarded_starts"] > 0
    # stationary: -Gamma does not change to first order along random directions of the logits
    logits = [torch.logit(x) for x in res.marginals]
    g = torch.Generator().manual_seed(0)
    eps = 1e-5
    for _ in range(5):
        d = [torch.randn(x.shape, generator=g, dtype=F64) for x in logits]

        def value(t: float, d=d) -> float:
            layers = tuple(torch.sigmoid(z + t * dz)[None, :] for z, dz in zip(logits, d, strict=True))
            return float(tap_free_energy(model, ChainState(layers))[0])

        slope = (value(eps) - value(-eps)) / (2 * eps)
        assert abs(slope) <= 1e-4  # a non-stationary point: O(1); rounding: ~1e-13 * 300 / eps
    assert math.isfinite(res.log_z) and res.log_z == pytest.approx(value(0.0), abs=1e-9)


def test_the_uniform_rho_of_a_large_dense_sparse_bm_satisfies_fosters_theorem() -> None:
    """Foster's theorem (the effective resistances of the edges sum to N - components) on a BM of
    MNIST's size whose laterals are partly zero (a sparse graph of 1,284 units): a plain
    pseudo-inverse lost 0.03 of the 1,283 here and the TRW stage refused the rho."""
    from boltzkit.models import BoltzmannMachine
    from boltzkit.variational.spanning import _upper_edges

    g = torch.Generator().manual_seed(0)
    lat = torch.randn(784, 784, generator=g, dtype=torch.float64) * 0.01
    lat = (lat + lat.t()) / 2
    lat[:100] = 0.0
    lat[:, :100] = 0.0  # 100 units without laterals, as MNIST's blank border pixels
    lat.fill_diagonal_(0.0)
    model = BoltzmannMachine.bm(
        784, 500, W=torch.randn(784, 500, generator=g, dtype=torch.float64) * 0.01, L=lat,
        J=_symmetric(500, g), dtype=torch.float64,
    )  # fmt: skip
    graph = BlockGraph.from_model(model)
    assert graph.sparse
    total = sum(
        float(r[_upper_edges(b)].sum()) for r, b in zip(uniform_rho(graph), graph.blocks, strict=True)
    )
    assert total == pytest.approx(graph.n_nodes - graph.n_components, abs=1e-8 * graph.n_nodes)


def _symmetric(n: int, g: torch.Generator) -> torch.Tensor:
    x = torch.randn(n, n, generator=g, dtype=torch.float64) * 0.01
    x = (x + x.t()) / 2
    return x.fill_diagonal_(0.0)
