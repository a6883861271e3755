"""Estimates that say when they cannot be trusted (Pareto k-hat, ESS, degenerate spreads), the
sandwich's gap, diverging training, and one-line warnings on the command line."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch
from conftest import F64, bars_and_stripes, random_machine, random_rbm
from test_cli import last_json, run
from typer.testing import CliRunner

from boltzkit import RBM
from boltzkit.cli.main import app
from boltzkit.errors import BoltzkitError, UnreliableEstimateWarning
from boltzkit.estimators import ais, base_rate_path, bridge, exact_log_z, ratio_path, sandwich, sis
from boltzkit.estimators.reliability import assess, pareto_k_hat
from boltzkit.io import save_model
from boltzkit.learning import train_rbm

# (seed, number of weights, tail shape xi of the synthetic weights, k-hat of ArviZ 0.23.4's psislw)
ARVIZ_K_HAT = [
    (0, 100, 0.2, 0.30454449046683457),
    (1, 100, 0.8, 0.8306615312787944),
    (2, 1000, 0.5, 0.6021848445374096),
    (3, 1000, 1.2, 1.2690860238045416),
    (4, 50, 0.0, 0.5372250453841005),
    (5, 4000, 0.3, 0.4536239588692108),
    (6, 200, -0.2, -0.4805130154273327),
]


def synthetic_log_weights(seed: int, n: int, xi: float) -> np.ndarray:
    """Weights with a generalised-Pareto tail of shape xi (xi > 0: w = U^-xi), light-tailed normal
    log-weights (xi = 0), or bounded weights (xi < 0)."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=n)
    if xi > 0:
        return -xi * np.log(u)
    if xi == 0:
        return rng.normal(size=n)
    return np.log1p(-u)


@pytest.mark.parametrize(("seed", "n", "xi", "reference"), ARVIZ_K_HAT)
def test_k_hat_matches_arviz(seed, n, xi, reference):
    """The reference numbers were computed with ArviZ's PSIS (``az.psislw``) on the same draws."""
    assert pareto_k_hat(synthetic_log_weights(seed, n, xi)) == pytest.approx(reference, abs=1e-10)


def test_k_hat_matches_arviz_live_when_installed():
    az = pytest.importorskip("arviz")
    for seed in range(5):
        lw = synthetic_log_weights(seed, 500, 0.6)
        _, k = az.psislw(lw.copy())
        assert pareto_k_hat(torch.from_numpy(lw)) == pytest.approx(float(k), abs=1e-10)


def test_k_hat_is_undefined_for_too_few_or_equal_weights():
    assert math.isnan(pareto_k_hat(np.array([0.0, 1.0, 2.0])))
    assert math.isnan(pareto_k_hat(np.zeros(100)))
    heavy = synthetic_log_weights(3, 4000, 1.5)
    assert pareto_k_hat(heavy) > 1.3 and pareto_k_hat(heavy - 1e4) == pytest.approx(pareto_k_hat(heavy))


def test_verdict_from_weights():
    ok = assess(torch.from_numpy(synthetic_log_weights(0, 200, 0.2)))
    assert ok.reliable and ok.reason is None
    heavy = assess(torch.from_numpy(synthetic_log_weights(3, 1000, 1.2)))
    assert not heavy.reliable and "k-hat" in heavy.reason and heavy.advice
    equal = torch.zeros(50, dtype=F64)
    assert not assess(equal).reliable and "lockstep" in assess(equal).reason
    assert assess(equal, trivial=True).reliable


def _constant_weight_rbm(n_visible: int, n_hidden: int, w: float, seed: int) -> RBM:
    g = torch.Generator().manual_seed(seed)
    return RBM(
        n_visible,
        n_hidden,
        weights=torch.full((n_visible, n_hidden), w, dtype=F64),
        vbias=torch.randn(n_visible, generator=g, dtype=F64),
        dtype=F64,
    )


def test_the_zero_width_band_is_reproduced_and_flagged():
    """A start model with |W| = 100 puts all its mass on one state: every chain starts there and,
    with few betas, moves in lockstep, so all weights are equal and the band has zero width while
    the estimate is 14 nats off (seen as `logz A --relative-to B --betas 10`)."""
    target, start = random_rbm(20, 5, 1, scale=0.1), _constant_weight_rbm(20, 7, 100.0, 2)
    truth = exact_log_z(target).log_z - exact_log_z(start).log_z
    res = ais(ratio_path(start, target), n_chains=100, betas=10, seed=0, check=False)
    band = res.ratio_band
    assert band.minus_3sigma == band.plus_3sigma == res.log_ratio  # the zero-width band
    assert abs(res.log_ratio - truth) > 5  # far off, yet "confident"
    d = res.to_dict()
    assert d["reliable"] is False and "lockstep" in d["reliability_reason"] and "--betas" in d["advice"]


def test_sis_on_a_hard_model_is_flagged_and_ais_is_not():
    model = random_rbm(200, 12, 3, scale=0.3)
    path = base_rate_path(model)
    bad = sis(path, n_chains=50, seed=0).to_dict()
    assert bad["reliable"] is False and bad["k_hat"] > 0.7 and "AIS" in bad["advice"]
    good = ais(path, n_chains=100, betas=2000, seed=0, check=False).to_dict()
    assert good["reliable"] is True and good["k_hat"] < 0.7 and good["reliability_reason"] is None


def test_a_trivial_path_with_equal_weights_is_reliable():
    rbm = RBM(5, 3, vbias=torch.linspace(-1, 1, 5, dtype=F64), dtype=F64)
    res = ais(base_rate_path(rbm), n_chains=20, betas=11, seed=0, check=False)
    assert float(res.log_weights.std()) == 0.0 and res.to_dict()["reliable"] is True


def test_one_sample_is_never_a_reliable_estimate():
    """One weight has no spread: its zero-width band would claim an exact answer (bridge sampling
    with one sample per side did, 6 nats off)."""
    one = assess(torch.tensor([0.3], dtype=F64))
    assert not one.reliable and "one weight" in one.reason and "--chains" in one.advice
    assert assess(torch.tensor([0.3], dtype=F64), trivial=True).reliable
    path = base_rate_path(random_rbm(6, 3, 2))
    assert bridge(path, n_chains=1, seed=0).to_dict()["reliable"] is False
    assert bridge(path, n_chains=200, seed=0).to_dict()["reliable"] is True


def test_a_model_against_itself_is_a_trivial_path():
    """A fully visible machine with laterals relative to itself: every weight is exactly 1, which
    is right (the two ends are one distribution), not chains moving in lockstep."""
    model = random_machine("bm", (6,), 3, keys=[(0, 0)])
    res = ais(ratio_path(model, model), n_chains=20, betas=50, seed=0, check=False)
    assert float(res.log_weights.abs().max()) == 0.0 and res.to_dict()["reliable"] is True
    other = random_machine("bm", (6,), 4, keys=[(0, 0)])
    assert not ratio_path(model, other).trivial


def test_sandwich_reports_its_gap_with_a_standard_error():
    rbm = random_rbm(7, 5, 4)
    d = sandwich(base_rate_path(rbm), n_chains=300, betas=201, seed=1).to_dict()
    assert d["gap_stderr"] > 0 and isinstance(d["ends_cross"], bool)
    assert ("cross" in d["sandwich_note"]) == d["ends_cross"]
    if d["ends_cross"]:
        assert "within" in d["sandwich_note"] or "beyond" in d["sandwich_note"]


def test_a_one_chain_sandwich_says_its_gap_cannot_be_judged():
    """One chain per direction: the gap has no standard error, so neither end is blamed and no
    'inf standard errors' is printed."""
    rbm = random_rbm(7, 5, 4)
    d = sandwich(base_rate_path(rbm), n_chains=1, betas=50, seed=0).to_dict()
    assert d["gap_stderr"] == 0.0 and d["gap"] != 0.0 and d["reliable"] is False
    assert "no standard error" in d["sandwich_note"]
    (check,) = d["checks"]
    assert check["passed"] is False and "no spread" in check["reason"] and "more chains" in check["advice"]
    assert "inf" not in check["reason"] and "not converged" not in check["reason"]


def test_a_diverging_run_stops_with_a_clear_error():
    with pytest.raises(BoltzkitError, match="diverged in epoch 1") as info:
        train_rbm(bars_and_stripes(), n_hidden=5, lr=1e6, epochs=3, progress=False)
    assert "lower it" in str(info.value)


def test_a_start_beyond_the_divergence_limit_is_refused_as_a_start_not_a_divergence():
    """A review's finding: a model of |W| = 1e29 given to train further was said to have
    diverged in epoch 1 for a learning rate too large."""
    from boltzkit.learning import train_model

    x = bars_and_stripes()
    huge = random_rbm(int(x.shape[1]), 3, 0)
    with torch.no_grad():
        huge.W.mul_(1e29)
    with pytest.raises(BoltzkitError, match="cannot start from this model: parameter W holds") as info:
        train_model(x, hidden=3, init=huge, epochs=1, progress=False)
    assert "learning rate" not in str(info.value) and "rescale" in str(info.value)


def test_a_falling_history_warns():
    values = iter([-10.0, -9.0, -30.0, -31.0])

    def monitor(model, datasets):
        return {"train_log_lik": next(values)}

    with pytest.warns(UserWarning, match="fell from -9 to -30"):
        train_rbm(bars_and_stripes(), n_hidden=3, epochs=4, progress=False, monitor=monitor)


def test_cli_warnings_are_one_line(tmp_path):
    runner = CliRunner()
    model = random_rbm(200, 12, 3, scale=0.3, dtype=torch.float32)
    save_model(model, tmp_path / "m.safetensors")
    result = runner.invoke(
        app, ["logz", str(tmp_path / "m.safetensors"), "--method", "sis", "--chains", "50"]
    )
    assert result.exit_code == 0
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "k-hat" in warnings[0] and "Traceback" not in result.output
    resumed = runner.invoke(
        app,
        [
            "train",
            "--data",
            "bars-and-stripes",
            "--epochs",
            "1",
            "--resume",
            "--out",
            str(tmp_path / "r.safetensors"),
        ],
    )
    assert resumed.exit_code == 0
    lines = resumed.stderr.strip().splitlines()
    assert lines and lines[0].startswith("warning: no checkpoint") and "UserWarning" not in resumed.stderr
    diverged = runner.invoke(
        app, ["train", "--data", "bars-and-stripes", "--lr", "1e6", "--out", str(tmp_path / "d.safetensors")]
    )
    assert diverged.exit_code == 1 and diverged.stderr.startswith("error: training diverged")
    assert not (tmp_path / "d.safetensors").exists()


def test_few_runs_fit_no_tail_and_one_carrying_run_is_flagged():
    """Below 21 weights the Pareto tail holds fewer than five and k-hat is not estimated (a fit to
    one exceedance returned its prior's 0.22 whatever the weights); an estimate that one run
    carries (over 90% of the summed weights) is unreliable where the ESS fraction cannot show it
    (ten runs or fewer: bridge sampling with 5 chains on a 12 x 6 RBM of large weights was 30 nats
    off, 'reliable'), while two runs that agree stay reliable."""
    assert math.isnan(pareto_k_hat(synthetic_log_weights(3, 20, 1.2)))
    assert math.isfinite(pareto_k_hat(synthetic_log_weights(3, 21, 1.2)))
    carried = assess(torch.tensor([0.0, -30.0, -31.0, -29.0, -40.0], dtype=F64))
    assert not carried.reliable and "one run carries" in carried.reason and "--chains" in carried.advice
    spread = torch.linspace(-0.2, 0.2, 10, dtype=F64)  # ten runs: the fewest whose spread is taken
    assert assess(spread).reliable
    few = assess(spread[:5])
    assert not few.reliable and "only 5 runs" in few.reason  # however even their weights
    assert "only 2 runs" in assess(torch.tensor([0.0, 0.05], dtype=F64)).reason  # ESS 1.9988 of 2
    assert assess(torch.tensor([0.0, 0.05], dtype=F64), trivial=True).reliable  # equal ends: nothing to judge


def test_logz_judges_an_estimate_by_the_exact_value_beside_it_and_withholds_its_json_band(tmp_path):
    """Two modes (every visible unit tied to one hidden unit, whose field of 0.5 keeps the model
    from being symmetric under flipping every unit: a symmetric one starts from the uniform base):
    five SIS runs from the base rate see one mode, their band sits 0.9 nats below the exact log Z
    enumerated beside it, and the weights alone (ESS 5 of 5) would call it reliable. The record
    says it is not, and its JSON carries no band, as the text prints none."""
    path = tmp_path / "sym.npz"
    np.savez(path, W=np.full((12, 1), 3.0), vbias=-1.5 * np.ones(12), hbias=np.array([-17.5]))
    record = last_json(run("logz", path, "--method", "sis", "--chains", 5, "--seed", 3, "--json"))
    assert record["exact_log_z"] == pytest.approx(3.3910, abs=1e-4)
    # five runs are too few for a band (the rule of 2026-12-07); before it, only the exact value beside
    # the estimate showed it unreliable (its judgement is tested on its own below)
    assert record["reliable"] is False and "only 5 runs" in record["reliability_reason"]
    assert record["log_z_minus_3sigma"] is None and record["log_z_plus_3sigma"] is None
    assert record["band_withheld"] and record["log_z"] < 2.5
    assert "no band" in run("logz", path, "--method", "sis", "--chains", 5, "--seed", 3).stdout
    # and its --out file, as the JSON line (review of 2026-12-04: the file kept the band)
    out = tmp_path / "sis.json"
    run("logz", path, "--method", "sis", "--chains", 5, "--seed", 3, "--out", out)
    saved = json.loads(out.read_text())
    assert saved["reliable"] is False and saved["band_withheld"]
    assert saved["log_z_minus_3sigma"] is None and saved["log_z_plus_3sigma"] is None


def test_logz_puts_the_exact_value_beside_a_variational_approximation(tmp_path):
    """Bethe and TAP bound nothing, and on a frustrated model they can be far off while they
    converge: where the model is cheap to enumerate, the exact log Z stands beside them (and
    beside the bounds), in the JSON and the text alike; the bounds sit on their sides."""
    g = np.random.default_rng(0)
    w = g.normal(0.0, 1.5, (10, 6))
    path = tmp_path / "frustrated.npz"
    np.savez(path, W=w, vbias=g.normal(0.0, 1.0, 10), hbias=g.normal(0.0, 1.0, 6))
    exact = last_json(run("logz", path, "--json"))["log_z"]
    records = {
        m: last_json(run("logz", path, "--method", m, "--json")) for m in ("mean-field", "bethe", "trw")
    }
    for record in records.values():
        assert record["exact_log_z"] == pytest.approx(exact, abs=1e-9)
        assert record.get("reliable") is not True  # a deterministic value claims no sampling verdict
    assert records["mean-field"]["log_z"] <= exact <= records["trw"]["log_z"]
    assert "enumerated beside it" in run("logz", path, "--method", "bethe").stdout


@pytest.mark.parametrize("estimator", ["sis", "ais", "sandwich"])
def test_an_unreliable_estimate_warns_at_the_callers_line(estimator) -> None:
    """The warning names this file, not boltzkit's code or torch's ``no_grad`` wrapper (SIS's
    warning named torch/utils/_contextlib.py)."""
    from boltzkit.errors import UnreliableEstimateWarning

    rbm = random_rbm(12, 6, seed=3, scale=4.0)
    path = base_rate_path(rbm)
    run_estimator = {
        "sis": lambda: sis(path, n_chains=20, seed=0),
        "ais": lambda: ais(path, n_chains=20, betas=2, seed=0, check=False),
        "sandwich": lambda: sandwich(path, n_chains=20, betas=2, seed=0),
    }[estimator]
    with pytest.warns(UnreliableEstimateWarning) as caught:
        run_estimator()
    assert {w.filename for w in caught} == {__file__}


def test_pooled_records_keep_every_runs_checks_in_any_order() -> None:
    """A review of 2026-12-07: ``LogZResult.pool`` kept the first record's checks only, so a failed
    reverse check counted or not by the order of the runs."""
    from boltzkit.estimators import LogZResult

    weights = torch.linspace(-0.1, 0.1, 50, dtype=torch.float64)
    failed = {"name": "exact reverse run", "passed": False, "reason": "the ends disagree", "advice": "longer"}
    passed = {"name": "exact reverse run", "passed": True, "reason": None, "advice": None}
    good = LogZResult.from_log_weights("ais", weights, log_z_start=0.0, n_steps=10, checks=[passed])
    bad = LogZResult.from_log_weights("ais", weights + 0.01, log_z_start=0.0, n_steps=10, checks=[failed])
    assert good.reliability().reliable and not bad.reliability().reliable
    for runs in ([good, bad], [bad, good]):
        pooled = LogZResult.pool(runs)
        assert pooled.reliability().reliable is False
        assert "the ends disagree" in pooled.reliability().reason
        assert sorted(c["run"] for c in pooled.settings["checks"]) == [0, 1]


def test_ais_runs_its_checks_by_default() -> None:
    """``ais()`` checks as every other estimator does (before 2026-12-07 only when asked), so a
    short schedule is not reliable on its weights' spread alone."""
    rbm = random_rbm(12, 8, 10, scale=3.0)
    with pytest.warns(UnreliableEstimateWarning, match="halving the schedule"):
        record = ais(base_rate_path(rbm), n_chains=20, betas=10, seed=0)
    assert {c["name"] for c in record.settings["checks"]} >= {"schedule halved"}
    assert record.reliability().reliable is False


def test_python_records_of_an_unreliable_estimate_hold_no_band_and_say_why() -> None:
    """``to_dict`` of a log Z record and of the log-probabilities from it withhold the bands of an
    unreliable estimate, as the command line's JSON does, and ``str`` gives the verdict (a review of
    2026-12-07: both printed bands the estimate could not support)."""
    from boltzkit.estimators import dataset_log_prob

    rbm = random_rbm(12, 8, 10, scale=3.0)
    data = (torch.rand(30, 12, generator=torch.Generator().manual_seed(1)) < 0.5).to(F64)
    with pytest.warns(UnreliableEstimateWarning):
        short = ais(base_rate_path(rbm), n_chains=20, betas=10, seed=0)
    long = ais(base_rate_path(rbm), n_chains=100, betas=2000, seed=0)
    assert short.reliability().reliable is False and long.reliability().reliable is True
    for record in (short.to_dict(), dataset_log_prob(rbm, data, short).to_dict()):
        bands = {k: v for k, v in record.items() if k.endswith(("_sigma", "_3sigma"))}
        assert bands and all(v is None for v in bands.values()), bands
        assert record["band_withheld"] and record["reliable"] is False
    assert short.band.plus_3sigma is not None  # the attribute stays, for who asks knowing the verdict
    text = str(short)
    assert "UNRELIABLE" in text and short.reliability().reason in text and "at 3 sigma" not in text
    kept = long.to_dict()
    assert kept["log_z_minus_3sigma"] < kept["log_z"] < kept["log_z_plus_3sigma"]
    assert "band_withheld" not in kept
    assert str(long).endswith("reliable") and f"{long.band.plus_3sigma:.6g}" in str(long)
    assert str(exact_log_z(rbm)) == f"log Z = {exact_log_z(rbm).log_z:.6g} (exact)"


@pytest.mark.parametrize(
    "log_weights",
    [[math.nan] * 5, [-math.inf] * 5, [0.0, 1.0, math.inf, 2.0, 3.0], [0.0, 0.1, math.nan, -0.1, 0.2]],
)
def test_weights_that_are_not_numbers_to_average_are_unreliable(log_weights) -> None:
    """NaN, an infinite weight, or zero weight everywhere: the estimate is undefined, and its
    record says so (a review of 2026-12-07: all-NaN weights printed as reliable)."""
    from boltzkit.estimators import LogZResult

    verdict = assess(torch.tensor(log_weights, dtype=F64))
    assert verdict.reliable is False and "not numbers to average" in verdict.reason
    record = LogZResult.from_log_weights(
        "ais", torch.tensor(log_weights, dtype=F64), log_z_start=0.0, n_steps=3
    )
    assert "UNRELIABLE" in str(record)


def test_a_run_of_zero_weight_beside_others_is_no_lockstep() -> None:
    """One weight of exp(-inf) among spread ones: before, the spread read as infinite and the
    lockstep rule (all weights equal) fired."""
    lw = torch.cat([torch.tensor([-math.inf], dtype=F64), torch.linspace(-0.2, 0.2, 30, dtype=F64)])
    assert assess(lw).reliable


def test_logz_judges_a_reliable_estimate_whose_band_misses_the_exact_value() -> None:
    """``logz``'s judgement by the exact log Z enumerated beside a small model: a band that misses it
    fails the estimate, whatever its weights said; one that holds it, or an estimate already
    unreliable, is left as it is."""
    from boltzkit.cli.logz import _judge_by_the_truth

    missed = {"reliable": True, "log_z_minus_3sigma": 1.0, "log_z_plus_3sigma": 2.0, "exact_log_z": 3.0}
    _judge_by_the_truth(missed)
    assert missed["reliable"] is False and "outside its ±3σ band" in missed["reliability_reason"]
    assert missed["checks"][-1]["name"] == "agrees with the exact log Z"
    held = {"reliable": True, "log_z_minus_3sigma": 1.0, "log_z_plus_3sigma": 4.0, "exact_log_z": 3.0}
    _judge_by_the_truth(held)
    assert held["reliable"] is True and "checks" not in held
    one_sided = {"reliable": True, "log_z_minus_3sigma": None, "log_z_plus_3sigma": 2.0, "exact_log_z": 3.0}
    _judge_by_the_truth(one_sided)
    assert one_sided["reliable"] is False


def test_a_variational_value_that_is_no_fixed_point_is_unreliable_in_its_record(tmp_path) -> None:
    """Bethe stopped after 3 sweeps: its record said only ``converged: false`` (its warning went to
    stderr); now ``reliable: false`` with the reason, as every estimate. A mean-field value is a
    lower bound at any iterate, and stays reliable as one."""
    from boltzkit.estimators import LogZResult
    from boltzkit.variational import variational_log_z

    rbm = random_rbm(10, 6, 0, scale=3.0)
    path = tmp_path / "rbm.safetensors"
    save_model(rbm, path)
    record = last_json(run("logz", path, "--method", "bethe", "--max-iter", 3, "--json"))
    assert record["converged"] is False and record["reliable"] is False and record["reliability_reason"]
    text = run("logz", path, "--method", "bethe", "--max-iter", 3).stdout
    assert "reliable: NO" in text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (whether it converged or not, the bound holds)
        early = LogZResult.from_variational(variational_log_z(rbm, "mean-field", max_iter=1))
    assert early.settings["bound"] == "lower" and early.reliability() is None  # no verdict against it


def test_a_python_warning_names_the_keywords_behind_its_advice() -> None:
    """The advice names the command line's options; a Python caller is told the keywords too."""
    rbm = random_rbm(12, 8, 10, scale=3.0)
    with pytest.warns(UnreliableEstimateWarning, match=r"in Python --betas: betas=") as caught:
        ais(base_rate_path(rbm), n_chains=20, betas=10, seed=0)
    assert "--betas" in str(caught[0].message)
