"""Estimates that cannot be fooled: each case of the "wrong without saying so" list reproduced on
small lattices, spin glasses and RBMs with exact answers, then answered right or flagged."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from conftest import F64

from boltzkit.errors import UnreliableEstimateWarning
from boltzkit.estimators import estimate_log_z, exact_log_z
from boltzkit.estimators.ais import ais
from boltzkit.estimators.api import UNIFORM_BASE, symmetric_base
from boltzkit.estimators.paths import base_rate_path
from boltzkit.estimators.reverse import reverse_ais, sandwich
from boltzkit.models import RBM, BoltzmannMachine
from boltzkit.state import ChainState


def ising(J: torch.Tensor, h: torch.Tensor) -> tuple[BoltzmannMachine, float]:
    """The fully visible model with weight ``exp(sum_{i<j} J_ij s_i s_j + h's)``, ``s = 2x - 1``, in
    {0, 1} units, and the constant ``log Z_ising - log Z_binary``."""
    L = 4.0 * J
    b = 2.0 * h - 2.0 * J.sum(1)
    return BoltzmannMachine([J.shape[0]], {(0, 0): L}, [b], dtype=F64), float(J.triu(1).sum() - h.sum())


def lattice(n: int, coupling: float, field: float = 0.0) -> tuple[BoltzmannMachine, float]:
    """An n x n periodic ferromagnet (Ising couplings ``coupling`` to the 4 neighbours)."""
    J = torch.zeros(n * n, n * n, dtype=F64)
    for r in range(n):
        for c in range(n):
            i = r * n + c
            for j in (r * n + (c + 1) % n, ((r + 1) % n) * n + c):
                J[i, j] = J[j, i] = coupling
    return ising(J, torch.full((n * n,), field, dtype=F64))


def spin_glass(n: int, beta: float, seed: int) -> tuple[BoltzmannMachine, float]:
    """A Sherrington-Kirkpatrick model at inverse temperature ``beta``: ``J_ij ~ N(0, beta^2 / n)``."""
    g = torch.Generator().manual_seed(seed)
    J = torch.randn(n, n, generator=g, dtype=F64).triu(1) * beta / math.sqrt(n)
    return ising(J + J.t(), torch.zeros(n, dtype=F64))


def inside(result, truth: float) -> bool:
    b = result.band
    return b.minus_3sigma is not None and b.minus_3sigma <= truth <= b.plus_3sigma


def honest(result, truth: float) -> bool:
    """Right (the truth inside the estimate's own ±3σ band) or saying it is not to be trusted."""
    return inside(result, truth) or not result.reliability().reliable


# ----------------------------------------------------------------------------- 1. symmetric modes
def test_a_start_of_its_own_biases_misses_the_mirror_mode_of_a_ferromagnet() -> None:
    """The case as found: AIS from the model's own {0, 1} biases is log 2 low with healthy weights."""
    model, _ = lattice(4, 0.6)
    truth = exact_log_z(model).log_z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        own = ais(base_rate_path(model), n_chains=100, betas=1000, seed=0, check=False)
    assert own.log_z == pytest.approx(truth - math.log(2), abs=0.15) and not inside(own, truth)


@pytest.mark.parametrize(
    ("coupling", "field"), [(0.6, 0.0), (0.3, 0.0), (0.6, 0.05), (0.4, 0.05), (0.6, 0.2)]
)
@pytest.mark.parametrize("steps", [100, 1000])
def test_default_ais_is_right_on_ferromagnets_near_and_at_zero_field(
    coupling: float, field: float, steps: int
) -> None:
    model, constant = lattice(4, coupling, field)
    truth = exact_log_z(model).log_z
    result = estimate_log_z(model, "ais", betas=steps, n_chains=100, seed=0)
    assert inside(result, truth) and result.reliability().reliable, (
        result.log_z - truth,
        result.settings["base_choice"],
    )
    if field == 0.0:
        assert result.settings["base_choice"]["chosen"].startswith("uniform")
    assert math.isfinite(constant)


def symmetric_rbm() -> BoltzmannMachine:
    """An 8 x 6 RBM symmetric under flipping every unit (zero Ising fields): W = 3, biases -9 and
    -12, so that all-off and all-on carry the same mass, far apart."""
    kw = {"dtype": F64}
    return RBM(
        8, 6, weights=torch.full((8, 6), 3.0, **kw), vbias=torch.full((8,), -9.0, **kw),
        hbias=torch.full((6,), -12.0, **kw), dtype=F64,
    )  # fmt: skip


@pytest.mark.parametrize("method", ["ais", "sandwich", "sis", "bridge"])
@pytest.mark.parametrize("seed", [0, 10])
def test_a_symmetric_model_starts_from_the_uniform_base_without_a_vote(method: str, seed: int) -> None:
    """Found by a probe: the pilot vote between the model's own biases and the uniform base went to
    the biases on seeds 0 and 10 (a short uniform pilot on a sharp model is low by its noise), and
    AIS then lost the mirror image: 0.001 against the exact 0.694, reported reliable. With
    ``max_bits`` below the model's size, as for a model too large to enumerate."""
    model = symmetric_rbm()
    truth = exact_log_z(model).log_z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        result = estimate_log_z(model, method, betas=100, n_chains=100, seed=seed, max_bits=4)
    assert result.settings["base_choice"] == {"chosen": UNIFORM_BASE, "pilot": None}
    assert result.settings["base"] == UNIFORM_BASE
    assert honest(result, truth), (method, result.log_z, truth)
    tilted = symmetric_rbm()
    with torch.no_grad():
        tilted.hbias.add_(0.5)  # the visible fields stay zero, one layer's do not: not symmetric
    assert symmetric_base(tilted) is None and symmetric_base(model) is not None
    # float32 parameters leave fields of 1e-7 where they are zero: still symmetric
    assert symmetric_base(model.detached_copy(dtype=torch.float32)) is not None
    assert symmetric_base(tilted.detached_copy(dtype=torch.float32)) is None
    glass, _ = spin_glass(14, 1.5, 0)  # a review's case: its float32 fields come out at 8e-8
    assert symmetric_base(glass.detached_copy(dtype=torch.float32)) is not None


def two_mode_rbm() -> RBM:
    """An 8 x 6 RBM with two far-apart modes, (v = 1, h = 0) and (v = 0, h = 1), W = -6, biases 1.5
    and 2: the base of its own biases puts 1e-6 of its mass on the second mode, which holds 30% of
    the model's."""
    kw = {"dtype": F64}
    return RBM(
        8, 6, weights=torch.full((8, 6), -6.0, **kw), vbias=torch.full((8,), 1.5, **kw),
        hbias=torch.full((6,), 2.0, **kw), dtype=F64,
    )  # fmt: skip


def two_mode_sandwich(betas: int, seed: int):
    """The sandwich of :func:`two_mode_rbm` with no exact samples (``max_bits=4``): 100 chains,
    reverse runs from the forward run's end states after 100 start sweeps; warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        return sandwich(
            base_rate_path(two_mode_rbm(), max_bits=4), n_chains=100, betas=betas, seed=seed,
            start="auto", start_chain_steps=100,
        )  # fmt: skip


@pytest.mark.parametrize("method", ["sis", "bridge"])
@pytest.mark.parametrize("seed", [0, 3, 4])
def test_draws_that_never_reach_a_second_mode_are_found_out_by_the_targets_own_chains(
    method: str, seed: int
) -> None:
    """Found by a probe: an 8 x 6 RBM with two far-apart modes (W = -6, biases 1.5 and 2); the base
    of its own biases puts 1e-6 of its mass on the second, so SIS's draws all lie in the first, with
    weights equal to 1e-7 (just above the lockstep test's rounding) and bridge sampling's chains of
    the target, started at those draws, stay there too: 0.36 nats low, reported reliable with
    bands of millionths of a nat. The target's chains started away from the draws find the mode."""
    model = two_mode_rbm()
    truth = exact_log_z(model).log_z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        # bridge sampling's chains of the target start at its draws: 10 sweeps keep them there
        result = estimate_log_z(model, method, n_chains=100, seed=seed, max_bits=4, start_chain_steps=10)
    assert not inside(result, truth)  # the draws miss the mode: only the verdict can be honest
    verdict = result.reliability()
    probe = result.settings["checks"][0]
    assert probe["name"] == "probe chains of the target" and not probe["passed"]
    assert probe["excess_log_weight"] > 5 and not verdict.reliable
    assert "chains of the target started away from the proposal" in verdict.reason


def test_bridge_chains_that_reached_a_missed_mode_in_part_are_found_out_by_chains_from_elsewhere() -> None:
    """Found by a probe: on the two-mode RBM, bridge sampling's chains of the target (1,000 sweeps
    from the draws, seed 4) reached the second mode in part, so the probes' weights found nothing
    above theirs, and the estimate, 34 sigma low, was reliable. Chains started away from them, as
    long, sit in that mode more often than they do."""
    model = two_mode_rbm()
    truth = exact_log_z(model).log_z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        result = estimate_log_z(model, "bridge", n_chains=100, seed=4, max_bits=4, start_chain_steps=1000)
    assert not inside(result, truth)
    weights, chains = result.settings["checks"]
    assert weights["passed"]  # the target's chains reached the mode: no probe weight lies above theirs
    assert chains["name"] == "probe chains agree with the target's chains" and not chains["passed"]
    assert chains["n_probes"] == 4 * 100 and chains["sweeps"] == 1000 and chains["p_value"] < 3e-3
    verdict = result.reliability()
    assert not verdict.reliable and "end elsewhere" in verdict.reason


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_ais_is_honest_on_spin_glasses(seed: int) -> None:
    model, _ = spin_glass(14, 1.5, seed)
    truth = exact_log_z(model).log_z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        result = estimate_log_z(model, "ais", betas=1000, n_chains=100, seed=seed)
    assert honest(result, truth)


# ------------------------------------------------------------------------------ 2. the sandwich
def test_a_sandwich_whose_ends_disagree_says_so_and_shows_both_ends() -> None:
    model, _ = lattice(4, 0.6)
    truth = exact_log_z(model).log_z
    with pytest.warns(UnreliableEstimateWarning, match="reverse"):
        s = sandwich(base_rate_path(model), n_chains=100, betas=1000, seed=0)
    assert not s.reliability().reliable
    d = s.to_dict()
    assert d["log_z_lower"] < d["log_z_upper"] and d["lower_bound"].startswith("stochastic lower")
    assert d["upper_bound"].startswith("stochastic upper")
    assert s.band.plus_3sigma >= d["log_z_upper"]  # the band spans both ends
    assert d["log_z_plus_3sigma"] is None and d["band_withheld"]  # ... and is no band to print
    assert d["log_z_lower"] < truth


@pytest.mark.parametrize(("betas", "seed"), [(100, 0), (100, 2), (1000, 2), (1000, 3)])
def test_a_sandwich_started_from_a_forward_run_that_missed_a_mode_is_found_out(betas: int, seed: int) -> None:
    """Found by a probe: with no exact samples (``max_bits=4``) the reverse runs start at the forward
    run's end states, in the first mode, and the ends agree 0.35 nats below log Z, reported
    reliable. Chains started away from those states (random and flipped visible units) reach the
    second mode: the probe check fails the estimate, or, where the probes' statistic happened to
    move towards the starts by a standard error over the second half of their sweeps (the rule
    that keeps slowly relaxing probes of MNIST RBMs from failing sound estimates), it says it is
    not informative. It never passes as a test: 16 of 18 such runs (3 schedules x 6 seeds) failed,
    the probes of 1,000-step runs looking again at the estimate's own cost; 18 of 18 with the
    probes' mirror moves, their lower cut and the drift rule of 2026-12-04."""
    truth = exact_log_z(two_mode_rbm()).log_z
    s = two_mode_sandwich(betas, seed)
    assert not inside(s, truth)  # both ends in the first mode: only the verdict can be honest
    gap, probes = s.settings["checks"]
    assert gap["passed"]  # the ends agree
    assert probes["name"] == "probe chains agree with the reverse starts"
    assert probes["n_probes"] == 4 * 100 and probes["p_value"] < 3e-3  # the sets differ
    # the second mode, where the hidden units are on and the visible ones off
    side = {"hidden layer 1 mean": 1.0, "visible mean": -1.0}[probes["statistic"]]
    assert side * (probes["probe_mean"] - probes["reference_mean"]) > 0
    if probes["passed"]:
        assert probes["reason"].startswith("not informative") and s.reliability().reliable
        assert abs(probes["drift"]) > probes["drift_stderr"]
    else:
        verdict = s.reliability()
        assert not verdict.reliable and "started away from the reverse run's starts" in verdict.reason
        assert "--start-chain-steps" in verdict.advice


def test_probes_still_relaxing_at_the_first_look_go_on_until_a_test_and_then_fail_a_missed_mode() -> None:
    """The two-mode sandwich of 1,000 steps, seed 0: after the start chains' 100 sweeps the
    probes' statistic still moved towards the starts (the drift rule excused it, "not
    informative"); with the estimate's own cost as their budget they ran on to 499 sweeps, sat in
    the second mode as the model does, and failed it. (Which seed takes this path changed with
    the probes' mirror moves, their lower cut and the drift rule of 2026-12-04: seed 2 before.)"""
    s = two_mode_sandwich(1000, 0)
    probes = s.settings["checks"][-1]
    budget = 2 * 100 * 1000 // (4 * 100) - 1  # the estimate's own chain-sweeps, per probe (499)
    assert [look["sweeps"] for look in probes["looks"]] == [100, budget] and probes["sweeps"] == budget
    assert probes["looks"][0]["relaxing"] and not probes["looks"][1]["relaxing"]
    assert not probes["passed"] and not s.reliability().reliable


def test_a_failure_of_probes_still_relaxing_at_the_budget_stands() -> None:
    """The two-mode sandwich of 1,000 steps, seed 2: the probes failed the first look unexcused
    (p = 1e-4 after 100 sweeps); at the budget (499 sweeps) their statistic moved towards the
    starts by more than its standard error. Only a test overturns a failure, so the check fails,
    at the first look's sweeps. (Seed 1 took this path before the probes' mirror moves.)"""
    s = two_mode_sandwich(1000, 2)
    probes = s.settings["checks"][-1]
    first, last = probes["looks"]
    assert (first["sweeps"], last["sweeps"]) == (100, 499) and not first["relaxing"] and last["relaxing"]
    assert not probes["passed"] and probes["sweeps"] == 100 and probes["p_value"] == first["p_value"] < 3e-3
    reason = probes["reason"]
    assert "so it stands" in reason and "still moving towards the starts" in reason
    assert not s.reliability().reliable


def stiff_exact_starts(seed: int, vbias: float):
    """A stiff 30 x 12 RBM (weights N(0, 2^2), visible biases ``vbias`` + N(0, 0.3^2), no hidden
    biases) and 200 exact-law starts of it (one sweep after exact draws, so both layers are
    draws): its path, the starts and the generator."""
    from boltzkit.estimators.reverse import relax
    from boltzkit.samplers.operators import make_operator

    g = torch.Generator().manual_seed(seed)
    w = 2.0 * torch.randn(30, 12, generator=g, dtype=F64)
    b = vbias + 0.3 * torch.randn(30, generator=g, dtype=F64)
    model = RBM(30, 12, weights=w, vbias=b, hbias=torch.zeros(12, dtype=F64), dtype=F64)
    path = base_rate_path(model, max_bits=22)
    return path, relax(path, path.sample_end(200, g), 1, make_operator("gibbs"), g), g


def test_failures_of_unrelaxed_probes_of_exact_starts_are_overturned_at_the_budget(monkeypatch) -> None:
    """Exact-law starts of stiff RBMs against probes of 2 sweeps, which have not relaxed: the first
    look fails some unexcused (17 of 200 such runs in the calibration below), and a second look at
    the budget (256 sweeps) passes every one, as samples of one law do."""
    from boltzkit.estimators import probes
    from boltzkit.samplers.operators import make_operator

    monkeypatch.setattr(probes, "PERMUTATIONS", 2000)
    gibbs, overturned = make_operator("gibbs"), 0
    for seed in range(40):
        path, starts, g = stiff_exact_starts(seed, -4.0)
        more = probes.start_check(path, starts, 2, gibbs, g, budget_chain_sweeps=256 * 4 * 200)
        assert more["passed"] and "reason" not in more and more["p_value"] >= 3e-3
        first = more.get("looks", [{"relaxing": True}])[0]
        overturned += not first["relaxing"] and first["p_value"] < 3e-3
    assert overturned >= 1


@pytest.mark.slow
@pytest.mark.parametrize("vbias", [-1.5, -4.0])
@pytest.mark.parametrize("n_steps", [1, 2])
def test_probe_check_calibration_on_stiff_exact_starts(
    monkeypatch, request, vbias: float, n_steps: int
) -> None:
    """The check's level where starts are exact-law samples and probes of 1-2 sweeps relax slowly
    (200 seeds per setting, a budget of 1,024 sweeps, about 2 minutes each). Measured (2026-12-03):
    the first look alone fails 0, 16, 6 and 17 of 200 runs (biases -1.5 and -4, probes of 1 and 2
    sweeps); with the second look, 0 in each. The bound: 4 of 200, the 99.9% point of a
    binomial(200, 0.003) (START_LEVEL)."""
    if "slow" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("slow calibration: select it with -m slow")
    from boltzkit.estimators import probes
    from boltzkit.samplers.operators import make_operator

    monkeypatch.setattr(probes, "PERMUTATIONS", 1000)
    gibbs, failed = make_operator("gibbs"), 0
    for seed in range(1000, 1200):
        path, starts, g = stiff_exact_starts(seed, vbias)
        check = probes.start_check(path, starts, n_steps, gibbs, g, budget_chain_sweeps=1024 * 4 * 200)
        failed += not check["passed"]
    assert failed <= 4


@pytest.mark.slow
def test_probe_check_power_on_a_partial_miss(request) -> None:
    """The check's power where the starts under-represent a mode rather than miss it: exact draws of
    the two-mode RBM, 100 starts of which a tenth of the second mode's share (3% against the
    model's 30%), probes of 100 sweeps, a budget of 499 (100 seeds, about 3 minutes). Measured
    (2026-12-03): 39 of 100 fail, as at the first look alone, the probes never leaving the mode
    they started in. With their mirror moves (2026-12-04) they hold the second mode as the model
    does, and 99 of 100 fail. The bound, 90, leaves room for a power of 95% and more."""
    if "slow" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("slow calibration: select it with -m slow")
    from boltzkit.estimators import probes
    from boltzkit.estimators.reverse import relax
    from boltzkit.samplers.operators import make_operator
    from boltzkit.state import ChainState

    gibbs, failed = make_operator("gibbs"), 0
    path = base_rate_path(two_mode_rbm(), max_bits=22)
    for seed in range(100, 200):
        g = torch.Generator().manual_seed(seed)
        draws = relax(path, path.sample_end(400, g), 1, gibbs, g)
        second = draws.layers[1].mean(1) > 0.5  # the mode where the hidden units are on
        first_mode, second_mode = (~second).nonzero().flatten(), second.nonzero().flatten()
        n_second = min(round(0.1 * len(second_mode) * 100 / 400), len(second_mode))
        chosen = torch.cat([second_mode[:n_second], first_mode[: 100 - n_second]])
        starts = ChainState(tuple(layer[chosen] for layer in draws.layers))
        check = probes.start_check(path, starts, 100, gibbs, g, budget_chain_sweeps=499 * 400)
        failed += not check["passed"]
    assert failed >= 90


@pytest.mark.parametrize("kind", ["rbm", "dbm"])
def test_the_probes_mirror_move_accepts_as_metropolis_hastings(kind: str) -> None:
    """Every state of a small model, 4,000 times over: the share of chains that :func:`mirror_move`
    flips agrees with ``min(1, p*(x') / p*(x))`` from the path's own ``log p*`` within 4.5
    binomial standard errors, and a flipped chain holds exactly the mirror image. The flip is an
    involution, so that acceptance is detailed balance: the move leaves the target invariant. An
    RBM path sums its hidden layer out (the visible flip alone counts); a DBM path keeps a hidden
    layer, which flips with the visible one."""
    from boltzkit.estimators.probes import mirror_move
    from boltzkit.models import BoltzmannMachine as BM

    g = torch.Generator().manual_seed(0)
    if kind == "rbm":
        w, b, c = (torch.randn(*shape, generator=g, dtype=F64) for shape in ((5, 3), (5,), (3,)))
        model = RBM(5, 3, weights=2.0 * w, vbias=b, hbias=c, dtype=F64)
    else:
        model = BM.dbm(
            (3, 2, 2), weights=[torch.randn(3, 2, generator=g) * 2, torch.randn(2, 2, generator=g) * 2],
            biases=[torch.randn(3, generator=g), torch.randn(2, generator=g), torch.randn(2, generator=g)],
            dtype=F64,
        )  # fmt: skip
    path = base_rate_path(model)
    n_visible, repeats = model.layer_sizes[0], 4000
    codes = torch.arange(2**n_visible)
    v = ((codes.unsqueeze(1) >> torch.arange(n_visible)) & 1).to(F64).repeat(repeats, 1)
    state = path.from_visible(v, g)
    moved, accepted = mirror_move(path, state, g)
    flipped = tuple(1.0 - x for x in state.layers)
    is_flipped = torch.stack([(m == f).all(1) for m, f in zip(moved.layers, flipped, strict=True)]).all(0)
    is_kept = torch.stack([(m == x).all(1) for m, x in zip(moved.layers, state.layers, strict=True)]).all(0)
    assert bool((is_flipped | is_kept).all())  # each chain moves to its mirror image or stays
    assert torch.equal(accepted, is_flipped)  # the mask names the chains that moved
    log_ratio = path.log_f(ChainState(flipped), 1.0) - path.log_f(state, 1.0)
    accept = log_ratio.clamp(max=0.0).exp()
    # per starting state (and kept hidden state, for the DBM): observed share against expected
    codes_of = [x.matmul(2.0 ** torch.arange(x.shape[1], dtype=F64)) for x in state.layers if x.shape[1]]
    key = torch.stack(codes_of)
    groups = torch.unique(key.t(), dim=0, return_inverse=True)[1]
    n = torch.bincount(groups).to(F64)
    observed = torch.bincount(groups, weights=is_flipped.to(F64)) / n
    expected = torch.bincount(groups, weights=accept) / n
    se = (expected * (1 - expected) / n).sqrt().clamp(min=1e-12)
    big = n >= 100
    assert bool(((observed - expected).abs()[big] <= 4.5 * se[big] + 1e-12).all())
    assert 0.05 < float(is_flipped.to(F64).mean()) < 0.95  # the move both moves and stays


def test_probes_of_exact_starts_of_a_two_mode_model_pass(monkeypatch) -> None:
    """Exact draws of the two-mode RBM (30% of its mass in the second mode) as the starts: the
    probes' flipped half starts in the second mode and Gibbs sweeps never leave it, so probes that
    only swept sat there about half the time against the starts' 30% and failed 35 of 60 such runs
    (2026-12-04). With a mirror move every 10 sweeps they hold the mode as the model does: at most
    2 of 30 fail, the 99.99% point of a binomial(30, 0.003) (0 of 60 measured)."""
    from boltzkit.estimators import probes
    from boltzkit.estimators.reverse import relax
    from boltzkit.samplers.operators import make_operator

    monkeypatch.setattr(probes, "PERMUTATIONS", 1000)
    gibbs, failed = make_operator("gibbs"), 0
    path = base_rate_path(two_mode_rbm(), max_bits=22)
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        starts = relax(path, path.sample_end(100, g), 1, gibbs, g)
        failed += not probes.start_check(path, starts, 100, gibbs, g, budget_chain_sweeps=499 * 400)["passed"]
    assert failed <= 2


def test_the_first_mirror_move_of_a_look_comes_before_its_halfway_point(monkeypatch) -> None:
    """Found by a review: with a move every 10 transitions, probes of 11-21 transitions made their
    first move after the halfway point, its jump out of a mode the starts miss read as a drift
    towards the starts, and the drift rule excused the failure. The two-mode RBM with hidden biases
    1.7 (8% of its mass in the second mode), 100 starts all in the first mode, probes of 15
    sweeps and no second look: "not informative" on 13 of 30 seeds then (4 without mirror moves),
    2 with the moves' period of a quarter of the look, 0 with mirrored probes also left out of the
    drift; the bound, 6, lies between."""
    from boltzkit.estimators import probes
    from boltzkit.estimators.reverse import relax
    from boltzkit.samplers.operators import make_operator

    assert [probes.mirror_period(n) for n in (0, 3, 4, 12, 15, 40, 41, 1000)] == [0, 0, 1, 3, 3, 10, 10, 10]
    assert all(0 < probes.mirror_period(n) < n // 2 for n in range(4, 200))  # a move in the first half
    monkeypatch.setattr(probes, "PERMUTATIONS", 2000)
    kw = {"dtype": F64}
    model = RBM(
        8, 6, weights=torch.full((8, 6), -6.0, **kw), vbias=torch.full((8,), 1.5, **kw),
        hbias=torch.full((6,), 1.7, **kw), dtype=F64,
    )  # fmt: skip
    path, gibbs, not_informative = base_rate_path(model, max_bits=22), make_operator("gibbs"), 0
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        draws = relax(path, path.sample_end(300, g), 1, gibbs, g)
        first_mode = draws.layers[1].mean(1) < 0.5
        starts = ChainState(tuple(layer[first_mode][:100] for layer in draws.layers))
        check = probes.start_check(path, starts, 15, gibbs, g, budget_chain_sweeps=0)
        not_informative += check["passed"] and check.get("reason", "").startswith("not informative")
    assert not_informative <= 6


def test_plain_ais_of_a_ferromagnet_with_a_minor_mirror_mode_is_not_withheld() -> None:
    """Found by a review (2026-12-03): plain AIS of a 16-spin fully connected ferromagnet (Ising
    couplings 0.6, fields 0.1; the all-minus mode holds 4% of the mass), 50 chains of 200 steps,
    no enumeration: the probes' flipped half stayed in the minor mode for its 49 sweeps, and the
    check failed right answers on 9 of 20 seeds (visible mean 0.42-0.48 against the ends' 0.82-0.88).
    With the probes' mirror moves it passes at least 19 of 20 (20 measured)."""
    J = torch.full((16, 16), 0.6, dtype=F64).fill_diagonal_(0.0)
    model, _ = ising(J, torch.full((16,), 0.1, dtype=F64))
    passed = 0
    for seed in range(20):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreliableEstimateWarning)
            result = estimate_log_z(model, "ais", betas=200, n_chains=50, seed=seed, max_bits=1)
        probe = result.settings["checks"][-1]
        assert probe["name"] == "probe chains agree with the forward run's end states"
        passed += probe["passed"]
    assert passed >= 19


def test_plain_ais_from_one_sharp_mode_of_a_ferromagnet_is_found_out() -> None:
    """Found on 2026-12-04: plain AIS of a 16-spin fully connected ferromagnet (Ising couplings
    0.6, fields 0.05: the all-minus mode holds 17% of the mass) from a base biased to the all-plus
    state, 100 chains of 200 steps: every run ends at the all-plus state, 0.17-0.20 nats low. That
    state is the starts' lower decile of log p* itself, so every probe in the all-minus mode lay
    below the cut and was set aside, and the estimate was reliable on 6 of 6 seeds; with the cut
    log n nats lower, the probes saw the mode but their mirror moves read as a drift towards the
    starts and excused 5 of 6. With mirrored probes left out of the drift where most probes kept
    their side, 5 of 6 are unreliable (6 of 6 when they were left out always, which broke the
    drift rule on symmetric models); the bound is that measurement."""
    J = torch.full((16, 16), 0.6, dtype=F64).fill_diagonal_(0.0)
    model, _ = ising(J, torch.full((16,), 0.05, dtype=F64))
    truth = exact_log_z(model).log_z
    path = base_rate_path(model, base_vbias=torch.full((16,), 4.0, dtype=F64), max_bits=1)
    found = 0
    for seed in range(6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreliableEstimateWarning)
            result = ais(path, n_chains=100, betas=200, seed=seed, check=True)
        assert result.log_z < truth - 0.15  # every run missed the all-minus mode
        verdict = result.reliability()
        found += not verdict.reliable and "the annealing chains missed mass" in verdict.reason
    assert found >= 5


def test_probes_of_exact_starts_of_a_symmetric_model_keep_the_drift_rule(monkeypatch) -> None:
    """Found by a review: in an RBM symmetric under flipping every unit the mirror move is always
    accepted, so leaving the probes that moved out of the drift left none, every failure stood,
    and exact-law starts (30 x 12, weights N(0, 1.5^2), probes of 10 sweeps, no second look)
    failed 25 of these 30 runs (the review: 50 of 60, against 2 before). Where most probes moved,
    all are kept: 2 of 30 fail, 23 "not informative" (measured); the bound, 6, lies far below the
    broken rule's rate."""
    from boltzkit.estimators import probes
    from boltzkit.estimators.reverse import relax
    from boltzkit.samplers.operators import make_operator

    monkeypatch.setattr(probes, "PERMUTATIONS", 1000)
    gibbs, failed = make_operator("gibbs"), 0
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        w = 1.5 * torch.randn(30, 12, generator=g, dtype=F64)
        model = RBM(30, 12, weights=w, vbias=-w.sum(1) / 2, hbias=-w.sum(0) / 2, dtype=F64)
        path = base_rate_path(model, max_bits=22)  # the base of the model's own (zero) fields
        starts = relax(path, path.sample_end(200, g), 1, gibbs, g)
        failed += not probes.start_check(path, starts, 10, gibbs, g)["passed"]
    assert failed <= 6


def test_probes_given_too_few_sweeps_run_on_until_they_pass_exact_starts(monkeypatch) -> None:
    """Starts that are exact samples (a 30 x 12 RBM, one transition after exact draws, so both
    layers are draws) and probes of 2 sweeps from random and flipped images: at one look the drift
    rule leaves the check "not informative" on some seeds; allowed to run on, the probes reach a
    test on every seed, and pass it, as samples of one law do (the looks together keep the level:
    every failure starts with a failure at the first look)."""
    from boltzkit.estimators import probes
    from boltzkit.estimators.reverse import relax
    from boltzkit.samplers.operators import make_operator

    monkeypatch.setattr(probes, "PERMUTATIONS", 2000)
    gibbs, not_informative, doubled = make_operator("gibbs"), 0, 0
    for seed in range(12):
        g = torch.Generator().manual_seed(seed)
        w = 0.5 * torch.randn(30, 12, generator=g, dtype=F64)
        b = -1.5 + 0.3 * torch.randn(30, generator=g, dtype=F64)
        model = RBM(30, 12, weights=w, vbias=b, hbias=torch.zeros(12, dtype=F64), dtype=F64)
        path = base_rate_path(model, max_bits=22)
        starts = relax(path, path.sample_end(200, g), 1, gibbs, g)
        one = probes.start_check(path, starts, 2, gibbs, g)
        more = probes.start_check(path, starts, 2, gibbs, g, budget_chain_sweeps=256 * 4 * 200)
        assert one["passed"] and "looks" not in one and one["sweeps"] == 2
        not_informative += one.get("reason", "").startswith("not informative")
        assert more["passed"] and "reason" not in more and more["p_value"] >= 3e-3
        doubled += more["sweeps"] > 2
    assert not_informative >= 3 and doubled >= 3


def test_the_probes_of_a_sandwich_change_none_of_its_numbers_and_pass_where_chains_mix() -> None:
    """A 12 x 8 RBM of unit-variance couplings, no exact samples: the probe chains agree with the
    reverse starts, the sandwich holds log Z, and its numbers are those of the run without them."""
    g = torch.Generator().manual_seed(3)
    w, b, c = (torch.randn(*shape, generator=g, dtype=F64) for shape in ((12, 8), (12,), (8,)))
    model = RBM(12, 8, weights=w, vbias=b, hbias=c, dtype=F64)
    truth = exact_log_z(model).log_z
    kw = {"n_chains": 100, "betas": 300, "seed": 1, "start": "auto", "start_chain_steps": 20}
    checked = sandwich(base_rate_path(model, max_bits=4), **kw)
    bare = sandwich(base_rate_path(model, max_bits=4), check=False, **kw)
    probes = checked.settings["checks"][-1]
    assert probes["name"] == "probe chains agree with the reverse starts" and probes["passed"]
    assert [c["name"] for c in bare.settings["checks"]] == ["forward and reverse agree"]
    assert checked.reliability().reliable and inside(checked, truth)
    assert torch.equal(checked.log_weights, bare.log_weights)
    assert torch.equal(checked.reverse.log_weights, bare.reverse.log_weights)


def test_the_probes_permutation_test_holds_its_level_on_a_rare_event(monkeypatch) -> None:
    """Two samples of one law, a rare event (5%) in 400 probes and 100 reference states: the
    reference often sees none, which Welch's t-distribution takes for certainty (a false alarm
    whenever the probes see a few); the permutation p-value is exact. Rejections at level 0.05 in
    200 pairs stay within 3 binomial standard errors of 10."""
    from boltzkit.estimators import probes

    monkeypatch.setattr(probes, "PERMUTATIONS", 1000)
    g = torch.Generator().manual_seed(0)
    rejected = 0
    for _ in range(200):
        a = (torch.rand(400, generator=g, dtype=F64) < 0.05).to(F64)
        b = (torch.rand(100, generator=g, dtype=F64) < 0.05).to(F64)
        rejected += probes._max_t_test({"event": a}, {"event": b}, g)[1] <= 0.05
    assert rejected <= 10 + 3 * math.sqrt(200 * 0.05 * 0.95)


def test_probes_independent_of_the_chains_they_test_hold_the_level_of_one_law(monkeypatch) -> None:
    """Found by a review: probes flipped from the target chains split between a symmetric model's
    two mirror modes as the chains do, the other way round, and the comparison saw twice the chains'
    own imbalance: 3.8% false alarms at the level 0.3% on an 8 x 8 RBM (W = 2, no fields) from the
    uniform base, where probes and chains have the same law. Flipped fresh draws of the base keep
    them independent: rejections at level 0.05 in 200 runs stay within 3 binomial standard errors of
    10 (they were 17% before)."""
    from boltzkit.estimators import probes
    from boltzkit.estimators.reverse import relax
    from boltzkit.samplers.operators import make_operator

    monkeypatch.setattr(probes, "PERMUTATIONS", 1000)
    w = torch.full((8, 8), 2.0, dtype=F64)
    model = RBM(8, 8, weights=w, vbias=-w.sum(1) / 2, hbias=-w.sum(0) / 2, dtype=F64)
    path = base_rate_path(model, base_vbias=torch.zeros(8, dtype=F64), max_bits=4)
    gibbs, g = make_operator("gibbs"), torch.Generator().manual_seed(0)
    rejected = 0
    for _ in range(200):
        chains = relax(path, path.sample_start(20, g), 30, gibbs, g)
        rejected += probes.chain_check(path, chains, 30, gibbs, g)["p_value"] <= 0.05
    assert rejected <= 10 + 3 * math.sqrt(200 * 0.05 * 0.95)


def test_plain_ais_whose_runs_all_missed_a_mode_is_found_out_by_chains_from_elsewhere() -> None:
    """Found by a review: a ferromagnetic 7-7-6 DBM (weights 2, biases -10.4, -10.4, -5.6) holds
    95% of its mass in its "all on" mode, which annealing from the base never reaches: AIS gave
    about 0.0 against log Z 3.04, with equal weights and a converged schedule check, reliable on 5
    of 8 seeds. Chains started away from the final states (random and flipped visible units) find
    the mode, more probable than where every run ended."""
    from boltzkit.models import BoltzmannMachine as BM

    w = 2.0
    model = BM.dbm(
        (7, 7, 6), weights=[torch.full((7, 7), w), torch.full((7, 6), w)],
        biases=[torch.full((7,), -10.4), torch.full((7,), -10.4), torch.full((6,), -5.6)], dtype=F64,
    )  # fmt: skip
    truth = exact_log_z(model).log_z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        result = estimate_log_z(model, "ais", n_chains=100, seed=1, max_bits=4)
    assert not inside(result, truth) and result.log_z < truth - 2.5
    schedule, probes = result.settings["checks"]
    assert schedule["passed"] and not probes["passed"]  # the weights and the halved schedule agree
    assert probes["name"] == "probe chains agree with the forward run's end states"
    verdict = result.reliability()
    assert not verdict.reliable and "the annealing chains missed mass" in verdict.reason


# ---------------------------------------------------------------------------- 3. reverse AIS
def test_reverse_ais_from_approximate_samples_says_its_bound_is_heuristic() -> None:
    model, _ = lattice(4, 0.6)
    path = base_rate_path(model, max_bits=4)  # too small a limit to enumerate: chains stand in
    with pytest.warns(UnreliableEstimateWarning, match="heuristic"):
        result = reverse_ais(path, n_chains=50, betas=200, start="auto", seed=0, start_chain_steps=50)
    verdict = result.reliability()
    assert (
        not verdict.reliable and "heuristic" in verdict.reason and "approximate" in result.settings["bound"]
    )


# ----------------------------------------------------------------------- 4. a too-short schedule
def test_a_too_short_schedule_is_caught_by_halving_it() -> None:
    """Independent units (log Z known in closed form) from the uniform base, 4 steps: every chain
    is biased the same way; the control run along 2 steps moves the estimate far beyond noise."""
    n = 200
    b = torch.full((n,), math.log(0.8 / 0.2), dtype=F64)
    model = BoltzmannMachine([n], {}, [b], dtype=F64)
    truth = exact_log_z(model).log_z
    with pytest.warns(UnreliableEstimateWarning):
        result = ais(
            base_rate_path(model, base_vbias=torch.zeros(n, dtype=F64)),
            n_chains=100,
            betas=5,
            seed=0,
            check=True,
        )
    check = next(c for c in result.settings["checks"] if c["name"] == "schedule halved")
    assert not check["passed"] and abs(check["difference"]) > 3 * check["difference_stderr"]
    assert not inside(result, truth) and not result.reliability().reliable


def test_a_trained_rbm_without_data_is_not_silently_wrong() -> None:
    """The zoo's CD1(20) (S&M 2008 Table 1): AIS from its own visible biases, or from its Ising
    fields, misses most of its mass (about 15 nats low) with healthy weights, for any schedule;
    the default AIS runs reverse AIS from exact samples beside it and says so."""
    from boltzkit.io import load_model

    rbm, _ = load_model("zoo:sm2008-cd1-20", dtype="float64")
    truth = exact_log_z(rbm).log_z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        own = ais(base_rate_path(rbm), n_chains=100, betas=1000, seed=0, check=False)
        assert own.log_z < truth - 10  # the case as found
        result = estimate_log_z(rbm, "ais", betas=1000, n_chains=100, seed=0)
    assert not result.reliability().reliable and "reverse" in result.reliability().reason
    assert honest(result, truth)


def test_every_estimator_warns_in_python_when_unreliable() -> None:
    model, _ = lattice(4, 0.6)
    with pytest.warns(UnreliableEstimateWarning, match="unreliable"):
        estimate_log_z(model, "sis", n_chains=50, seed=0)


@pytest.mark.parametrize("coupling", [0.3, 0.6, 1.0])
def test_simple_importance_sampling_that_never_reaches_the_ordered_states_says_so(coupling: float) -> None:
    """SIS from a uniform base on a 4 x 4 ferromagnet: 100 draws never reach the ordered states that
    carry most of the mass, so the weights look healthy and the estimate is far too low (found at
    K = 0.6: 0.63 nats below, reliable); the reverse end from exact samples shows it."""
    model, _ = lattice(4, coupling)
    truth = exact_log_z(model).log_z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        result = estimate_log_z(model, "sis", seed=0)
    assert honest(result, truth)
    assert any(c["name"] == "exact reverse run" for c in result.settings["checks"])
