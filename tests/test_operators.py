"""Transition operators: exact transition matrices, SLEM references, sampled vs exact.

Exact identities use float64 models of at most 8 units, whose full transition matrices
(2^N x 2^N) are built by :mod:`boltzkit.diagnostics`. Statistical tests use fixed seeds and
per-state tolerances of 5 binomial standard errors ``sqrt(p (1 - p) / n)``.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import F64, assert_frequencies_match, bits_to_index, random_rbm

from boltzkit import RBM, BoltzkitError, ChainState
from boltzkit.diagnostics import (
    all_states,
    block_kernels,
    eigenvalue_moduli,
    format_slem_table,
    slem,
    slem_study,
    stationary_check,
    stationary_distribution,
    transition_matrix,
)
from boltzkit.errors import IntractableError
from boltzkit.estimators import exact_joint_distribution
from boltzkit.samplers import (
    Blend,
    FlipTheState,
    Gibbs,
    StepInfo,
    TransitionOperator,
    make_operator,
    move_probability,
    run_chains,
)

OPERATORS = [Gibbs(), FlipTheState(), Blend(0.5), Blend(0.2, 0.8)]
OP_IDS = [op.name for op in OPERATORS]
SHAPES = [(3, 2), (5, 3), (3, 5)]
BETAS = [1.0, 0.37]


def pi_at(model: RBM, beta: float) -> torch.Tensor:
    """Exact joint distribution at ``beta`` from ``exact_joint_distribution`` (beta = 1)."""
    _, log_p = exact_joint_distribution(model)
    return torch.softmax(beta * log_p, 0)


# ------------------------------------------------------------------------------ invariance
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("op", OPERATORS, ids=OP_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_transition_matrix_is_kernel_and_leaves_joint_invariant(shape, op, beta):
    rbm = random_rbm(*shape, seed=7 * shape[0] + shape[1])
    P = transition_matrix(rbm, op, beta=beta)
    n_states = 2 ** sum(shape)
    assert P.shape == (n_states, n_states) and P.dtype == F64
    assert float(P.min()) >= 0.0
    torch.testing.assert_close(P.sum(1), torch.ones(n_states, dtype=F64), rtol=0, atol=1e-12)
    pi = pi_at(rbm, beta)
    torch.testing.assert_close(pi @ P, pi, rtol=0, atol=1e-12)
    check = stationary_check(rbm, op, beta=beta)
    assert check.ok and check.invariance_error <= 1e-12 and check.row_sum_error <= 1e-12


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("op", OPERATORS, ids=OP_IDS)
def test_each_block_kernel_satisfies_detailed_balance(op, beta):
    rbm = random_rbm(3, 5, seed=3)
    pi = pi_at(rbm, beta)
    kernels = block_kernels(rbm, op, beta=beta)
    assert [b.layer for b, _ in kernels] == [1, 0]  # RBM sweep: hidden given v, then visible given h
    for _, K in kernels:
        flow = pi.unsqueeze(1) * K
        torch.testing.assert_close(flow, flow.t(), rtol=0, atol=1e-14)
    # the sweep is the product of the block kernels in sweep order
    torch.testing.assert_close(
        transition_matrix(rbm, op, beta=beta), kernels[0][1] @ kernels[1][1], rtol=0, atol=1e-15
    )


def test_stationary_distribution_uses_exact_joint_convention():
    rbm = random_rbm(5, 3, seed=1)
    states, log_p = exact_joint_distribution(rbm)
    torch.testing.assert_close(all_states(rbm), states, rtol=0, atol=0)
    torch.testing.assert_close(stationary_distribution(rbm), log_p.exp(), rtol=0, atol=1e-14)
    torch.testing.assert_close(stationary_distribution(rbm, beta=0.37), pi_at(rbm, 0.37), rtol=0, atol=1e-14)


def _fts_unit(x: int, p1: float) -> tuple[float, float]:
    """(P(stay), P(move)) of one unit in state ``x`` with ``p(x=1) = p1``, Definition 1 (Eq. 2)."""
    px = p1 if x == 1 else 1.0 - p1
    if p1 == 0.5:  # v* = -1
        return 0.5, 0.5
    star = 1 if p1 > 0.5 else 0
    p_star = max(p1, 1.0 - p1)
    if x == star:  # from the more probable state: move with p(other) / p(current)
        move = (1.0 - p_star) / px
        return 1.0 - move, move
    return 0.0, 1.0


def test_flip_the_state_matrix_matches_definition_1_written_out():
    """An independent loop implementation of Brügge et al. (2013), Eq. 2, with T = T_h T_v."""
    rbm = random_rbm(3, 2, seed=5)
    W, b, c = rbm.W.detach(), rbm.vbias.detach(), rbm.hbias.detach()
    states = all_states(rbm)
    n = states.shape[0]
    expected = torch.zeros(n, n, dtype=F64)
    for i in range(n):
        v, h = states[i, :3], states[i, 3:]
        p_h = torch.sigmoid(c + v @ W)
        for j in range(n):
            v2, h2 = states[j, :3], states[j, 3:]
            t_h = math.prod(_fts_unit(int(h[k]), float(p_h[k]))[int(h2[k] != h[k])] for k in range(2))
            p_v = torch.sigmoid(b + W @ h2)
            t_v = math.prod(_fts_unit(int(v[k]), float(p_v[k]))[int(v2[k] != v[k])] for k in range(3))
            expected[i, j] = t_h * t_v
    torch.testing.assert_close(transition_matrix(rbm, FlipTheState()), expected, rtol=0, atol=1e-14)


def test_blend_endpoints_are_gibbs_and_flip():
    rbm = random_rbm(3, 2, seed=2)
    P_g = transition_matrix(rbm, Gibbs())
    P_f = transition_matrix(rbm, FlipTheState())
    torch.testing.assert_close(transition_matrix(rbm, Blend(0.0)), P_g, rtol=0, atol=0)
    torch.testing.assert_close(transition_matrix(rbm, Blend(1.0)), P_f, rtol=0, atol=0)
    # per-layer alphas: Gibbs on the visible layer, flip-the-state on the hidden layer
    (_, K_h_flip), (_, _) = block_kernels(rbm, FlipTheState())
    (_, _), (_, K_v_gibbs) = block_kernels(rbm, Gibbs())
    torch.testing.assert_close(transition_matrix(rbm, Blend(0.0, 1.0)), K_h_flip @ K_v_gibbs, rtol=0, atol=0)


# ------------------------------------------------------------------------------------- SLEM
_W2 = torch.tensor([[1.0, -2.0], [0.5, 1.5]], dtype=F64)
_B2 = torch.tensor([0.1, -0.3], dtype=F64)
_C2 = torch.tensor([-0.5, 0.4], dtype=F64)


@pytest.mark.parametrize(
    ("op", "weight_scale", "expected"),
    [
        (Gibbs(), 1.0, 0.280703),
        (FlipTheState(), 1.0, 0.479865),
        (Blend(0.5), 1.0, 0.237408),
        (Gibbs(), 3.0, 0.732228),
        (FlipTheState(), 3.0, 0.605840),
    ],
    ids=["gibbs", "flip", "blend0.5", "gibbs-w3", "flip-w3"],
)
def test_slem_reference_values_2x2(op, weight_scale, expected):
    """ALGORITHMS.md Sec. 6; 'weights x3' scales W only (the biases stay)."""
    rbm = RBM(2, 2, weights=_W2 * weight_scale, vbias=_B2, hbias=_C2, dtype=F64)
    assert slem(transition_matrix(rbm, op)) == pytest.approx(expected, abs=5e-7)


def test_tie_rule_all_zero_rbm_flip_the_state_mixes_in_one_sweep():
    """At a tie the unit moves with probability 1/2 (Definition 1), so the all-zero 2x2 RBM is
    sampled exactly in one sweep: P has identical uniform rows and SLEM ~ 0, not 1."""
    rbm = RBM(2, 2, dtype=F64)
    P = transition_matrix(rbm, FlipTheState())
    torch.testing.assert_close(P, torch.full((16, 16), 1 / 16, dtype=F64), rtol=0, atol=1e-15)
    assert slem(P) < 1e-12


def test_two_state_chain_eigenvalues():
    """One unit with p(x=1) = 0.8: flip-the-state has eigenvalues {1, -(1-p)/p = -0.25}; Gibbs {1, 0}."""
    rbm = RBM(1, 0, vbias=torch.tensor([math.log(4.0)], dtype=F64), dtype=F64)
    P = transition_matrix(rbm, FlipTheState())
    torch.testing.assert_close(P, torch.tensor([[0.0, 1.0], [0.25, 0.75]], dtype=F64), rtol=0, atol=1e-15)
    eig = sorted(torch.linalg.eigvals(P).real.tolist())
    assert eig == pytest.approx([-0.25, 1.0], abs=1e-14)
    assert slem(P) == pytest.approx(0.25, abs=1e-14)
    assert slem(transition_matrix(rbm, Gibbs())) == pytest.approx(0.0, abs=1e-14)
    # the same numbers straight from the per-unit rule
    logits = torch.full((2, 1), math.log(4.0), dtype=F64)
    current = torch.tensor([[0.0], [1.0]], dtype=F64)
    torch.testing.assert_close(
        move_probability(logits, current, 1.0), torch.tensor([[1.0], [0.25]], dtype=F64), rtol=0, atol=1e-15
    )


@pytest.mark.parametrize("dtype", [torch.float32, F64], ids=["f32", "f64"])
def test_in_place_kernels_give_the_out_of_place_formulas_bit_for_bit(dtype):
    """The samplers compute move probabilities, decisions and Bernoulli draws in place for speed;
    they must round exactly as the plain formulas do, or a seeded run's numbers would change."""
    from boltzkit._numerics import bernoulli

    g = torch.Generator().manual_seed(11)
    logits = torch.randn(64, 50, generator=g, dtype=dtype) * 6
    logits[:, :4] = torch.tensor([0.0, -0.0, 80.0, -80.0], dtype=dtype)  # ties and saturation
    current = (torch.rand(64, 50, generator=g, dtype=dtype) < 0.4).to(dtype)
    u = torch.rand(64, 50, generator=g, dtype=dtype)
    u_before, current_before = u.clone(), current.clone()
    signed = (2.0 * current - 1.0) * logits
    p_gibbs = torch.sigmoid(-signed)
    p_flip = torch.where(signed == 0, torch.full_like(signed, 0.5), torch.exp(-torch.relu(signed)))
    for alpha, op in ((0.0, Gibbs()), (1.0, FlipTheState()), (0.3, Blend(0.3))):
        expected = p_flip if alpha == 1.0 else p_gibbs
        if 0.0 < alpha < 1.0:
            expected = alpha * p_flip + (1.0 - alpha) * p_gibbs
        got = move_probability(logits, current, alpha)
        assert got.dtype == dtype and torch.equal(got, expected)
        if alpha == 0.0:  # Gibbs draws the new value itself: on where u < p(x = 1 | rest)
            decided = (u < torch.sigmoid(logits)).to(dtype)
        else:
            decided = torch.where(u < expected, 1.0 - current, current)
        assert torch.equal(op.decide(logits, current, u, 0), decided)
        assert torch.equal(u, u_before) and torch.equal(current, current_before)
        # a sample never carries a graph, even from logits that require a gradient
        assert not op.decide(logits.clone().requires_grad_(), current, u, 0).requires_grad
    p = torch.sigmoid(logits)
    drawn = bernoulli(p, torch.Generator().manual_seed(5))
    reference = (torch.rand(p.shape, generator=torch.Generator().manual_seed(5), dtype=dtype) < p).to(dtype)
    assert drawn.dtype == dtype and torch.equal(drawn, reference)


def test_eigenvalue_moduli_sorted_and_periodic_chain_has_slem_one():
    swap = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=F64)
    assert eigenvalue_moduli(swap).tolist() == pytest.approx([1.0, 1.0])
    assert slem(swap) == pytest.approx(1.0)
    assert slem(torch.ones(1, 1, dtype=F64)) == 0.0


def test_slem_study_is_seeded_and_follows_the_weak_coupling_limit():
    """With |W| <= 0.01 and zero biases every unit is near a tie: Gibbs is near-exact (SLEM ~ 0)
    while flip-the-state nearly alternates (SLEM ~ 1), so Gibbs always wins (Brügge et al. 2013,
    Sec. 5.1)."""
    kwargs = {"sizes": (2, 3), "bounds": (0.01, 5.0), "n_models": 6}
    rows = slem_study(**kwargs, generator=torch.Generator().manual_seed(0))
    again = slem_study(**kwargs, generator=torch.Generator().manual_seed(0))
    assert rows == again
    assert [(r.n, r.c) for r in rows] == [(2, 0.01), (2, 5.0), (3, 0.01), (3, 5.0)]
    for r in rows:
        assert r.n_models == 6 and 0.0 <= r.fraction_b_better <= 1.0
        assert 0.0 <= r.mean_slem_a <= 1.0 + 1e-9 and 0.0 <= r.mean_slem_b <= 1.0 + 1e-9
    weak = [r for r in rows if r.c == 0.01]
    for r in weak:
        assert r.fraction_b_better == 0.0
        assert r.mean_slem_a < 0.01 and r.mean_slem_b > 0.95
    table = format_slem_table(rows)
    assert len(table.splitlines()) == 1 + len(rows)


@pytest.mark.slow
def test_slem_study_paper_trend(request):
    """Brügge et al. 2013, Fig. 3: flip-the-state wins more often as the weights grow (~100 s)."""
    if "slow" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("slow experiment: select it with -m slow")
    rows = slem_study(generator=torch.Generator().manual_seed(2013))
    for n in (2, 3, 4):
        frac = {r.c: r.fraction_b_better for r in rows if r.n == n}
        assert frac[10.0] > frac[1.0]


# ------------------------------------------------------------------------ sampled vs exact
@pytest.mark.parametrize("op", OPERATORS, ids=OP_IDS)
def test_sampled_joint_matches_exact_distribution(op):
    """20,000 independent chains, 60 sweeps from uniform random states, on a 3x2 RBM.

    The exact distribution after t sweeps is mu_0 P^t; it is within 1e-9 of pi here (every
    SLEM < 0.7), so the state frequencies are compared with the exact joint distribution."""
    rbm = random_rbm(3, 2, seed=11)
    n_chains, n_steps = 20_000, 60
    pi = pi_at(rbm, 1.0)
    assert float(pi.min()) * n_chains > 20  # every state is expected often enough for 5 SE
    P = transition_matrix(rbm, op)
    mu = torch.full((32,), 1 / 32, dtype=F64) @ torch.linalg.matrix_power(P, n_steps)
    assert float((mu - pi).abs().max()) < 1e-9
    g = torch.Generator().manual_seed(20130)
    state = run_chains(rbm, op, rbm.random_state(n_chains, g), n_steps, generator=g)
    assert_frequencies_match(bits_to_index(state.concat()), pi)


@pytest.mark.parametrize("op", OPERATORS, ids=OP_IDS)
def test_one_step_with_per_chain_beta_matches_matrix_rows(op):
    """One sweep from a fixed state with beta = 1 for half of the chains and 0.37 for the other
    half: each half lands on the row of P(beta) of the start state."""
    rbm = random_rbm(3, 2, seed=4)
    n = 20_000
    start_index = 0b10110  # v = (0, 1, 1), h = (0, 1)
    x0 = all_states(rbm)[start_index]
    state = rbm.split_units(x0.expand(2 * n, -1).clone())
    beta = torch.cat([torch.ones(n, dtype=F64), torch.full((n,), 0.37, dtype=F64)])
    new, _ = op.step(rbm, state, beta=beta, generator=torch.Generator().manual_seed(99))
    idx = bits_to_index(new.concat())
    assert_frequencies_match(idx[:n], transition_matrix(rbm, op, beta=1.0)[start_index])
    assert_frequencies_match(idx[n:], transition_matrix(rbm, op, beta=0.37)[start_index])


@pytest.mark.parametrize("op", OPERATORS, ids=OP_IDS)
def test_constant_beta_tensor_equals_float_beta(op):
    rbm = random_rbm(5, 3, seed=8)
    g = torch.Generator().manual_seed(3)
    state = rbm.random_state(37, g)
    for b in (1.0, 0.37):
        out_float, _ = op.step(rbm, state, beta=b, generator=torch.Generator().manual_seed(5))
        out_tensor, _ = op.step(
            rbm, state, beta=torch.full((37,), b, dtype=F64), generator=torch.Generator().manual_seed(5)
        )
        for a, c in zip(out_float.layers, out_tensor.layers, strict=True):
            assert torch.equal(a, c)


def test_per_chain_beta_logits_match_rowwise_floats():
    rbm = random_rbm(5, 3, seed=9)
    state = rbm.random_state(7, torch.Generator().manual_seed(1))
    betas = torch.tensor([0.0, 0.1, 0.37, 0.5, 0.9, 1.0, 2.0], dtype=F64)
    for block in rbm.blocks():
        batched = rbm.block_logits(state, block, betas)
        rowwise = torch.stack(
            [rbm.block_logits(state, block, float(b))[i] for i, b in enumerate(betas)],
        )
        torch.testing.assert_close(batched, rowwise, rtol=0, atol=1e-15)


# --------------------------------------------------------------------- clamped and fresh layers
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("op", OPERATORS, ids=OP_IDS)
def test_clamped_visible_is_stationary_for_hidden_conditional(op, beta):
    rbm = random_rbm(3, 5, seed=6)
    P = transition_matrix(rbm, op, beta=beta, clamped=(0,))
    states = all_states(rbm)
    v_index = (states[:, :3].to(torch.int64) << torch.arange(3)).sum(1)
    same_v = v_index.unsqueeze(1) == v_index.unsqueeze(0)
    assert float(P[~same_v].abs().max()) == 0.0  # the visible layer never changes
    torch.testing.assert_close(P.sum(1), torch.ones(P.shape[0], dtype=F64), rtol=0, atol=1e-12)
    pi = pi_at(rbm, beta)
    for v in range(8):
        cond = torch.where(v_index == v, pi, torch.zeros_like(pi))
        cond = cond / cond.sum()  # p_beta(h | v) on the states with this v
        torch.testing.assert_close(cond @ P, cond, rtol=0, atol=1e-12)
        assert stationary_check(rbm, op, beta=beta, clamped=(0,), pi=cond).ok
    # clamping everything leaves every state where it is
    torch.testing.assert_close(
        transition_matrix(rbm, op, clamped=(0, 1)), torch.eye(256, dtype=F64), rtol=0, atol=0
    )


@pytest.mark.parametrize("op", OPERATORS, ids=OP_IDS)
def test_run_chains_with_clamped_visible_keeps_data(op):
    rbm = random_rbm(5, 3, seed=10)
    g = torch.Generator().manual_seed(4)
    state = rbm.random_state(50, g)
    out = run_chains(rbm, op, state, 5, generator=g, clamped=(0,))
    assert torch.equal(out.visible, state.visible)
    assert not torch.equal(out.hidden, state.hidden)


def test_fresh_hidden_layer_makes_the_sweep_independent_of_stale_hidden_values():
    rbm = random_rbm(3, 2, seed=12)
    op = FlipTheState()
    P = transition_matrix(rbm, op, fresh_layers=(1,))
    # rows of states that differ only in h are identical
    for v in range(8):
        rows = P[[v | (h << 3) for h in range(4)]]
        torch.testing.assert_close(rows, rows[0].expand(4, -1), rtol=0, atol=1e-15)
    kernels = block_kernels(rbm, op, fresh_layers=(1,))
    (_, K_h_gibbs), _ = block_kernels(rbm, Gibbs())
    torch.testing.assert_close(kernels[0][1], K_h_gibbs, rtol=0, atol=0)
    pi = pi_at(rbm, 1.0)
    torch.testing.assert_close(pi @ P, pi, rtol=0, atol=1e-12)
    # sampled: one FTS sweep from v fixed and stale h lands on that row
    n = 20_000
    start = 0b11101  # v = (1, 0, 1), h = (1, 1)
    state = rbm.split_units(all_states(rbm)[start].expand(n, -1).clone())
    new, _ = op.step(rbm, state, generator=torch.Generator().manual_seed(8), fresh_layers=(1,))
    assert_frequencies_match(bits_to_index(new.concat()), P[start])


def test_gibbs_fresh_layers_change_nothing():
    rbm = random_rbm(5, 3, seed=13)
    state = rbm.random_state(40, torch.Generator().manual_seed(0))
    a, _ = Gibbs().step(rbm, state, generator=torch.Generator().manual_seed(1))
    b, _ = Gibbs().step(rbm, state, generator=torch.Generator().manual_seed(1), fresh_layers=(1,))
    for x, y in zip(a.layers, b.layers, strict=True):
        assert torch.equal(x, y)


# ------------------------------------------------------------------------- parsing and misc
@pytest.mark.parametrize(
    ("spec", "cls", "alphas", "name"),
    [
        ("gibbs", Gibbs, None, "gibbs"),
        (" Gibbs ", Gibbs, None, "gibbs"),
        ("flip", FlipTheState, (1.0, 1.0), "flip"),
        ("fts", FlipTheState, (1.0, 1.0), "flip"),
        ("flip-the-state", FlipTheState, (1.0, 1.0), "flip"),
        ("blend:0.5", Blend, (0.5, 0.5), "blend:0.5"),
        ("BLEND:0.3,0.7", Blend, (0.3, 0.7), "blend:0.3,0.7"),
        ("blend:0,1", Blend, (0.0, 1.0), "blend:0,1"),
    ],
)
def test_make_operator_parses_specs(spec, cls, alphas, name):
    op = make_operator(spec)
    assert type(op) is cls and op.name == name
    if alphas is not None:
        assert (op.alpha_visible, op.alpha_hidden) == alphas
        assert (op.alpha(0), op.alpha(1), op.alpha(2)) == (alphas[0], alphas[1], alphas[1])
    assert make_operator(op) is op
    assert name in repr(op)


@pytest.mark.parametrize("spec", ["metropolis", "", "blend:", "blend:x", "blend:0.1,0.2,0.3", "blend"])
def test_make_operator_rejects_unknown_specs(spec):
    with pytest.raises(BoltzkitError, match="unknown sampler") as info:
        make_operator(spec)
    assert "blend:ALPHA" in str(info.value)


@pytest.mark.parametrize("spec", ["blend:1.5", "blend:-0.1", "blend:0.5,2", "blend:nan"])
def test_make_operator_rejects_alpha_outside_unit_interval(spec):
    with pytest.raises(BoltzkitError, match=r"alpha must lie in \[0, 1\]"):
        make_operator(spec)


def test_operator_is_abstract_and_blend_validates():
    with pytest.raises(TypeError):
        TransitionOperator()  # type: ignore[abstract]
    with pytest.raises(BoltzkitError):
        Blend(0.5, -1.0)


@pytest.mark.parametrize("op", OPERATORS, ids=OP_IDS)
def test_same_seed_same_chains(op):
    rbm = random_rbm(5, 3, seed=14)

    def run(seed: int) -> ChainState:
        g = torch.Generator().manual_seed(seed)
        return run_chains(rbm, op, rbm.random_state(64, g), 10, generator=g)

    a, b, c = run(123), run(123), run(124)
    assert all(torch.equal(x, y) for x, y in zip(a.layers, b.layers, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a.layers, c.layers, strict=True))


def test_observers_get_flip_rates():
    rbm = random_rbm(5, 3, seed=15)
    g = torch.Generator().manual_seed(2)
    seen: list[tuple[int, ChainState, StepInfo]] = []
    start = rbm.random_state(30, g)
    run_chains(rbm, "flip", start, 3, generator=g, observers=[lambda s, st, info: seen.append((s, st, info))])
    assert [s for s, _, _ in seen] == [1, 2, 3]
    prev = start
    for _, st, info in seen:
        pairs = zip(prev.layers, st.layers, strict=True)
        expected = tuple(float((a != b).to(torch.float32).mean()) for a, b in pairs)
        assert info.flip_rate == pytest.approx(expected)
        prev = st


def test_large_weights_give_finite_kernels_and_samples():
    g = torch.Generator().manual_seed(16)
    rbm = RBM(3, 2, weights=torch.randn(3, 2, generator=g, dtype=F64) * 50.0, dtype=F64)
    for op in OPERATORS:
        P = transition_matrix(rbm, op)
        assert bool(torch.isfinite(P).all())
        torch.testing.assert_close(P.sum(1), torch.ones(32, dtype=F64), rtol=0, atol=1e-12)
        check = stationary_check(rbm, op)
        assert check.ok
        out = run_chains(rbm, op, rbm.random_state(16, g), 3, generator=g)
        assert all(bool(((x == 0) | (x == 1)).all()) for x in out.layers)
    logits = torch.tensor([[-1e4, 1e4, 0.0, -1e4, 1e4]], dtype=F64)
    current = torch.tensor([[0.0, 1.0, 1.0, 1.0, 0.0]], dtype=F64)
    for alpha in (0.0, 0.3, 1.0):
        q = move_probability(logits, current, alpha)
        assert bool(torch.isfinite(q).all()) and bool(((q >= 0) & (q <= 1)).all())
    torch.testing.assert_close(
        move_probability(logits, current, 1.0),
        torch.tensor([[0.0, 0.0, 0.5, 1.0, 1.0]], dtype=F64),
        rtol=0,
        atol=0,
    )


def test_float32_model_matrix_is_computed_in_float64():
    rbm = random_rbm(3, 2, seed=17)
    r32 = RBM(3, 2, weights=rbm.W.detach(), vbias=rbm.vbias.detach(), hbias=rbm.hbias.detach())
    P32 = transition_matrix(r32, "blend:0.5")
    assert P32.dtype == F64 and r32.dtype == torch.float32
    torch.testing.assert_close(P32, transition_matrix(rbm, "blend:0.5"), rtol=0, atol=1e-6)


def test_transition_matrix_refuses_large_models():
    with pytest.raises(IntractableError, match=r"2\^11 x 2\^11") as info:
        transition_matrix(RBM(7, 4, dtype=F64), "gibbs", max_bits=10)
    assert "11 units" in str(info.value)


def test_the_block_sweep_hooks_give_means_take_logits_and_report_each_block() -> None:
    """The one block sweep's hooks: ``means`` sets a layer to ``sigmoid(logits)``, ``logits`` stands
    in for the model's own inputs of a whole layer, ``observe`` sees every block updated; without
    hooks the sweep draws the same numbers as before."""
    from boltzkit.samplers import make_operator
    from boltzkit.state import Block

    rbm = random_rbm(5, 3, seed=31)
    g = torch.Generator().manual_seed(32)
    state = rbm.random_state(4, g)
    op = make_operator("flip")
    seen: list[tuple[int, torch.Tensor]] = []
    after, _ = op.step(
        rbm,
        state,
        generator=g,
        means=(0,),
        observe=lambda block, logits, new: seen.append((block.layer, logits)),
    )
    assert [layer for layer, _ in seen] == [b.layer for b in rbm.blocks()]
    expected = torch.sigmoid(rbm.block_logits(after, Block(0)))
    assert torch.allclose(after.visible, expected) and torch.allclose(
        seen[-1][1], rbm.block_logits(after, Block(0))
    )
    forced, _ = op.step(
        rbm, state, generator=g, clamped=(0,), logits={1: torch.full((4, 3), 50.0, dtype=F64)}
    )
    assert bool((forced.hidden == 1).all())  # flip from 0 always, and stays at 1 with p(0) ~ e^-50
    one, two = torch.Generator().manual_seed(33), torch.Generator().manual_seed(33)
    plain, _ = op.step(rbm, state, generator=one)
    hooked, _ = op.step(rbm, state, generator=two, observe=lambda *_: None)
    assert all(torch.equal(a, b) for a, b in zip(plain.layers, hooked.layers, strict=True))
