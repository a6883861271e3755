"""AIS (S&M 2008, Sec. 3) on RBMs: engine, base-rate and RBM-to-RBM paths, result records, base rates.

Small float64 RBMs with prime layer sizes (one float32, one 784 x 13) have their log Z by
enumeration. Every statistical check allows ``K_SIGMA = 5`` standard errors, taken from the
estimate's own record (``log_z_stderr``) or from the spread over repeated independent runs;
seeds are fixed.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import F64, K_SIGMA, exact_log_z_value, random_rbm
from hypothesis import given, settings
from hypothesis import strategies as st

from boltzkit._numerics import LOG2, make_generator, softplus
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import adaptive_betas, ais, anneal
from boltzkit.estimators.base_rate import base_rate_log_z, fit_base_rate
from boltzkit.estimators.exact import bit_states
from boltzkit.estimators.paths import base_rate_path, ratio_path
from boltzkit.estimators.result import LogZResult
from boltzkit.estimators.schedules import linear_betas
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.rbm import RBM

BAND_KEYS = ("minus_sigma", "plus_sigma", "minus_3sigma", "plus_3sigma")
RECORD_KEYS = (
    "method",
    "log_z",
    "log_z_minus_sigma",
    "log_z_plus_sigma",
    "log_z_minus_3sigma",
    "log_z_plus_3sigma",
    "ess",
    "n_chains",
    "n_steps",
    "seconds",
)


def _assert_within(result: LogZResult, exact: float) -> None:
    se = result.log_z_stderr
    assert se > 0, "a stochastic estimate must have a positive standard error"
    assert abs(result.log_z - exact) <= K_SIGMA * se, (result.log_z, exact, se)


def _log_mean_exp(x: torch.Tensor) -> float:
    return float(torch.logsumexp(x.to(F64), 0) - math.log(x.numel()))


# ---------------------------------------------------------------------------------- accuracy
@pytest.mark.parametrize(("n_visible", "n_hidden", "seed"), [(7, 3, 1), (11, 5, 2), (5, 13, 3)])
def test_ais_within_5_se_of_exact_on_tiny_models(n_visible: int, n_hidden: int, seed: int) -> None:
    rbm = random_rbm(n_visible, n_hidden, seed)
    res = ais(base_rate_path(rbm), n_chains=100, betas=501, seed=seed, check=False)
    assert res.method == "ais" and res.n_chains == 100 and res.n_steps == 500
    _assert_within(res, exact_log_z_value(rbm))


@pytest.mark.parametrize("sampler", ["gibbs", "flip", "blend:0.5"])
@pytest.mark.parametrize("sweeps", [1, 2])
def test_ais_with_each_operator_and_sweeps(sampler: str, sweeps: int) -> None:
    rbm = random_rbm(11, 5, 7, scale=1.2)
    res = ais(
        base_rate_path(rbm), n_chains=100, betas=301, sampler=sampler, sweeps=sweeps, seed=17, check=False
    )
    assert res.settings["sampler"] == sampler
    assert res.settings["sweeps"] == sweeps
    assert res.settings["total_sweeps"] == 300 * sweeps
    _assert_within(res, exact_log_z_value(rbm))


def test_ais_with_base_rate_data_on_a_tiny_model() -> None:
    rbm = random_rbm(7, 5, 4)
    g = torch.Generator().manual_seed(40)
    data = (torch.rand(61, 7, generator=g, dtype=F64) < 0.3).to(F64)
    res = ais(base_rate_path(rbm, data=data), n_chains=100, betas=501, seed=41, check=False)
    assert res.settings["base"] == "base rates of the data"
    # log Z of the base model over {v, h}: its 5 hidden units are uniform (ALGORITHMS.md Sec. 1)
    log_z_base = base_rate_log_z(fit_base_rate(data)) + 5 * LOG2
    assert res.settings["log_z_base"] == pytest.approx(log_z_base, abs=1e-12)
    _assert_within(res, exact_log_z_value(rbm))


def test_ais_on_a_float32_model_matches_the_float64_exact_value() -> None:
    rbm64 = random_rbm(11, 5, 8)
    rbm32 = random_rbm(11, 5, 8, dtype=torch.float32)
    res = ais(base_rate_path(rbm32), n_chains=100, betas=501, seed=9, check=False)
    assert res.settings["dtype"] == "float32"
    assert res.log_weights.dtype == F64
    _assert_within(res, exact_log_z_value(rbm64))


@pytest.fixture(scope="module")
def mnist_sized() -> tuple[RBM, torch.Tensor, float]:
    """784 x 13 RBM, W ~ N(0, 0.25^2), b ~ N(0, 1), c ~ N(0, 0.5^2), and random binary data."""
    rbm = random_rbm(784, 13, 2024, scale=0.25, vbias_scale=1.0)
    g = torch.Generator().manual_seed(2025)
    p = torch.sigmoid(rbm.vbias.detach() + torch.randn(784, generator=g, dtype=F64))
    data = (torch.rand(500, 784, generator=g, dtype=F64) < p).to(F64)
    return rbm, data, exact_log_z_value(rbm)


def test_problem_of_the_mnist_sized_model_is_not_trivial(mnist_sized) -> None:
    rbm, _, exact = mnist_sized
    sis = ais(base_rate_path(rbm), n_chains=100, betas=2, seed=1, check=False)
    assert exact - sis.log_z > 5.0  # simple importance sampling misses by many nats
    assert sis.ess < 10


@pytest.mark.parametrize("with_data", [False, True], ids=["model-biases", "data-base-rates"])
def test_ais_within_5_se_of_exact_on_an_mnist_sized_rbm(mnist_sized, with_data: bool) -> None:
    rbm, data, exact = mnist_sized
    path = base_rate_path(rbm, data=data if with_data else None)
    res = ais(path, n_chains=100, betas=2001, seed=5, check=False)
    assert res.n_steps == 2000
    _assert_within(res, exact)


# ----------------------------------------------------------------- exact special cases of AIS
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(
    n_visible=st.sampled_from([2, 3, 5, 7]),
    n_hidden=st.sampled_from([1, 2, 3, 5]),
    n_chains=st.integers(1, 13),
    seed=st.integers(0, 2**31 - 1),
)
def test_two_point_grid_is_simple_importance_sampling(
    n_visible: int, n_hidden: int, n_chains: int, seed: int
) -> None:
    rbm = random_rbm(n_visible, n_hidden, seed % 1000)
    base_vbias = 0.7 * torch.randn(n_visible, generator=torch.Generator().manual_seed(seed + 1), dtype=F64)
    two = torch.tensor([0.0, 1.0], dtype=F64)
    res = ais(
        base_rate_path(rbm, base_vbias=base_vbias), n_chains=n_chains, betas=two, seed=seed, check=False
    )
    # by hand: v ~ p_A from the same generator stream, w = p*_B(v) / p_A(v)
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(n_chains, n_visible, generator=g, dtype=F64)
    v = (u < torch.sigmoid(base_vbias)).to(F64)
    log_p_a = v @ base_vbias - softplus(base_vbias).sum()
    log_f_b = rbm.log_unnormalized_visible(v).detach()
    log_w = log_f_b - log_p_a
    assert res.n_steps == 1
    assert res.log_z == pytest.approx(_log_mean_exp(log_w), abs=1e-10)
    # the engine's raw weights are p*_1(v) / p*_0(v) with p*_0 = p*_A 2^{n_hidden}
    raw = log_f_b - v @ base_vbias - n_hidden * LOG2
    torch.testing.assert_close(res.log_weights, raw, rtol=0, atol=1e-10)


def test_two_point_anneal_makes_no_transition() -> None:
    rbm = random_rbm(5, 3, 12)
    path = base_rate_path(rbm)
    g = torch.Generator().manual_seed(3)
    init = path.sample_start(11, g)
    state_before = torch.get_rng_state()
    run = anneal(path, linear_betas(2), init=init, generator=g)
    assert torch.equal(run.final_state.visible, init.visible)
    torch.testing.assert_close(run.log_weights, path.log_f(init, 1.0) - path.log_f(init, 0.0))
    assert torch.equal(torch.get_rng_state(), state_before)  # the global RNG is never touched


@pytest.mark.parametrize("sampler", ["gibbs", "flip"])
def test_zero_weights_give_exact_log_z_with_constant_weights(sampler: str) -> None:
    g = torch.Generator().manual_seed(31)
    b = torch.randn(7, generator=g, dtype=F64)
    c = 1.5 * torch.randn(5, generator=g, dtype=F64)
    rbm = RBM(7, 5, vbias=b, hbias=c, dtype=F64)
    closed_form = float(softplus(b).sum() + softplus(c).sum())
    assert exact_log_z_value(rbm) == pytest.approx(closed_form, abs=1e-12)
    for kwargs in ({"base_vbias": rbm.vbias.detach()}, {}):  # the default base is the same
        res = ais(base_rate_path(rbm, **kwargs), n_chains=13, betas=23, sampler=sampler, seed=4, check=False)
        assert res.log_z == pytest.approx(closed_form, abs=1e-10)
        lw = res.log_weights
        assert float(lw.max() - lw.min()) < 1e-10  # every chain carries the same weight
        assert float(lw[0]) == pytest.approx(float(softplus(c).sum()) - 5 * LOG2, abs=1e-10)
        assert res.log_z_stderr < 1e-10
        assert res.ess == pytest.approx(13.0)


def test_zero_weights_and_zero_hidden_biases_give_zero_log_weights() -> None:
    b = torch.linspace(-2.0, 2.0, 7, dtype=F64)
    rbm = RBM(7, 3, vbias=b, dtype=F64)
    res = ais(base_rate_path(rbm), n_chains=5, betas=11, seed=0, check=False)
    assert float(res.log_weights.abs().max()) < 1e-12
    assert res.log_z == pytest.approx(float(softplus(b).sum()) + 3 * LOG2, abs=1e-12)


# ------------------------------------------------------------------------------ ratio path
def test_ais_log_ratio_between_rbms_with_different_hidden_counts() -> None:
    rbm_a = random_rbm(11, 3, 51)
    rbm_b = random_rbm(11, 5, 52)
    exact_a, exact_b = exact_log_z_value(rbm_a), exact_log_z_value(rbm_b)
    res = ais(ratio_path(rbm_a, rbm_b), n_chains=100, betas=501, seed=53, check=False)
    assert res.is_ratio and res.n_steps == 500
    assert res.settings["start"] == "exact samples of A"
    assert "warning" not in res.settings
    assert abs(res.log_ratio - (exact_b - exact_a)) <= K_SIGMA * res.log_z_stderr
    # log Z_B = log Z_A + log(Z_B / Z_A), bands shifted alike
    assert res.reference_log_z == pytest.approx(exact_a, abs=1e-10)
    assert res.log_z == pytest.approx(res.reference_log_z + res.log_ratio, abs=1e-12)
    _assert_within(res, exact_b)
    d = res.to_dict()
    for key in ("log_ratio", *(f"log_ratio_{k}" for k in BAND_KEYS)):
        assert key in d
    for k in BAND_KEYS:
        assert d[f"log_z_{k}"] == pytest.approx(d[f"log_ratio_{k}"] + exact_a, abs=1e-10)
    assert d["log_ratio_minus_sigma"] < d["log_ratio"] < d["log_ratio_plus_sigma"]


def test_ais_log_ratio_with_more_hidden_than_visible_units_in_a() -> None:
    rbm_a = random_rbm(5, 7, 61)
    rbm_b = random_rbm(5, 3, 62)
    res = ais(ratio_path(rbm_a, rbm_b), n_chains=100, betas=301, seed=63, check=False)
    assert (
        abs(res.log_ratio - (exact_log_z_value(rbm_b) - exact_log_z_value(rbm_a)))
        <= K_SIGMA * res.log_z_stderr
    )


def test_ais_log_ratio_with_approximate_start_is_labelled() -> None:
    rbm_a = random_rbm(11, 3, 71)
    rbm_b = random_rbm(11, 5, 72)
    path = ratio_path(rbm_a, rbm_b, max_bits=2, start_chain_steps=20)
    with pytest.warns(UserWarning, match="not exactly unbiased"):
        res = ais(path, n_chains=17, betas=31, seed=1, check=False)
    assert "warning" in res.settings
    assert res.reference_log_z is None and res.log_z is None
    d = json.loads(res.to_json())
    assert all(d[key] is None for key in RECORD_KEYS[1:6])
    assert math.isfinite(d["log_ratio"])


def test_ratio_path_rejects_different_visible_layers() -> None:
    with pytest.raises(BoltzkitError, match="share their visible units"):
        ratio_path(random_rbm(5, 3, 2), random_rbm(7, 3, 1))


# -------------------------------------------------------------- unbiasedness and lower bound
@pytest.fixture(scope="module", params=["gibbs", "flip", "blend:0.5"])
def many_noisy_runs(request) -> tuple[torch.Tensor, float]:
    """400 independent, deliberately noisy runs (4 chains, 2 steps) on a 7 x 3 model."""
    rbm = random_rbm(7, 3, 11, scale=1.2)
    path = base_rate_path(rbm)
    log_z = [
        ais(path, n_chains=4, betas=3, sampler=request.param, seed=10_000 + i, check=False).log_z
        for i in range(400)
    ]
    return torch.tensor(log_z, dtype=F64), exact_log_z_value(rbm)


def test_z_hat_is_unbiased_over_many_seeds(many_noisy_runs) -> None:
    log_z, exact = many_noisy_runs
    ratio = torch.exp(log_z - exact)
    se = float(ratio.std()) / math.sqrt(ratio.numel())
    assert float(ratio.std()) > 0.1  # the runs are noisy, so the check has power
    assert abs(float(ratio.mean()) - 1.0) <= K_SIGMA * se


def test_log_z_hat_is_a_stochastic_lower_bound(many_noisy_runs) -> None:
    log_z, exact = many_noisy_runs
    se = float(log_z.std()) / math.sqrt(log_z.numel())
    assert float(log_z.mean()) <= exact + K_SIGMA * se
    # Markov's inequality: P(log Z_hat > log Z + log 2) <= 1/2
    frac = float((log_z > exact + LOG2).to(F64).mean())
    assert frac <= 0.5 + K_SIGMA * math.sqrt(0.25 / log_z.numel())


# ------------------------------------------------------------------------ adaptive schedules
def test_adaptive_betas_shape_and_estimate() -> None:
    rbm = random_rbm(11, 5, 81, scale=1.2)
    path = base_rate_path(rbm)
    betas = adaptive_betas(path, 200, n_chains=50, generator=torch.Generator().manual_seed(0))
    assert betas.dtype == F64 and betas.numel() == 201
    assert float(betas[0]) == 0.0 and float(betas[-1]) == 1.0
    assert bool((betas[1:] >= betas[:-1]).all())
    res = ais(path, n_chains=100, betas="adaptive:300", seed=82, check=False)
    assert res.n_steps == 300
    assert res.settings["schedule"].startswith("adaptive (300 steps")
    _assert_within(res, exact_log_z_value(rbm))


# ----------------------------------------------------------------------------- determinism
def test_same_seed_same_log_weights_different_seed_different() -> None:
    rbm = random_rbm(7, 5, 91)
    kw = {"n_chains": 23, "betas": 41, "sampler": "blend:0.5"}
    path = base_rate_path(rbm)
    a = ais(path, seed=123, **kw)
    b = ais(path, seed=123, **kw)
    c = ais(path, seed=124, **kw)
    assert torch.equal(a.log_weights, b.log_weights)
    assert not torch.equal(a.log_weights, c.log_weights)
    d = ais(path, seed=make_generator(123), **kw)
    assert torch.equal(a.log_weights, d.log_weights)
    assert d.settings["seed"] == "generator"
    ra = ais(ratio_path(random_rbm(7, 3, 92), rbm), n_chains=7, betas=21, seed=5, check=False)
    rb = ais(ratio_path(random_rbm(7, 3, 92), rbm), n_chains=7, betas=21, seed=5, check=False)
    assert torch.equal(ra.log_weights, rb.log_weights)


def test_invalid_settings_are_refused() -> None:
    rbm = random_rbm(5, 3, 1)
    path = base_rate_path(rbm)
    with pytest.raises(BoltzkitError, match="chains"):
        ais(path, n_chains=0, betas=5, check=False)
    with pytest.raises(BoltzkitError, match="sweeps"):
        ais(path, n_chains=3, betas=5, sweeps=0, check=False)
    with pytest.raises(BoltzkitError, match="sampler"):
        ais(path, n_chains=3, betas=5, sampler="metropolis", check=False)
    with pytest.raises(BoltzkitError, match="wrong width"):
        base_rate_path(rbm, data=torch.zeros(4, 7))


# ---------------------------------------------------------------------------- result record
def test_record_keys_and_bands_match_the_formulas() -> None:
    rbm = random_rbm(7, 3, 101)
    res = ais(base_rate_path(rbm), n_chains=50, betas=101, seed=2, check=False)
    d = json.loads(res.to_json())
    for key in RECORD_KEYS:
        assert key in d, key
    assert "log_ratio" not in d
    assert d["method"] == "ais" and d["n_chains"] == 50 and d["n_steps"] == 100
    assert d["seconds"] > 0
    # the bands by hand: Z_hat = Z_0 mean(w), sigma = Z_0 std(w) / sqrt(M) (S&M 2008, Eqs. 11-12)
    log_z0 = res.log_z_start
    w = torch.exp(res.log_weights)
    z_hat = float(w.mean())
    sigma = float(w.std()) / math.sqrt(w.numel())
    assert d["log_z"] == pytest.approx(log_z0 + math.log(z_hat), abs=1e-10)
    for key, k in (("minus_sigma", -1), ("plus_sigma", 1), ("minus_3sigma", -3), ("plus_3sigma", 3)):
        assert d[f"log_z_{key}"] == pytest.approx(log_z0 + math.log(z_hat + k * sigma), abs=1e-10)
    assert d["ess"] == pytest.approx(float(w.sum() ** 2 / (w**2).sum()), rel=1e-12)
    assert res.log_z_stderr == pytest.approx(sigma / z_hat, rel=1e-10)


def test_lower_band_is_none_when_z_minus_3_sigma_is_not_positive() -> None:
    res = LogZResult.from_log_weights("ais", torch.tensor([0.0, 50.0], dtype=F64), log_z_start=1.5, n_steps=9)
    band = res.band
    assert band.minus_3sigma is None
    assert band.value == pytest.approx(1.5 + 50.0 - LOG2 + math.log1p(math.exp(-50.0)))
    assert band.plus_3sigma > band.plus_sigma > band.value
    d = res.to_dict()  # one run carries the estimate: unreliable, so its record holds no band at all
    assert d["reliable"] is False and d["log_z_plus_3sigma"] is None and d["log_z"] == band.value
    text = res.to_json()  # allow_nan=False: it would raise on NaN
    assert "NaN" not in text and json.loads(text)["log_z_minus_3sigma"] is None
    # a band whose lower end stays positive is not None
    ok = LogZResult.from_log_weights(
        "ais", torch.tensor([0.0, 0.1, -0.1], dtype=F64), log_z_start=0.0, n_steps=1
    )
    assert ok.band.minus_3sigma is not None  # (three runs: the record withholds it as unreliable)


def test_extreme_log_weights_do_not_overflow() -> None:
    lw = torch.tensor([0.0, 5000.0, -3000.0, 4990.0], dtype=F64)
    res = LogZResult.from_log_weights("ais", lw, log_z_start=-10.0, n_steps=3)
    expected = -10.0 + 5000.0 + math.log1p(math.exp(-10.0)) - math.log(4)
    assert res.log_z == pytest.approx(expected, abs=1e-9)
    d = json.loads(res.to_json())
    for key in ("log_z", "ess"):
        assert math.isfinite(d[key]), key
    assert d["reliable"] is False and d["log_z_plus_3sigma"] is None  # two runs carry it: no band
    band = res.band
    assert band.value < band.plus_sigma < band.plus_3sigma < 5001.0
    assert 1.0 <= d["ess"] <= 2.0
    assert math.isfinite(res.log_z_stderr)


def test_pool_of_two_runs_equals_one_run_over_the_concatenated_weights() -> None:
    rbm = random_rbm(7, 3, 111)
    path = base_rate_path(rbm)
    r1 = ais(path, n_chains=13, betas=51, seed=1, check=False)
    r2 = ais(path, n_chains=17, betas=51, seed=2, check=False)
    pooled = LogZResult.pool([r1, r2])
    one = LogZResult.from_log_weights(
        "ais", torch.cat([r1.log_weights, r2.log_weights]), log_z_start=r1.log_z_start, n_steps=50
    )
    assert pooled.n_chains == 30
    assert pooled.log_z == pytest.approx(one.log_z, abs=1e-12)
    assert pooled.ess == pytest.approx(one.ess, rel=1e-12)
    assert pooled.log_z_stderr == pytest.approx(one.log_z_stderr, rel=1e-12)
    pd, od = pooled.to_dict(), one.to_dict()
    for key in RECORD_KEYS[1:6]:
        assert pd[key] == pytest.approx(od[key], abs=1e-12)
    assert pooled.settings["seed"] == [1, 2] and pooled.settings["pooled_runs"] == 2
    other = ais(path, n_chains=13, betas=21, seed=3, check=False)
    with pytest.raises(ValueError, match="same estimator"):
        LogZResult.pool([r1, other])


# -------------------------------------------------------------------------------- base rate
def test_fit_base_rate_with_always_on_and_always_off_pixels() -> None:
    g = torch.Generator().manual_seed(7)
    data = (torch.rand(29, 5, generator=g, dtype=F64) < 0.5).to(F64)
    data[:, 0], data[:, 3] = 1.0, 0.0
    b = fit_base_rate(data, smoothing=0.01)
    assert b.dtype == F64 and b.shape == (5,)
    assert bool(torch.isfinite(b).all())
    n, a = 29, 0.01 * 29
    assert float(b[0]) == pytest.approx(math.log((n + a) / a), rel=1e-12)
    assert float(b[3]) == pytest.approx(-float(b[0]), rel=1e-12)  # symmetric smoothing
    p = (data.sum(0) + a) / (n + 2 * a)
    torch.testing.assert_close(torch.sigmoid(b), p)


def test_fit_base_rate_refuses_bad_input() -> None:
    with pytest.raises(BoltzkitError):
        fit_base_rate(torch.zeros(0, 5))
    with pytest.raises(BoltzkitError):
        fit_base_rate(torch.zeros(5))
    with pytest.raises(BoltzkitError, match="smoothing"):
        fit_base_rate(torch.zeros(3, 5), smoothing=0.0)


def test_base_rate_log_z_closed_form() -> None:
    b = torch.tensor([0.3, -1.7, 2.2, 0.0, -0.4], dtype=F64)
    v = bit_states(0, 32, 5)
    by_enumeration = float(torch.logsumexp(v @ b, 0))
    assert base_rate_log_z(b) == pytest.approx(by_enumeration, abs=1e-12)
    assert base_rate_log_z(b) == pytest.approx(sum(math.log1p(math.exp(x)) for x in b.tolist()), abs=1e-12)
    # the factorial base model of a path (S2 Eq. 43): visible biases b, one uniform hidden layer
    visible_only = BoltzmannMachine.independent([b])
    assert visible_only.n_hidden == 0 and visible_only.kind == "independent"
    assert exact_log_z_value(visible_only) == pytest.approx(by_enumeration, abs=1e-12)
    path = base_rate_path(RBM(5, 3, dtype=F64), base_vbias=b)
    assert path.model_a.n_hidden == 3 and not path.model_a.coupling_keys
    assert path.log_z_a == pytest.approx(base_rate_log_z(b) + 3 * LOG2, abs=1e-12)
    assert exact_log_z_value(path.model_a) == pytest.approx(by_enumeration + 3 * LOG2, abs=1e-12)


def _assert_base(path, vbias: torch.Tensor, like: RBM) -> None:
    """The path starts at the factorial model with visible biases ``vbias`` and zero hidden biases
    (S2 Eq. 43: an RBM with zero weights) and ends at ``like``."""
    base = path.model_a
    assert base.kind == "independent" and not base.coupling_keys and not path.is_ratio
    assert base.layer_sizes == like.layer_sizes and base.dtype == like.dtype
    assert path.model_b is like
    torch.testing.assert_close(base.bias(0).detach(), vbias.to(like.dtype), rtol=0, atol=0)
    assert torch.equal(base.bias(1).detach(), torch.zeros(like.n_hidden, dtype=like.dtype))
    assert path.log_z_a == pytest.approx(base_rate_log_z(vbias) + like.n_hidden * LOG2, abs=1e-12)


def test_base_rate_path_sources() -> None:
    rbm = random_rbm(5, 3, 1)
    given_b = torch.arange(5, dtype=F64) / 5
    path = base_rate_path(rbm, base_vbias=given_b)
    assert path.base_name == "given visible biases"
    _assert_base(path, given_b, rbm)
    path = base_rate_path(rbm)
    assert path.base_name.startswith("model visible biases")
    _assert_base(path, rbm.vbias.detach(), rbm)
    data = torch.tensor([[1.0, 0.0, 1.0, 0.0, 1.0]] * 3, dtype=F64)
    path = base_rate_path(rbm, data=data)
    assert path.base_name == "base rates of the data"
    _assert_base(path, fit_base_rate(data), rbm)
    # given biases win over data, as before
    assert base_rate_path(rbm, data=data, base_vbias=given_b).base_name == "given visible biases"


def test_ais_refuses_tempering_as_its_kernel_alone_or_repeated_and_takes_composed_samplers() -> None:
    """AIS moves each chain at its own beta, so a sampler with replicas cannot be its kernel: the
    binary paths refuse it in one line as the unit paths do (before, a tempering sampler failed
    deep inside with a message about its replicas' chain count). Cycles of repeats run."""
    from boltzkit.estimators import estimate_log_z

    model = random_rbm(8, 4, seed=0)
    for sampler in ("pt:3", "(pt:3)*2"):
        with pytest.raises(BoltzkitError, match="own inverse temperature") as info:
            estimate_log_z(model, "ais", n_chains=20, betas=50, seed=0, sampler=sampler)
        assert "without replicas" in str(info.value)
    composed = estimate_log_z(model, "ais", n_chains=400, betas=200, seed=0, sampler="gibbs*2+flip")
    assert abs(composed.log_z - exact_log_z_value(model)) < K_SIGMA * max(composed.log_z_stderr, 1e-3)
