"""Learning SRBMs, BMs and DBMs (Salakhutdinov 2008, "S2", Secs. 4.2-4.3): gradients against exact
gradients on tiny models, and training that raises the exact log-likelihood."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from conftest import F64, bars_and_stripes, bit_matrix, random_machine

from boltzkit.estimators.exact import exact_log_prob, exact_log_z
from boltzkit.estimators.likelihood import exact_log_likelihoods
from boltzkit.learning import (
    CDLearner,
    ClampedChains,
    ExactConditional,
    MeanFieldPhase,
    PCDLearner,
    init_model,
    load_checkpoint,
    train_model,
)
from boltzkit.models import BoltzmannMachine


def exact_nll_gradient(model: BoltzmannMachine, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """d(-mean log p(x))/d theta by autograd through the joint enumeration (float64)."""
    params = {name: p.detach().clone().requires_grad_(True) for name, p in model.named_parameters()}
    clone = model.detached_copy()
    n = model.n_units
    states = bit_matrix(n)
    n_v = model.n_visible

    def energy(xs: torch.Tensor) -> torch.Tensor:
        parts = torch.split(xs, list(model.layer_sizes), dim=1)
        e = torch.zeros(xs.shape[0], dtype=F64)
        for l, m in model.coupling_keys:
            w = params[model.coupling_name(l, m)]
            if l == m:
                w = (w + w.t()) / 2 - torch.diag(torch.diagonal(w))  # symmetric parameterisation
                e = e - 0.5 * ((parts[l] @ w) * parts[l]).sum(1)
            else:
                e = e - ((parts[l] @ w) * parts[m]).sum(1)
        for l in range(model.n_layers):
            e = e - parts[l] @ params[model.bias_name(l)]
        return e

    log_f = -energy(states)
    key = (states[:, :n_v].long() * (2 ** torch.arange(n_v))).sum(1)
    xi = (x.long() * (2 ** torch.arange(n_v))).sum(1)
    log_pv = torch.stack([torch.logsumexp(log_f[key == k], 0) for k in range(1 << n_v)])
    nll = -(log_pv[xi].mean() - torch.logsumexp(log_f, 0))
    nll.backward()
    del clone
    grads = {}
    for name, p in params.items():
        g = p.grad
        if name in ("L", "J") or name.startswith("L_"):  # one parameter per pair: both entries move together
            g = g + g.t()
            g.fill_diagonal_(0.0)
        grads[name] = g
    return grads


def _persistent_gradient(model, x, learner, n_sweeps=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    learner.init_chains(model, g, x)
    for _ in range(n_sweeps):
        learner.phases(model, x, g)
    learner.set_gradients(model, x, g)
    ph = learner.phases(model, x, torch.Generator().manual_seed(seed + 1))
    return ph


def _z_scores(model, negative, exact, n):
    """|grad - exact| / SE with SEs from the chains' per-sample statistics."""
    out = {}
    layers = [t.to(F64) for t in negative.layers]
    for l, m in model.coupling_keys:
        name = model.coupling_name(l, m)
        per = (layers[l][:, :, None] * layers[m][:, None, :]).reshape(n, -1)
        se = per.std(0).reshape(layers[l].shape[1], layers[m].shape[1]) / math.sqrt(n)
        diff = (getattr(model, name).grad - exact[name]).abs()
        if l == m:
            diff = diff[~torch.eye(diff.shape[0], dtype=torch.bool)]
            se = se[~torch.eye(se.shape[0], dtype=torch.bool)]
        out[name] = diff / se.clamp_min(1e-12)
    for l in range(model.n_layers):
        name = model.bias_name(l)
        se = layers[l].std(0) / math.sqrt(n)
        out[name] = (getattr(model, name).grad - exact[name]).abs() / se.clamp_min(1e-12)
    return out


def test_srbm_persistent_gradient_matches_the_exact_gradient():
    """Exact p(h|v) positive phase (S2 Sec. 4.2) and SAP chains with sequential visible updates."""
    model = random_machine("srbm", (5, 3), seed=1, scale=0.8)
    x = (torch.rand(11, 5, generator=torch.Generator().manual_seed(2)) < 0.4).to(F64)
    n = 20_000
    learner = PCDLearner(n, k=1, positive=ExactConditional())
    ph = _persistent_gradient(model, x, learner)
    exact = exact_nll_gradient(model, x)
    for name, z in _z_scores(
        model, learner.chains and model.rao_blackwellize(learner.chains), exact, n
    ).items():
        assert bool((z < 5).all()), f"{name}: max z = {float(z.max()):.2f}"
    assert ph.positive.layers[1].shape == (11, 3)


def test_mean_field_positive_phase_is_exact_when_the_posterior_factorises():
    """A BM whose hidden laterals are zero has a factorial posterior: the mean-field data term
    equals the exact one, and SAP's gradient matches the exact gradient."""
    model = random_machine("bm", (5, 3), seed=3, scale=0.8)
    with torch.no_grad():
        model.J.zero_()
    x = (torch.rand(11, 5, generator=torch.Generator().manual_seed(4)) < 0.4).to(F64)
    mf = MeanFieldPhase(damping=0.0, tol=1e-12, max_iter=200)(model, x, torch.Generator())
    torch.testing.assert_close(mf.layers[1], model.conditional_probs(mf, 1), rtol=0, atol=1e-10)
    n = 20_000
    learner = PCDLearner(n, k=1, positive=MeanFieldPhase(damping=0.0, tol=1e-12, max_iter=200))
    _persistent_gradient(model, x, learner)
    exact = exact_nll_gradient(model, x)
    del exact["J"]  # its data term is mu mu^T, exact here; the model term is checked below
    z = _z_scores(model, model.rao_blackwellize(learner.chains), {**exact, "J": model.J.grad}, n)
    for name in exact:
        assert bool((z[name] < 5).all()), f"{name}: max z = {float(z[name].max()):.2f}"


def test_clamped_chains_positive_phase_estimates_the_exact_data_term():
    """Hinton-Sejnowski positive phase on a BM with hidden laterals: E_{p(h|v)}[h], unbiased."""
    model = random_machine("bm", (4, 3), seed=5, scale=1.0)
    v = bit_matrix(4)[[3, 9, 12]].repeat(5000, 1)
    state = ClampedChains(n_steps=30, sampler="gibbs")(model, v, torch.Generator().manual_seed(6))
    # exact E[h | v] by enumerating h
    h = bit_matrix(3)
    for row in (0, 1, 2):
        vv = v[row : row + 1].expand(8, -1)
        log_f = -model.joint_energy(model.split_units(torch.cat([vv, h], 1)))
        p = torch.softmax(log_f, 0)
        exact = p @ h
        samples = state.layers[1][row::3]
        se = samples.std(0) / math.sqrt(samples.shape[0])
        assert bool(((samples.mean(0) - exact).abs() < 5 * se).all())


@pytest.mark.parametrize(
    ("kind", "hidden", "method", "k", "lr", "epochs", "gain"),
    [
        ("srbm", 8, "sap", 5, 0.1, 60, 1.0),
        ("bm", 5, "sap", 5, 0.1, 60, 1.0),
        ("srbm", 8, "cd", 1, 0.1, 60, 1.0),
        # a DBM leaves its small-weight start slowly (the top layer sees no signal at first)
        ("dbm", (6, 4), "sap", 3, 0.5, 100, 0.5),
    ],
)
def test_training_raises_the_exact_log_likelihood(kind, hidden, method, k, lr, epochs, gain):
    x = bars_and_stripes()
    model, hist = train_model(
        x, kind=kind, hidden=hidden, method=method, k=k, epochs=epochs, lr=lr, batch_size=8, n_chains=32,
        seed=0, progress=False, monitor=partial(exact_log_likelihoods, max_bits=21), monitor_every=20,
    )  # fmt: skip
    init = init_model(kind, 16, hidden, generator=torch.Generator().manual_seed(0), data=x)
    x64 = x.to(F64)
    ll0 = float(exact_log_prob(init.as_float64(), x64, exact_log_z(init.as_float64())).mean())
    ll = float(exact_log_prob(model.as_float64(), x64, exact_log_z(model.as_float64())).mean())
    assert model.kind == kind
    assert ll > ll0 + gain, (ll0, ll)
    for l, m in model.coupling_keys:  # updates keep the laterals exactly symmetric
        if l == m:
            lat = model.coupling(l, l)
            assert torch.equal(lat, lat.t()) and not bool(torch.diagonal(lat).any())
    assert hist[-1]["train_log_lik"] == pytest.approx(ll, abs=1e-6)
    assert all(math.isfinite(r["recon_error"]) for r in hist)


def test_bm_training_resumes_to_the_uninterrupted_parameters(tmp_path):
    x = bars_and_stripes()
    common = dict(kind="bm", hidden=3, method="sap", k=2, epochs=4, lr=0.05, batch_size=8, n_chains=7,
                  seed=5, progress=False, sampler="flip")  # fmt: skip
    full, _ = train_model(x, **common)
    ckpt = tmp_path / "bm.safetensors"
    train_model(x, checkpoint_path=ckpt, checkpoint_every=1, **{**common, "epochs": 4}, callbacks=[_Stop(2)])
    assert load_checkpoint(ckpt)["epoch"] == 2
    resumed, hist = train_model(x, checkpoint_path=ckpt, checkpoint_every=1, resume=True, **common)
    for (name, a), (_, b) in zip(full.named_parameters(), resumed.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    assert len(hist) == 4


class _Stop:
    """A callback that stops training after ``epoch`` (the checkpoint is written first)."""

    order = 1000

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_begin(self, trainer):
        pass

    def on_epoch_begin(self, trainer, epoch):
        pass

    def on_epoch_end(self, trainer, record):
        if record["epoch"] == self.epoch:
            trainer.stop()

    def on_train_end(self, trainer):
        pass


def test_cd_learner_on_an_srbm_updates_the_visible_layer_sequentially():
    model = random_machine("srbm", (7, 3), seed=8, scale=0.5)
    x = (torch.rand(13, 7, generator=torch.Generator().manual_seed(9)) < 0.5).to(F64)
    ph = CDLearner(2, "flip").phases(model, x, torch.Generator().manual_seed(1))
    assert ph.negative.layers[0].shape == (13, 7)
    assert bool(((ph.negative.layers[0] == 0) | (ph.negative.layers[0] == 1)).all())
    assert ph.reconstruction is not None and float(ph.reconstruction) > 0


def test_the_damping_reaches_the_automatic_mean_field_positive_phase():
    """``positive="auto"`` gives a BM or DBM the damped mean field with the damping asked for (the
    positive phase chosen per model, not its default damping)."""
    from boltzkit.learning import Callback, train_model

    seen = []

    class Spy(Callback):
        def on_train_begin(self, trainer):
            seen.append(trainer.learner.positive_phase(trainer.model))

    x = bars_and_stripes()
    for damping in (0.2, 0.9):
        train_model(x, kind="dbm", hidden=[3, 2], method="pcd", epochs=1, damping=damping, progress=False,
                    callbacks=[Spy()], device="cpu")  # fmt: skip
    assert [p.name for p in seen] == ["mean-field", "mean-field"]
    assert [p.damping for p in seen] == [0.2, 0.9]


def test_train_refuses_a_dbm_of_one_hidden_layer_and_empty_sizes() -> None:
    """A one-layer DBM is an RBM: asked for one, train says so rather than training an RBM under the
    DBM's name (as for other visible units); ``--hidden 3,`` and ``3,,2`` are not lists of sizes.
    (The Python API keeps the degenerate DBM: scikit-learn's checks set ``n_components=1``.)"""
    from typer.testing import CliRunner

    from boltzkit.cli.main import app

    runner = CliRunner()
    base = ["train", "--data", "bars-and-stripes", "--epochs", "1", "--out", "never.safetensors"]
    result = runner.invoke(app, [*base, "--model", "dbm", "--hidden", "3"])
    assert result.exit_code == 1 and "--model rbm" in result.output and "Traceback" not in result.output
    for text in ("3,", "3,,2", ","):
        result = runner.invoke(app, [*base, "--model", "dbm", "--hidden", text])
        assert result.exit_code == 2 and "not a list of positive whole numbers" in result.output, text
