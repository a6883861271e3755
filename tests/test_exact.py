"""Exact identities on tiny float64 RBMs and the LogZResult record.

Reference values: ALGORITHMS.md, Sec. 2 (exact log Z). Enumeration identities (Salakhutdinov &
Murray 2008, Eqs. 1-6): log Z by summing out either layer equals the brute-force sum over joint
states; the free energy is minus the log-sum over h of exp(-E); the conditionals are the ratios
of joint probabilities. Statistical checks use fixed seeds and 5 binomial standard errors.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import F64, assert_frequencies_match, bit_matrix, bits_to_index, random_rbm
from hypothesis import given, settings
from hypothesis import strategies as st

from boltzkit import RBM
from boltzkit.errors import BoltzkitError, IntractableError
from boltzkit.estimators import (
    LogZResult,
    effective_sample_size,
    exact_joint_distribution,
    exact_log_prob,
    exact_log_z,
    exact_sample,
    layer_log_probs,
    log_z_brute_force,
)
from boltzkit.samplers import make_operator, run_chains

SHAPES = [(5, 3), (3, 7), (7, 5)]


def joint_table(rbm: RBM, beta: float = 1.0) -> torch.Tensor:
    """Exact p_beta(v, h) as a table of shape (2^n_visible, 2^n_hidden)."""
    _, log_p = exact_joint_distribution(rbm)
    p = torch.softmax(beta * log_p, 0)
    # joint index = v_index + (h_index << n_visible): row-major (h, v), so transpose
    return p.reshape(1 << rbm.n_hidden, 1 << rbm.n_visible).t()


# --------------------------------------------------------------------------- reference values
def test_log_z_all_zero_4x3_is_7_log_2():
    result = exact_log_z(RBM(4, 3, dtype=F64))
    assert result.log_z == pytest.approx(7 * math.log(2), abs=1e-12)
    assert result.log_z == pytest.approx(4.852030, abs=5e-7)


def test_log_z_1x1_reference():
    rbm = RBM(
        1, 1, weights=torch.tensor([[1.0]]), vbias=torch.tensor([0.5]), hbias=torch.tensor([-0.5]), dtype=F64
    )
    expected = math.log(1 + math.exp(0.5) + math.exp(-0.5) + math.exp(1.0))
    assert exact_log_z(rbm).log_z == pytest.approx(expected, abs=1e-12)
    assert exact_log_z(rbm).log_z == pytest.approx(1.787339, abs=5e-7)


def rbm_3x2_reference() -> RBM:
    return RBM(
        3,
        2,
        weights=torch.tensor([[1.0, -2.0], [0.5, 1.5], [-1.0, 0.25]]),
        vbias=torch.tensor([0.1, -0.3, 0.2]),
        hbias=torch.tensor([-0.5, 0.4]),
        dtype=F64,
    )


def test_log_z_3x2_reference_by_every_enumeration():
    rbm = rbm_3x2_reference()
    by_hidden = exact_log_z(rbm)
    assert by_hidden.settings["enumerated_layer"] == "hidden" and by_hidden.settings["n_states"] == 4
    by_visible = float(torch.logsumexp(rbm.log_unnormalized_visible(bit_matrix(3)).detach(), 0))
    by_joint = log_z_brute_force(rbm)
    for value in (by_hidden.log_z, by_visible, by_joint):
        assert value == pytest.approx(3.870813, abs=5e-7)
    assert by_hidden.log_z == pytest.approx(by_joint, abs=1e-13)
    assert by_visible == pytest.approx(by_joint, abs=1e-13)


# ------------------------------------------------------------------------------ enumeration
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_hidden_visible_and_joint_enumeration_agree(shape):
    rbm = random_rbm(*shape, seed=sum(shape))
    n_v, n_h = shape
    over_hidden = float(torch.logsumexp(rbm.log_unnormalized_hidden(bit_matrix(n_h)).detach(), 0))
    over_visible = float(torch.logsumexp(rbm.log_unnormalized_visible(bit_matrix(n_v)).detach(), 0))
    brute = log_z_brute_force(rbm)
    result = exact_log_z(rbm)
    assert result.method == "exact"
    assert result.settings["enumerated_layer"] == ("hidden" if n_h <= n_v else "visible")
    assert result.settings["n_states"] == 2 ** min(n_v, n_h)
    for value in (over_hidden, over_visible, result.log_z):
        assert value == pytest.approx(brute, abs=1e-12)
    # the swapped model is the same distribution
    assert exact_log_z(rbm.swapped()).log_z == pytest.approx(brute, abs=1e-12)


@pytest.mark.parametrize("shape", [(3, 7), (7, 5)], ids=["3x7", "7x5"])
def test_chunking_does_not_change_log_z(shape):
    rbm = random_rbm(*shape, seed=3)
    reference = exact_log_z(rbm).log_z
    for chunk in (1, 2, 3, 5, 7, 31):
        assert exact_log_z(rbm, chunk_size=chunk).log_z == pytest.approx(reference, abs=1e-12)


def test_float32_arithmetic_is_close_and_float32_model_is_accepted():
    rbm = random_rbm(7, 5, seed=4)
    r32 = random_rbm(7, 5, seed=4, dtype=torch.float32)
    reference = exact_log_z(rbm).log_z
    assert exact_log_z(rbm, dtype=torch.float32).log_z == pytest.approx(reference, abs=1e-4)
    assert exact_log_z(r32).log_z == pytest.approx(reference, abs=1e-4)


@pytest.mark.parametrize("beta", [1.0, 0.37])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_free_energy_sums_out_hidden_units(shape, beta):
    rbm = random_rbm(*shape, seed=5)
    n_v, n_h = shape
    v = bit_matrix(n_v)
    h = bit_matrix(n_h)
    vv = v.repeat_interleave(h.shape[0], 0)
    hh = h.repeat(v.shape[0], 1)
    energies = rbm.energy(vv, hh).reshape(v.shape[0], h.shape[0])
    brute = -torch.logsumexp(-beta * energies, 1)
    torch.testing.assert_close(rbm.free_energy(v, beta), brute, rtol=0, atol=1e-12)
    torch.testing.assert_close(rbm.log_unnormalized_visible(v, beta), -brute, rtol=0, atol=1e-12)
    # and the other way round: summing out v
    brute_h = torch.logsumexp(-beta * energies, 0)
    torch.testing.assert_close(rbm.log_unnormalized_hidden(h, beta), brute_h, rtol=0, atol=1e-12)


@pytest.mark.parametrize("beta", [1.0, 0.37])
def test_conditionals_match_ratios_of_the_joint(beta):
    rbm = random_rbm(5, 3, seed=6)
    table = joint_table(rbm, beta)  # (2^5, 2^3)
    v = bit_matrix(5)
    h = bit_matrix(3)
    p_v = table.sum(1, keepdim=True)
    p_h = table.sum(0, keepdim=True)
    expected_h = (table @ h) / p_v  # p(h_j = 1 | v), (32, 3)
    expected_v = (table.t() @ v) / p_h.t()  # p(v_i = 1 | h), (8, 5)
    torch.testing.assert_close(rbm.prob_h_given_v(v, beta), expected_h, rtol=0, atol=1e-12)
    torch.testing.assert_close(rbm.prob_v_given_h(h, beta), expected_v, rtol=0, atol=1e-12)
    # the marginals from layer_log_probs at beta = 1
    if beta == 1.0:
        _, log_pv = layer_log_probs(rbm, "visible")
        _, log_ph = layer_log_probs(rbm, "hidden")
        torch.testing.assert_close(log_pv.exp(), p_v.squeeze(1), rtol=0, atol=1e-13)
        torch.testing.assert_close(log_ph.exp(), p_h.squeeze(0), rtol=0, atol=1e-13)


def test_energy_at_beta_scales_and_accepts_per_chain_beta():
    rbm = random_rbm(5, 3, seed=7)
    g = torch.Generator().manual_seed(0)
    state = rbm.random_state(11, g)
    e1 = rbm.energy(state.visible, state.hidden)
    assert e1.dtype == F64 and e1.shape == (11,)
    torch.testing.assert_close(rbm.energy(state.visible, state.hidden, 0.37), 0.37 * e1, rtol=0, atol=1e-14)
    betas = torch.linspace(0, 2, 11, dtype=F64)
    torch.testing.assert_close(rbm.energy(state.visible, state.hidden, betas), betas * e1, rtol=0, atol=1e-14)
    fe = torch.stack([rbm.free_energy(state.visible[i : i + 1], float(b))[0] for i, b in enumerate(betas)])
    torch.testing.assert_close(rbm.free_energy(state.visible, betas), fe, rtol=0, atol=1e-13)
    # E(v, h) written out
    W, b, c = rbm.W.detach(), rbm.vbias.detach(), rbm.hbias.detach()
    v, h = state.visible, state.hidden
    manual = -torch.einsum("ni,ij,nj->n", v, W, h) - v @ b - h @ c
    torch.testing.assert_close(e1, manual, rtol=0, atol=1e-13)
    torch.testing.assert_close(rbm.joint_energy(state), e1, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(5, 3), (3, 7)], ids=["5x3", "3x7"])
def test_closed_form_at_zero_coupling(shape):
    g = torch.Generator().manual_seed(8)
    b = torch.randn(shape[0], generator=g, dtype=F64) * 2
    c = torch.randn(shape[1], generator=g, dtype=F64) * 2
    rbm = RBM(*shape, vbias=b, hbias=c, dtype=F64)
    closed = float(torch.nn.functional.softplus(b).sum() + torch.nn.functional.softplus(c).sum())
    assert exact_log_z(rbm).log_z == pytest.approx(closed, abs=1e-12)
    assert log_z_brute_force(rbm) == pytest.approx(closed, abs=1e-12)
    # free energy at W = 0: -b^T v - sum softplus(c)
    v = bit_matrix(shape[0])
    torch.testing.assert_close(
        rbm.free_energy(v), -(v @ b) - torch.nn.functional.softplus(c).sum(), rtol=0, atol=1e-12
    )


# --------------------------------------------------------------------------------- refusals
def test_exact_log_z_refuses_beyond_max_bits_and_points_to_ais():
    rbm = RBM(37, 31)
    with pytest.raises(IntractableError) as info:
        exact_log_z(rbm, max_bits=30)
    message = str(info.value)
    assert "2^31" in message and "2,147,483,648" in message
    assert "AIS" in message
    assert isinstance(info.value, BoltzkitError)


def test_other_enumerations_refuse_too():
    with pytest.raises(IntractableError, match="AIS"):
        layer_log_probs(RBM(29, 3), "visible", max_bits=24)
    with pytest.raises(IntractableError, match="2\\^27"):
        exact_sample(RBM(29, 27), 5, generator=0, max_bits=26)
    with pytest.raises(IntractableError, match="2\\^23"):
        exact_joint_distribution(RBM(13, 10))
    with pytest.raises(IntractableError, match="2\\^23"):
        log_z_brute_force(RBM(13, 10))


# ---------------------------------------------------------------------- probabilities, samples
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_exact_log_prob_is_normalized(shape):
    rbm = random_rbm(*shape, seed=9)
    v = bit_matrix(shape[0])
    log_z = exact_log_z(rbm)
    lp = exact_log_prob(rbm, v)
    assert float(torch.logsumexp(lp, 0)) == pytest.approx(0.0, abs=1e-12)
    torch.testing.assert_close(exact_log_prob(rbm, v, log_z), lp, rtol=0, atol=0)
    torch.testing.assert_close(exact_log_prob(rbm, v, log_z.log_z), lp, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(3, 2), (2, 3)], ids=["3x2-hidden-enumerated", "2x3-visible-enumerated"])
def test_exact_sample_matches_joint_distribution(shape):
    rbm = random_rbm(*shape, seed=10)
    n = 50_000
    _, log_p = exact_joint_distribution(rbm)
    p = log_p.exp()
    assert float(p.min()) * n > 20  # every state is expected often enough for 5 SE
    samples = exact_sample(rbm, n, generator=torch.Generator().manual_seed(11))
    assert samples.visible.shape == (n, shape[0]) and samples.hidden.shape == (n, shape[1])
    assert_frequencies_match(bits_to_index(samples.concat()), p)


@pytest.mark.parametrize("shape", [(7, 3), (3, 7)], ids=["7x3", "3x7"])
def test_exact_sample_small_layer_marginal(shape):
    rbm = random_rbm(*shape, seed=12)
    n = 50_000
    layer = "hidden" if shape[1] <= shape[0] else "visible"
    _, log_p = layer_log_probs(rbm, layer)
    samples = exact_sample(rbm, n, generator=13)
    x = samples.hidden if layer == "hidden" else samples.visible
    assert_frequencies_match(bits_to_index(x), log_p.exp())
    # same seed, same samples
    again = exact_sample(rbm, n, generator=13)
    assert torch.equal(again.concat(), samples.concat())


# ----------------------------------------------------------------------------- large weights
def test_large_weights_stay_finite():
    g = torch.Generator().manual_seed(14)
    rbm = RBM(5, 3, weights=torch.randn(5, 3, generator=g, dtype=F64) * 50.0, dtype=F64)
    log_z = exact_log_z(rbm)
    assert math.isfinite(log_z.log_z)
    assert log_z.log_z == pytest.approx(log_z_brute_force(rbm), rel=1e-10)
    v = bit_matrix(5)
    assert bool(torch.isfinite(rbm.free_energy(v)).all())
    lp = exact_log_prob(rbm, v, log_z)
    assert bool(torch.isfinite(lp).all())
    assert float(torch.logsumexp(lp, 0)) == pytest.approx(0.0, abs=1e-9)
    r32 = RBM(5, 3, weights=rbm.W.detach())
    assert exact_log_z(r32).log_z == pytest.approx(log_z.log_z, rel=1e-5)
    for spec in ("gibbs", "flip", "blend:0.5"):
        out = run_chains(rbm, make_operator(spec), rbm.random_state(8, g), 3, generator=g)
        assert all(bool(((x == 0) | (x == 1)).all()) for x in out.layers)
    samples = exact_sample(rbm, 100, generator=0)
    assert bool(torch.isfinite(samples.concat()).all())


def test_softplus_is_exact_above_20():
    """Pre-activations in (20, 40) on both layers: every enumeration agrees to 1e-12."""
    rbm = RBM(
        3,
        2,
        weights=torch.tensor([[21.3, 25.7], [-3.0, 30.1], [12.0, -8.0]]),
        vbias=torch.tensor([0.2, -0.1, 0.3]),
        hbias=torch.tensor([-0.4, 0.5]),
        dtype=F64,
    )
    brute = log_z_brute_force(rbm)
    v = bit_matrix(3)
    h = bit_matrix(2)
    with torch.no_grad():
        over_visible = float(torch.logsumexp(rbm.log_unnormalized_visible(v), 0))
        over_hidden = float(torch.logsumexp(rbm.log_unnormalized_hidden(h), 0))
        energies = rbm.energy(v.repeat_interleave(4, 0), h.repeat(8, 1)).reshape(8, 4)
        torch.testing.assert_close(rbm.free_energy(v), -torch.logsumexp(-energies, 1), rtol=0, atol=1e-12)
    assert over_visible == pytest.approx(brute, abs=1e-12)
    assert over_hidden == pytest.approx(brute, abs=1e-12)
    assert exact_log_z(rbm).log_z == pytest.approx(brute, abs=1e-12)


# ------------------------------------------------------------------------------- properties
@settings(max_examples=15, deadline=None)
@given(
    n_visible=st.integers(1, 5),
    n_hidden=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_permuting_units_leaves_log_z_unchanged(n_visible, n_hidden, seed, data):
    rbm = random_rbm(n_visible, n_hidden, seed=seed, scale=2.0)
    pv = data.draw(st.permutations(range(n_visible)))
    ph = data.draw(st.permutations(range(n_hidden)))
    W = rbm.W.detach()[pv][:, ph]
    permuted = RBM(
        n_visible,
        n_hidden,
        weights=W,
        vbias=rbm.vbias.detach()[pv],
        hbias=rbm.hbias.detach()[ph],
        dtype=F64,
    )
    assert exact_log_z(permuted).log_z == pytest.approx(exact_log_z(rbm).log_z, abs=1e-12)


# ----------------------------------------------------------------------------- LogZResult
def _numpy_band(log_w: np.ndarray, log_z_start: float, k: float) -> tuple[float | None, float]:
    """Reference log(Z -/+ k sigma) with numpy in float64 (small weights, no shifting needed)."""
    w = np.exp(log_w)
    z = w.mean()
    sigma = w.std(ddof=1) / math.sqrt(w.size)
    lower = None if z - k * sigma <= 0 else math.log(z - k * sigma) + log_z_start
    return lower, math.log(z + k * sigma) + log_z_start


def test_band_values_and_none_lower_band():
    log_w = torch.log(torch.tensor([1.0, 1.0, 1.0, 100.0], dtype=F64))
    r = LogZResult.from_log_weights("ais", log_w, log_z_start=2.5, n_steps=10, seed=1)
    assert r.log_z == pytest.approx(2.5 + math.log(25.75), abs=1e-12)
    band = r.band
    low1, up1 = _numpy_band(log_w.numpy(), 2.5, 1.0)
    low3, up3 = _numpy_band(log_w.numpy(), 2.5, 3.0)
    assert low3 is None and band.minus_3sigma is None  # Z - 3 sigma <= 0: None, never NaN
    assert band.minus_sigma == pytest.approx(low1, abs=1e-12)
    assert band.plus_sigma == pytest.approx(up1, abs=1e-12)
    assert band.plus_3sigma == pytest.approx(up3, abs=1e-12)
    assert band.minus_sigma < band.value < band.plus_sigma < band.plus_3sigma
    sigma = np.exp(log_w.numpy()).std(ddof=1) / 2.0
    assert r.log_z_stderr == pytest.approx(sigma / 25.75, rel=1e-12)
    assert r.n_chains == 4 and r.n_steps == 10


def test_lower_band_at_the_boundary_is_none_or_finite():
    # w = (2, 1): mean 1.5, sigma = std / sqrt(2) = 0.5, so Z - 3 sigma = 0 up to rounding
    r = LogZResult.from_log_weights(
        "ais", torch.log(torch.tensor([2.0, 1.0], dtype=F64)), log_z_start=0.0, n_steps=1
    )
    low = r.band.minus_3sigma
    assert low is None or (math.isfinite(low) and low < r.band.minus_sigma)
    assert r.band.minus_sigma == pytest.approx(0.0, abs=1e-12)  # log(1.5 - 0.5)


def test_bands_bracket_value_for_random_weights_and_huge_spreads():
    g = torch.Generator().manual_seed(15)
    for spread in (0.1, 2.0, 50.0, 2000.0):
        log_w = torch.randn(257, generator=g, dtype=F64) * spread + 1000.0
        r = LogZResult.from_log_weights("ais", log_w, log_z_start=-3.0, n_steps=5)
        b = r.band
        values = [b.minus_3sigma, b.minus_sigma, b.value, b.plus_sigma, b.plus_3sigma]
        assert all(x is None or math.isfinite(x) for x in values)
        present = [x for x in values if x is not None]
        assert present == sorted(present)
        assert b.value == pytest.approx(-3.0 + float(torch.logsumexp(log_w, 0)) - math.log(257), abs=1e-9)
        assert 1.0 <= r.ess <= 257.0
        json.loads(r.to_json())  # no NaN or inf reaches JSON


def test_reciprocal_bands_flip():
    log_w = torch.log(torch.tensor([0.01, 0.01, 0.01, 5.0], dtype=F64))
    r = LogZResult.from_log_weights("reverse-ais", log_w, log_z_start=4.0, n_steps=3, reciprocal=True)
    w = np.exp(log_w.numpy())
    m, s = w.mean(), w.std(ddof=1) / 2.0
    assert r.log_z == pytest.approx(4.0 - math.log(m), abs=1e-12)
    b = r.band
    assert b.minus_sigma == pytest.approx(4.0 - math.log(m + s), abs=1e-12)
    assert b.plus_sigma == pytest.approx(4.0 - math.log(m - s), abs=1e-12)
    assert b.minus_3sigma == pytest.approx(4.0 - math.log(m + 3 * s), abs=1e-12)
    assert m - 3 * s <= 0 and b.plus_3sigma is None  # r - 3 sigma <= 0: the upper end of Z is unbounded


def test_exact_result_record():
    r = exact_log_z(rbm_3x2_reference())
    b = r.band
    assert b.value == b.minus_sigma == b.plus_sigma == b.minus_3sigma == b.plus_3sigma == r.log_z
    assert r.log_z_stderr == 0.0 and r.ess is None and r.n_chains == 0
    d = json.loads(r.to_json())
    assert d["method"] == "exact" and d["log_z"] == pytest.approx(3.870813, abs=5e-7)
    assert d["enumerated_layer"] == "hidden" and d["n_states"] == 4
    assert LogZResult.pool([r, r]) is r


def test_pooling_equals_concatenated_weights():
    g = torch.Generator().manual_seed(16)
    a_w = torch.randn(50, generator=g, dtype=F64)
    b_w = torch.randn(70, generator=g, dtype=F64)
    a = LogZResult.from_log_weights("ais", a_w, log_z_start=1.0, n_steps=100, seconds=1.5, seed=1)
    b = LogZResult.from_log_weights("ais", b_w, log_z_start=1.0, n_steps=100, seconds=2.0, seed=2)
    pooled = LogZResult.pool([a, b])
    direct = LogZResult.from_log_weights("ais", torch.cat([a_w, b_w]), log_z_start=1.0, n_steps=100)
    assert pooled.log_z == pytest.approx(direct.log_z, abs=1e-13)
    assert pooled.band == direct.band
    assert pooled.n_chains == 120 and pooled.seconds == pytest.approx(3.5)
    assert pooled.settings["seed"] == [1, 2] and pooled.settings["pooled_runs"] == 2
    other = LogZResult.from_log_weights("ais", b_w, log_z_start=1.0, n_steps=99)
    with pytest.raises(ValueError, match="same estimator"):
        LogZResult.pool([a, other])
    with pytest.raises(ValueError):
        LogZResult.pool([])


def test_to_json_keys():
    log_w = torch.log(torch.tensor([1.0, 1.0, 1.0, 100.0], dtype=F64))
    r = LogZResult.from_log_weights(
        "ais", log_w, log_z_start=0.0, n_steps=7, seed=3, schedule="linear", base=torch.tensor([1.0, 2.0])
    )
    d = json.loads(r.to_json())
    for key in (
        "method",
        "log_z",
        "log_z_minus_sigma",
        "log_z_plus_sigma",
        "log_z_minus_3sigma",
        "log_z_plus_3sigma",
        "log_z_stderr",
        "ess",
        "n_chains",
        "n_steps",
        "seconds",
        "seed",
        "schedule",
        "base",
    ):
        assert key in d, key
    assert d["log_z_minus_3sigma"] is None
    assert d["n_chains"] == 4 and d["n_steps"] == 7 and d["base"] == [1.0, 2.0]
    assert "log_weights" not in d
    with_w = json.loads(r.to_json(include_weights=True))
    assert with_w["log_weights"] == pytest.approx(log_w.tolist())
    # a ratio with unknown reference: log Z fields are null, the ratio band is present
    ratio = LogZResult.from_log_weights("ais", log_w, log_z_start=0.5, n_steps=7, is_ratio=True)
    d = json.loads(ratio.to_json())
    assert ratio.log_z is None and d["log_z"] is None and d["log_z_plus_sigma"] is None
    assert d["log_ratio"] == pytest.approx(0.5 + math.log(25.75), abs=1e-12)
    known = LogZResult.from_log_weights(
        "ais", log_w, log_z_start=0.5, n_steps=7, is_ratio=True, reference_log_z=2.0
    )
    assert known.log_z == pytest.approx(2.5 + math.log(25.75), abs=1e-12)
    assert known.band.plus_sigma == pytest.approx(2.0 + known.ratio_band.plus_sigma, abs=1e-12)


def test_effective_sample_size():
    assert effective_sample_size(torch.zeros(10, dtype=F64)) == pytest.approx(10.0)
    assert effective_sample_size(torch.tensor([0.0, -800.0, -900.0], dtype=F64)) == pytest.approx(1.0)
