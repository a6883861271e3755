"""Iterate averaging (boltzkit.learning.averaging): the saved model is the average of the iterates
the same run visits, exactly; a resumed run reaches the same average; specs and errors."""

from __future__ import annotations

import pytest
import torch
from conftest import KillAfter, Killed, bars_and_stripes
from typer.testing import CliRunner

from boltzkit.cli.main import app
from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import dataset_log_prob, exact_log_z
from boltzkit.io import load_model
from boltzkit.learning import train_dbn, train_model
from boltzkit.learning.averaging import ParameterAverage, parse_average
from boltzkit.learning.callbacks import Callback
from boltzkit.learning.checkpoint import load_checkpoint
from boltzkit.learning.recipes import get_recipe


class _Iterates(Callback):
    """The parameters at the end of every epoch (one update per epoch in these tests)."""

    def __init__(self) -> None:
        self.params: list[dict[str, torch.Tensor]] = []

    def on_epoch_end(self, trainer, record):
        self.params.append({n: p.detach().clone() for n, p in trainer.model.named_parameters()})


def _run(x, **kw):
    """PCD on Bars and Stripes with one minibatch per epoch: each epoch is one update."""
    common = dict(
        kind="rbm", hidden=5, method="pcd", n_chains=9, epochs=6, lr=0.2, batch_size=x.shape[0],
        momentum=0.5, seed=3, progress=False,
    )  # fmt: skip
    common.update(kw)
    return train_model(x, **common)


class _Count(Callback):
    """The iterate average's count at the end of training."""

    def on_train_end(self, trainer):
        self.n_averaged = trainer.average.n_averaged


@pytest.mark.parametrize("spec", ["polyak:3", "ema:0.6", "ema:0.8@2"])
def test_the_trained_model_is_the_average_of_the_runs_own_iterates(spec):
    x = bars_and_stripes()
    seen, seen_averaged = _Iterates(), _Iterates()
    raw, _ = _run(x, callbacks=[seen])
    averaged, _ = _run(x, average=spec, callbacks=[seen_averaged])
    avg = parse_average(spec)
    for step, (a, b) in enumerate(zip(seen.params, seen_averaged.params, strict=True)):
        for name in a:  # the average does not steer the run: the same raw iterates with and without it
            assert torch.equal(a[name], b[name]), (step, name)
    for name, _ in raw.named_parameters():
        iterates = [p[name].double() for p in seen.params][avg.start - 1 :]
        if avg.kind == "polyak":  # Polyak & Juditsky (1992) Eq. 3: the uniform mean
            expected = torch.stack(iterates).mean(0)
        else:  # EMA, the first averaged iterate copied
            expected = iterates[0]
            for theta in iterates[1:]:
                expected = avg.decay * expected + (1 - avg.decay) * theta
        got = dict(averaged.named_parameters())[name].double()
        assert torch.allclose(got, expected, atol=1e-6, rtol=0), name
        assert not torch.allclose(got, iterates[-1], atol=1e-4), name  # the average is not the last iterate


def test_every_update_of_the_averaged_epochs_is_averaged():
    x = bars_and_stripes()  # 32 rows, batches of 5: 7 updates per epoch
    count = _Count()
    _run(x, batch_size=5, epochs=4, average="polyak:3", callbacks=[count])
    assert count.n_averaged == 2 * 7


@pytest.mark.parametrize("spec", ["polyak:2", "ema:0.7@3"])
def test_a_resumed_run_reaches_the_uninterrupted_average(tmp_path, spec):
    x = bars_and_stripes()
    full, _ = _run(x, average=spec, batch_size=8)
    ckpt = tmp_path / "ckpt.safetensors"
    with pytest.raises(Killed):
        _run(
            x, average=spec, batch_size=8, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(4)]
        )
    state = load_checkpoint(ckpt)
    start = parse_average(spec).start
    assert state["epoch"] == 4 and int(state["average"]["n_averaged"]) == (4 - start + 1) * 4
    resumed, _ = _run(x, average=spec, batch_size=8, checkpoint_path=ckpt, resume=True)
    again, _ = _run(x, average=spec, batch_size=8, checkpoint_path=ckpt, resume=True)  # finished run
    for (name, a), (_, b), (_, c) in zip(
        full.named_parameters(), resumed.named_parameters(), again.named_parameters(), strict=True
    ):
        assert torch.equal(a, b) and torch.equal(a, c), name
    with pytest.raises(BoltzkitError, match="different settings"):  # another average, another run
        _run(x, average="polyak:3", batch_size=8, checkpoint_path=ckpt, resume=True)


def test_an_average_object_is_never_shared_between_runs():
    x = bars_and_stripes()
    shared = ParameterAverage("polyak", start=2)
    first, _ = _run(x, average=shared)
    second, _ = _run(x, average=shared)
    assert shared.n_averaged == 0  # train() averages into a fresh copy
    assert torch.equal(first.W, second.W)


def test_an_average_that_would_start_after_the_last_epoch_is_refused_before_training():
    x = bars_and_stripes()
    with pytest.raises(BoltzkitError, match="starts after the last epoch"):
        _run(x, epochs=2, average="polyak:5")
    with pytest.raises(BoltzkitError, match="starts after the last epoch of a layer"):
        train_dbn(
            x, [6, 4], epochs=[3, 2], recipe=get_recipe("default").replace(average="polyak:3"), progress=False
        )


def test_a_dbn_trains_every_layer_with_the_average():
    x = bars_and_stripes()
    recipe = get_recipe("default").replace(
        average="ema:0.5", method="pcd", n_chains=8, epochs=3, batch_size=32
    )
    dbn, histories = train_dbn(x, [6, 4], recipe=recipe, seed=1, progress=False)
    plain, _ = train_dbn(x, [6, 4], recipe=recipe.replace(average=None), seed=1, progress=False)
    for averaged_rbm, plain_rbm in zip(dbn.rbms, plain.rbms, strict=True):
        assert not torch.allclose(averaged_rbm.W, plain_rbm.W, atol=1e-5)


def test_specs_round_trip_and_bad_ones_say_what_is_expected():
    for spec in ("ema:0.999", "ema:0.99@3", "polyak:5"):
        assert parse_average(spec).spec == spec
    assert parse_average("ema:0.9999999").spec == "ema:0.9999999"  # no rounding to an invalid 1
    assert parse_average("none") is None and parse_average(None) is None
    for bad, match in (
        ("ema", "unknown iterate average"),
        ("ema:1.5", r"decay must lie in \(0, 1\)"),
        ("polyak", "needs its first epoch"),
        ("polyak:0", "integer >= 1"),
        ("mean:3", "unknown iterate average"),
    ):
        with pytest.raises(BoltzkitError, match=match):
            parse_average(bad)
    with pytest.raises(BoltzkitError, match="unknown iterate average"):
        ParameterAverage("median")
    recipe = get_recipe("sm2008-cd1").replace(average="ema:0.99")
    assert recipe.train_kwargs()["average"] == "ema:0.99" and recipe.to_dict()["average"] == "ema:0.99"
    with pytest.raises(BoltzkitError, match="unknown iterate average"):
        get_recipe("sm2008-cd1").replace(average="ema")


def test_cli_trains_an_averaged_model_and_records_the_average(tmp_path):
    runner = CliRunner()
    out = tmp_path / "m.safetensors"
    args = ["train", "--data", "bars-and-stripes", "--hidden", "4", "--epochs", "3", "--method", "pcd"]
    args += ["--chains", "8", "--no-progress"]
    result = runner.invoke(app, [*args, "--average", "polyak:2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    saved, metadata = load_model(out)
    assert metadata["training"]["average"] == "polyak:2"
    # the reported numbers describe the saved (averaged) model, not the last raw iterate
    log_z = exact_log_z(saved).log_z
    metrics = metadata["metrics"]
    assert metrics["log_z"] == pytest.approx(log_z, abs=1e-9)
    train_x = load_dataset("bars-and-stripes").x
    exact_train = dataset_log_prob(saved, train_x, log_z).mean_log_prob
    assert metrics["train_log_lik"] == pytest.approx(exact_train, abs=1e-6)
    bad = runner.invoke(app, [*args, "--average", "ema:2", "--out", str(tmp_path / "b.safetensors")])
    assert bad.exit_code == 2 and "decay must lie in (0, 1)" in bad.output
    # Gaussian visible units train under the same trainer: the average is theirs too
    gauss_out = tmp_path / "g.safetensors"
    gauss = runner.invoke(
        app, [*args, "--visible", "gaussian", "--average", "polyak:2", "--out", str(gauss_out)]
    )
    assert gauss.exit_code == 0, gauss.output
    saved, metadata = load_model(gauss_out)
    assert metadata["training"]["average"] == "polyak:2" and saved.kind == "gaussian-rbm"
    # (the file holds sigma in float32, the model log sigma: the round trip moves log Z by ~1e-7)
    assert metadata["metrics"]["log_z"] == pytest.approx(exact_log_z(saved).log_z, abs=1e-6)
