"""Annealing paths for every member of the Boltzmann machine family (SRBM, BM, DBM).

The geometric path of S&M 2008 (Eqs. 13-17) and S2 Sec. 4 over the union of two models' layers:
its log p*_beta against the models' own unnormalized probabilities, its default summed-out
layers, and AIS, the forward/reverse sandwich, SIS and the model-to-model ratio along it against
exact log Z by enumeration. Small float64 models with prime-ish layer sizes: tiny ones (7 visible
units) and 4x4-patch-sized ones (16 visible units: SRBM 16x10, BM 16x5, DBM 16-6-4). Every
statistical check allows ``K_SIGMA = 5`` standard errors taken from the estimate's own record
(``log_z_stderr``) or from the spread of its log-weights; seeds are fixed.
"""

from __future__ import annotations

import pytest
import torch
from conftest import F64, K_SIGMA, exact_log_z_value, mean_and_se, random_machine

from boltzkit._numerics import LOG2, softplus
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import (
    ais,
    base_rate_path,
    estimate_log_ratio,
    ratio_path,
    sandwich,
    sis,
)
from boltzkit.estimators.exact import bit_states, log_unnormalized_marginal
from boltzkit.estimators.reverse import BOUND_EXACT
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.state import ChainState

#: (kind, layer sizes): tiny and 16-visible members of each family.
MODELS = [
    ("srbm", (7, 5)),
    ("bm", (7, 3)),
    ("dbm", (7, 5, 3)),
    ("srbm", (16, 10)),
    ("bm", (16, 5)),
    ("dbm", (16, 6, 4)),
]
MODEL_IDS = [f"{kind}-{'x'.join(map(str, sizes))}" for kind, sizes in MODELS]


def _random_state(sizes: tuple[int, ...], n: int, seed: int) -> ChainState:
    g = torch.Generator().manual_seed(seed)
    return ChainState(tuple((torch.rand(n, s, generator=g, dtype=F64) < 0.5).to(F64) for s in sizes))


# ------------------------------------------------------------------------------ structure
def test_default_summed_out_layers() -> None:
    # SRBM: the hidden layer (no laterals); BM with hidden laterals: nothing (joint space {v, h})
    assert base_rate_path(random_machine("srbm", (7, 5), 1)).summed == (1,)
    bm_path = base_rate_path(random_machine("bm", (7, 3), 1))
    assert bm_path.summed == () and bm_path.kept == (0, 1)
    # DBM: the odd layers
    dbm_path = base_rate_path(random_machine("dbm", (7, 5, 3), 1))
    assert dbm_path.summed == (1,) and dbm_path.kept == (0, 2)
    deeper = base_rate_path(random_machine("dbm", (7, 5, 3, 2), 1))
    assert deeper.model_b.kind == "dbm" and deeper.summed == (1, 3) and deeper.kept == (0, 2)
    # model to model: each model's own default, for the layers it owns (an SRBM's hidden layers
    # are coupled to v only, so both sum out)
    srbms = ratio_path(random_machine("srbm", (7, 3), 2), random_machine("srbm", (7, 5), 3))
    assert srbms.layer_sizes == (7, 5, 3) and srbms.summed == (1, 2)
    assert srbms.offset == pytest.approx((5 - 3) * LOG2, abs=1e-12)
    bms = ratio_path(random_machine("bm", (7, 5), 2), random_machine("bm", (7, 3), 3))
    assert bms.layer_sizes == (7, 3, 5) and bms.summed == ()


def test_explicit_sum_out_is_checked() -> None:
    model = random_machine("dbm", (7, 5, 3), 1)
    assert base_rate_path(model, sum_out=(0, 2)).summed == (0, 2)
    assert base_rate_path(model, sum_out=()).summed == ()
    with pytest.raises(BoltzkitError, match="cannot be summed out"):
        base_rate_path(model, sum_out=(1, 2))  # coupled to each other
    with pytest.raises(BoltzkitError, match="cannot be summed out"):
        base_rate_path(random_machine("bm", (7, 3), 1), sum_out=(1,))  # hidden laterals


# ---------------------------------------------------------------------------------- log f
@pytest.mark.parametrize(("kind", "sizes"), MODELS[:3], ids=MODEL_IDS[:3])
def test_log_f_end_points_are_the_models_log_p_star(kind: str, sizes: tuple[int, ...]) -> None:
    model = random_machine(kind, sizes, 21)
    b_a = torch.linspace(-1.0, 1.0, sizes[0], dtype=F64)
    path = base_rate_path(model, base_vbias=b_a)
    x = _random_state(sizes, 13, 22)
    summed = path.summed
    # beta = 1: log p*(kept layers) of the model with the summed layers summed out
    at_one = path.log_f(x, 1.0)
    torch.testing.assert_close(at_one, model.log_unnormalized(x, sum_out=summed), rtol=0, atol=1e-12)
    given = {l: x.layers[l] for l in path.kept}
    torch.testing.assert_close(at_one, log_unnormalized_marginal(model, given), rtol=0, atol=1e-10)
    # beta = 0: the base's (visible biases b_a, every other layer uniform)
    at_zero = path.log_f(x, 0.0)
    torch.testing.assert_close(at_zero, path.model_a.log_unnormalized(x, sum_out=summed), rtol=0, atol=1e-12)
    n_summed = sum(sizes[l] for l in summed)
    torch.testing.assert_close(at_zero, x.visible @ b_a + n_summed * LOG2, rtol=0, atol=1e-12)
    # in between: the model with couplings beta W and biases (1 - beta) b_A + beta b (S&M Eq. 15)
    beta = 0.3
    mixed = BoltzmannMachine(
        sizes,
        {key: beta * model.coupling(*key).detach() for key in model.coupling_keys},
        [
            (1 - beta) * path.model_a.bias(l).detach() + beta * model.bias(l).detach()
            for l in range(len(sizes))
        ],
        dtype=F64,
    )
    torch.testing.assert_close(
        path.log_f(x, beta), mixed.log_unnormalized(x, sum_out=summed), rtol=0, atol=1e-12
    )
    # the values carried by summed-out layers do not enter log p*
    if summed:
        other = x
        for l in summed:
            other = other.with_layer(l, 1.0 - x.layers[l])
        for b in (0.0, beta, 1.0):
            torch.testing.assert_close(path.log_f(other, b), path.log_f(x, b), rtol=0, atol=0)


def test_dbm_log_f_sums_to_the_visible_marginal() -> None:
    """Summing log p*_1(v, h2) over all h2 gives the exact log p*(v) (h1 summed in closed form)."""
    model = random_machine("dbm", (7, 5, 3), 23)
    path = base_rate_path(model)
    v = _random_state((7,), 5, 24).visible
    h2 = bit_states(0, 8, 3)
    per_v = []
    for row in v:
        states = ChainState((row.expand(8, -1), torch.zeros(8, 5, dtype=F64), h2))
        per_v.append(torch.logsumexp(path.log_f(states, 1.0), 0))
    torch.testing.assert_close(
        torch.stack(per_v), log_unnormalized_marginal(model, {0: v}), rtol=0, atol=1e-10
    )


@pytest.mark.parametrize("kind", ["srbm", "bm"])
def test_ratio_path_log_f_end_points(kind: str) -> None:
    """The layers of one model only are uniform at the other end: ``p*_0 = p*_A 2^{n_B-only}``
    (summed) and ``p*_1 = p*_B 2^{n_A-only}`` (S&M 2008, Eq. 16)."""
    a, b = random_machine(kind, (7, 3), 31), random_machine(kind, (7, 5), 32)
    path = ratio_path(a, b)
    assert path.is_ratio and path.layer_sizes == (7, 5, 3)
    x = _random_state(path.layer_sizes, 11, 33)
    # an SRBM's hidden layers sum out: the other model's layer adds n log 2 (softplus(0) per
    # unit); a BM's hidden layers are kept, and the other model's layer adds no energy
    a_sum = b_sum = (1,) if kind == "srbm" else ()
    uniform_b = 5 * LOG2 if kind == "srbm" else 0.0
    uniform_a = 3 * LOG2 if kind == "srbm" else 0.0
    torch.testing.assert_close(
        path.log_f(x, 0.0),
        a.log_unnormalized(path.project(x, 0), sum_out=a_sum) + uniform_b,
        rtol=0,
        atol=1e-12,
    )
    torch.testing.assert_close(
        path.log_f(x, 1.0),
        b.log_unnormalized(path.project(x, 1), sum_out=b_sum) + uniform_a,
        rtol=0,
        atol=1e-12,
    )
    assert path.offset == pytest.approx((5 - 3) * LOG2, abs=1e-12)


# --------------------------------------------------------------------------- AIS accuracy
@pytest.mark.parametrize("sampler", ["gibbs", "flip"])
@pytest.mark.parametrize(("kind", "sizes"), MODELS, ids=MODEL_IDS)
def test_ais_within_5_se_of_exact(kind: str, sizes: tuple[int, ...], sampler: str) -> None:
    model = random_machine(kind, sizes, 2)
    assert model.kind == kind
    path = base_rate_path(model)
    res = ais(path, n_chains=100, betas=301, sampler=sampler, seed=3, check=False)
    assert res.method == "ais" and res.n_chains == 100 and res.n_steps == 300
    assert res.settings["sampler"] == sampler and res.settings["base"] == path.base_name
    assert res.log_weights.dtype == F64
    exact = exact_log_z_value(model)
    assert res.log_z_stderr > 0
    assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr, (res.log_z, exact, res.log_z_stderr)


def test_the_16_visible_problems_are_not_trivial() -> None:
    """Simple importance sampling from the base (AIS without intermediate distributions) is
    degenerate on the 16-visible models: a few of 100 draws carry all the weight, and its standard
    error is over ten times that of the AIS runs above (about 0.02-0.04 nats)."""
    for kind, sizes in MODELS[3:]:
        res = sis(base_rate_path(random_machine(kind, sizes, 2)), n_chains=100, seed=3)
        assert res.ess < 5, kind
        assert res.log_z_stderr > 0.5, kind


def test_ais_with_base_rate_data_on_a_dbm() -> None:
    model = random_machine("dbm", (16, 6, 4), 41)
    g = torch.Generator().manual_seed(42)
    data = (torch.rand(37, 16, generator=g, dtype=F64) < 0.3).to(F64)
    path = base_rate_path(model, data=data)
    assert path.base_name == "base rates of the data"
    res = ais(path, n_chains=100, betas=301, seed=43, check=False)
    assert res.settings["base"] == "base rates of the data"
    assert abs(res.log_z - exact_log_z_value(model)) <= K_SIGMA * res.log_z_stderr


# --------------------------------------------------------------------------------- sandwich
@pytest.mark.parametrize(("kind", "sizes"), MODELS, ids=MODEL_IDS)
def test_forward_and_reverse_ais_bracket_exact_log_z(kind: str, sizes: tuple[int, ...]) -> None:
    model = random_machine(kind, sizes, 2)
    exact = exact_log_z_value(model)
    path = base_rate_path(model)
    assert path.end_is_exact
    # a coarse schedule: the bracket is wide, and still holds
    s = sandwich(path, n_chains=500, betas=6, seed=5)
    fwd, rev = s.forward, s.reverse
    assert s.settings["upper_bound"].startswith(BOUND_EXACT)
    assert fwd.log_z <= exact + K_SIGMA * fwd.log_z_stderr
    assert rev.log_z >= exact - K_SIGMA * rev.log_z_stderr
    # single-chain bounds: log Z_0 + E[log w_fwd] <= log Z <= log Z_0 - E[log w_rev]
    m_f, se_f = mean_and_se(fwd.log_weights)
    m_r, se_r = mean_and_se(rev.log_weights)
    assert s.settings["log_z_lower_per_chain"] == pytest.approx(fwd.log_z_start + m_f, abs=1e-12)
    assert s.settings["log_z_upper_per_chain"] == pytest.approx(rev.log_z_start - m_r, abs=1e-12)
    assert fwd.log_z_start + m_f <= exact + K_SIGMA * se_f
    assert rev.log_z_start - m_r >= exact - K_SIGMA * se_r
    assert s.settings["gap_per_chain"] > K_SIGMA * s.settings["gap_per_chain_stderr"]
    # a finer schedule: both ends agree with the exact value
    fine = sandwich(path, n_chains=200, betas=201, seed=6)
    for res in (fine.forward, fine.reverse):
        assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr, (res.method, res.log_z, exact)
    assert fine.settings["gap_per_chain"] < s.settings["gap_per_chain"]


# ------------------------------------------------------------------------------ ratio path
@pytest.mark.parametrize("sampler", ["gibbs", "flip"])
@pytest.mark.parametrize(
    ("kind", "sizes_a", "sizes_b"),
    [
        ("srbm", (7, 3), (7, 5)),
        ("bm", (7, 5), (7, 3)),
        ("srbm", (16, 5), (16, 11)),
        ("bm", (16, 3), (16, 5)),
    ],
    ids=["srbm-7x3-to-7x5", "bm-7x5-to-7x3", "srbm-16x5-to-16x11", "bm-16x3-to-16x5"],
)
def test_ratio_path_within_5_se_of_exact_log_ratio(
    kind: str, sizes_a: tuple[int, int], sizes_b: tuple[int, int], sampler: str
) -> None:
    a, b = random_machine(kind, sizes_a, 11), random_machine(kind, sizes_b, 12)
    exact_a, exact_b = exact_log_z_value(a), exact_log_z_value(b)
    path = ratio_path(a, b)  # A first: estimates log Z_B - log Z_A
    assert path.exact_start and path.log_z_a == pytest.approx(exact_a, abs=1e-10)
    res = ais(path, n_chains=100, betas=301, sampler=sampler, seed=7, check=False)
    assert res.is_ratio and res.settings["start"] == "exact samples of A"
    assert abs(res.log_ratio - (exact_b - exact_a)) <= K_SIGMA * res.log_z_stderr
    assert res.reference_log_z == pytest.approx(exact_a, abs=1e-10)
    assert abs(res.log_z - exact_b) <= K_SIGMA * res.log_z_stderr


def test_ratio_path_between_dbms_with_different_layer_sizes() -> None:
    a, b = random_machine("dbm", (7, 3, 5), 13), random_machine("dbm", (7, 5, 3), 14)
    path = ratio_path(a, b)
    assert path.layer_sizes == (7, 5, 3, 3, 5) and path.summed == (1, 3)
    res = ais(path, n_chains=100, betas=301, seed=15, check=False)
    assert abs(res.log_ratio - (exact_log_z_value(b) - exact_log_z_value(a))) <= K_SIGMA * res.log_z_stderr


def test_ratio_path_enumeration_dtype_is_honoured() -> None:
    """float32 enumeration of A: the same log Z_A up to float32 rounding, and really float32."""
    a, b = random_machine("srbm", (16, 5), 11), random_machine("srbm", (16, 11), 12)
    p64 = ratio_path(a, b)
    p32 = ratio_path(a, b, enumeration_dtype=torch.float32)
    assert p64.log_z_a == pytest.approx(exact_log_z_value(a), abs=1e-10)
    diff = abs(p32.log_z_a - p64.log_z_a)
    assert 0.0 < diff < 1e-3, diff
    assert p32.exact_start
    # the dispatcher passes it on: its reference log Z_A is the float32 enumeration's
    res = estimate_log_ratio(b, a, "sis", n_chains=3, enumeration_dtype=torch.float32)
    assert res.reference_log_z == p32.log_z_a
    assert estimate_log_ratio(b, a, "sis", n_chains=3).reference_log_z == p64.log_z_a


def test_ratio_path_argument_order() -> None:
    """``ratio_path(A, B)`` estimates ``log Z_B - log Z_A``; swapping the models flips the sign."""
    a, b = random_machine("bm", (7, 5), 16), random_machine("bm", (7, 3), 17)
    truth = exact_log_z_value(b) - exact_log_z_value(a)
    forward = ais(ratio_path(a, b), n_chains=100, betas=201, seed=18, check=False)
    backward = ais(ratio_path(b, a), n_chains=100, betas=201, seed=19, check=False)
    assert abs(forward.log_ratio - truth) <= K_SIGMA * forward.log_z_stderr
    assert abs(backward.log_ratio + truth) <= K_SIGMA * backward.log_z_stderr


# ---------------------------------------------------------------------------------- SIS
@pytest.mark.parametrize("ratio", [False, True], ids=["base-rate", "bm-to-bm"])
def test_sis_equals_ais_with_the_two_point_grid_on_a_bm(ratio: bool) -> None:
    b = random_machine("bm", (7, 3), 51)
    path = ratio_path(random_machine("bm", (7, 5), 52), b) if ratio else base_rate_path(b)
    by_sis = sis(path, n_chains=200, seed=4)
    by_ais = ais(path, n_chains=200, betas=2, seed=4, check=False)
    assert by_sis.method == "sis" and by_sis.n_steps == 1 and by_ais.n_steps == 1
    assert by_sis.log_z_start == by_ais.log_z_start
    assert by_sis.log_z == pytest.approx(by_ais.log_z, abs=1e-10)
    torch.testing.assert_close(by_sis.log_weights, by_ais.log_weights, rtol=0, atol=1e-10)
    # the raw weights are exactly the path's log p*_1(x) - log p*_0(x) at exact draws x ~ p_0
    x = path.sample_start(200, torch.Generator().manual_seed(4))
    torch.testing.assert_close(by_sis.log_weights, path.log_f(x, 1.0) - path.log_f(x, 0.0), rtol=0, atol=0)
    if not ratio:  # by hand: the base is independent, log p*_0 = v . b_A (+ nothing summed)
        log_f_b = -b.joint_energy(x)
        torch.testing.assert_close(
            by_sis.log_weights, log_f_b - x.visible @ b.bias(0).detach(), rtol=0, atol=1e-12
        )


def test_sis_log_z_base_and_estimate_on_an_srbm() -> None:
    model = random_machine("srbm", (7, 5), 53, scale=0.5)
    path = base_rate_path(model)
    b_a = model.bias(0).detach()
    assert path.log_z_a == pytest.approx(float(softplus(b_a).sum()) + 5 * LOG2, abs=1e-12)
    res = sis(path, n_chains=20_000, seed=54)
    assert abs(res.log_z - exact_log_z_value(model)) <= K_SIGMA * res.log_z_stderr
