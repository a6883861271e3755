"""Reverse AIS / sandwich, simple importance sampling, bridge sampling, likelihoods, dispatch.

Tiny float64 RBMs with prime layer sizes, whose log Z is known by enumeration. Every statistical
tolerance is a multiple (5) of the estimator's own standard error.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import K_SIGMA, exact_log_z_value, mean_and_se, random_rbm

from boltzkit.errors import BoltzkitError, DataError, IntractableError
from boltzkit.estimators import (
    METHODS,
    LogZResult,
    ais,
    base_rate_path,
    dataset_log_prob,
    estimate_log_ratio,
    estimate_log_z,
    exact_log_prob,
    exact_log_z,
    ratio_path,
    reverse_ais,
    sandwich,
    sis,
)
from boltzkit.estimators import bridge as bridge_sampling
from boltzkit.estimators.reverse import BOUND_EXACT, BOUND_HEURISTIC
from boltzkit.models.rbm import RBM


@pytest.fixture(scope="module")
def rbm() -> RBM:
    return random_rbm(7, 5, seed=1)


@pytest.fixture(scope="module")
def path(rbm: RBM):
    """The base-rate path to ``rbm`` (base: its own visible biases, zero weights)."""
    return base_rate_path(rbm)


@pytest.fixture(scope="module")
def exact(rbm: RBM) -> float:
    return exact_log_z_value(rbm)


@pytest.fixture(scope="module")
def data(rbm: RBM) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    return (torch.rand(23, rbm.n_visible, generator=g) < 0.4).to(torch.float64)


def _group_log_estimates(result: LogZResult, group: int) -> tuple[float, float]:
    """Mean and standard error of ``log Z_hat`` over independent groups of ``group`` chains."""
    lw = result.log_weights.reshape(-1, group)
    per = torch.logsumexp(lw, 1) - math.log(group)
    per = result.log_z_start - per if result.reciprocal else result.log_z_start + per
    return float(per.mean()), float(per.std(unbiased=True)) / math.sqrt(per.numel())


# -------------------------------------------------------------------------- reverse AIS, BDMC
def test_forward_and_reverse_bracket_exact_log_z(path, exact: float) -> None:
    fwd = ais(path, n_chains=2000, betas=6, seed=11, check=False)
    rev = reverse_ais(path, n_chains=2000, betas=6, seed=12)
    assert rev.method == "reverse-ais" and rev.reciprocal
    assert rev.settings["bound"] == BOUND_EXACT
    # means of log-estimates, each from 10 chains: E[log Z_fwd] <= log Z <= E[log Z_rev]
    lo, se_lo = _group_log_estimates(fwd, 10)
    hi, se_hi = _group_log_estimates(rev, 10)
    assert lo <= exact + K_SIGMA * se_lo
    assert hi >= exact - K_SIGMA * se_hi
    # single-chain bounds: log Z_0 + E[log w_fwd] <= log Z <= log Z_0 - E[log w_rev]
    m_f, se_f = mean_and_se(fwd.log_weights)
    m_r, se_r = mean_and_se(rev.log_weights)
    assert fwd.log_z_start + m_f <= exact + K_SIGMA * se_f
    assert rev.log_z_start - m_r >= exact - K_SIGMA * se_r
    assert rev.log_z_start - m_r - (fwd.log_z_start + m_f) > K_SIGMA * math.hypot(se_f, se_r)


def test_forward_and_reverse_agree_with_exact_on_a_fine_schedule(path, exact: float) -> None:
    fwd = ais(path, n_chains=1000, betas=101, seed=21, check=False)
    rev = reverse_ais(path, n_chains=1000, betas=101, seed=22)
    for res in (fwd, rev):
        assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr


def test_reverse_bands_are_the_image_of_the_reciprocal_interval(path) -> None:
    rev = reverse_ais(path, n_chains=300, betas=4, seed=3)
    w = torch.exp(rev.log_weights)
    r, sigma = float(w.mean()), float(w.std(unbiased=True)) / math.sqrt(w.numel())
    b = rev.band
    assert b.value == pytest.approx(rev.log_z_start - math.log(r), abs=1e-10)
    assert b.minus_sigma == pytest.approx(rev.log_z_start - math.log(r + sigma), abs=1e-10)
    assert b.minus_3sigma == pytest.approx(rev.log_z_start - math.log(r + 3 * sigma), abs=1e-10)
    if r > 3 * sigma:
        assert b.plus_3sigma == pytest.approx(rev.log_z_start - math.log(r - 3 * sigma), abs=1e-10)
    else:
        assert b.plus_3sigma is None
    assert b.minus_3sigma <= b.minus_sigma <= b.value <= b.plus_sigma
    assert rev.log_z_stderr == pytest.approx(sigma / r, rel=1e-10)


def test_reverse_starts_approximate_are_labelled(rbm: RBM, path, data: torch.Tensor) -> None:
    chains = reverse_ais(path, n_chains=50, betas=11, start="chains", start_chain_steps=20, seed=0)
    from_data = reverse_ais(
        path, n_chains=50, betas=11, start="data", start_data=data, start_chain_steps=20, seed=0
    )
    auto = reverse_ais(
        base_rate_path(rbm, max_bits=3), n_chains=50, betas=11, start="auto", start_chain_steps=20, seed=0
    )
    for res in (chains, from_data, auto):
        assert res.settings["bound"] == BOUND_HEURISTIC
        assert "approximate" in res.settings["start"] and "warning" in res.settings
        assert math.isfinite(res.log_z)
    assert reverse_ais(path, n_chains=5, betas=3, start="auto").settings["bound"] == BOUND_EXACT


def test_reverse_start_errors(rbm: RBM, path) -> None:
    with pytest.raises(IntractableError, match="start='chains'"):
        reverse_ais(base_rate_path(rbm, max_bits=3), n_chains=5, betas=3)
    with pytest.raises(BoltzkitError, match="start_data"):
        reverse_ais(path, n_chains=5, betas=3, start="data")
    with pytest.raises(BoltzkitError, match="start mode"):
        reverse_ais(path, n_chains=5, betas=3, start="nope")
    with pytest.raises(DataError, match="width"):
        reverse_ais(path, n_chains=5, betas=3, start="data", start_data=torch.zeros(4, 3))


def test_sandwich_gap_shrinks_as_the_schedule_grows(path) -> None:
    coarse = sandwich(path, n_chains=2000, betas=3, seed=5)
    fine = sandwich(path, n_chains=2000, betas=101, seed=6)
    gc, sc = coarse.settings["gap_per_chain"], coarse.settings["gap_per_chain_stderr"]
    gf, sf = fine.settings["gap_per_chain"], fine.settings["gap_per_chain_stderr"]
    # the per-chain gap estimates the symmetrised KL between forward and reverse chains: >= 0
    assert gc >= -K_SIGMA * sc and gf >= -K_SIGMA * sf
    assert gc - gf > K_SIGMA * math.hypot(sc, sf)


def test_sandwich_record(path, exact: float) -> None:
    s = sandwich(path, n_chains=400, betas=21, seed=9)
    fwd = ais(path, n_chains=400, betas=21, seed=9, check=False)
    assert s.method == "sandwich"
    # forward half is ais with the same seed, number for number
    assert torch.equal(s.log_weights, fwd.log_weights) and s.log_z == fwd.log_z
    d = s.to_dict()
    assert d["log_z"] == d["log_z_lower"] == s.forward.log_z
    assert d["log_z_upper"] == s.reverse.log_z
    assert d["gap"] == pytest.approx(d["log_z_upper"] - d["log_z_lower"], abs=1e-12)
    assert d["upper_bound"].startswith(BOUND_EXACT) and d["lower_bound"].startswith("stochastic lower bound")
    assert d["n_steps"] == 20
    assert d["reverse"]["log_z"] == s.reverse.band.value
    json.loads(json.dumps(d, allow_nan=False))
    assert len(s.to_dict(include_weights=True)["reverse_log_weights"]) == 400
    for key in ("log_z_lower", "log_z_upper"):
        res = s.forward if key == "log_z_lower" else s.reverse
        assert abs(d[key] - exact) <= K_SIGMA * res.log_z_stderr


# ------------------------------------------------------------------------------------- SIS
def test_sis_equals_ais_with_the_two_point_grid(rbm: RBM) -> None:
    bias = torch.linspace(-1.0, 1.0, rbm.n_visible, dtype=torch.float64)
    for kw in ({}, {"base_vbias": bias}):
        p = base_rate_path(rbm, **kw)
        by_sis = sis(p, n_chains=300, seed=4)
        by_ais = ais(p, n_chains=300, betas=2, seed=4, check=False)
        assert by_sis.method == "sis" and by_sis.n_steps == 1 and by_ais.n_steps == 1
        assert by_sis.log_z == pytest.approx(by_ais.log_z, abs=1e-10)
        # SIS's raw weights are the path's two-point AIS weights log p*_1(x) - log p*_0(x) (same
        # draws x ~ p_0): no constant between them any more
        assert by_sis.log_z_start == by_ais.log_z_start
        torch.testing.assert_close(by_sis.log_weights, by_ais.log_weights)
        x = p.sample_start(300, torch.Generator().manual_seed(4))
        torch.testing.assert_close(by_sis.log_weights, p.log_f(x, 1.0) - p.log_f(x, 0.0), rtol=0, atol=0)


def test_sis_within_5_se_of_exact(path, exact: float) -> None:
    res = sis(path, n_chains=20_000, seed=8)
    assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr


# ---------------------------------------------------------------------------------- bridge
@pytest.mark.parametrize("bridge", ["geometric", "optimal"])
def test_bridge_within_5_se_of_exact(path, exact: float, bridge: str) -> None:
    res = bridge_sampling(path, n_chains=4000, bridge=bridge, seed=13)
    assert res.method == "bridge" and res.settings["bridge"] == bridge
    assert "exact" in res.settings["samples_b"] and "warning" not in res.settings
    assert res.log_z_stderr > 0 and res.n_chains == 8000
    assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr
    b = res.band
    assert b.minus_3sigma <= b.minus_sigma <= b.value <= b.plus_sigma <= b.plus_3sigma
    json.loads(json.dumps(res.to_dict(), allow_nan=False))


def test_bridge_with_gibbs_samples_is_labelled(rbm: RBM, exact: float) -> None:
    res = bridge_sampling(base_rate_path(rbm, max_bits=3), n_chains=2000, chain_steps=100, seed=14)
    assert "approximate" in res.settings["samples_b"] and "warning" in res.settings
    assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr


def test_bridge_log_ratio(rbm: RBM, exact: float) -> None:
    ref = random_rbm(7, 3, seed=2)
    res = bridge_sampling(ratio_path(ref, rbm), n_chains=3000, seed=15)
    truth = exact - float(exact_log_z(ref).log_z)
    assert res.is_ratio and abs(res.log_ratio - truth) <= K_SIGMA * res.log_z_stderr
    assert res.log_z == pytest.approx(res.reference_log_z + res.log_ratio, abs=1e-12)


# ------------------------------------------------------------------------------ likelihoods
def test_log_prob_with_exact_log_z_matches_exact_log_prob(rbm: RBM, data: torch.Tensor) -> None:
    lz = exact_log_z(rbm)
    res = dataset_log_prob(rbm, data, lz, per_example=True, batch_size=4)
    truth = exact_log_prob(rbm, data, lz)
    assert res.mean_log_prob == pytest.approx(float(truth.mean()), abs=1e-12)
    torch.testing.assert_close(res.per_example, truth)
    assert res.n == 23 and res.log_z_method == "exact"
    for k in ("minus_sigma", "plus_sigma", "minus_3sigma", "plus_3sigma"):
        assert getattr(res, f"mean_log_prob_{k}") == pytest.approx(res.mean_log_prob, abs=1e-12)
    # batching and input type do not matter; a plain number counts as exact
    same = dataset_log_prob(rbm, data.numpy().astype(np.uint8), float(lz.log_z))
    assert same.mean_log_prob == pytest.approx(res.mean_log_prob, abs=1e-12)
    assert same.per_example is None


def test_log_prob_bands_follow_the_log_z_band(rbm: RBM, path, data: torch.Tensor) -> None:
    lz = ais(path, n_chains=50, betas=5, seed=2, check=False)
    res = dataset_log_prob(rbm, data, lz)
    b, m = lz.band, res.mean_neg_free_energy
    assert res.mean_log_prob == pytest.approx(m - lz.log_z, abs=1e-12)
    assert res.mean_log_prob_minus_3sigma == pytest.approx(m - b.plus_3sigma, abs=1e-12)
    assert res.mean_log_prob_plus_sigma == pytest.approx(m - b.minus_sigma, abs=1e-12)
    assert (
        res.mean_log_prob_minus_3sigma
        <= res.mean_log_prob_minus_sigma
        <= res.mean_log_prob
        <= res.mean_log_prob_plus_sigma
        <= res.mean_log_prob_plus_3sigma
    )
    d = res.to_dict()
    assert d["log_z_plus_3sigma"] == b.plus_3sigma and d["mean_log_prob_conservative"] is None


def test_log_prob_none_bands_propagate(rbm: RBM, data: torch.Tensor) -> None:
    wide = LogZResult.from_log_weights(
        "ais", torch.tensor([0.0, -40.0, -40.0, -40.0], dtype=torch.float64), log_z_start=9.0, n_steps=1
    )
    assert wide.band.minus_3sigma is None
    res = dataset_log_prob(rbm, data, wide)
    assert res.mean_log_prob_plus_3sigma is None and res.mean_log_prob_minus_3sigma is not None
    rev = LogZResult.from_log_weights(
        "reverse-ais",
        torch.tensor([0.0, -40.0, -40.0, -40.0], dtype=torch.float64),
        log_z_start=9.0,
        n_steps=1,
        reciprocal=True,
    )
    res_rev = dataset_log_prob(rbm, data, rev)
    assert res_rev.mean_log_prob_minus_3sigma is None and res_rev.mean_log_prob_plus_3sigma is not None
    for r in (res, res_rev):
        json.loads(json.dumps(r.to_dict(include_per_example=True), allow_nan=False))


def test_log_prob_with_sandwich_gives_conservative_value(rbm: RBM, path, data: torch.Tensor) -> None:
    s = sandwich(path, n_chains=100, betas=11, seed=1)
    res = dataset_log_prob(rbm, data, s)
    assert res.mean_log_prob_conservative == pytest.approx(
        res.mean_neg_free_energy - s.settings["log_z_upper"], abs=1e-12
    )


def test_log_prob_validation(rbm: RBM, data: torch.Tensor) -> None:
    lz = exact_log_z(rbm)
    with pytest.raises(DataError, match="2-D"):
        dataset_log_prob(rbm, data[0], lz)
    with pytest.raises(DataError, match="width"):
        dataset_log_prob(rbm, data[:, :5], lz)
    with pytest.raises(DataError, match="binary"):
        dataset_log_prob(rbm, data * 0.5, lz)
    with pytest.raises(DataError, match="empty"):  # check_binary's message for zero rows
        dataset_log_prob(rbm, data[:0], lz)
    with pytest.raises(BoltzkitError, match="batch_size"):
        dataset_log_prob(rbm, data, lz, batch_size=0)
    ratio = LogZResult.from_log_weights(
        "ais", torch.zeros(3, dtype=torch.float64), log_z_start=0.0, n_steps=1, is_ratio=True
    )
    with pytest.raises(BoltzkitError, match="no log Z"):
        dataset_log_prob(rbm, data, ratio)
    assert dataset_log_prob(rbm, data.bool(), lz).mean_log_prob == pytest.approx(
        float(exact_log_prob(rbm, data, lz).mean()), abs=1e-12
    )


# ----------------------------------------------------------------------------- dispatching
def test_estimate_log_z_dispatch(rbm: RBM, exact: float) -> None:
    for method in METHODS:
        res = estimate_log_z(rbm, method, n_chains=200, betas=21, seed=1)
        assert res.method == method
        assert math.isfinite(res.log_z)
        if method == "exact":
            assert res.log_z == exact
        else:
            assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr
    assert estimate_log_z(rbm, "reverse_ais", n_chains=5, betas=3).method == "reverse-ais"
    heuristic = estimate_log_z(rbm, "reverse-ais", n_chains=5, betas=3, max_bits=3)
    assert heuristic.settings["bound"] == BOUND_HEURISTIC


def test_estimate_log_z_errors(rbm: RBM) -> None:
    with pytest.raises(BoltzkitError, match="unknown log Z method"):
        estimate_log_z(rbm, "mcmc")
    with pytest.raises(IntractableError):
        estimate_log_z(rbm, "exact", max_bits=3)
    with pytest.raises(BoltzkitError, match="visible"):
        estimate_log_ratio(rbm, random_rbm(5, 3, seed=2))
    with pytest.raises(BoltzkitError, match="unknown log Z method"):
        estimate_log_ratio(rbm, random_rbm(7, 3, seed=2), "mcmc")


def test_estimate_log_ratio_methods(rbm: RBM, exact: float) -> None:
    ref = random_rbm(7, 3, seed=2)
    log_z_a = float(exact_log_z(ref).log_z)
    truth = exact - log_z_a
    for method in METHODS:
        res = estimate_log_ratio(rbm, ref, method, n_chains=500, betas=41, seed=3)
        assert res.method == method and res.is_ratio
        assert res.reference_log_z == pytest.approx(log_z_a, abs=1e-10)
        d = res.to_dict()
        assert d["log_ratio"] == res.log_ratio
        if method == "exact":
            assert res.log_ratio == pytest.approx(truth, abs=1e-12) and res.log_z == exact
        else:
            assert abs(res.log_ratio - truth) <= K_SIGMA * res.log_z_stderr
        if method == "sandwich":
            assert {"log_ratio_lower", "log_ratio_upper", "gap", "log_z_upper"} <= d.keys()
        json.loads(json.dumps(d, allow_nan=False))


@pytest.mark.parametrize("method", ["ais", "reverse-ais", "sandwich", "sis", "bridge"])
def test_same_seed_same_numbers(rbm: RBM, method: str) -> None:
    kw = {"n_chains": 64, "betas": 11}
    a = estimate_log_z(rbm, method, seed=31, **kw)
    b = estimate_log_z(rbm, method, seed=31, **kw)
    c = estimate_log_z(rbm, method, seed=32, **kw)
    assert a.log_z == b.log_z and a.to_dict()["log_z_plus_3sigma"] == b.to_dict()["log_z_plus_3sigma"]
    assert a.log_z != c.log_z
    if a.log_weights is not None:
        assert torch.equal(a.log_weights, b.log_weights)
