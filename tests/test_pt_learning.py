"""Parallel tempering as a learner (t-PT_k, Brügge, Fischer & Igel 2013, Sec. 4.2) and the adaptive
ladder: the negative phase's statistics and swap rates against exact enumeration."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import F64, K_SIGMA, bit_matrix, random_rbm

from boltzkit.diagnostics.transition_matrix import exact_swap_rates
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.likelihood import exact_log_likelihoods
from boltzkit.learning.gradients import PTLearner, make_learner
from boltzkit.learning.phases import Persistent, TemperedChains
from boltzkit.learning.trainer import Trainer
from boltzkit.samplers import run_chains
from boltzkit.samplers.tempering import ParallelTempering, SwapMonitor, equalize_ladder, ladder, tune_ladder


@torch.no_grad()
def _exact_model_statistics(rbm) -> dict[str, torch.Tensor]:
    """``E[v h^T]``, ``E[v]``, ``E[h]`` under the model, by enumerating the visible states."""
    v = bit_matrix(rbm.n_visible)
    log_p = -rbm.free_energy(v).to(F64)
    p = torch.softmax(log_p, 0)
    h = torch.sigmoid(v @ rbm.W + rbm.hbias)
    return {"W": (v * p[:, None]).t() @ h, "vbias": p @ v, "hbias": p @ h}


@pytest.mark.parametrize("inner", ["gibbs", "flip"])
def test_the_beta_one_replica_gives_the_exact_model_statistics(inner):
    """With a fixed model, the PT negative phase's Rao-Blackwellised statistics after burn-in match
    exact expectations within K_SIGMA standard errors (independent chains)."""
    rbm = random_rbm(5, 3, 11, scale=2.0)
    n = 4000
    learner = make_learner("pt", temperatures=5, k=1, sampler=inner, n_chains=n)
    assert isinstance(learner, PTLearner) and learner.method == "pt"
    g = torch.Generator().manual_seed(4)
    v = bit_matrix(5)[:7]
    learner.setup(rbm, v, g)
    for _ in range(60):
        learner.phases(rbm, v, g)
    neg = learner.phases(rbm, v, g).negative
    assert neg.n_chains == n
    exact = _exact_model_statistics(rbm)
    vm, hm = neg.layers
    per_chain = {"W": vm[:, :, None] * hm[:, None, :], "vbias": vm, "hbias": hm}
    for name, x in per_chain.items():
        mean = x.mean(0)
        se = x.std(0, unbiased=True) / math.sqrt(n)
        z = (mean - exact[name]).abs() / se.clamp_min(1e-12)
        assert float(z.max()) < K_SIGMA, (name, float(z.max()))
    rates = learner.swap_rates
    assert rates.shape == (4,) and bool(((rates > 0) & (rates <= 1)).all())


def test_sampled_swap_rates_match_the_exact_rates():
    rbm = random_rbm(4, 3, 5, scale=1.5)
    pt = ParallelTempering(4, "gibbs")
    n = 20_000
    g = torch.Generator().manual_seed(7)
    state = run_chains(rbm, pt, pt.extend(rbm.random_state(n, g)), 30, generator=g)
    monitor = SwapMonitor(4, n)
    run_chains(rbm, pt, state, 1, generator=g, observers=[monitor])
    exact = exact_swap_rates(rbm, pt.betas)
    se = torch.sqrt(exact * (1 - exact) / n)
    assert bool(((monitor.swap_rates - exact).abs() <= K_SIGMA * se).all()), (monitor.swap_rates, exact)


def test_equalize_ladder_converges_to_equal_exact_rates():
    rbm = random_rbm(5, 3, 2, scale=2.5)
    betas = ladder(6, "adaptive")
    uniform_rates = exact_swap_rates(rbm, betas)
    for _ in range(40):
        betas = equalize_ladder(betas, exact_swap_rates(rbm, betas))
    rates = exact_swap_rates(rbm, betas)
    assert float(betas[0]) == 0.0 and float(betas[-1]) == 1.0
    assert float(rates.max() - rates.min()) < 0.01 < float(uniform_rates.max() - uniform_rates.min())


def test_equalize_ladder_keeps_ends_and_order_and_refuses_bad_rates():
    betas = ladder(5)
    same = equalize_ladder(betas, [0.7, 0.7, 0.7, 0.7])
    torch.testing.assert_close(same, betas, rtol=0, atol=1e-12)
    moved = equalize_ladder(betas, [1.0, 1.0, 0.0, 0.0])
    assert bool((moved[1:] > moved[:-1]).all()) and float(moved[-1]) == 1.0 and float(moved[0]) == 0.0
    assert float(moved[2]) > float(betas[2])  # the wide-open low end is stretched
    with pytest.raises(BoltzkitError, match="swap rates"):
        equalize_ladder(betas, [0.5, 0.5])
    with pytest.raises(BoltzkitError, match="swap rates"):
        equalize_ladder(betas, [0.5, 1.5, 0.5, 0.5])
    with pytest.raises(BoltzkitError, match="temperature ladder"):
        ParallelTempering(4, kind="cosine")


def test_tuned_ladder_has_more_equal_exact_rates():
    rbm = random_rbm(5, 3, 2, scale=2.5)
    pt = ParallelTempering(6, "gibbs", kind="adaptive")
    assert pt.adaptive
    before = exact_swap_rates(rbm, pt.betas)
    betas, state = tune_ladder(
        rbm, pt, n_chains=1000, n_rounds=40, n_iterations=8, generator=torch.Generator().manual_seed(1)
    )
    after = exact_swap_rates(rbm, betas)
    assert state.n_chains == 6 * 1000
    assert float(after.max() - after.min()) < 0.5 * float(before.max() - before.min())


def test_adaptive_learner_moves_its_ladder():
    rbm = random_rbm(5, 3, 2, scale=2.5)
    learner = make_learner("pt", temperatures=4, n_chains=200, ladder="adaptive", adapt_every=10)
    g = torch.Generator().manual_seed(0)
    v = bit_matrix(5)[:9]
    learner.setup(rbm, v, g)
    start = learner.betas.clone()
    for _ in range(10):
        learner.phases(rbm, v, g)
    assert not torch.equal(learner.betas, start) and float(learner.betas[-1]) == 1.0
    assert learner.negative.monitor.n_rounds == 0  # the window restarted after the move


def test_an_epochs_swap_rates_survive_the_adaptive_ladders_restart():
    """An adaptive ladder restarts its window of rates after each move; when an epoch ends on a
    move, the window is empty. The epoch's record takes its rates from the never-reset totals."""
    from boltzkit.learning.callbacks import SwapRates

    rbm = random_rbm(5, 3, 2, scale=2.5)
    learner = make_learner("pt", temperatures=4, n_chains=200, ladder="adaptive", adapt_every=10)
    g = torch.Generator().manual_seed(0)
    v = bit_matrix(5)[:9]
    learner.setup(rbm, v, g)
    record = {"epoch": 1}
    swaps = SwapRates(learner)
    swaps.on_epoch_begin(None, 1)
    for _ in range(10):  # an epoch of 10 updates ends on the ladder's move
        learner.phases(rbm, v, g)
    swaps.on_epoch_end(None, record)
    accepted, rounds = learner.swap_totals
    assert learner.negative.monitor.n_rounds == 0 and rounds == 10
    assert record["swap_rates"] == [round(float(a) / 10, 4) for a in accepted]
    assert min(record["swap_rates"]) > 0.0


def test_persistent_chains_with_a_tempering_sampler_return_the_target_chains():
    rbm = random_rbm(5, 3, 1)
    phase = Persistent(n_chains=13, k=2, sampler="pt:3:flip")
    g = torch.Generator().manual_seed(0)
    phase.setup(rbm, bit_matrix(5)[:4], g)
    assert phase.chains.n_chains == 3 * 13
    state, _ = phase(rbm, bit_matrix(5)[:4], None, None, g)
    assert state.n_chains == 13


def test_pt_training_follows_exact_gradient_ascent_and_resumes_exactly(tmp_path):
    """150 PT updates reach the exact log-likelihood of 150 steps of exact gradient ascent (same
    learning rate) within 0.05 nats; a run stopped, checkpointed and resumed ends bit for bit equal."""
    data = torch.tensor(
        [
            [1, 1, 0, 0, 1],
            [1, 1, 0, 0, 0],
            [1, 0, 1, 0, 1],
            [0, 1, 0, 1, 1],
            [1, 1, 1, 1, 1],
            [0, 0, 0, 0, 1],
        ],
        dtype=F64,
    )
    lr, updates = 0.1, 150

    def fresh():
        return random_rbm(5, 3, 9, scale=0.01, vbias_scale=0.0, hbias_scale=0.0)

    def run(epochs, resume_from=None):
        rbm = fresh()
        learner = make_learner("pt", temperatures=5, k=1, n_chains=64, ladder="adaptive", adapt_every=7)
        opt = torch.optim.SGD(rbm.parameters(), lr=lr)
        trainer = Trainer(rbm, learner, opt, data, epochs=epochs, batch_size=6, generator=3)
        if resume_from is not None:
            trainer.load_checkpoint(resume_from)
        trainer.fit()
        return rbm, trainer, learner

    exact = fresh()
    start = exact_log_likelihoods(exact, {"train": data})["train_log_lik"]
    with torch.no_grad():
        for _ in range(updates):
            e = _exact_model_statistics(exact)
            h = torch.sigmoid(data @ exact.W + exact.hbias)
            exact.W += lr * (data.t() @ h / data.shape[0] - e["W"])
            exact.vbias += lr * (data.mean(0) - e["vbias"])
            exact.hbias += lr * (h.mean(0) - e["hbias"])
    target = exact_log_likelihoods(exact, {"train": data})["train_log_lik"]
    full, _, learner_full = run(updates)
    reached = exact_log_likelihoods(full, {"train": data})["train_log_lik"]
    assert target > start + 0.3
    assert abs(reached - target) < 0.05, (reached, target)
    assert learner_full.describe().startswith("5-PT-1 (gibbs, adaptive ladder")
    # stop after 60 updates, checkpoint, resume to the end: the same parameters, ladder and counts
    _, trainer, _ = run(60)
    ckpt = tmp_path / "pt.ckpt"
    trainer.epochs = updates
    trainer.save_checkpoint(ckpt)
    resumed, _, learner_resumed = run(updates, resume_from=ckpt)
    for a, b in zip(full.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(learner_full.betas, learner_resumed.betas)
    assert learner_full.round_trips == learner_resumed.round_trips


def test_tempered_chains_k_follows_the_learner():
    phase = TemperedChains(n_chains=5, n_temperatures=3, k=2)
    assert phase.k == 2 and phase.operator.name == "pt:3@2"
    phase.k = 4
    assert phase.operator.k == 4 and phase.operator.name == "pt:3@4"
    with pytest.raises(BoltzkitError, match="positive integer"):
        phase.k = 0


@pytest.mark.parametrize("kind", ["rbm", "dbm", "srbm"])
def test_energies_from_the_last_sweep_equal_the_joint_energies(kind):
    """The swap round reuses the final layer's input for the energies (no extra product); they
    equal ``joint_energy`` of the new state. An SRBM's last layer has laterals: no shortcut."""
    from conftest import random_machine

    model = (
        random_rbm(5, 3, 1)
        if kind == "rbm"
        else random_machine(kind, (5, 3, 2)[: 3 if kind == "dbm" else 2], 2)
    )
    pt = ParallelTempering(4, "flip")
    g = torch.Generator().manual_seed(0)
    state = pt.extend(model.random_state(9, g))
    new, energy = pt._last_sweep(model, state, pt.row_betas(state), g, (), ())
    if kind == "srbm":
        assert energy is None
    else:
        torch.testing.assert_close(energy, model.joint_energy(new), rtol=0, atol=1e-12)


def test_command_line_trains_and_samples_with_parallel_tempering(tmp_path):
    import json

    from typer.testing import CliRunner

    from boltzkit.cli.main import app

    runner = CliRunner()
    model = tmp_path / "pt.safetensors"
    args = ["train", "--data", "bars-and-stripes:size=3", "--out", model, "--hidden", "4", "--method", "pt"]
    args += [
        "--temperatures",
        "4",
        "--k",
        "2",
        "--ladder",
        "adaptive",
        "--epochs",
        "5",
        "--batch-size",
        "8",
        "--json",
    ]
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["settings"]["temperatures"] == 4 and record["settings"]["ladder"] == "adaptive"
    assert len(record["history"][-1]["swap_rates"]) == 3
    args = ["sample", model, "--out", tmp_path / "s.npy", "--sampler", "pt:4", "--pt-steps", "2"]
    result = runner.invoke(app, [str(a) for a in [*args, "--chains", "5", "--steps", "20", "--json"]])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["pt_steps"] == 2 and len(record["swap_rates"]) == 3 and record["round_trips"] >= 0
    bad = runner.invoke(app, ["sample", str(model), "--out", str(tmp_path / "g.npy"), "--pt-steps", "2"])
    assert bad.exit_code == 1 and "parallel tempering only" in bad.output
    bad = runner.invoke(app, ["reproduce", "ais-operators", "--only", "table1", "--out", str(tmp_path / "r")])
    assert bad.exit_code == 1 and "--only does not apply to ais-operators" in bad.output


def test_cd_refuses_a_tempering_sampler_in_one_line_for_binary_models_too() -> None:
    """CD's chains restart at the data, so they have no replicas to temper: binary CD now says so
    as the unit learners do (it failed inside the sweep on the replicas' chain count)."""
    for sampler in ("pt:3", "(pt:3)*2"):
        with pytest.raises(BoltzkitError, match="not at tempered replicas") as info:
            make_learner("cd", sampler=sampler)
        assert "'pt'" in str(info.value)
    make_learner("pcd", sampler="pt:3", n_chains=6)  # persistent chains take it
