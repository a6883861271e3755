"""Transition operators on every member of the family: exact transition matrices, the fused
single-site sweep against its unit-by-unit definition, and sampled against exact distributions.

Exact tests (no sampling noise): for SRBMs, BMs and DBMs of at most 8 units, the full transition
matrix of one sweep of every operator has rows summing to 1, non-negative entries, and leaves the
model's distribution at inverse temperature beta invariant.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import F64, random_machine

from boltzkit.diagnostics import stationary_check, stationary_distribution, transition_matrix
from boltzkit.errors import BoltzkitError
from boltzkit.samplers import Cycle, Repeat, make_operator, run_chains
from boltzkit.samplers.sequential import sequential_update, sequential_update_reference

OPERATORS = ["gibbs", "flip", "blend:0.5", "blend:0.3,0.7", "flip+gibbs", "gibbs*2"]
MODELS = [
    ("srbm", (4, 3)),
    ("srbm", (5, 3)),
    ("bm", (4, 3)),
    ("bm", (5, 3)),
    ("dbm", (3, 2, 3)),
    ("dbm", (2, 2, 2, 2)),
]


@pytest.mark.parametrize(("kind", "sizes"), MODELS, ids=lambda x: str(x))
@pytest.mark.parametrize("operator", OPERATORS)
@pytest.mark.parametrize("beta", [1.0, 0.37])
def test_every_operator_leaves_every_kind_invariant(kind, sizes, operator, beta):
    assert sum(sizes) <= 8
    model = random_machine(kind, sizes, seed=sum(sizes), scale=1.5)
    check = stationary_check(model, operator, beta=beta)
    assert check.ok, check


@pytest.mark.parametrize(("kind", "sizes"), [("srbm", (4, 3)), ("bm", (4, 3))])
def test_a_sweep_of_a_layer_with_laterals_is_the_product_of_single_unit_kernels(kind, sizes):
    """The matrix of a sequential block is the product over its units, so clamping the other
    layer leaves the conditional of the swept layer invariant (not just the joint)."""
    model = random_machine(kind, sizes, seed=3, scale=1.5)
    P = transition_matrix(model, "flip", clamped=(1,))
    pi = stationary_distribution(model)
    n_v = sizes[0]
    # conditional of v given each hidden state: pi restricted to a fixed h, renormalised
    idx = torch.arange(pi.numel())
    for h in range(1 << sizes[1]):
        mask = (idx >> n_v) == h
        cond = torch.where(mask, pi, torch.zeros_like(pi))
        cond = cond / cond.sum()
        torch.testing.assert_close(cond @ P, cond, rtol=0, atol=1e-12)


def test_composed_operators_multiply_their_matrices():
    model = random_machine("bm", (3, 3), seed=5)
    flip, gibbs = transition_matrix(model, "flip"), transition_matrix(model, "gibbs")
    torch.testing.assert_close(transition_matrix(model, "flip+gibbs"), flip @ gibbs)
    torch.testing.assert_close(transition_matrix(model, "gibbs*3"), gibbs @ gibbs @ gibbs)
    assert isinstance(make_operator("flip+gibbs"), Cycle) and make_operator("flip+gibbs").name == "flip+gibbs"
    assert isinstance(make_operator("gibbs*5"), Repeat) and make_operator("gibbs*5").n == 5
    for bad in ("gibbs*0", "gibbs*x", "flip+", "metropolis", "(gibbs", "(gibbs)*0", "()*2", "(gibbs)x"):
        with pytest.raises(BoltzkitError, match="sampler"):
            make_operator(bad)


def test_every_composed_name_parses_back_to_its_operator():
    """A repeat of a cycle is named in parentheses ("gibbs+flip*3" would be gibbs, then flip three
    times), a repeat of parallel tempering too; a repeat inside a cycle is a cycle's part."""
    model = random_machine("bm", (3, 3), seed=5)
    flip, gibbs = transition_matrix(model, "flip"), transition_matrix(model, "gibbs")
    cycled = Repeat(Cycle("gibbs", "flip"), 3)
    assert cycled.name == "(gibbs+flip)*3"
    torch.testing.assert_close(transition_matrix(model, cycled.name), (gibbs @ flip).matrix_power(3))
    torch.testing.assert_close(transition_matrix(model, "gibbs*2+flip"), gibbs @ gibbs @ flip)
    for op in (
        cycled,
        Repeat("pt:3", 2),
        Cycle(Repeat("gibbs", 2), "flip"),
        make_operator("pt:10:flip+gibbs@5"),
    ):
        again = make_operator(op.name)
        assert again.name == op.name and type(again) is type(op)
    assert make_operator("(pt:3)*2").keeps_replicas and not make_operator("gibbs*2").keeps_replicas
    assert make_operator("(gibbs + flip) * 2").name == "(gibbs+flip)*2"  # spaces as in "gibbs * 2"
    # tempering inside a cycle gets the cycle's own hint, not "unknown sampler"
    for spec in ("flip+pt:3", "(pt:3)*2+gibbs", "pt:3+gibbs", "pt:3:flip@2+gibbs"):
        with pytest.raises(BoltzkitError, match="cannot be part of a cycle") as info:
            make_operator(spec)
        assert "pt:T:A+B" in str(info.value)


def test_grouping_parentheses_and_the_errors_of_a_tempering_spec():
    """Parentheses without a count only group; tempering inside tempering is refused as nesting
    however it is wrapped; a bad sweep count after a cycle inside tempering is said as such."""
    model = random_machine("bm", (3, 3), seed=5)
    gibbs = transition_matrix(model, "gibbs")
    torch.testing.assert_close(transition_matrix(model, "(gibbs)"), gibbs)
    assert make_operator("((pt:3))*2").name == "(pt:3)*2"
    for spec in ("pt:3:pt:2", "pt:3:(pt:2)*2", "pt:3:(pt:2)"):
        with pytest.raises(BoltzkitError, match="cannot be nested"):
            make_operator(spec)
    with pytest.raises(BoltzkitError, match="k >= 1"):
        make_operator("pt:3:flip+gibbs@0")
    with pytest.raises(BoltzkitError, match="unknown sampler"):
        make_operator("gibbs*\u00b2")  # a superscript two is not a count


# ----------------------------------------------------------------- the fused sequential sweep
@pytest.mark.parametrize("operator", ["gibbs", "flip", "blend:0.4"])
@pytest.mark.parametrize("chunk", [1, 3, 7, 48])
def test_fused_sequential_sweep_equals_the_unit_by_unit_sweep(operator, chunk):
    model = random_machine("bm", (37, 5), seed=9, scale=0.8)
    g = torch.Generator().manual_seed(1)
    state = model.random_state(11, g)
    op = make_operator(operator)
    for beta in (1.0, 0.5, torch.rand(11, generator=g, dtype=F64)):
        for layer in (0, 1):
            fused = sequential_update(
                model, state, layer, op, beta=beta, generator=torch.Generator().manual_seed(7), chunk=chunk
            )
            ref = sequential_update_reference(
                model, state, layer, op, beta=beta, generator=torch.Generator().manual_seed(7)
            )
            assert torch.equal(fused, ref)


def test_fused_sweep_is_exact_with_strong_couplings():
    """Strong laterals make long chains of changed decisions inside a chunk: still exact."""
    model = random_machine("srbm", (61, 3), seed=10, scale=4.0)
    state = model.random_state(17, torch.Generator().manual_seed(2))
    op = make_operator("gibbs")
    fused = sequential_update(model, state, 0, op, generator=torch.Generator().manual_seed(3), chunk=61)
    ref = sequential_update_reference(model, state, 0, op, generator=torch.Generator().manual_seed(3))
    assert torch.equal(fused, ref)


# ---------------------------------------------------------------- sampled vs exact distributions
@pytest.mark.parametrize(("kind", "sizes"), [("srbm", (4, 3)), ("bm", (3, 3)), ("dbm", (2, 3, 2))])
@pytest.mark.parametrize("operator", ["gibbs", "flip"])
def test_sampled_joint_matches_the_exact_distribution(kind, sizes, operator):
    model = random_machine(kind, sizes, seed=12, scale=1.0)
    pi = stationary_distribution(model)
    n_chains = 40_000
    g = torch.Generator().manual_seed(13)
    state = run_chains(model, operator, model.random_state(n_chains, g), 40, generator=g)
    x = state.concat()
    index = (x.long() * (2 ** torch.arange(x.shape[1]))).sum(1)
    freq = torch.bincount(index, minlength=pi.numel()).to(F64) / n_chains
    se = torch.sqrt(pi * (1 - pi) / n_chains)
    z = (freq - pi).abs() / se
    assert bool((z < 5).all()), f"max z = {float(z.max()):.2f}"
    assert math.isclose(float(freq.sum()), 1.0)
