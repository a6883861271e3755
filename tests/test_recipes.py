"""Training recipes, their schedules, CD's mean reconstruction and centered gradients."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from conftest import F64, STRUCTURES, random_machine, random_rbm
from test_cli import last_json, run

from boltzkit.errors import BoltzkitError
from boltzkit.estimators.exact import exact_log_prob
from boltzkit.io import load_model
from boltzkit.learning import train, train_dbn, train_model
from boltzkit.learning.centering import Centering, centered_biases, centered_energy, parse_centering
from boltzkit.learning.phases import ContrastiveDivergence, ExactConditional, sample_means
from boltzkit.learning.recipes import (
    RECIPES,
    SETTINGS,
    Recipe,
    get_recipe,
    recipe_differences,
    recipe_settings,
)
from boltzkit.learning.schedules import LRSchedule, parse_k_schedule, parse_lr_schedule, parse_momentum
from boltzkit.state import ChainState


def _bars(n: int = 40, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, 9, generator=g) < 0.3).to(torch.float32)


def _all_states(sizes: tuple[int, ...]) -> ChainState:
    n = sum(sizes)
    bits = torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)), dtype=F64)
    layers, start = [], 0
    for size in sizes:
        layers.append(bits[:, start : start + size])
        start += size
    return ChainState(tuple(layers))


# ----------------------------------------------------------------------------------- schedules
def test_momentum_schedule_switches_after_its_epochs() -> None:
    schedule = parse_momentum("0.5,0.9@5")
    assert [schedule(e) for e in range(7)] == [0.5] * 5 + [0.9] * 2
    assert schedule.spec == "0.5,0.9@5" and not schedule.constant
    assert parse_momentum(0.9).constant and parse_momentum("0.9")(100) == 0.9
    for bad in ("1.0", "0.5,1.2@3", "fast", "0.5,0.9@-1"):
        with pytest.raises(BoltzkitError):
            parse_momentum(bad)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("constant", [1.0, 1.0, 1.0, 1.0, 1.0]),
        ("linear", [1.0, 0.8, 0.6, 0.4, 0.2]),  # 10 updates, every second one shown
        ("linear-after:2", [1.0, 1.0, 1.0, 2 / 3, 1 / 3]),  # 2 epochs of 2 updates at full speed
        ("inverse:1", [1.0, 1 / 2, 1 / 3, 1 / 4, 1 / 5]),  # 1 / (1 + t / 2)
        ("step:2", [1.0, 1.0, 1 / 2, 1 / 2, 1 / 3]),  # 1 / ceil(epoch / 2), epochs of 2 updates
    ],
)
def test_lr_schedule_factors_at_given_updates(spec: str, expected: list[float]) -> None:
    schedule = parse_lr_schedule(spec)
    got = [schedule.factor(t, n_updates=10, per_epoch=2) for t in range(0, 10, 2)]
    assert got == pytest.approx(expected)
    assert parse_lr_schedule(schedule.spec) == schedule


def test_lr_schedule_errors_and_flags() -> None:
    assert parse_lr_schedule(True) == LRSchedule("linear") and parse_lr_schedule(None) == LRSchedule()
    for bad in ("cosine", "inverse", "linear-after:x", "inverse:0", "step", "step:0"):
        with pytest.raises(BoltzkitError):
            parse_lr_schedule(bad)


def test_a_decay_that_would_start_after_the_last_epoch_is_refused() -> None:
    """linear-after:E with E >= epochs would run at a constant rate: refused, as a late average is."""
    from conftest import bars_and_stripes

    from boltzkit.learning import train_rbm

    with pytest.raises(BoltzkitError, match="starts after the last epoch"):
        train_rbm(bars_and_stripes(), n_hidden=3, epochs=3, lr_schedule="linear-after:3", progress=False)
    _, history = train_rbm(
        bars_and_stripes(), n_hidden=3, epochs=4, lr_schedule="linear-after:2", progress=False
    )
    assert history[1]["lr"] == history[2]["lr"] > history[3]["lr"]  # each record: the epoch's first rate


# ------------------------------------------------------------------------------------- recipes
def test_registry_names_and_unknown_recipe() -> None:
    for name in ("default", "sm2008-cd1", "sm2008-cd3", "sm2008-cd25", "sm2008-cd25-mean", "s2008-sap"):
        assert get_recipe(name).name == name
    with pytest.raises(BoltzkitError, match="sm2008-cd1"):  # the error names the known recipes
        get_recipe("cd-fast")
    # a renamed recipe names its new name (sm2008-cd25-sampled became sm2008-cd25 on 2026-12-01)
    with pytest.raises(BoltzkitError, match="now called 'sm2008-cd25'"):
        get_recipe("sm2008-cd25-sampled")


#: Each recipe's (k, learning rate, momentum) at its first epoch, its middle one and its last,
#: with 600 updates per epoch (60,000 MNIST images in batches of 100); the rate is the one of the
#: epoch's first update.
RECIPE_SCHEDULES = {
    "default": [(1, 0.05, 0.0)] * 3,
    "sm2008-cd1": [(1, 0.05, 0.5), (1, 0.025, 0.9), (1, 0.05 / 100, 0.9)],
    "sm2008-cd3": [(3, 0.1, 0.5), (3, 0.05, 0.9), (3, 0.1 / 50, 0.9)],
    "sm2008-cd25": [(1, 0.1, 0.5), (13, 0.05, 0.9), (25, 0.1 / 100, 0.9)],
    "sm2008-cd25-mean": [(1, 0.05, 0.5), (13, 0.025, 0.9), (25, 0.05 / 100, 0.9)],
    "sm2008-cd25-step": [(1, 0.05, 0.5), (13, 0.05 / 13, 0.9), (25, 0.05 / 25, 0.9)],
    "s2008-sap": [(5, 0.005, 0.0), (5, 0.0025, 0.0), (5, 0.005 / 500, 0.0)],
    "dbn-top-pcd": [(1, 0.001, 0.5), (1, 0.0005, 0.9), (1, 0.001 / 10, 0.9)],
    "sap-finetune": [(5, 0.002, 0.0), (5, 0.001, 0.0), (5, 0.002 / 20, 0.0)],
}


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_recipe_schedule_at_given_epochs(name: str) -> None:
    recipe, per_epoch = RECIPES[name], 600
    k_of = parse_k_schedule(recipe.k_schedule if recipe.k_schedule is not None else recipe.k)
    lr_of, momentum_of = parse_lr_schedule(recipe.lr_schedule), parse_momentum(recipe.momentum)
    epochs = (0, recipe.epochs // 2, recipe.epochs - 1)
    got = [
        (
            k_of(e, recipe.epochs),
            recipe.lr * lr_of.factor(e * per_epoch, recipe.epochs * per_epoch, per_epoch),
            momentum_of(e),
        )
        for e in epochs
    ]
    assert got == [pytest.approx(row) for row in RECIPE_SCHEDULES[name]], name


def test_paper_recipes_follow_their_sources() -> None:
    cd25 = RECIPES["sm2008-cd25-mean"]  # S1's CD25 as rbm.m reconstructs
    assert cd25.k_schedule == "linear:1:25" and cd25.reconstruction == "mean"
    sampled = RECIPES["sm2008-cd25"]  # the same CD25 but for the reconstruction, rate and decay
    same = {"name": cd25.name, "summary": cd25.summary, "sources": cd25.sources, "lr": cd25.lr}
    assert sampled.replace(**same, weight_decay=cd25.weight_decay, reconstruction="mean") == cd25
    assert (sampled.reconstruction, sampled.lr, sampled.weight_decay) == ("sample", 0.1, 0.0002)
    assert parse_momentum(cd25.momentum)(4) == 0.5 and parse_momentum(cd25.momentum)(5) == 0.9
    step = RECIPES["sm2008-cd25-step"]  # Salakhutdinov's code: CD = ceil(epoch/20), the rate 0.05 / CD
    assert step.reconstruction == "mean"
    k_of, lr_of = parse_k_schedule(step.k_schedule), parse_lr_schedule(step.lr_schedule)
    assert [k_of(e, step.epochs) for e in (0, 20, 480, 499)] == [1, 2, 25, 25]
    assert [step.lr * lr_of.factor(e * 600, step.epochs * 600, 600) for e in (0, 20, 499)] == pytest.approx(
        [0.05, 0.025, 0.002]
    )
    sap = RECIPES["s2008-sap"]
    assert (sap.method, sap.k, sap.n_chains, sap.epochs, sap.lr, sap.lr_schedule) == (
        "sap",
        5,
        100,
        500,
        0.005,
        "linear",
    )
    for recipe in RECIPES.values():
        assert set(recipe.sources) <= set(SETTINGS)


def test_recipe_replace_round_trip_and_validation() -> None:
    recipe = RECIPES["sm2008-cd3"].replace(epochs=7)
    assert recipe.epochs == 7 and recipe.name == "sm2008-cd3+"
    assert RECIPES["sm2008-cd3"].replace(epochs=50).name == "sm2008-cd3"  # nothing changed
    assert Recipe.from_dict(recipe.to_dict()) == recipe
    with pytest.raises(BoltzkitError, match="unknown recipe settings"):
        recipe.replace(learning_rate=0.1)
    with pytest.raises(BoltzkitError, match="reconstruction"):
        Recipe(name="x", summary="", reconstruction="blurred")


def test_train_model_uses_the_recipe_and_explicit_arguments_win() -> None:
    x = _bars()
    recipe = RECIPES["sm2008-cd1"].replace(epochs=6, batch_size=10)
    model, history = train_model(x, hidden=4, recipe=recipe, lr=0.02, progress=False, seed=3)
    records = history.records
    assert [r["momentum"] for r in records] == [0.5] * 5 + [0.9]  # the recipe's schedule
    assert records[0]["lr"] == pytest.approx(0.02)  # the explicit learning rate
    # linear decay to 0 over 6 epochs of 4 updates: epoch e starts at factor 1 - 4e/24
    assert [r["lr"] for r in records] == pytest.approx([0.02 * (1 - 4 * e / 24) for e in range(6)])
    again, _ = train_model(x, hidden=4, recipe=recipe, lr=0.02, progress=False, seed=3)
    assert torch.equal(model.W, again.W)


def test_a_recipe_initialises_as_it_says() -> None:
    x = _bars()
    zero = RECIPES["sm2008-cd1"].replace(epochs=1, init_vbias="zero", init_scale=0.5)
    model, _ = train_model(x, hidden=3, recipe=zero, lr=1e-9, progress=False)  # (almost) untrained
    assert float(model.vbias.detach().abs().max()) < 1e-6
    assert 0.2 < float(model.W.detach().std()) < 1.0


def test_the_command_line_overrides_a_recipes_initialisation(tmp_path) -> None:
    out = tmp_path / "zero.safetensors"
    last_json(
        run("train", "--data", "bars-and-stripes", "--hidden", 3, "--recipe", "sm2008-cd1", "--epochs", 1,
            "--lr", 1e-9, "--init-vbias", "zero", "--init-scale", 0.5, "--out", out, "--json")
    )  # fmt: skip
    model, metadata = load_model(out)
    assert float(model.vbias.detach().abs().max()) < 1e-6  # not the data's log-odds
    assert metadata["training"]["init_vbias"] == "zero" and metadata["training"]["recipe"] == "sm2008-cd1"
    # a review's finding: the recipe's name alone hid that the options changed its settings
    assert metadata["training"]["recipe_overrides"] == {
        "epochs": 1, "lr": 1e-9, "init_vbias": "zero", "init_scale": 0.5,
    }  # fmt: skip


def test_an_explicit_k_replaces_the_recipes_k_schedule(tmp_path) -> None:
    cd25 = RECIPES["sm2008-cd25"].replace(epochs=3, batch_size=16)  # k by epoch: 1, 13, 25
    assert cd25.replace(k=5).k_schedule is None and cd25.replace(k=5, k_schedule="linear:1:5").k == 5
    _, history = train_model(_bars(), hidden=3, recipe=cd25, k=5, progress=False)
    assert [r["k"] for r in history.records] == [5, 5, 5]
    _, histories = train_dbn(
        _bars(), [4, 3], recipe="sm2008-cd25", k=5, epochs=3, batch_size=16, progress=False
    )
    assert [[r["k"] for r in h.records] for h in histories] == [[5, 5, 5], [5, 5, 5]]
    out = tmp_path / "k5.safetensors"
    last_json(
        run("train", "--data", "bars-and-stripes", "--hidden", 3, "--recipe", "sm2008-cd25", "--epochs", 3,
            "--batch-size", 16, "--k", 5, "--out", out, "--json")
    )  # fmt: skip
    training = load_model(out)[1]["training"]
    assert (training["k"], training["k_schedule"]) == (5, None)


def test_persistent_chains_under_a_mean_reconstruction_recipe_sample(tmp_path) -> None:
    """sm2008-cd1 reconstructs with means, which only CD has: --method pcd drops it, unless a
    reconstruction is given too (then the clear error stands)."""
    cd1 = RECIPES["sm2008-cd1"]
    assert cd1.reconstruction == "mean" and cd1.replace(method="pcd").reconstruction == "sample"
    assert cd1.replace(method="cd").reconstruction == "mean"
    out = tmp_path / "p.safetensors"
    run("train", "--data", "bars-and-stripes", "--hidden", 3, "--recipe", "sm2008-cd1", "--method", "pcd",
        "--epochs", 1, "--out", out)  # fmt: skip
    assert load_model(out)[1]["training"]["method"] == "pcd"
    with pytest.raises(BoltzkitError, match="mean reconstruction applies to CD only"):
        train_model(
            _bars(), hidden=3, recipe=cd1.replace(method="pcd", reconstruction="mean"), progress=False
        )


# ----------------------------------------------------------------------------- reconstruction
@pytest.mark.parametrize("k", [1, 3])
def test_cd_mean_reconstruction_is_the_visible_mean_given_the_last_hidden_draw(k: int) -> None:
    rbm = random_rbm(7, 5, seed=1)
    v = (torch.rand(6, 7, generator=torch.Generator().manual_seed(2)) < 0.5).to(F64)
    positive = ExactConditional()(rbm, v, torch.Generator())
    phase = ContrastiveDivergence(k, reconstruction="mean")
    negative, _ = phase(rbm, v, positive, ExactConditional(), torch.Generator().manual_seed(9))
    # replay the same random numbers with samples, and take the last visible update's mean
    sampled = ContrastiveDivergence(k, reconstruction="sample")
    g = torch.Generator().manual_seed(9)
    state = sample_means(positive, g, (1,))
    h = state.layers[1]
    for sweep in range(k):
        if sweep > 0:
            h = torch.bernoulli(torch.sigmoid(state.layers[0] @ rbm.W + rbm.hbias), generator=g)
            state = state.with_layer(1, h)
        if sweep < k - 1:
            probs = torch.sigmoid(h @ rbm.W.t() + rbm.vbias)
            state = state.with_layer(0, (torch.rand(probs.shape, generator=g, dtype=F64) < probs).to(F64))
    v_mean = torch.sigmoid(h @ rbm.W.t() + rbm.vbias)
    assert torch.allclose(negative.layers[0], v_mean)
    assert torch.allclose(negative.layers[1], torch.sigmoid(v_mean @ rbm.W + rbm.hbias))
    assert sampled.reconstruction == "sample"


def test_mean_reconstruction_refuses_visible_laterals_and_persistent_chains() -> None:
    srbm = random_machine("srbm", (4, 3), seed=0)
    v = torch.zeros(2, 4, dtype=F64)
    phase = ContrastiveDivergence(1, reconstruction="mean")
    with pytest.raises(BoltzkitError, match="laterals"):
        phase(srbm, v, ExactConditional()(srbm, v, torch.Generator()), ExactConditional(), torch.Generator())
    with pytest.raises(BoltzkitError, match="CD only"):
        train(random_rbm(9, 2, seed=0), _bars().to(F64), generator=torch.Generator(), method="pcd",
              reconstruction="mean", progress=False)  # fmt: skip


# ---------------------------------------------------------------------------------- centering
@pytest.mark.parametrize("kind", ["rbm", "srbm", "bm", "dbm"])
def test_centered_energy_is_the_ordinary_energy_plus_a_constant(kind: str) -> None:
    sizes = (3, 2, 2) if kind == "dbm" else (3, 3)
    model = random_machine(kind, sizes, seed=4)
    g = torch.Generator().manual_seed(5)
    offsets = [torch.rand(n, generator=g, dtype=F64) for n in sizes]
    states = _all_states(sizes)
    diff = centered_energy(model, centered_biases(model, offsets), offsets, states) - model.energy_of(states)
    assert float(diff.max() - diff.min()) < 1e-12


@pytest.mark.parametrize("kind", ["rbm", "srbm", "bm", "dbm"])
def test_a_centered_step_saves_as_an_ordinary_model_with_the_same_log_p(kind: str) -> None:
    """One SGD step of the centered model (centered coordinates, centered gradient, then the
    conversion (*) of boltzkit.learning.centering) gives the same log p(v) on every visible state
    as boltzkit's step: the ordinary model with the transformed gradient."""
    sizes = (3, 2, 2) if kind == "dbm" else (3, 3)
    keys = [(l, l + 1) for l in range(len(sizes) - 1)] if kind == "dbm" else STRUCTURES[kind]
    model = random_machine(kind, sizes, seed=6)
    g = torch.Generator().manual_seed(7)
    positive = ChainState(tuple((torch.rand(20, n, generator=g, dtype=F64) < 0.6).to(F64) for n in sizes))
    negative = ChainState(tuple((torch.rand(30, n, generator=g, dtype=F64) < 0.4).to(F64) for n in sizes))
    centering = Centering(rate=0.3, mean="average")
    centering.setup(model, positive.layers[0])
    centering.update(positive, negative)
    mu = [o.clone() for o in centering.offsets]
    eta = 0.7

    # the centered model: same couplings, centered biases; its gradient from centered statistics
    biases_c = centered_biases(model, mu)

    def centered_mean(state: ChainState, l: int, m: int) -> torch.Tensor:
        a, b = state.layers[l] - mu[l], state.layers[m] - mu[m]
        out = a.t() @ b / a.shape[0]
        return out.fill_diagonal_(0.0) if l == m else out

    new_couplings = {
        (l, m): model.coupling(l, m).detach()
        + eta * (centered_mean(positive, l, m) - centered_mean(negative, l, m))
        for l, m in keys
    }
    new_biases_c = [
        biases_c[l] + eta * (positive.layers[l].mean(0) - negative.layers[l].mean(0))
        for l in range(len(sizes))
    ]
    reference = model.detached_copy()
    with torch.no_grad():
        for (l, m), w in new_couplings.items():
            reference.coupling(l, m).copy_(w)
        for l, b in enumerate(new_biases_c):
            reference.bias(l).copy_(b)
        ordinary = centered_biases(reference, [-o for o in mu])  # b' = b - sum_m W mu_m
        for l, b in enumerate(ordinary):
            reference.bias(l).copy_(b)

    # boltzkit's step: ordinary gradients, transformed, one plain SGD step
    model.set_gradients(positive, negative)
    centering.transform(model)
    with torch.no_grad():
        for p in model.parameters():
            p -= eta * p.grad
    visible = _all_states(sizes[:1]).layers[0]
    assert torch.allclose(exact_log_prob(model, visible), exact_log_prob(reference, visible), atol=1e-10)


def test_centered_training_keeps_laterals_exactly_symmetric() -> None:
    """The centered gradient of a lateral block is one symmetric term (review of 2026-12-04: two
    outer products subtracted one after the other left L asymmetric by 7e-9 after 5 epochs and
    1.5e-7 after 200, in float32, and saving symmetrised it: another model than the trained one)."""
    x = (torch.rand(200, 10, generator=torch.Generator().manual_seed(1)) < 0.3).float()
    model, _ = train_model(
        x, kind="bm", hidden=6, centering="average:0.1", method="sap", n_chains=10, epochs=5,
        batch_size=10, lr=0.05, progress=False,
    )  # fmt: skip
    for l, m in model.coupling_keys:
        if l == m:
            lateral = model.coupling(l, l).detach()
            assert float(lateral.abs().max()) > 0.01 and torch.equal(lateral, lateral.t())


def test_centering_trains_resumes_and_records_its_offsets(tmp_path) -> None:
    x = _bars().to(F64)
    kw = {"k": 1, "epochs": 4, "lr": 0.1, "batch_size": 10, "centering": "average:0.1", "progress": False}
    ckpt = tmp_path / "run.ckpt"

    def fresh():
        return random_rbm(9, 4, seed=2, scale=0.1)

    whole = fresh()
    history = train(whole, x, generator=torch.Generator().manual_seed(1), **kw)
    assert history.records[-1]["epoch"] == 4
    part = fresh()
    part_kw = {**kw, "epochs": 4}
    with pytest.raises(KeyboardInterrupt):

        class Stop:
            order = 200

            def on_train_begin(self, trainer):
                pass

            def on_epoch_begin(self, trainer, epoch):
                if epoch == 3:
                    raise KeyboardInterrupt

            def on_epoch_end(self, trainer, record):
                pass

            def on_train_end(self, trainer):
                pass

        train(part, x, generator=torch.Generator().manual_seed(1), checkpoint_path=ckpt, checkpoint_every=1,
              callbacks=[Stop()], **part_kw)  # fmt: skip
    resumed = fresh()
    train(
        resumed, x, generator=torch.Generator().manual_seed(1), checkpoint_path=ckpt, resume=True, **part_kw
    )
    assert torch.equal(resumed.W, whole.W) and torch.equal(resumed.vbias, whole.vbias)
    assert parse_centering("none") is None and parse_centering("data").mean == "data"
    with pytest.raises(BoltzkitError):
        parse_centering("median")


# ---------------------------------------------------------------------------------------- DBN
def test_train_dbn_takes_one_init_transpose_flag_and_a_recipe() -> None:
    x = _bars(60)
    recipe = RECIPES["sm2008-cd1"].replace(epochs=2, batch_size=20)
    dbn, histories = train_dbn(x, [9, 9], recipe=recipe, init_transpose=True, progress=False)
    assert dbn.layer_sizes == (9, 9, 9) and len(histories) == 2
    assert histories[1].records[0]["momentum"] == 0.5
    with pytest.raises(BoltzkitError, match="first layer"):
        train_dbn(x, [9, 9], init_transpose=[True, True], progress=False)
    assert math.isfinite(float(dbn.rbms[1].W.detach().sum()))


def test_a_wider_transposed_start_defines_the_rbm_below_exactly() -> None:
    from boltzkit.estimators.dbn_bound import dbn_exact_log_prob
    from boltzkit.estimators.exact import exact_log_prob
    from boltzkit.learning.stacking import transposed_start
    from boltzkit.models.dbn import DBN

    rbm = random_rbm(6, 4, seed=3)
    v = torch.tensor(list(itertools.product([0.0, 1.0], repeat=6)), dtype=F64)
    g = torch.Generator().manual_seed(0)
    for scale, tol in ((0.0, 1e-10), (0.01, 0.05)):
        top = transposed_start(rbm, 9, generator=g, scale=scale)
        assert top.layer_sizes == (4, 9)
        dbn = DBN([rbm, top])
        assert torch.allclose(dbn_exact_log_prob(dbn, v), exact_log_prob(rbm, v), atol=tol)
    with pytest.raises(BoltzkitError, match="narrower"):
        train_dbn(_bars(20), [9, 5], init_transpose=True, epochs=1, progress=False)
    # refused before the layers below train (review of 2026-12-04: after them, their hours lost)
    from boltzkit.learning.callbacks import Callback

    started = []

    class Started(Callback):
        def on_train_begin(self, trainer) -> None:  # noqa: ANN001
            started.append(trainer)

    with pytest.raises(BoltzkitError, match="hidden layer 3 cannot start .* narrower") as info:
        train_dbn(
            _bars(20), [16, 9, 5], init_transpose=True, epochs=1, progress=False,
            layer_callbacks=lambda l: [Started()],
        )  # fmt: skip
    assert not started and "at least 16 (the visible units of the RBM below it)" in str(info.value)


def test_a_recipe_used_for_other_layers_than_it_is_meant_for_trains_with_a_warning(tmp_path) -> None:
    """A review's finding: ``dbn-top-pcd`` without a bottom trained the DBN's bottom layer by the
    top's recipe without a word. Recipes say what they are meant for; used otherwise they train as
    told and warn, in Python and on the command line; used as meant, they are silent."""
    import warnings

    x = _bars(60)
    top = RECIPES["dbn-top-pcd"].replace(epochs=1, batch_size=20)
    with pytest.warns(UserWarning, match="bottom layer is trained by it too") as caught:
        dbn, _ = train_dbn(x, [9, 12], recipe=top, init_transpose=True, progress=False)
    assert len(caught) == 1  # the layer above starts transposed, as meant
    with pytest.warns(UserWarning, match="transposed layer below .* but layer 2 starts at random"):
        train_dbn(x, [9, 12], recipe=top, bottom=dbn.rbms[:1], progress=False)
    with pytest.warns(UserWarning, match="starts at random couplings"):
        train_model(x, hidden=4, recipe=top, progress=False)
    finetune = RECIPES["sap-finetune"].replace(epochs=1, batch_size=20)
    with pytest.warns(UserWarning, match="meant to train a trained model further"):
        model, _ = train_model(x, hidden=4, recipe=finetune, progress=False)
    with pytest.warns(
        UserWarning, match="RBM, SRBM, BM or DBM further .* the DBN's layers 1 and 2 start"
    ) as caught:
        train_dbn(x, [9, 12], recipe=finetune, progress=False)
    assert len(caught) == 1  # one warning for both layers
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as meant: no warning
        train_dbn(x, [9, 12], recipe=top, bottom=dbn.rbms[:1], init_transpose=True, progress=False)
        train_model(x, hidden=4, recipe=finetune, init=model, progress=False)
        train_model(x, hidden=4, recipe=RECIPES["sm2008-cd1"].replace(epochs=1), progress=False)
    # not a training setting: the run's recorded settings leave it out, the listing says it
    assert "meant_for" not in recipe_settings(top) and recipe_settings(top) == recipe_settings(
        top.replace(meant_for="any")
    )
    assert (
        "meant_for = 'upper-layers'" in top.describe() and "meant_for" not in RECIPES["sm2008-cd1"].describe()
    )
    with pytest.raises(BoltzkitError, match="meant_for"):
        Recipe(name="x", summary="", meant_for="tops")
    result = run("train", "--data", "bars-and-stripes", "--model", "dbn", "--hidden", "8,20", "--recipe",
                 "dbn-top-pcd", "--epochs", 1, "--out", tmp_path / "dbn.safetensors", "--json")  # fmt: skip
    assert (
        "warning: the recipe 'dbn-top-pcd' is meant for a DBN's layers above a trained bottom"
        in result.stderr
    )


def test_the_default_recipe_is_the_plain_defaults_for_every_method(tmp_path) -> None:
    """``--recipe default`` trains as no recipe does, persistent chains included (review of
    2026-12-04: it fixed a constant rate where train() decays it for PCD), and its recorded
    overrides are what the command changed, not the settings a method change makes moot."""
    common = ("train", "--data", "bars-and-stripes", "--hidden", 4, "--epochs", 2, "--method", "pcd")
    run(*common, "--out", tmp_path / "plain.safetensors")
    run(*common, "--recipe", "default", "--out", tmp_path / "default.safetensors")
    plain, _ = load_model(tmp_path / "plain.safetensors")
    named, md = load_model(tmp_path / "default.safetensors")
    assert torch.equal(plain.W, named.W) and md["training"]["lr_schedule"] == "linear"
    assert md["training"]["recipe_overrides"] == {"method": "pcd", "epochs": 2}
    chains = recipe_differences(RECIPES["default"], {**recipe_settings(RECIPES["default"]), "method": "pcd",
                                                     "n_chains": 500, "reconstruction": None})  # fmt: skip
    assert chains == {"method": "pcd", "n_chains": 500}  # chains the command did change are kept
    # a run of the default recipe recorded before its schedule was left to train() (CD: constant)
    assert (
        recipe_differences(
            RECIPES["default"], {**recipe_settings(RECIPES["default"]), "lr_schedule": "constant"}
        )
        == {}
    )


def test_a_dbns_recorded_overrides_give_each_layers_values(tmp_path) -> None:
    """Per-layer --k and --epochs are recorded as the lists that ran (review of 2026-12-04: the
    first layer's value alone)."""
    out = tmp_path / "dbn.safetensors"
    run("train", "--data", "bars-and-stripes", "--model", "dbn", "--hidden", "6,6", "--recipe", "sm2008-cd25",
        "--epochs", "2,3", "--k", "1,2", "--out", out)  # fmt: skip
    overrides = load_model(out)[1]["training"]["recipe_overrides"]
    assert overrides["k"] == [1, 2] and overrides["epochs"] == [2, 3]
    used = {**recipe_settings(RECIPES["sm2008-cd25"]), "lr": [0.1, 0.1]}  # the recipe's own rate, each layer
    assert "lr" not in recipe_differences(RECIPES["sm2008-cd25"], used)
