"""Transition operators on layers of non-binary units: Gibbs, flip-the-state (Liu's Metropolized
Gibbs for categorical units), blends and parallel tempering, checked against exact enumeration.

Every operator's full one-sweep transition matrix over (v, h) must leave the model's distribution
invariant; one step of the running operator must follow its matrix's row; parallel tempering's
replicas must sample the tempered family ``exp(-self_energy(v) - beta E_tempered(v, h))``.
Statistical tolerances are 5 standard errors of the frequencies compared (binomial).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import integrate
from test_unit_types import categorical_rbm, density, gaussian_rbm

from boltzkit.errors import BoltzkitError
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.samplers import make_operator
from boltzkit.samplers.driver import sample
from boltzkit.samplers.operators import UnitOperator, move_probability
from boltzkit.samplers.tempering import ParallelTempering
from boltzkit.state import Block, ChainState
from boltzkit.units import Bernoulli, Categorical

F64 = torch.float64
OPERATORS = ["gibbs", "flip", "blend:0.4,0.7"]


def all_states(model: UnitRBM) -> ChainState:
    """Every (v, h) of a tiny categorical RBM, visible states outermost."""
    vs = model.visible_units.states(model.n_visible, dtype=F64)
    hs = Bernoulli().states(model.n_hidden, dtype=F64)
    pairs = list(itertools.product(range(len(vs)), range(len(hs))))
    return ChainState.of(vs[[i for i, _ in pairs]], hs[[j for _, j in pairs]])


@torch.no_grad()
def exact_joint(model: UnitRBM, states: ChainState, beta: float = 1.0) -> torch.Tensor:
    """``p_beta(v, h)`` on every state: the untempered self-energy plus ``beta`` times the rest."""
    self_energy = model.visible_units.self_energy(states.visible, model.visible_params())
    return torch.softmax(-self_energy - beta * model.tempered_energy(states), 0)


def same_except(states: ChainState, layer: int) -> torch.Tensor:
    """``[a, b]``: states a and b agree on every layer but ``layer``."""
    keep = [x for i, x in enumerate(states.layers) if i != layer]
    return torch.stack([(x.unsqueeze(1) == x.unsqueeze(0)).all(-1) for x in keep]).all(0)


@torch.no_grad()
def sweep_matrix(model: UnitRBM, op: UnitOperator, states: ChainState) -> torch.Tensor:
    """The exact transition matrix of one sweep (h | v, then v | h) over ``states``."""
    n = states.n_chains
    # hidden block: binary units with the operator's per-unit move probabilities
    logits = model.block_logits(states, Block(1))
    move = op.move_prob(logits, states.hidden, 1)  # (n, n_hidden)
    differs = states.hidden.unsqueeze(1) != states.hidden.unsqueeze(0)  # (a, b, n_hidden)
    k_hidden = torch.where(differs, move.unsqueeze(1), 1 - move.unsqueeze(1)).prod(-1)
    k_hidden = k_hidden * same_except(states, 1)
    # visible block: the unit type's kernel with the operator's flip weight
    field, params = model.block_field(states, Block(0))
    probs = model.visible_units.kernel(field, params, states.visible, op.flip_weight(0))  # (n, nv, Q)
    targets = states.visible.long()  # (n, nv)
    per_unit = (
        probs.unsqueeze(1)
        .expand(n, n, *probs.shape[1:])
        .gather(-1, targets.unsqueeze(0).expand(n, n, -1).unsqueeze(-1))[..., 0]
    )  # (a, b, nv): probability that a's units move to b's values
    k_visible = per_unit.prod(-1) * same_except(states, 0)
    return k_hidden @ k_visible


@pytest.mark.parametrize("spec", OPERATORS)
@pytest.mark.parametrize("q", [2, 3])
def test_every_operator_leaves_a_categorical_rbm_invariant(spec: str, q: int) -> None:
    model = categorical_rbm(2, q, 2, seed=11, scale=2.0)
    states = all_states(model)
    op = make_operator(spec)
    matrix = sweep_matrix(model, op, states)
    assert torch.allclose(matrix.sum(1), torch.ones(len(matrix), dtype=F64), atol=1e-12)
    pi = exact_joint(model, states)
    assert torch.allclose(pi @ matrix, pi, atol=1e-12)
    if spec != "gibbs":  # flip-the-state moves more: fewer visible units keep their state
        gibbs = sweep_matrix(model, make_operator("gibbs"), states)
        assert float((pi * matrix.diagonal()).sum()) < float((pi * gibbs.diagonal()).sum())


def test_metropolized_gibbs_with_two_states_is_the_binary_flip_the_state() -> None:
    logit = torch.tensor([[-3.0, -0.4, 0.0, 0.4, 3.0]], dtype=F64)
    field = torch.stack([torch.zeros_like(logit), logit], -1)  # p(x = 1) = sigmoid(logit)
    params = {"bias": torch.zeros(5, 2, dtype=F64)}
    for current in (torch.zeros_like(logit), torch.ones_like(logit)):
        for alpha in (1.0, 0.3):
            probs = Categorical(2).kernel(field, params, current, alpha)
            moved = probs.gather(-1, (1 - current).long().unsqueeze(-1))[..., 0]
            assert torch.allclose(moved, move_probability(logit, current, alpha), atol=1e-15)


def test_liu_metropolized_gibbs_never_stays_where_it_can_move() -> None:
    """With three states, Metropolized Gibbs moves ``x -> y`` with ``p_y / max(1 - p_x, 1 - p_y)``
    (Liu 1996): from the least probable state it always moves, from the others it may stay."""
    field = torch.tensor([[[0.0, 0.5, 1.5]]], dtype=F64)
    params = {"bias": torch.zeros(1, 3, dtype=F64)}
    p = torch.softmax(field[0, 0], -1)
    for x in range(3):
        row = Categorical(3).kernel(field, params, torch.tensor([[float(x)]], dtype=F64), 1.0)[0, 0]
        stay = float(row[x])
        assert (stay > 1e-12) == (x != 0)
        for y in range(3):
            if y != x:
                assert float(row[y]) == pytest.approx(float(p[y] / max(1 - p[x], 1 - p[y])), abs=1e-15)


@pytest.mark.parametrize("spec", ["flip", "blend:0.4,0.7"])
def test_one_step_of_the_running_operator_follows_its_matrix(spec: str) -> None:
    model = categorical_rbm(2, 3, 2, seed=12, scale=2.0)
    states = all_states(model)
    op = make_operator(spec)
    matrix = sweep_matrix(model, op, states)
    start, n = 7, 40_000
    init = ChainState(tuple(x[start : start + 1].expand(n, -1).clone() for x in states.layers))
    g = torch.Generator().manual_seed(13)
    after, _ = op.step(model, init, generator=g)
    codes = torch.stack(
        [
            ((after.visible == v).all(-1) & (after.hidden == h).all(-1))
            for v, h in zip(*states.layers, strict=True)
        ]
    )
    freq = codes.to(F64).mean(1)
    expected = matrix[start]
    se = torch.sqrt(expected * (1 - expected) / n)
    assert bool(((freq - expected).abs() <= 5 * se + 1e-12).all())


def test_tempering_replicas_sample_the_tempered_family() -> None:
    model = categorical_rbm(2, 3, 2, seed=14, scale=2.0)
    states = all_states(model)
    op = ParallelTempering(3, "gibbs", kind="uniform")  # betas 0, 0.5, 1
    n = 4_000
    g = torch.Generator().manual_seed(15)
    state = op.extend(model.random_state(n, g))
    for _ in range(30):
        state, _ = op.step(model, state, generator=g)
    for replica, beta in enumerate(op.betas.tolist()):
        v = state.visible[replica * n : (replica + 1) * n]
        pi = exact_joint(model, states, beta)
        for unit in range(2):
            for cat in range(3):
                p = float(pi[states.visible[:, unit] == cat].sum())
                freq = float((v[:, unit] == cat).to(F64).mean())
                assert abs(freq - p) <= 5 * math.sqrt(p * (1 - p) / n), (beta, unit, cat)


def test_gaussian_units_take_gibbs_and_tempering_but_refuse_flip() -> None:
    model = gaussian_rbm(1, 3, seed=16)
    g = torch.Generator().manual_seed(17)
    log_z = math.log(integrate.quad(lambda x: density(model, x), -40, 40, limit=400)[0])
    moments = [
        integrate.quad(lambda x, k=k: x**k * density(model, x) / math.exp(log_z), -40, 40, limit=400)[0]
        for k in (1, 2)
    ]
    sd = math.sqrt(moments[1] - moments[0] ** 2)
    n = 20_000
    for spec in ("gibbs", "pt:3", "blend:0,0.5"):
        v = sample(model, spec, n_chains=n, n_steps=30, generator=g).visible[:, 0]
        assert abs(float(v.mean()) - moments[0]) <= 5 * sd / math.sqrt(n), spec
    with pytest.raises(BoltzkitError, match="no rule for gaussian"):
        sample(model, "flip", n_chains=2, n_steps=1, generator=g)


def test_command_line_samples_unit_models_with_every_sampler_and_draws_them(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from test_cli import assert_clean_failure, last_json, run

    from boltzkit.io import save_model

    gaussian, potts = tmp_path / "g.safetensors", tmp_path / "p.safetensors"
    save_model(gaussian_rbm(16, 3, seed=18).float(), gaussian)
    save_model(categorical_rbm(5, 4, 3, seed=19).float(), potts)
    record = last_json(
        run("sample", gaussian, "--out", tmp_path / "g.png", "--sampler", "pt:3", "--chains", 8,
            "--steps", 5, "--json")
    )  # fmt: skip
    assert len(record["swap_rates"]) == 2 and (tmp_path / "g.png").stat().st_size > 0
    assert "no rule for gaussian" in assert_clean_failure(
        run("sample", gaussian, "--out", tmp_path / "g.npy", "--sampler", "flip")
    )
    for sampler in ("flip", "blend:0.5", "pt:3:flip"):
        out = tmp_path / "p.npy"
        assert (
            run(
                "sample", potts, "--out", out, "--sampler", sampler, "--chains", 4, "--steps", 5, "--force"
            ).exit_code
            == 0
        )
        states = np.load(out)
        assert states.dtype == np.int16 and states.shape == (4, 5) and 0 <= states.min() and states.max() <= 3
    assert run("sample", potts, "--out", tmp_path / "p.png", "--chains", 4, "--steps", 5).exit_code == 0
    assert (
        run(
            "plot", "samples", tmp_path / "p.npy", "--units", "categorical:4", "--out", tmp_path / "q.png"
        ).exit_code
        == 0
    )
    np.save(tmp_path / "real.npy", np.random.default_rng(0).normal(size=(6, 16)))
    drawn = run("plot", "samples", tmp_path / "real.npy", "--units", "gaussian", "--out", tmp_path / "r.png")
    assert drawn.exit_code == 0
    assert "category" in assert_clean_failure(
        run("plot", "samples", tmp_path / "real.npy", "--units", "categorical:4", "--out", tmp_path / "s.png")
    )


@pytest.mark.parametrize("spec", OPERATORS)
def test_the_diagnostics_matrix_of_a_categorical_rbm_is_the_operators_kernel(spec: str) -> None:
    """``boltzkit.diagnostics.transition_matrix`` enumerates categorical layers in mixed radix: its
    matrix is the sweep built here unit by unit, and it leaves the exact joint invariant."""
    from boltzkit.diagnostics.transition_matrix import stationary_check, transition_matrix, unit_radices

    model = categorical_rbm(2, 3, 2, seed=20, scale=2.0)
    states = all_states(model)
    places = torch.tensor([1, 3, 9, 18])  # radices 3, 3, 2, 2
    assert unit_radices(model) == [3, 3, 2, 2]
    order = (torch.cat(states.layers, 1).long() * places).sum(1)
    matrix = transition_matrix(model, spec)
    assert torch.allclose(
        matrix[order][:, order], sweep_matrix(model, make_operator(spec), states), atol=1e-12
    )
    assert stationary_check(model, spec).ok


def test_exact_parallel_tempering_on_a_categorical_rbm_leaves_the_tempered_product_invariant() -> None:
    from boltzkit.diagnostics.transition_matrix import (
        exact_swap_rates,
        tempered_product_distribution,
        tempering_transition_matrix,
    )

    model = categorical_rbm(2, 3, 2, seed=21, scale=2.0)
    pt = ParallelTempering(2, "flip", kind="uniform")  # betas 0 and 1
    matrix = tempering_transition_matrix(model, pt)
    product = tempered_product_distribution(model, pt.betas)
    assert torch.allclose(matrix.sum(1), torch.ones(len(matrix), dtype=F64), atol=1e-12)
    assert torch.allclose(product @ matrix, product, atol=1e-12)
    rate = float(exact_swap_rates(model, pt.betas)[0])
    assert 0.0 < rate < 1.0
    with pytest.raises(BoltzkitError, match="continuum of states"):
        tempering_transition_matrix(gaussian_rbm(1, 2, seed=22), pt)
