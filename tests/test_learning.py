"""Tests of boltzkit.learning: CD-k / PCD learners, k schedules, the trainer, checkpoints, train_rbm."""

from __future__ import annotations

import json
import math
import warnings
from functools import partial

import pytest
import torch
from conftest import KillAfter, Killed, bars_and_stripes, random_rbm
from safetensors.torch import save_file

from boltzkit.errors import BoltzkitError, DataError, ModelFileError
from boltzkit.estimators.exact import exact_log_prob, exact_log_z, layer_log_probs
from boltzkit.estimators.likelihood import exact_log_likelihoods
from boltzkit.learning import (
    Callback,
    CDLearner,
    GeometricK,
    History,
    LinearK,
    LogLikelihood,
    PCDLearner,
    Statistics,
    StepK,
    Trainer,
    history_paths,
    init_rbm,
    load_checkpoint,
    parse_k_schedule,
    save_checkpoint,
    train_rbm,
    visible_bias_from_data,
)
from boltzkit.learning.checkpoint import decode_state, encode_state
from boltzkit.models import RBM

SAMPLERS = ["gibbs", "flip", "blend:0.5"]
EXACT = partial(exact_log_likelihoods, max_bits=20)  # the exact log-likelihood monitor


# ----------------------------------------------------------------------------------- fixtures
def tiny_data(n: int = 11, n_visible: int = 5, seed: int = 1, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, n_visible, generator=g) < 0.4).to(dtype)


def exact_mean_log_lik(rbm: RBM, x: torch.Tensor) -> float:
    r64 = rbm.as_float64()
    return float(exact_log_prob(r64, x.to(torch.float64), exact_log_z(r64)).mean())


def exact_nll_gradient(rbm: RBM, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """d(-mean log p(x))/d theta by autograd through an enumeration over all visible states."""
    params = {
        name: getattr(rbm, name).detach().to(torch.float64).clone().requires_grad_(True)
        for name in ("W", "vbias", "hbias")
    }
    n_visible = rbm.n_visible
    states = ((torch.arange(1 << n_visible)[:, None] >> torch.arange(n_visible)) & 1).to(torch.float64)

    def log_f(v: torch.Tensor) -> torch.Tensor:  # log p*(v) = b^T v + sum_j softplus(c_j + (W^T v)_j)
        return v @ params["vbias"] + torch.nn.functional.softplus(v @ params["W"] + params["hbias"]).sum(1)

    nll = -(log_f(x.to(torch.float64)).mean() - torch.logsumexp(log_f(states), 0))
    nll.backward()
    return {name: p.grad for name, p in params.items()}


def exact_model_statistics(rbm: RBM) -> dict[str, torch.Tensor]:
    """E_model[v h^T], E_model[v], E_model[h] by enumerating the visible layer (float64)."""
    states, log_p = layer_log_probs(rbm, "visible")
    p = torch.exp(log_p)
    hp = rbm.as_float64().prob_h_given_v(states).detach()
    return {"vh": states.t() @ (p[:, None] * hp), "v": p @ states, "h": p @ hp}


# ------------------------------------------------------------------------------ k schedules
def test_k_schedule_values():
    assert parse_k_schedule("1:25").values(25) == list(range(1, 26))
    assert parse_k_schedule("linear:1:25").values(5) == [1, 7, 13, 19, 25]
    assert parse_k_schedule("1:3").values(5) == [1, 2, 2, 3, 3]  # 1.5 and 2.5 round half up
    assert parse_k_schedule("5:1").values(3) == [5, 3, 1]
    assert parse_k_schedule("1:25").values(1) == [1]
    assert parse_k_schedule("geometric:1:16").values(5) == [1, 2, 4, 8, 16]
    assert parse_k_schedule("3").values(4) == [3, 3, 3, 3]
    assert parse_k_schedule("constant:2").values(2) == [2, 2]
    assert parse_k_schedule(7).values(2) == [7, 7]
    assert isinstance(parse_k_schedule(" Linear : 2 : 4 "), LinearK)
    assert isinstance(parse_k_schedule("geometric:1:4"), GeometricK)
    # Salakhutdinov's CD = ceil(epoch / 20) for 1-based epochs, capped at 25, whatever the run's length
    step = parse_k_schedule("step:20:25")
    assert isinstance(step, StepK)
    assert [step(e, 500) for e in (0, 19, 20, 39, 40, 479, 480, 499)] == [1, 1, 2, 2, 3, 24, 25, 25]
    assert step(700, 500) == 25 and step.values(3) == [1, 1, 1]
    assert parse_k_schedule("step:2:3").values(8) == [1, 1, 2, 2, 3, 3, 3, 3]
    for sched in ("1:25", "geometric:2:9", "4", "step:20:25"):
        s = parse_k_schedule(sched)
        assert parse_k_schedule(s.spec) == s
        assert parse_k_schedule(s) is s


@pytest.mark.parametrize(
    "spec",
    ["", "a:b", "0:5", "1:0", "linear:1", "1:2:3", "constant:0", "-1", 0, 1.5, True, "step:20", "step:0:5"],
)
def test_k_schedule_rejects_bad_specs(spec):
    with pytest.raises(BoltzkitError):
        parse_k_schedule(spec)


# --------------------------------------------------------------------------- learner chains
def test_cd1_gibbs_is_v0_h0_v1_then_p_h_given_v1():
    """Replay CD-1 by hand from the same generator: v0 -> h0 ~ p(h|v0) -> v1 ~ p(v|h0) -> p(h|v1)."""
    rbm = random_rbm(7, 3, 0, dtype=torch.float32, draw_dtype=torch.float32)
    v0 = tiny_data(11, 7, dtype=torch.float32)
    g = torch.Generator().manual_seed(5)
    h0p = torch.sigmoid(v0 @ rbm.W.detach() + rbm.hbias.detach())
    h0 = (torch.rand(h0p.shape, generator=g) < h0p).float()
    v1p = torch.sigmoid(h0 @ rbm.W.detach().t() + rbm.vbias.detach())
    v1 = (torch.rand(v1p.shape, generator=g) < v1p).float()
    h1p = torch.sigmoid(v1 @ rbm.W.detach() + rbm.hbias.detach())
    ph = CDLearner(1).phases(rbm, v0, torch.Generator().manual_seed(5))
    assert torch.equal(ph.v_data, v0)
    torch.testing.assert_close(ph.h_data, h0p)
    assert torch.equal(ph.v_model, v1)
    torch.testing.assert_close(ph.h_model, h1p)
    torch.testing.assert_close(ph.reconstruction, ((v0 - v1p) ** 2).sum())


def test_cd_first_visible_update_of_flip_starts_from_the_data():
    """With flip-the-state, v1 is the flip move from v0 given h0 (not a fresh Gibbs draw)."""
    rbm = random_rbm(7, 3, 0, dtype=torch.float32, draw_dtype=torch.float32)
    v0 = tiny_data(13, 7, dtype=torch.float32)
    g = torch.Generator().manual_seed(9)
    h0p = rbm.prob_h_given_v(v0).detach()
    h0 = (torch.rand(h0p.shape, generator=g) < h0p).float()
    a = rbm.visible_logits(h0).detach()
    s = (2 * v0 - 1) * a
    p_move = torch.where(s == 0, torch.full_like(s, 0.5), torch.exp(-torch.relu(s)))
    v1 = torch.where(torch.rand(v0.shape, generator=g) < p_move, 1 - v0, v0)
    ph = CDLearner(1, "flip").phases(rbm, v0, torch.Generator().manual_seed(9))
    assert torch.equal(ph.v_model, v1)


def test_phases_called_directly_return_states_outside_the_autograd_graph():
    """A phase is sampling, never differentiated: called outside ``torch.no_grad`` (as a user
    composing phases by hand would) its states carry no graph of the model's parameters."""
    from boltzkit.learning.phases import ContrastiveDivergence, ExactConditional, Persistent, TemperedChains

    rbm = random_rbm(7, 3, 0)
    v = tiny_data(5, 7)
    g = torch.Generator().manual_seed(2)
    positive_phase = ExactConditional()
    positive = positive_phase(rbm, v, g)
    assert not any(layer.requires_grad for layer in positive.layers)
    for phase in (ContrastiveDivergence(2), Persistent(4, 2), TemperedChains(4, 3, 1)):
        phase.setup(rbm, v, g)
        state, _ = phase(rbm, v, positive, positive_phase, g)
        assert not any(layer.requires_grad for layer in state.layers), type(phase).__name__


def test_set_gradients_is_minus_the_statistics_difference():
    rbm = random_rbm(7, 5, 0)
    x = tiny_data(13, 7)
    learner = PCDLearner(17, 1, "blend:0.5")
    g = torch.Generator().manual_seed(2)
    learner.init_chains(rbm, g, x)
    state = g.get_state()
    stats = learner.statistics(rbm, x, g)
    learner.init_chains(rbm, torch.Generator().manual_seed(2), x)  # same chains again
    g.set_state(state)
    learner.set_gradients(rbm, x, g)
    grads = stats.gradients()
    torch.testing.assert_close(rbm.W.grad, grads["W"])
    torch.testing.assert_close(rbm.vbias.grad, grads["vbias"])
    torch.testing.assert_close(rbm.hbias.grad, grads["hbias"])
    assert isinstance(stats, Statistics) and stats.vh_model.shape == (7, 5)


# ---------------------------------------------------------------- gradients vs exact ones
def test_positive_phase_is_the_exact_data_term():
    """The data term with p(h|v) equals d log p*(v)/d theta by autograd, for every learner."""
    rbm = random_rbm(5, 3, 0)
    x = tiny_data(11, 5)
    params = [p.detach().clone().requires_grad_(True) for p in (rbm.W, rbm.vbias, rbm.hbias)]
    W, b, c = params
    log_f = (x @ b + torch.nn.functional.softplus(x @ W + c).sum(1)).mean()
    gW, gb, gc = torch.autograd.grad(log_f, params)
    for learner in (CDLearner(2), PCDLearner(7, 1), CDLearner(1, "flip")):
        s = learner.statistics(rbm, x, torch.Generator().manual_seed(0))
        torch.testing.assert_close(s.vh_data, gW, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(s.v_data, gb, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(s.h_data, gc, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_pcd_negative_statistics_match_the_model_within_5_se(sampler):
    """After burn-in, PCD chains' Rao-Blackwellised statistics estimate E_model without bias."""
    rbm = random_rbm(5, 3, 4)
    n_chains = 20000
    learner = PCDLearner(n_chains, k=1, sampler=sampler)
    g = torch.Generator().manual_seed(11)
    learner.init_chains(rbm, g)  # uniform random start
    x = tiny_data(11, 5)
    for _ in range(60):  # burn-in: 60 sweeps at fixed parameters
        learner.phases(rbm, x, g)
    ph = learner.phases(rbm, x, g)
    v, h = ph.v_model, ph.h_model
    exact = exact_model_statistics(rbm)
    for per_chain, target in (
        ((v[:, :, None] * h[:, None, :]).reshape(n_chains, -1), exact["vh"].reshape(-1)),
        (v, exact["v"]),
        (h, exact["h"]),
    ):
        mean = per_chain.mean(0)
        se = per_chain.std(0) / math.sqrt(n_chains)
        z = (mean - target).abs() / se
        assert bool((z < 5).all()), f"max z = {float(z.max()):.2f}"


def test_pcd_gradient_matches_the_exact_log_likelihood_gradient():
    rbm = random_rbm(5, 3, 6)
    x = tiny_data(11, 5, seed=2)
    n_chains = 20000
    learner = PCDLearner(n_chains, k=1)
    g = torch.Generator().manual_seed(12)
    learner.init_chains(rbm, g, x)
    for _ in range(60):
        learner.phases(rbm, x, g)
    learner.set_gradients(rbm, x, g)
    exact = exact_nll_gradient(rbm, x)
    # standard errors from the chains' per-sample statistics (the data term is exact)
    v, h = learner.chains.visible, rbm.prob_h_given_v(learner.chains.visible).detach()
    se = {
        "W": (v[:, :, None] * h[:, None, :]).std(0) / math.sqrt(n_chains),
        "vbias": v.std(0) / math.sqrt(n_chains),
        "hbias": h.std(0) / math.sqrt(n_chains),
    }
    for name in ("W", "vbias", "hbias"):
        z = (getattr(rbm, name).grad - exact[name]).abs() / se[name]
        assert bool((z < 5).all()), f"{name}: max z = {float(z.max()):.2f}"


def test_cd_with_many_sweeps_approaches_the_exact_gradient():
    """CD-k chains started at the data converge to the model as k grows: CD-50 on a small-weight
    model is unbiased within 5 standard errors."""
    rbm = random_rbm(5, 3, 8, scale=0.5)
    x = tiny_data(11, 5, seed=3).repeat(1500, 1)  # 16,500 chains started at the data
    learner = CDLearner(50)
    learner.set_gradients(rbm, x, torch.Generator().manual_seed(4))
    exact = exact_nll_gradient(rbm, x)
    ph = learner.phases(rbm, x, torch.Generator().manual_seed(4))  # same chains again
    v, h = ph.v_model, ph.h_model
    n = x.shape[0]
    se = {
        "W": (v[:, :, None] * h[:, None, :]).std(0) / math.sqrt(n),
        "vbias": v.std(0) / math.sqrt(n),
        "hbias": h.std(0) / math.sqrt(n),
    }
    for name in ("W", "vbias", "hbias"):
        z = (getattr(rbm, name).grad - exact[name]).abs() / se[name]
        assert bool((z < 5).all()), f"{name}: max z = {float(z.max()):.2f}"


# ---------------------------------------------------------------------------- training
def test_training_on_bars_and_stripes_raises_the_exact_log_likelihood():
    x = bars_and_stripes()
    assert x.shape == (32, 16) and torch.unique(x, dim=0).shape[0] == 30
    init = init_rbm(16, 7, generator=torch.Generator().manual_seed(0), data=x)
    ll0 = exact_mean_log_lik(init, x)
    rbm, hist = train_rbm(
        x, n_hidden=7, method="pcd", n_chains=32, epochs=150, lr=0.5, batch_size=8,
        momentum=0.5, seed=0, progress=False,
    )  # fmt: skip
    ll = exact_mean_log_lik(rbm, x)
    assert ll0 < -10.5  # about 16 log(1/2) at the start
    assert ll > ll0 + 4.0, (ll0, ll)
    assert len(hist) == 150 and "train_log_lik" not in hist[0]


@pytest.mark.parametrize("method", ["cd", "pcd"])
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_every_sampler_trains_with_cd_and_pcd(method, sampler):
    x = bars_and_stripes()
    rbm, hist = train_rbm(
        x, n_hidden=7, method=method, sampler=sampler, k=2, n_chains=16, epochs=100, lr=0.5,
        batch_size=8, momentum=0.5, seed=1, progress=False,
    )  # fmt: skip
    init = init_rbm(16, 7, generator=torch.Generator().manual_seed(1), data=x)
    ll0, ll = exact_mean_log_lik(init, x), exact_mean_log_lik(rbm, x)
    assert math.isfinite(ll) and ll > ll0 + 1.5, (ll0, ll)
    assert all(math.isfinite(r["recon_error"]) for r in hist)
    assert hist[-1]["recon_error"] < hist[0]["recon_error"]


def test_exact_log_likelihood_is_recorded_when_tractable():
    x = bars_and_stripes()
    model, hist = train_rbm(
        x[:24], n_hidden=5, epochs=3, valid_x=x[24:], progress=False, batch_size=8, monitor=EXACT
    )
    for rec in hist:
        assert {"epoch", "seconds", "elapsed", "recon_error", "lr", "k", "log_z"} <= set(rec)
        assert rec["train_log_lik"] < 0 and rec["valid_log_lik"] < 0
    assert hist[-1]["train_log_lik"] == pytest.approx(exact_mean_log_lik(model, x[:24]), abs=1e-9)
    _, hist = train_rbm(
        x, n_hidden=5, epochs=1, progress=False, monitor=partial(exact_log_likelihoods, max_bits=4)
    )
    assert "train_log_lik" not in hist[0]


def test_k_schedule_drives_the_learner():
    x = bars_and_stripes()
    seen = []
    cb = Callback()
    cb.on_epoch_begin = lambda trainer, epoch: seen.append(trainer.learner.k)
    _, hist = train_rbm(x, n_hidden=3, epochs=5, k_schedule="1:9", callbacks=[cb], progress=False)
    assert seen == [1, 3, 5, 7, 9] == hist.column("k")


def test_pcd_learning_rate_decays_linearly_to_zero():
    x = bars_and_stripes()
    _, hist = train_rbm(x, n_hidden=3, method="pcd", epochs=4, lr=0.2, batch_size=8, progress=False)
    assert hist.column("lr") == pytest.approx([0.2, 0.15, 0.1, 0.05])
    _, hist = train_rbm(x, n_hidden=3, method="cd", epochs=3, lr=0.2, progress=False)
    assert hist.column("lr") == [0.2, 0.2, 0.2]


def test_initialisation_follows_the_practical_guide():
    x = bars_and_stripes()[:5]  # some units are always 0 or always 1 here
    rbm = init_rbm(16, 50, generator=torch.Generator().manual_seed(0), data=x)
    p = x.mean(0).clamp(1e-3, 1 - 1e-3)
    torch.testing.assert_close(rbm.vbias.detach(), torch.log(p / (1 - p)))
    torch.testing.assert_close(visible_bias_from_data(x).float(), torch.log(p / (1 - p)))
    assert torch.all(rbm.hbias == 0)
    assert 0.008 < float(rbm.W.detach().std()) < 0.012


def test_same_seed_same_parameters_and_other_seed_differs():
    x = bars_and_stripes()
    kw = {"n_hidden": 5, "epochs": 2, "batch_size": 8, "progress": False, "method": "pcd", "sampler": "flip"}
    a, _ = train_rbm(x, seed=3, **kw)
    b, _ = train_rbm(x, seed=3, **kw)
    c, _ = train_rbm(x, seed=4, **kw)
    assert torch.equal(a.W, b.W) and torch.equal(a.vbias, b.vbias) and torch.equal(a.hbias, b.hbias)
    assert not torch.equal(a.W, c.W)


def test_trainer_works_with_any_optimizer_and_scheduler():
    x = bars_and_stripes()
    g = torch.Generator().manual_seed(0)
    rbm = init_rbm(16, 7, generator=g, data=x)
    opt = torch.optim.Adam(rbm.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
    ll0 = exact_mean_log_lik(rbm, x)
    trainer = Trainer(
        rbm, CDLearner(3), opt, x, epochs=40, batch_size=8, generator=g, scheduler=sched,
        scheduler_interval="epoch", callbacks=[LogLikelihood(EXACT, every=20)],
    )  # fmt: skip
    hist = trainer.fit()
    assert hist[-1]["lr"] == pytest.approx(0.05) and hist[0]["lr"] == pytest.approx(0.1)
    assert "train_log_lik" in hist[19] and "train_log_lik" not in hist[18]
    assert hist[-1]["train_log_lik"] > ll0 + 1.0


@pytest.mark.parametrize("monitor_seconds, warns", [(5.0, True), (0.5, False)])
def test_a_monitor_that_dominates_the_run_warns_once_and_names_its_every(monkeypatch, monitor_seconds, warns):
    """A measurement over COSTLY epochs of training (and over a second) warns once, naming the
    --monitor-every that keeps it within the training time; a cheap one stays silent."""
    import boltzkit.learning.callbacks as callbacks

    clock = [0.0]  # a clock that only the monitor advances: training takes no time on it
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: clock[0])

    def slow_monitor(model, datasets):
        clock[0] += monitor_seconds
        return EXACT(model, datasets)

    x = bars_and_stripes()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, hist = train_rbm(x, n_hidden=3, epochs=4, batch_size=8, progress=False, monitor=slow_monitor)
    said = [str(w.message) for w in caught if "log-likelihood monitor" in str(w.message)]
    assert len(said) == (1 if warns else 0), said
    if warns:
        assert "--monitor-every 5000" in said[0] and "in epoch 1" in said[0]  # 5 s / the 1 ms floor
    assert all("train_log_lik" in r for r in hist.records)  # the warning changes nothing measured


@pytest.mark.parametrize(("scale", "cut"), [(4.0, True), (0.01, False)])
def test_a_cut_tempering_ladder_warns_once_and_names_the_pair(scale, cut):
    """Two temperatures, beta = 0 and 1: on a sharp RBM the uniform state of the hot replica is
    (almost) never accepted at beta = 1, no replica makes a round trip, and training says so once;
    on a flat RBM the pair swaps freely and nothing is said. Either way the records hold the rates."""
    from boltzkit.learning.api import train

    model = random_rbm(16, 8, seed=5, scale=scale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hist = train(
            model,
            bars_and_stripes(),
            generator=torch.Generator().manual_seed(6),
            method="pt",
            temperatures=2,
            n_chains=20,
            epochs=3,
            batch_size=8,
            lr=1e-4,
            progress=False,
        )
    said = [str(w.message) for w in caught if "ladder is cut" in str(w.message)]
    rates = [r["swap_rates"][0] for r in hist.records]
    assert len(said) == (1 if cut else 0), said
    if cut:
        assert max(rates) < 0.01 and hist.records[-1]["round_trips"] == 0
        assert (
            "between beta = 0 and 1" in said[0] and "in epoch 1" in said[0] and "--ladder adaptive" in said[0]
        )
    else:
        assert min(rates) > 0.1 and hist.records[-1]["round_trips"] > 0  # far above BLOCKED


def test_progress_bar_goes_to_stderr(capsys):
    train_rbm(bars_and_stripes(), n_hidden=3, epochs=2, progress=True)
    captured = capsys.readouterr()
    assert "epoch" in captured.err and captured.out == ""


# ------------------------------------------------------------------ history and checkpoints
def test_history_is_written_as_csv_and_json(tmp_path):
    x = bars_and_stripes()
    base = tmp_path / "run" / "history"
    _, hist = train_rbm(
        x, n_hidden=5, epochs=3, batch_size=8, history_path=base, progress=False, monitor=EXACT
    )
    csv_path, json_path = history_paths(base)
    assert csv_path.name == "history.csv" and json_path.name == "history.json"
    records = json.loads(json_path.read_text())
    assert records == hist.to_list() and [r["epoch"] for r in records] == [1, 2, 3]
    lines = csv_path.read_text().splitlines()
    header = lines[0].split(",")
    assert header[:6] == ["epoch", "seconds", "elapsed", "recon_error", "lr", "k"]
    assert "train_log_lik" in header and len(lines) == 4
    assert History.read_json(json_path).column("epoch") == [1, 2, 3]
    assert history_paths(tmp_path / "h.csv") == (tmp_path / "h.csv", tmp_path / "h.json")


@pytest.mark.parametrize(
    "kw",
    [
        {"method": "cd", "k_schedule": "1:4", "momentum": 0.9, "weight_decay": 1e-3, "sampler": "blend:0.5"},
        {"method": "pcd", "k": 2, "n_chains": 13, "sampler": "flip", "momentum": 0.5},
    ],
)
def test_resume_reaches_the_parameters_of_an_uninterrupted_run(tmp_path, kw):
    x = bars_and_stripes()
    common = dict(n_hidden=7, epochs=4, lr=0.1, batch_size=7, seed=5, progress=False, monitor=EXACT, **kw)
    full, full_hist = train_rbm(x, **common)
    ckpt = tmp_path / "ckpt.safetensors"
    with pytest.raises(Killed):
        train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(2)], **common)
    assert load_checkpoint(ckpt)["epoch"] == 2
    resumed, hist = train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, resume=True, **common)
    for name in ("W", "vbias", "hbias"):
        assert torch.equal(getattr(full, name), getattr(resumed, name)), name
    assert len(hist) == 4
    for a, b in zip(full_hist, hist, strict=True):
        for key in ("epoch", "recon_error", "lr", "k", "train_log_lik", "log_z"):
            assert a[key] == b[key], key
    state = load_checkpoint(ckpt)
    assert state["epoch"] == 4
    again, _ = train_rbm(x, checkpoint_path=ckpt, resume=True, **common)  # finished: nothing to do
    assert torch.equal(again.W, full.W)


def test_a_resumed_run_takes_the_products_as_the_interrupted_run_took_them(tmp_path, monkeypatch):
    """The checkpoint records whether the sparse-state lookup was taken; the resumed run takes the
    same choice whatever this process decided, and ends with the uninterrupted run's parameters;
    the process's own choice is back once it is done. A checkpoint without the record was written
    by a version that always took the lookup."""
    from boltzkit import _numerics
    from boltzkit.learning.checkpoint import save_checkpoint

    lookups = []
    real = torch.nn.functional.embedding_bag
    monkeypatch.setattr(
        torch.nn.functional, "embedding_bag", lambda *a, **k: lookups.append(1) or real(*a, **k)
    )
    kept = _numerics._sparse_products
    g = torch.Generator().manual_seed(4)
    x = (torch.rand(60, 784, generator=g) < 0.13).to(torch.float64)  # sparse: the lookup applies
    n_hidden = _numerics.SPARSE_MIN_COLUMNS
    common = dict(n_hidden=n_hidden, epochs=3, lr=0.1, batch_size=20, seed=5, progress=False)
    ckpt = tmp_path / "ckpt.safetensors"
    try:
        _numerics.set_sparse_products(True)
        full, _ = train_rbm(x, **common)
        with pytest.raises(Killed):
            train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(1)], **common)
        assert load_checkpoint(ckpt)["sparse_products"] is True and lookups
        _numerics.set_sparse_products(False)
        lookups.clear()
        dense, _ = train_rbm(x, **common)  # the other path
        assert not lookups
        resumed, hist = train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, resume=True, **common)
        assert torch.equal(resumed.W, full.W) and hist.sparse_products is True and lookups
        assert _numerics.sparse_products() is False  # this process's choice again
        with pytest.raises(Killed):
            train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(1)], **common)
        state = load_checkpoint(ckpt)
        assert state.pop("sparse_products") is False
        save_checkpoint(ckpt, state)  # as a version before the record wrote it
        lookups.clear()
        train_rbm(x, checkpoint_path=ckpt, resume=True, **common)
        assert lookups  # resumed on the lookup
    finally:
        _numerics.set_sparse_products(kept)


def test_resume_refuses_a_checkpoint_of_another_run(tmp_path):
    x = bars_and_stripes()
    ckpt = tmp_path / "c.safetensors"
    train_rbm(x, n_hidden=5, epochs=2, checkpoint_path=ckpt, progress=False)
    with pytest.raises(BoltzkitError, match="different settings"):
        train_rbm(x, n_hidden=5, epochs=2, lr=0.01, checkpoint_path=ckpt, resume=True, progress=False)
    with pytest.raises(BoltzkitError, match="different shape"):
        train_rbm(x, n_hidden=6, epochs=2, checkpoint_path=ckpt, resume=True, progress=False)
    with pytest.raises(BoltzkitError, match="different settings"):
        train_rbm(1 - x, n_hidden=5, epochs=2, checkpoint_path=ckpt, resume=True, progress=False)


def test_resume_refuses_other_data_and_another_positive_phase_and_reads_older_fingerprints(tmp_path):
    """The data's fingerprint hashes its values: one 1 moved to another row is other data (the old
    position-weighted sum repeated every 97 rows and missed it). A mean-field positive phase of
    another damping is another run. A checkpoint of the old fingerprint, without the positive
    phase's parameters, still resumes on its own data."""
    from boltzkit.learning import train_model
    from boltzkit.learning.checkpoint import save_checkpoint
    from boltzkit.learning.trainer import data_fingerprint, legacy_data_fingerprint

    a = torch.zeros(200, 10)
    a[3, 5] = 1.0
    moved = torch.zeros(200, 10)
    moved[100, 5] = 1.0
    assert legacy_data_fingerprint(a) == legacy_data_fingerprint(moved)
    assert data_fingerprint(a) != data_fingerprint(moved) and data_fingerprint(a) == data_fingerprint(
        a.clone()
    )
    x = bars_and_stripes()
    ckpt = tmp_path / "c.safetensors"
    kw = {
        "kind": "bm",
        "hidden": 3,
        "epochs": 2,
        "batch_size": 8,
        "n_chains": 10,
        "seed": 3,
        "progress": False,
    }
    with pytest.raises(Killed):
        train_model(x, **kw, damping=0.5, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(1)])
    with pytest.raises(BoltzkitError, match="positive_settings.damping: 0.5 -> 0.9"):
        train_model(x, **kw, damping=0.9, checkpoint_path=ckpt, resume=True)
    flipped = x.clone()
    flipped[0, 0] = 1 - flipped[0, 0]  # one value changed
    with pytest.raises(BoltzkitError, match="train_data"):
        train_model(flipped, **kw, damping=0.5, checkpoint_path=ckpt, resume=True)
    state = load_checkpoint(ckpt)  # as an older version wrote it
    del state["settings"]["positive_settings"]
    state["settings"]["train_data"] = legacy_data_fingerprint(x)
    save_checkpoint(ckpt, state)
    resumed, _ = train_model(x, **kw, damping=0.5, checkpoint_path=ckpt, resume=True)
    full, _ = train_model(x, **kw, damping=0.5)
    assert torch.equal(resumed.W, full.W)
    # a command-line recipe recorded no centering and no average as "none", now as null
    kw = {"hidden": 3, "epochs": 2, "recipe": "default", "seed": 1, "progress": False}
    with pytest.raises(Killed):
        train_model(x, **kw, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(1)])
    state = load_checkpoint(ckpt)
    assert state["settings"]["recipe"]["centering"] is None
    state["settings"]["recipe"].update(centering="none", average="none")
    save_checkpoint(ckpt, state)
    resumed, _ = train_model(x, **kw, checkpoint_path=ckpt, resume=True)
    assert torch.equal(resumed.W, train_model(x, **kw)[0].W)


def test_a_run_of_a_recipe_whose_settings_changed_resumes_under_the_name_they_have_now(tmp_path):
    """sm2008-cd25's settings became sm2008-cd25-mean's on 2026-12-01: a checkpoint of the old
    sm2008-cd25 is refused under that name with the new name in the hint, and resumes under it
    (a recipe is compared by its settings, not its name and texts)."""
    from boltzkit.learning import train_model
    from boltzkit.learning.recipes import RECIPES

    x = bars_and_stripes()
    old = RECIPES["sm2008-cd25-mean"].replace(
        name="sm2008-cd25", summary="the old text", epochs=2, batch_size=16
    )
    ckpt = tmp_path / "c.safetensors"
    kw = {"hidden": 3, "seed": 0, "progress": False, "checkpoint_path": ckpt}
    with pytest.raises(Killed):
        train_model(x, recipe=old, checkpoint_every=1, callbacks=[KillAfter(1)], **kw)
    with pytest.raises(BoltzkitError, match="different settings") as caught:
        train_model(x, recipe=RECIPES["sm2008-cd25"].replace(epochs=2, batch_size=16), resume=True, **kw)
    assert "--recipe sm2008-cd25-mean" in str(caught.value)
    now = RECIPES["sm2008-cd25-mean"].replace(epochs=2, batch_size=16)
    resumed, _ = train_model(x, recipe=now, resume=True, **kw)
    assert torch.equal(resumed.W, train_model(x, recipe=old, hidden=3, seed=0, progress=False)[0].W)
    # a run of today's sm2008-cd25 refused for another reason is not sent to sm2008-cd25-mean
    today = RECIPES["sm2008-cd25"].replace(epochs=2, batch_size=16)
    with pytest.raises(Killed):
        train_model(x, recipe=today, checkpoint_every=1, callbacks=[KillAfter(1)], **kw)
    for change in ({"seed": 3}, {"recipe": today.replace(lr=0.05)}):
        with pytest.raises(BoltzkitError, match="different settings") as caught:
            train_model(x, **{"recipe": today, **kw, **change}, resume=True)
        assert "sm2008-cd25-mean" not in str(caught.value) and "resume with the same" in str(caught.value)
    # other data: the hint says the data differ (for a DBN's upper layer: another --data or --bottom)
    with pytest.raises(BoltzkitError, match="different settings") as caught:
        train_model(1.0 - x, recipe=today, resume=True, **kw)
    assert "training data differ" in str(caught.value) and "--bottom" in str(caught.value)


def test_resume_names_only_the_recipe_settings_that_changed(tmp_path):
    """A recipe is recorded as one dict: a changed rate shows as recipe.lr alone, not the dict twice."""
    from boltzkit.learning import train_model

    x = bars_and_stripes()
    ckpt = tmp_path / "c.safetensors"
    kw = {"hidden": 3, "recipe": "sm2008-cd1", "epochs": 2, "checkpoint_path": ckpt, "progress": False}
    train_model(x, **kw)
    with pytest.raises(BoltzkitError, match="different settings") as caught:
        train_model(x, **kw, lr=0.2, resume=True)
    got = caught.value.got
    assert "recipe.lr: " in got and "-> 0.2" in got and "'summary'" not in got and "recipe: {" not in got


def test_resume_without_a_checkpoint_starts_afresh(tmp_path):
    x = bars_and_stripes()
    ckpt = tmp_path / "missing.safetensors"
    with pytest.warns(UserWarning, match="no checkpoint"):
        a, _ = train_rbm(x, n_hidden=3, epochs=1, checkpoint_path=ckpt, resume=True, progress=False)
    b, _ = train_rbm(x, n_hidden=3, epochs=1, progress=False)
    assert torch.equal(a.W, b.W) and ckpt.exists()


def test_checkpoint_state_round_trip_keeps_types_and_tensors():
    state = {
        "ints": {0: torch.arange(3), 7: {"step": torch.tensor(2.0)}},
        "tuple": (0.9, 0.999),
        "nan": math.nan,
        "inf": -math.inf,
        "list": [1, "a", None, True, [torch.ones(2, 3, dtype=torch.float64)]],
        "gen": torch.Generator().manual_seed(3).get_state(),
        "__weird": 1,
    }
    back = decode_state(encode_state(state))
    assert set(back["ints"]) == {0, 7} and torch.equal(back["ints"][0], torch.arange(3))
    assert back["ints"][7]["step"].item() == 2.0 and back["tuple"] == (0.9, 0.999)
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf and back["__weird"] == 1
    assert back["list"][:4] == [1, "a", None, True] and back["list"][4][0].dtype == torch.float64
    assert torch.equal(back["gen"], state["gen"])
    # an Adam state survives and loads into a fresh optimizer
    p = torch.nn.Parameter(torch.randn(3, 2))
    opt = torch.optim.Adam([p], lr=0.1)
    p.grad = torch.ones_like(p)
    opt.step()
    opt2 = torch.optim.Adam([torch.nn.Parameter(p.detach().clone())], lr=0.1)
    opt2.load_state_dict(decode_state(encode_state({"o": opt.state_dict()}))["o"])
    torch.testing.assert_close(
        opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"]
    )
    with pytest.raises(TypeError):
        encode_state({"bad": object()})


def test_binary_tensors_are_stored_bit_packed_and_come_back_exactly(tmp_path):
    """Persistent chains of binary units take one bit per entry; anything else (a -0.0, a 0.5, an
    integer mask, a short tensor) is stored as it is, and all come back equal in dtype and value."""
    g = torch.Generator().manual_seed(0)
    chains = (torch.rand(20, 100, 784, generator=g, dtype=torch.float64) < 0.3).to(torch.float64)
    state = {
        "chains": chains,
        "float32": chains[0].to(torch.float32),
        "odd_length": chains[0, 0, :101],
        "negative_zero": torch.tensor([-0.0] + [1.0] * 99),
        "half": torch.full((100,), 0.5),
        "ints": torch.ones(100, dtype=torch.int64),
        "short": torch.ones(3),
        "float8": torch.ones(100, dtype=torch.float8_e4m3fn),  # not packed: no sign test for it
    }
    data = encode_state(state)
    assert len(data) < chains.numel() / 8 + 40_000  # not 12.5 MB
    back = decode_state(data)
    for name, value in state.items():
        assert back[name].dtype == value.dtype and back[name].shape == value.shape, name
        assert torch.equal(back[name].view(torch.uint8), value.view(torch.uint8)), name
    assert torch.signbit(back["negative_zero"][0])  # -0.0 was not packed to +0.0
    old = tmp_path / "v1.ckpt"  # a version-1 file (no packed tensors) still reads
    doc = {"format_version": 1, "state": {"x": {"__tensor__": "t0"}}}
    save_file({"t0": chains[0, 0]}, str(old), metadata={"boltzkit_checkpoint": json.dumps(doc)})
    assert torch.equal(load_checkpoint(old)["x"], chains[0, 0])


def test_damaged_checkpoints_raise_model_file_errors(tmp_path):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, {"a": torch.ones(3)})
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(ModelFileError, match="cannot read"):
        load_checkpoint(path)
    with pytest.raises(ModelFileError, match="cannot open"):
        load_checkpoint(tmp_path / "nope.safetensors")


def test_a_flipped_bit_in_a_checkpoints_arrays_is_refused(tmp_path):
    """A bit flipped in a checkpoint's parameters was caught only where the value it made was
    absurd (a review of 2026-12-07); the stored tensors' SHA-256 now catches any flip."""
    path = tmp_path / "c.ckpt"
    weights = torch.linspace(-1, 1, 64, dtype=torch.float64)
    save_checkpoint(path, {"W": weights, "epoch": 3})
    assert torch.equal(load_checkpoint(path)["W"], weights)
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0x01  # the low bit of one weight's mantissa: a valid, ordinary number still
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFileError, match="damaged"):
        load_checkpoint(path)


# ----------------------------------------------------------------------------- bad inputs
_X = bars_and_stripes()


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((_X[0],), {}, DataError, "2-D"),
        ((_X * 0.5,), {}, DataError, "binary"),
        ((_X[:0],), {}, DataError, "empty"),
        ((_X,), {"valid_x": _X[:, :9]}, DataError, "columns"),
        ((_X,), {"valid_x": _X + 1}, DataError, "binary"),
        ((_X,), {"batch_size": 0}, BoltzkitError, "batch_size"),
        ((_X,), {"lr": 0.0}, BoltzkitError, "learning rate"),
        ((_X,), {"lr": -1.0}, BoltzkitError, "learning rate"),
        ((_X,), {"lr": math.nan}, BoltzkitError, "learning rate"),
        ((_X,), {"k": 0}, BoltzkitError, "k must be"),
        ((_X,), {"epochs": 0}, BoltzkitError, "epochs"),
        ((_X,), {"n_hidden": 0}, BoltzkitError, "n_hidden"),
        ((_X,), {"n_chains": 0}, BoltzkitError, "n_chains"),
        ((_X,), {"method": "sgd"}, BoltzkitError, "learning method"),
        ((_X,), {"sampler": "metropolis"}, BoltzkitError, "sampler"),
        ((_X,), {"k_schedule": "1-25"}, BoltzkitError, "k schedule"),
        ((_X,), {"momentum": 1.0}, BoltzkitError, "momentum"),
        ((_X,), {"weight_decay": -0.1}, BoltzkitError, "weight_decay"),
        ((_X,), {"resume": True}, BoltzkitError, "checkpoint path"),
        ((_X,), {"dtype": torch.int64}, BoltzkitError, "dtype"),
        ((_X,), {"checkpoint_every": -1}, BoltzkitError, "checkpoint_every"),
    ],
)
def test_bad_inputs_raise_clear_errors(args, kwargs, error, match):
    kwargs = {"n_hidden": 3, "progress": False, **kwargs}
    with pytest.raises(error, match=match) as info:
        train_rbm(*args, **kwargs)
    assert "Got:" in str(info.value) or "Hint:" in str(info.value) or "Expected:" in str(info.value)


def test_trainer_checks_its_inputs():
    rbm = init_rbm(16, 3, generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(rbm.parameters(), lr=0.1)
    with pytest.raises(DataError, match="columns"):
        Trainer(rbm, CDLearner(), opt, _X[:, :15], epochs=1)
    with pytest.raises(BoltzkitError, match="batch_size"):
        Trainer(rbm, CDLearner(), opt, _X, epochs=1, batch_size=0)
    with pytest.raises(BoltzkitError, match="scheduler_interval"):
        Trainer(rbm, CDLearner(), opt, _X, epochs=1, scheduler_interval="step")
    with pytest.raises(BoltzkitError, match="k must be"):
        CDLearner(0)
    with pytest.raises(BoltzkitError, match="n_chains"):
        PCDLearner(0)


def test_a_resumed_run_says_when_it_overrides_the_products_the_variable_asks_for(tmp_path, monkeypatch):
    """$BOLTZKIT_SPARSE_PRODUCTS naming the other path than the checkpoint's is overridden, so the
    run resumes bit for bit, and says so (a probe of 2026-12-07: silently)."""
    from boltzkit import _numerics

    kept = _numerics._sparse_products
    x = (torch.rand(60, 784, generator=torch.Generator().manual_seed(4)) < 0.13).to(torch.float64)
    common = dict(
        n_hidden=_numerics.SPARSE_MIN_COLUMNS, epochs=2, lr=0.1, batch_size=20, seed=5, progress=False
    )
    ckpt = tmp_path / "ckpt.safetensors"
    try:
        _numerics.set_sparse_products(True)
        with pytest.raises(Killed):
            train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(1)], **common)
        monkeypatch.setenv(_numerics.SPARSE_PRODUCTS_ENV, "off")
        with pytest.warns(UserWarning, match="interrupted run took the lookup"):
            _, hist = train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, resume=True, **common)
        assert hist.sparse_products is True
        monkeypatch.setenv(_numerics.SPARSE_PRODUCTS_ENV, "on")  # the same path: nothing to say
        with pytest.raises(Killed):
            train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(1)], **common)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            train_rbm(x, checkpoint_path=ckpt, checkpoint_every=1, resume=True, **common)
    finally:
        _numerics.set_sparse_products(kept)
