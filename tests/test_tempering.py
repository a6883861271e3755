"""Parallel tempering (t-PT_k, Brügge, Fischer & Igel 2013, Sec. 4.2): the exact joint transition
matrix leaves the product of tempered distributions invariant, the implementation moves as that
matrix says, and sampled marginals match exact ones."""

from __future__ import annotations

import pytest
import torch
from conftest import F64, random_machine, random_rbm

from boltzkit.diagnostics import stationary_distribution
from boltzkit.diagnostics.transition_matrix import tempered_product_distribution, tempering_transition_matrix
from boltzkit.errors import BoltzkitError
from boltzkit.samplers import make_operator, run_chains, sample
from boltzkit.samplers.tempering import ParallelTempering, SwapMonitor, ladder
from boltzkit.state import ChainState

MODELS = [
    ("rbm", lambda: random_rbm(2, 1, 3, scale=2.0)),
    ("srbm", lambda: random_machine("srbm", (2, 1), 4, scale=2.0)),
    ("bm", lambda: random_machine("bm", (2, 2), 5, scale=1.5)),
]


def _index(x: torch.Tensor) -> torch.Tensor:
    return (x.long() * (2 ** torch.arange(x.shape[1]))).sum(1)


@pytest.mark.parametrize(("kind", "make"), MODELS)
@pytest.mark.parametrize("operator", ["gibbs", "flip", "blend:0.5"])
@pytest.mark.parametrize(("t", "k"), [(2, 1), (3, 2)])
def test_the_joint_transition_matrix_leaves_the_tempered_product_invariant(kind, make, operator, t, k):
    if kind == "bm" and t == 3:
        t = 2  # 4 units: three replicas would be 4096 joint states; two are 256
    model = make()
    pt = ParallelTempering(t, operator, k=k)
    P = tempering_transition_matrix(model, pt)
    pi = tempered_product_distribution(model, pt.betas)
    torch.testing.assert_close(P.sum(1), torch.ones_like(pi), rtol=0, atol=1e-12)
    assert float(P.min()) >= 0
    torch.testing.assert_close(pi @ P, pi, rtol=0, atol=1e-12)


@pytest.mark.parametrize("operator", ["gibbs", "flip"])
def test_one_step_moves_as_the_exact_matrix_says(operator):
    """From one fixed joint state of 3 replicas, the frequencies of the next joint state over many
    chains match the matrix row within 5 standard errors (swap logic and inner sweeps)."""
    model = random_rbm(2, 1, 7, scale=2.0)
    pt = ParallelTempering(3, operator)
    P = tempering_transition_matrix(model, pt)
    n_units, t, n = model.n_units, 3, 60_000
    start = [5, 2, 7]  # joint state of the replicas, replica 0 (hottest) first
    x = torch.tensor([[(s >> j) & 1 for j in range(n_units)] for s in start], dtype=F64)
    state = model.split_units(x.repeat_interleave(n, 0))  # replica r in rows r n .. (r + 1) n - 1
    new, _ = pt.step(model, state, generator=torch.Generator().manual_seed(1))
    per_replica = _index(new.concat()).reshape(t, n)
    joint = sum(per_replica[r] * (1 << n_units) ** r for r in range(t))
    freq = torch.bincount(joint, minlength=P.shape[0]).to(F64) / n
    row = P[sum(s * (1 << n_units) ** r for r, s in enumerate(start))]
    se = torch.sqrt(row * (1 - row) / n)
    assert bool(((freq - row).abs() <= 5 * se + 1e-12).all()), float(
        ((freq - row).abs() / se.clamp_min(1e-12)).max()
    )


@pytest.mark.parametrize(("kind", "make"), MODELS)
def test_sampled_marginals_match_every_tempered_distribution(kind, make):
    model = make()
    pt = ParallelTempering(4, "flip", k=1)
    n = 20_000
    g = torch.Generator().manual_seed(2)
    state = run_chains(model, pt, pt.extend(model.random_state(n, g)), 40, generator=g)
    x = _index(state.concat()).reshape(pt.n_temperatures, n)
    for r, beta in enumerate(pt.betas):
        pi = stationary_distribution(model, beta=float(beta))
        freq = torch.bincount(x[r], minlength=pi.numel()).to(F64) / n
        z = (freq - pi).abs() / torch.sqrt(pi * (1 - pi) / n)
        assert bool((z < 5).all()), (r, float(z.max()))
    target = pt.project(state)
    assert target.n_chains == n and torch.equal(target.concat(), state.concat()[-n:])


def test_swap_monitor_counts_acceptances_and_round_trips():
    model = random_rbm(5, 3, 8, scale=1.0)
    pt = make_operator("pt:6")
    assert isinstance(pt, ParallelTempering) and pt.name == "pt:6"
    monitor = SwapMonitor(6, 50)
    g = torch.Generator().manual_seed(3)
    run_chains(model, pt, pt.extend(model.random_state(50, g)), 300, generator=g, observers=[monitor])
    rates = monitor.swap_rates
    assert rates.shape == (5,) and bool(((rates > 0) & (rates <= 1)).all())
    assert monitor.round_trips > 0


def test_specs_ladders_and_errors():
    pt = make_operator("pt:10:flip@5")
    assert pt.n_temperatures == 10 and pt.k == 5 and pt.operator.name == "flip" and pt.name == "pt:10:flip@5"
    torch.testing.assert_close(pt.betas, torch.linspace(0, 1, 10, dtype=F64))
    geo = ladder(5, "geometric")
    assert float(geo[-1]) == 1.0 and bool((geo[1:] > geo[:-1]).all())
    with pytest.raises(BoltzkitError, match="at least two temperatures"):
        ParallelTempering(1)
    with pytest.raises(BoltzkitError, match="temperature ladder"):
        ParallelTempering(betas=[0.0, 0.5, 0.9])
    with pytest.raises(BoltzkitError, match="parallel-tempering sampler"):
        make_operator("pt:x")
    with pytest.raises(BoltzkitError, match="cycle"):
        make_operator("gibbs+pt:3")
    model = random_rbm(3, 2, 1)
    with pytest.raises(BoltzkitError, match="every replica"):
        pt.step(model, model.random_state(7, torch.Generator()), generator=torch.Generator())


def test_sample_returns_the_chains_at_beta_one():
    model = random_rbm(5, 3, 9)
    out = sample(model, "pt:4", n_chains=13, n_steps=5, generator=torch.Generator().manual_seed(0))
    assert isinstance(out, ChainState) and out.n_chains == 13 and out.visible.shape == (13, 5)
