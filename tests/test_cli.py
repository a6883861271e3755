"""The ``boltzkit`` command line, run in-process with typer's CliRunner.

Good paths (train, logz, evaluate, sample) are checked against the Python API; bad inputs must end
with a non-zero exit status, one clear message on stderr, and no traceback.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_rbm
from typer.testing import CliRunner

from boltzkit import RBM
from boltzkit.cli.common import json_line, jsonable
from boltzkit.cli.main import app
from boltzkit.data import load_dataset, shared_rows
from boltzkit.errors import BoltzkitError, IntractableError
from boltzkit.estimators import dataset_log_prob, exact_log_z
from boltzkit.io import load_model, save_model

runner = CliRunner()


def run(*args: str):
    """Invoke ``boltzkit ARGS`` in-process (progress bars off)."""
    return runner.invoke(app, [str(a) for a in args])


def last_json(result) -> dict:
    """The JSON object on the last stdout line; NaN/Infinity would be rejected."""
    assert result.exit_code == 0, result.output
    line = result.stdout.strip().splitlines()[-1]

    def reject(token: str):
        raise AssertionError(f"non-strict JSON constant {token} in {line}")

    return json.loads(line, parse_constant=reject)


def assert_clean_failure(result, code: int | None = 1) -> str:
    """Non-zero exit, no traceback, one 'error:' line on stderr (usage errors: typer's message)."""
    assert result.exit_code != 0, result.output
    if code is not None:
        assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
    err = result.stderr.strip()
    if result.exit_code == 2:  # usage error from typer
        assert "Error" in err
    else:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err
    return err


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> tuple[Path, RBM]:
    """A random 7 x 5 RBM saved as a boltzkit file."""
    f32 = torch.float32
    rbm = random_rbm(7, 5, 11, scale=0.5, vbias_scale=0.3, hbias_scale=0.3, dtype=f32, draw_dtype=f32)
    path = tmp_path_factory.mktemp("models") / "rbm7x5.safetensors"
    save_model(rbm, path)
    return path, rbm


@pytest.fixture(scope="module")
def bas_model(tmp_path_factory) -> Path:
    """An RBM trained on bars-and-stripes by the command line itself."""
    path = tmp_path_factory.mktemp("bas") / "bas.safetensors"
    args = ("--data", "bars-and-stripes", "--hidden", 5, "--epochs", 3, "--lr", 0.1)
    result = run("train", *args, "--out", path)
    assert result.exit_code == 0, result.output
    return path


# ----------------------------------------------------------------------------------- top level
def test_version():
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout.strip().startswith("boltzkit ")


def test_no_arguments_shows_help():
    result = run()
    assert "train" in result.output and "logz" in result.output


# -------------------------------------------------------------------------------------- train
def test_train_bars_and_stripes_json(tmp_path):
    out = tmp_path / "model.safetensors"
    record = last_json(
        run(
            "train", "--model", "rbm", "--data", "bars-and-stripes", "--hidden", 5, "--method", "cd",
            "--k", 1, "--epochs", 3, "--lr", 0.1, "--batch-size", 8, "--sampler", "gibbs", "--seed", 0,
            "--out", out, "--json",
        )
    )  # fmt: skip
    assert out.is_file()
    for key in ("seconds", "log_z", "train_log_lik", "recon_error", "settings", "history"):
        assert key in record
    assert record["seconds"] > 0
    assert len(record["history"]) == 3
    rbm, metadata = load_model(out)
    assert (rbm.n_visible, rbm.n_hidden) == (16, 5)
    assert metadata["data"] == "bars-and-stripes"
    assert metadata["image_shape"] == [4, 4]
    assert metadata["training"]["method"] == "cd" and metadata["training"]["epochs"] == 3
    assert record["log_z"] == pytest.approx(exact_log_z(rbm).log_z, abs=1e-9)
    x = load_dataset("bars-and-stripes").x
    assert record["train_log_lik"] == pytest.approx(dataset_log_prob(rbm, x, record["log_z"]).mean_log_prob)
    # Bars and Stripes has no separate test set: nothing is scored as "test"
    assert record["test_log_lik"] is None


def test_train_is_reproducible(tmp_path):
    args = ("train", "--data", "bars-and-stripes", "--hidden", 3, "--epochs", 2, "--seed", 5)
    for name in ("a", "b"):
        assert run(*args, "--out", tmp_path / f"{name}.safetensors").exit_code == 0
    a, _ = load_model(tmp_path / "a.safetensors")
    b, _ = load_model(tmp_path / "b.safetensors")
    assert torch.equal(a.W, b.W)


def test_train_user_npy_pcd_with_history_and_checkpoint(tmp_path):
    rng = np.random.default_rng(3)
    data = tmp_path / "data.npy"
    np.save(data, (rng.random((37, 11)) < 0.3).astype(np.uint8))
    out = tmp_path / "user.safetensors"
    args = (
        "train", "--data", data, "--hidden", 3, "--method", "pcd", "--chains", 7, "--k", 2,
        "--sampler", "flip", "--momentum", 0.5, "--weight-decay", 1e-4, "--epochs", 2, "--lr", 0.05,
        "--batch-size", 10, "--checkpoint-every", 1, "--history", tmp_path / "hist", "--out", out,
    )  # fmt: skip
    record = last_json(run(*args, "--json"))
    assert record["settings"]["method"] == "pcd" and record["settings"]["n_chains"] == 7
    assert (tmp_path / "hist.csv").is_file() and (tmp_path / "hist.json").is_file()
    assert not (tmp_path / "user.safetensors.ckpt").exists()  # removed once the model is saved
    rbm, metadata = load_model(out)
    assert rbm.n_visible == 11 and metadata["data"] == str(data)
    assert "--force" in assert_clean_failure(run(*args))  # no silent overwrite
    # rerunning a finished run (nothing to resume) trains it again to the same numbers, and says so
    again_run = run(*args, "--resume")
    assert again_run.exit_code == 0 and "nothing to resume" in again_run.stderr
    again, _ = load_model(out)
    assert torch.equal(rbm.W, again.W)


@pytest.fixture
def saved_epochs(monkeypatch) -> list[int]:
    """The epochs at which the trainer writes a checkpoint, in order (the writes still happen)."""
    from boltzkit.learning.trainer import Trainer

    epochs: list[int] = []
    original = Trainer.save_checkpoint

    def spy(self, path):
        epochs.append(self.history[-1]["epoch"])
        original(self, path)

    monkeypatch.setattr(Trainer, "save_checkpoint", spy)
    return epochs


def test_train_explicit_checkpoint_is_written_every_epoch(tmp_path, saved_epochs):
    """--checkpoint FILE without --checkpoint-every saves after each epoch (its documented default),
    so that a run stopped mid-way resumes from its last epoch, not from the start."""
    args = ("train", "--data", "bars-and-stripes", "--hidden", 3, "--epochs", 3, "--batch-size", 8)
    ckpt = tmp_path / "run.ckpt"
    result = run(*args, "--checkpoint", ckpt, "--out", tmp_path / "m.safetensors")
    assert result.exit_code == 0, result.output
    assert saved_epochs == [1, 2, 3]


@pytest.mark.parametrize(("seconds", "expected"), [(1e9, [4]), (0.0, [1, 2, 3, 4])])
def test_the_implicit_checkpoint_is_written_at_most_every_few_seconds(
    tmp_path, monkeypatch, saved_epochs, seconds, expected
):
    """Without --checkpoint the run still checkpoints (OUT.ckpt), but a periodic save waits until
    DEFAULT_CHECKPOINT_SECONDS have passed since the last one: many short epochs then cost a few
    writes, not one each; the last epoch is always saved. --checkpoint-every N saves every N."""
    import boltzkit.cli.train as train_cli

    monkeypatch.setattr(train_cli, "DEFAULT_CHECKPOINT_SECONDS", seconds)
    args = ("train", "--data", "bars-and-stripes", "--hidden", 3, "--epochs", 4, "--batch-size", 8)
    result = run(*args, "--out", tmp_path / "m.safetensors")
    assert result.exit_code == 0, result.output
    assert saved_epochs == expected
    saved_epochs.clear()
    result = run(*args, "--checkpoint-every", 2, "--out", tmp_path / "m.safetensors", "--force")
    assert result.exit_code == 0, result.output
    assert saved_epochs == [2, 4]


def test_a_resumed_run_counts_the_seconds_of_its_earlier_epochs(tmp_path, monkeypatch):
    """The model's training_seconds (and so a zoo card's) cover every epoch, not only those of the
    run that finished the training, and the resumed run's own time outside its epochs."""
    from boltzkit.learning.trainer import Trainer

    original, epoch = Trainer.save_checkpoint, Trainer.run_epoch

    def stop_after_two(self, path):
        original(self, path)
        if self.history[-1]["epoch"] == 2:
            raise KeyboardInterrupt

    def slow_epoch(self):  # the first run's epochs take long, so its seconds must show
        time.sleep(1.0)
        return epoch(self)

    args = ("train", "--data", "bars-and-stripes", "--hidden", 3, "--epochs", 3, "--batch-size", 8)
    ckpt, out = tmp_path / "run.ckpt", tmp_path / "m.safetensors"
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "save_checkpoint", stop_after_two)
        patch.setattr(Trainer, "run_epoch", slow_epoch)
        assert run(*args, "--checkpoint", ckpt, "--out", out).exit_code == 130
    resume = Trainer.load_checkpoint

    def slow_resume(self, path):  # the resumed run spends a second outside its epochs
        time.sleep(1.0)
        return resume(self, path)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "load_checkpoint", slow_resume)
        record = last_json(run(*args, "--checkpoint", ckpt, "--resume", "--out", out, "--json"))
    history = record["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3]
    _, metadata = load_model(out)
    # the earlier run's two epochs and the whole of the resumed run (not the larger of the two)
    seconds = metadata["training_seconds"]
    assert seconds >= 3.0 and seconds >= history[-1]["elapsed"] + 1.0


def test_train_list_recipes_needs_no_data_or_output():
    result = run("train", "--list-recipes")
    assert result.exit_code == 0, result.output
    assert "sm2008-cd25" in result.stdout and "dbn-top-pcd" in result.stdout and "[S1]" in result.stdout


@pytest.mark.parametrize("order", [("--list-recipes", "--json"), ("--json", "--list-recipes")])
def test_train_list_recipes_json_in_either_order(order):
    from boltzkit.learning.recipes import RECIPES, Recipe

    result = run("train", *order)
    assert result.exit_code == 0, result.output
    recipes = last_json(result)["recipes"]
    assert [r["name"] for r in recipes] == list(RECIPES)
    assert Recipe.from_dict(recipes[0]) == next(iter(RECIPES.values()))


def test_train_records_the_schedule_phase_and_k_that_ran(tmp_path):
    """Defaults resolved by train() (PCD's linear decay, the positive phase) are recorded as they
    ran, and a k schedule replaces the recipe's k in the record."""
    out = tmp_path / "p.safetensors"
    args = ("--data", "bars-and-stripes", "--hidden", 4, "--epochs", 3, "--batch-size", 8, "--json")
    history = last_json(run("train", *args, "--method", "pcd", "--out", out))["history"]
    training = load_model(out)[1]["training"]
    assert training["lr_schedule"] == "linear" and training["positive"] == "exact"
    assert history[0]["lr"] > history[1]["lr"] > history[2]["lr"]  # it did decay
    out2 = tmp_path / "k.safetensors"
    run("train", *args, "--recipe", "sm2008-cd25", "--k-schedule", "1:5", "--out", out2)
    training = load_model(out2)[1]["training"]
    assert training["k"] is None and training["k_schedule"] == "1:5"


def test_evaluate_draws_generated_data_from_the_seed_the_model_was_trained_with(tmp_path):
    """A generated data set (here Artificial Modes) is drawn from a seed: evaluate takes the one
    recorded at training, whatever --seed the log Z estimate uses, unless --data-seed says else."""
    out = tmp_path / "am.safetensors"
    data = "artificial-modes:n=300"
    trained = last_json(run("train", "--data", data, "--hidden", 3, "--epochs", 1, "--seed", 5,
                            "--test-data", data, "--out", out, "--json"))  # fmt: skip
    for seed in (0, 5):
        scored = last_json(run("evaluate", out, "--data", data, "--seed", seed, "--json"))
        assert scored["data_seed"] == 5
        assert scored["mean_log_prob"] == pytest.approx(trained["test_log_lik"], abs=1e-9)
    other = last_json(run("evaluate", out, "--data", data, "--data-seed", 0, "--json"))
    assert other["data_seed"] == 0 and other["mean_log_prob"] != pytest.approx(
        trained["test_log_lik"], abs=1e-6
    )


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        (("--components", 7), "--components"),
        (("--init-transpose",), "--init-transpose"),
        (("--layer-data", "probs"), "--layer-data"),
        (("--chains", 50), "--chains"),  # CD keeps no chains
        (("--damping", 0.3), "--damping"),  # an RBM's positive phase is exact
        (("--method", "pcd", "--ladder", "geometric"), "--ladder"),
        (("--model", "mixture", "--components", 3, "--lr", 0.5), "--lr"),
        (("--model", "mixture", "--components", 3, "--history", "h"), "--history"),
        (("--model", "dbn", "--hidden", "4,3", "--history", "h"), "--history"),
        (("--model", "dbn", "--hidden", "4,3", "--valid-data", "bars-and-stripes"), "--valid-data"),
        (("--model", "dbn", "--hidden", "4,3", "--positive", "mean-field"), "--positive"),  # layers are RBMs
        (("--model", "dbn", "--hidden", "4,3", "--method", "pt", "--ladder", "uniform"), "--ladder"),
    ],
)
def test_train_refuses_an_option_the_run_would_not_use(tmp_path, options, flag):
    result = run(
        "train", "--data", "bars-and-stripes", "--epochs", 1, *options, "--out", tmp_path / "m.safetensors"
    )
    message = assert_clean_failure(result)
    assert f"{flag} applies to" in message and f"drop {flag}" in message
    assert not (tmp_path / "m.safetensors").exists()


@pytest.mark.parametrize(
    ("options", "flag"), [(("--init-scale", 0.5), "--init-scale"), (("--init-vbias", "zero"), "--init-vbias")]
)
def test_train_from_a_model_refuses_options_of_fresh_weights(bas_model, tmp_path, options, flag):
    """A run started from --init draws no initial weights (review of 2026-12-04: the options were
    dropped, and recorded in the metadata as if used); the API refuses them as well."""
    from boltzkit.learning import train_model

    out = tmp_path / "m.safetensors"
    args = ("train", "--data", "bars-and-stripes", "--hidden", 5, "--epochs", 1, "--init", bas_model)
    message = assert_clean_failure(run(*args, *options, "--out", out))
    assert f"{flag} applies to a fresh model's initial weights" in message and not out.exists()
    start, _ = load_model(bas_model)
    x = load_dataset("bars-and-stripes").x
    with pytest.raises(BoltzkitError, match="a model started from init draws none"):
        train_model(x, hidden=5, init=start, init_scale=0.5, epochs=1)


def test_train_warns_where_held_out_data_are_training_rows(tmp_path):
    """--test-data naming the training file, or --valid-data whose rows all sit in the training set
    (of 64 units or more), gives a training figure under a held-out name (review of 2026-12-04)."""
    from boltzkit.cli.common import warn_if_training_rows

    rng = np.random.default_rng(0)
    data = tmp_path / "x.npy"
    np.save(data, (rng.random((40, 12)) < 0.3).astype(np.float32))
    args = ("train", "--data", data, "--hidden", 3, "--epochs", 1, "--out", tmp_path / "m.safetensors")
    result = run(*args, "--test-data", data)
    assert result.exit_code == 0 and "40 of the 40 rows of --test-data" in result.output
    wide = torch.from_numpy((rng.random((50, 70)) < 0.5).astype(np.float32))
    import io
    from contextlib import redirect_stderr

    for held, says in (
        (wide[10:30], True),
        ((torch.rand(20, 70, generator=torch.Generator().manual_seed(1)) < 0.5).float(), False),
    ):
        err = io.StringIO()
        with redirect_stderr(err):
            warn_if_training_rows(held, wide, "--valid-data v")
        assert ("20 of the 20 rows of --valid-data v are training rows" in err.getvalue()) is says


def test_test_data_auto_takes_the_test_split_of_a_real_valued_archive(tmp_path):
    """--test-data auto is the test split of --data for Gaussian units too (review of 2026-12-04:
    null, where binary data got theirs)."""
    rng = np.random.default_rng(0)
    data = tmp_path / "g.npz"
    np.savez(data, train=rng.normal(size=(30, 4)), test=rng.normal(size=(10, 4)))
    record = last_json(
        run("train", "--data", data, "--visible", "gaussian", "--hidden", 2, "--epochs", 1, "--json",
            "--out", tmp_path / "g.safetensors")
    )  # fmt: skip
    assert record["test_log_lik"] is not None and record["settings"]["test_data"].endswith(":test")


def test_mistyped_output_folders_fail_before_any_work(tmp_path):
    (tmp_path / "m.safetensors").mkdir()
    message = assert_clean_failure(
        run("train", "--data", "bars-and-stripes", "--out", tmp_path / "m.safetensors", "--force")
    )
    assert "names a folder" in message
    message = assert_clean_failure(
        run("reproduce", "bruegge-fischer-igel-2013", "--finished-only", "--out", tmp_path / "typo")
    )
    assert "does not exist" in message and not (tmp_path / "typo").exists()


def test_a_dbn_whose_bottom_holds_every_layer_is_refused(tmp_path):
    bottom = tmp_path / "r.safetensors"
    run("train", "--data", "bars-and-stripes", "--hidden", 3, "--epochs", 1, "--out", bottom)
    message = assert_clean_failure(
        run("train", "--model", "dbn", "--data", "bars-and-stripes", "--hidden", 3, "--bottom", bottom,
            "--out", tmp_path / "d.safetensors")
    )  # fmt: skip
    assert "nothing to train" in message and "--hidden 3,3" in message


def test_a_dbns_per_layer_values_are_for_the_layers_it_trains_above_its_bottom(tmp_path):
    """With --bottom, a per-layer list gives one value per layer trained; a value for the frozen
    bottom is refused, not dropped without a word (a probe of 2026-12-06 found --lr 0.5,0.1 trained
    as --lr 0.1 and recorded as [0.5, 0.1]), and the record holds None for the bottom's layers."""
    bottom = tmp_path / "r.safetensors"
    run("train", "--data", "bars-and-stripes", "--hidden", 4, "--epochs", 1, "--out", bottom)
    common = (
        "train",
        "--model",
        "dbn",
        "--data",
        "bars-and-stripes",
        "--hidden",
        "4,3,2",
        "--bottom",
        bottom,
    )
    message = assert_clean_failure(run(*common, "--lr", "0.5,0.2,0.1", "--out", tmp_path / "x.safetensors"))
    assert "trained already" in message and "2 values" in message
    listed, single = tmp_path / "listed.safetensors", tmp_path / "single.safetensors"
    assert run(*common, "--lr", "0.2,0.1", "--epochs", "2,1", "--out", listed).exit_code == 0
    training = load_model(listed)[1]["training"]
    assert training["lr"] == [None, 0.2, 0.1] and training["epochs"] == [None, 2, 1]
    # the recipe's own value given per layer is no override (the bottom's None aside)
    recipe = tmp_path / "recipe.safetensors"
    assert (
        run(*common, "--recipe", "sm2008-cd1", "--lr", "0.05,0.05", "--epochs", 1, "--out", recipe).exit_code
        == 0
    )
    assert "lr" not in load_model(recipe)[1]["training"]["recipe_overrides"]
    # a bottom that does not fit is refused for that, not for the per-layer counts
    misfit = ("train", "--model", "dbn", "--data", "bars-and-stripes", "--bottom", bottom, "--lr", "0.1,0.2")
    assert "nothing to train" in assert_clean_failure(
        run(*misfit, "--hidden", 4, "--out", tmp_path / "n.safetensors")
    )
    assert "do not fit" in assert_clean_failure(
        run(*misfit, "--hidden", "5,3", "--out", tmp_path / "f.safetensors")
    )
    assert run(*common, "--lr", "0.2", "--epochs", "2", "--out", single).exit_code == 0
    a, b = load_model(listed)[0], load_model(single)[0]
    assert torch.equal(a.rbms[0].W, b.rbms[0].W)  # the frozen bottom, as given
    assert torch.equal(a.rbms[1].W, b.rbms[1].W)  # its first trained layer: lr 0.2 and 2 epochs in both


def test_train_human_summary(tmp_path):
    result = run("train", "--data", "bars-and-stripes", "--hidden", 3, "--out", tmp_path / "m.safetensors")
    assert result.exit_code == 0, result.output
    assert "log Z (exact)" in result.stdout and "reconstruction error" in result.stdout


# --------------------------------------------------------------------------------------- logz
def test_logz_exact_json_matches_api(small_model, tmp_path):
    path, rbm = small_model
    out = tmp_path / "result.json"
    record = last_json(run("logz", path, "--method", "exact", "--json", "--out", out))
    expected = exact_log_z(rbm).log_z
    assert record["method"] == "exact"
    assert record["log_z"] == pytest.approx(expected, abs=1e-9)
    assert record["seconds"] >= 0
    assert json.loads(out.read_text())["log_z"] == pytest.approx(expected, abs=1e-9)


def test_logz_reads_npz(small_model, tmp_path):
    _, rbm = small_model
    path = tmp_path / "plain.npz"
    np.savez(path, **{k: getattr(rbm, k).detach().numpy() for k in ("W", "vbias", "hbias")})
    record = last_json(run("logz", path, "--json"))
    assert record["log_z"] == pytest.approx(exact_log_z(rbm).log_z, abs=1e-9)


def test_logz_ais_json(small_model):
    path, rbm = small_model
    args = ("--method", "ais", "--chains", 30, "--betas", 60, "--sweeps", 1, "--seed", 1)
    record = last_json(run("logz", path, *args, "--json"))
    assert record["method"] == "ais" and record["n_chains"] == 30
    # a loose sanity bound; the estimator's accuracy is tested with the estimators
    assert abs(record["log_z"] - exact_log_z(rbm).log_z) < 0.5


def test_logz_relative_to_exact(small_model, tmp_path):
    path, rbm = small_model
    other = RBM.random(7, 3, scale=0.5, generator=torch.Generator().manual_seed(2))
    other_path = tmp_path / "a.safetensors"
    save_model(other, other_path)
    record = last_json(run("logz", path, "--relative-to", other_path, "--method", "exact", "--json"))
    expected = exact_log_z(rbm).log_z - exact_log_z(other).log_z
    assert record["log_ratio"] == pytest.approx(expected, abs=1e-9)


def test_logz_human_output(small_model):
    result = run("logz", small_model[0])
    assert result.exit_code == 0 and "log Z (exact)" in result.stdout


def test_logz_text_says_what_the_probe_check_tested():
    """The plain-text report names each probe check's chains, looks and verdict: "reliable: yes"
    alone does not say whether the probes tested anything."""
    from boltzkit.cli.logz import _probe_line

    looks = [
        {"sweeps": 1000, "p_value": 2e-4, "relaxing": True},
        {"sweeps": 7250, "p_value": 0.015, "relaxing": False},
    ]
    tested = {
        "name": "probe chains agree with the reverse starts",
        "passed": True,
        "n_probes": 400,
        "looks": looks,
    }
    assert _probe_line(tested) == (
        "probe check: 400 chains started away from the reverse starts, 1,000 sweeps (p = 0.0002, still "
        "relaxing), 7,250 sweeps (p = 0.015): agree"
    )
    idle = {"name": "probe chains agree with the forward run's end states", "passed": True, "n_probes": 8,
            "sweeps": 2, "reason": "not informative: 0 of 8 probe chains reached the range"}  # fmt: skip
    assert _probe_line(idle).endswith(
        "2 sweeps (no test, still relaxing): not informative (the probes had not relaxed)"
    )
    failed = {"name": "probe chains of the target", "passed": False, "n_chains": 100, "sweeps": 100,
              "excess_log_weight": 12.76}  # fmt: skip
    assert "+12.76 nats" in _probe_line(failed) and _probe_line(failed).endswith(
        "FOUND weights the draws never reach"
    )
    assert _probe_line(
        {"name": "probe chains of the target", "passed": True, "reason": "not run: fewer than 4 chains"}
    ) == ("probe check (of the target): not run: fewer than 4 chains")
    assert _probe_line({"name": "schedule halved", "passed": True}) is None


def test_logz_ais_text_shows_its_probe_check(tmp_path):
    """Plain AIS of a model beyond ``--max-bits`` runs the probes of its end states; the text shows them."""
    path = tmp_path / "m.safetensors"
    save_model(random_rbm(8, 5, seed=2), path)
    result = run("logz", path, "--method", "ais", "--betas", "100", "--chains", "20", "--max-bits", "4")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("probe check:"))
    assert "chains started away from the forward run's end states" in line and "sweeps (p = " in line


# ----------------------------------------------------------------------------------- evaluate
def test_evaluate_exact_json_and_per_example(bas_model, tmp_path):
    per_example = tmp_path / "logp.npy"
    record = last_json(
        run(
            "evaluate", bas_model, "--data", "bars-and-stripes", "--split", "test", "--logz", "exact",
            "--per-example", per_example, "--json",
        )
    )  # fmt: skip
    rbm, _ = load_model(bas_model)
    x = load_dataset("bars-and-stripes").x
    log_z = exact_log_z(rbm).log_z
    # log p*(v) is evaluated in float64 arithmetic (the float32 parameters converted exactly)
    expected = float((rbm.as_float64().log_unnormalized_visible(x.double()).detach() - log_z).mean())
    assert record["n"] == 32 and record["split"] == "test"
    assert record["log_z"] == pytest.approx(log_z, abs=1e-9)
    assert record["mean_log_prob"] == pytest.approx(expected, abs=1e-9)
    values = np.load(per_example)
    assert values.shape == (32,)
    assert values.mean() == pytest.approx(expected, abs=1e-9)


def test_evaluate_says_how_much_of_its_data_the_model_was_trained_on(tmp_path, monkeypatch):
    """Rows of the evaluation set that equal a row of the recorded training data are counted, in
    the JSON and the text: a training-set figure is never passed off as a held-out one."""
    rng = np.random.default_rng(0)
    train = rng.integers(0, 2, size=(40, 70)).astype(np.uint8)  # 70 units: no row recurs by chance
    unseen = rng.integers(0, 2, size=(12, 70)).astype(np.uint8)
    np.save(tmp_path / "train.npy", train)
    np.save(tmp_path / "mixed.npy", np.concatenate([train[:5], unseen[:5]]))
    np.save(tmp_path / "some.npy", train[[3, 1, 2]])
    np.save(tmp_path / "unseen.npy", unseen)
    monkeypatch.chdir(tmp_path)  # the model records the path as given: train.npy, here
    model = tmp_path / "m.safetensors"
    assert run("train", "--data", "train.npy", "--hidden", 3, "--epochs", 1, "--out", model).exit_code == 0
    for name, shared, phrase in (
        ("mixed", 5, "5 of the 10 examples are also in the model's training data"),
        ("train", 40, "these 40 examples are the model's training data (train.npy): a training-set figure"),
        ("some", 3, "all 3 examples are in the model's training data"),
        ("unseen", 0, "none of the 12 examples is in the model's training data (train.npy): held out"),
    ):
        record = last_json(run("evaluate", model, "--data", f"{name}.npy", "--json"))
        assert record["training_data"]["shared_examples"] == shared
        assert record["training_data"]["n_examples"] == len(np.load(f"{name}.npy"))
        assert phrase in run("evaluate", model, "--data", f"{name}.npy").stdout
    # another folder's train.npy is not the data the model was trained on: not compared
    other = tmp_path / "other"
    other.mkdir()
    np.save(other / "train.npy", np.concatenate([train[:30], unseen[:10]]))
    monkeypatch.chdir(other)
    record = last_json(run("evaluate", model, "--data", tmp_path / "mixed.npy", "--json"))
    assert record["training_data"]["shared_examples"] is None
    assert "not the training data: its values differ" in record["training_data"]["note"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.npy").unlink()  # the recorded data is gone: no count, and the note says so
    record = last_json(run("evaluate", model, "--data", "mixed.npy", "--json"))
    assert record["training_data"]["shared_examples"] is None
    assert "the recorded training data train.npy cannot be read here" in record["training_data"]["note"]
    assert (
        "not compared with the model's training data" in run("evaluate", model, "--data", "mixed.npy").stdout
    )


@pytest.mark.parametrize("kind", ["dbn", "mixture"])
def test_evaluate_of_a_stack_knows_its_training_data_by_its_values(tmp_path, monkeypatch, kind):
    """A DBN or mixture records its training data's fingerprint as an RBM does: another file of the
    same name and size is not taken for it (the review of 2026-12-06 found a DBN's own training set
    called held out when read from another folder's file of that name)."""
    rng = np.random.default_rng(1)
    train, other_rows = (rng.integers(0, 2, size=(40, 70)).astype(np.uint8) for _ in range(2))
    np.save(tmp_path / "train.npy", train)
    np.save(tmp_path / "copy.npy", train)
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "m.safetensors"
    shape = ("--hidden", "4,3") if kind == "dbn" else ("--components", 3)
    args = ("train", "--model", kind, "--data", "train.npy", *shape, "--epochs", 1, "--out", model)
    assert run(*args).exit_code == 0
    own = last_json(run("evaluate", model, "--data", "copy.npy", "--json"))["training_data"]
    assert own["identical"] and own["shared_examples"] == 40
    other = tmp_path / "other"
    other.mkdir()
    np.save(other / "train.npy", other_rows)  # the same name and size, other rows
    monkeypatch.chdir(other)
    record = last_json(run("evaluate", model, "--data", tmp_path / "copy.npy", "--json"))["training_data"]
    assert record["shared_examples"] is None and "its values differ" in record["note"]


def test_evaluate_compares_generated_data_with_the_training_sets_own_seed(tmp_path):
    # artificial modes drawn from seed 0 at training; evaluated on the train split drawn from seed 1
    model = tmp_path / "am.safetensors"
    data = "artificial-modes:p=0.1,n=200"
    assert (
        run("train", "--data", data, "--hidden", 3, "--epochs", 1, "--seed", 0, "--out", model).exit_code == 0
    )
    own = last_json(run("evaluate", model, "--data", data, "--split", "train", "--json"))["training_data"]
    assert own["identical"] and own["shared_examples"] == 200
    drawn = last_json(run("evaluate", model, "--data", data, "--split", "train", "--data-seed", 1, "--json"))
    counted = drawn["training_data"]
    train0 = load_dataset(data, split="train", seed=0).x
    train1 = load_dataset(data, split="train", seed=1).x
    assert not counted["identical"] and counted["shared_examples"] == shared_rows(train1, train0) < 200


def test_base_rates_come_from_the_training_data_drawn_from_its_own_seed(tmp_path):
    """The base-rate model of an AIS path is fitted to the recorded training data as the model saw
    it: generated data drawn from the seed the file records, not from the estimate's --seed (the
    review of 2026-12-04 found the estimate's seed used), for an RBM and a DBN's bottom alike."""
    from boltzkit.cli.common import LogZMethod, LogZOptions, base_rate_data

    data = "artificial-modes:p=0.1,n=200"
    rbm_file, dbn_file = tmp_path / "am.safetensors", tmp_path / "dbn.safetensors"
    assert (
        run("train", "--data", data, "--hidden", 3, "--epochs", 1, "--seed", 4, "--out", rbm_file).exit_code
        == 0
    )
    args = (
        "train",
        "--model",
        "dbn",
        "--data",
        data,
        "--hidden",
        "3,2",
        "--epochs",
        1,
        "--seed",
        4,
        "--out",
        dbn_file,
    )
    assert run(*args).exit_code == 0
    train4, train9 = (load_dataset(data, split="train", seed=s).x for s in (4, 9))
    assert not torch.equal(train4, train9)
    opts = LogZOptions(LogZMethod("ais"), 10, None, 1, "gibbs", None, 9, None)
    for path in (rbm_file, dbn_file):
        model, metadata = load_model(path)
        x, source = base_rate_data(model, opts, metadata=metadata)
        assert torch.equal(x.cpu(), train4) and source == f"{data} (recorded in the model file)"
    # a --base-rate-data of the user's own is drawn from the estimate's seed
    given = LogZOptions(LogZMethod("ais"), 10, None, 1, "gibbs", data, 9, None)
    x, source = base_rate_data(model, given, metadata=metadata)
    assert torch.equal(x.cpu(), train9) and source == data


def test_evaluate_text_gives_the_verdict_and_a_sandwichs_conservative_figure(bas_model, tmp_path):
    """The text says what the JSON says (review of 2026-12-04: it gave neither the verdict nor the
    figure with the sandwich's upper end, nor which end the main figure takes)."""
    args = ("evaluate", bas_model, "--data", "bars-and-stripes", "--logz", "sandwich", "--chains", 20)
    record = last_json(run(*args, "--betas", 200, "--json"))
    text = run(*args, "--betas", 200).stdout
    assert f"{record['mean_log_prob']:.4f}  (with the forward end of log Z)" in text
    assert f"reverse (upper) end of log Z: {record['mean_log_prob_conservative']:.4f}" in text
    assert ("reliable: yes" if record["reliable"] else "reliable: NO") in text
    # AIS of 2 steps on a sharp 12 x 6 RBM from the base rates of uniform noise: 5-19 nats low,
    # unreliable on 6 of 6 seeds
    sharp, data = tmp_path / "sharp.safetensors", tmp_path / "x.npy"
    save_model(random_rbm(12, 6, 3, scale=5.0), sharp)
    np.save(data, (np.random.default_rng(0).random((50, 12)) < 0.5).astype(np.float32))
    short = (
        "evaluate",
        sharp,
        "--data",
        data,
        "--logz",
        "ais",
        "--chains",
        20,
        "--betas",
        3,
        "--base-rate-data",
        data,
    )
    verdict = last_json(run(*short, "--json"))
    assert verdict["reliable"] is False
    text = run(*short).stdout
    assert "(unreliable)" in text and f"reliable: NO: {verdict['reliability_reason']}" in text


def test_evaluate_per_example_text(bas_model, tmp_path):
    out = tmp_path / "logp.txt"
    assert run("evaluate", bas_model, "--data", "bars-and-stripes", "--per-example", out).exit_code == 0
    assert len(out.read_text().split()) == 32


# ------------------------------------------------------------------------------------- sample
def test_sample_npy_shape_and_seed(bas_model, tmp_path):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    common = ("sample", bas_model, "--sampler", "flip", "--chains", 13, "--steps", 20, "--seed", 4)
    record = last_json(run(*common, "--out", a, "--json"))
    assert record["n_chains"] == 13 and record["n_visible"] == 16
    assert run(*common, "--out", b).exit_code == 0
    x = np.load(a)
    assert x.shape == (13, 16) and set(np.unique(x)) <= {0, 1}
    assert np.array_equal(x, np.load(b))


def test_a_count_too_large_to_hold_is_a_clear_error(bas_model, tmp_path):
    """A --steps past what the machine's integers hold ends with one line that says so (a probe of
    2026-12-06 got "unexpected OverflowError" from deep in the progress bar)."""
    result = run("sample", bas_model, "--out", tmp_path / "s.npy", "--chains", 1, "--steps", 10**20)
    assert "too large to count" in assert_clean_failure(result) and not (tmp_path / "s.npy").exists()
    for args in (  # torch's own overflow, whose message carries a C++ stack (a review of 2026-12-06)
        ("logz", bas_model, "--method", "ais", "--betas", 10**20),
        ("mixing", bas_model, "--steps", 10**20),
        ("train", "--data", "bars-and-stripes", "--hidden", 10**20, "--out", tmp_path / "m.safetensors"),
    ):
        message = assert_clean_failure(run(*args))
        assert "too large to count" in message and "frame #" not in message


def test_sample_png(bas_model, tmp_path):
    out = tmp_path / "grid.png"
    result = run("sample", bas_model, "--chains", 9, "--steps", 5, "--out", out)
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sample_png_without_matplotlib(bas_model, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes "import matplotlib" fail
    err = assert_clean_failure(run("sample", bas_model, "--steps", 1, "--out", tmp_path / "g.png"))
    assert "matplotlib" in err and not (tmp_path / "g.png").exists()


def test_sample_png_without_an_image_shape_draws_rows(small_model, tmp_path):
    """As `plot samples` draws them: a model whose images have no known shape (not a square, none
    recorded) gets one row of units per sample."""
    result = run("sample", small_model[0], "--steps", 1, "--chains", 4, "--out", tmp_path / "g.png")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -------------------------------------------------------------------------------- bad inputs
@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, bas_model) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    z = np.zeros
    files = {
        "nan": ("nan.npz", {"W": np.full((5, 3), np.nan, np.float32), "vbias": z(5), "hbias": z(3)}),
        "shapes": ("shapes.npz", {"W": z((5, 3)), "vbias": z(4), "hbias": z(3)}),
        "missing": ("missing.npz", {"W": z((5, 3)), "vbias": z(5)}),
        "big": ("big.npz", {"W": z((40, 40)), "vbias": z(40), "hbias": z(40)}),
    }
    out = {}
    for key, (name, arrays) in files.items():
        np.savez(d / name, **arrays)
        out[key] = d / name
    raw = bas_model.read_bytes()
    (d / "truncated.safetensors").write_bytes(raw[: len(raw) // 2])
    (d / "foreign.safetensors").write_text("this is not a model\n")
    (d / "foreign.npz").write_bytes(b"\x00" * 64)
    np.save(d / "nonbinary.npy", np.full((4, 16), 0.5))
    np.save(d / "wide.npy", np.zeros((4, 17), np.uint8))
    for name in ("truncated.safetensors", "foreign.safetensors", "foreign.npz", "nonbinary.npy", "wide.npy"):
        out[name.split(".")[0] + ("_npz" if name == "foreign.npz" else "")] = d / name
    out["absent"] = d / "absent.safetensors"
    return out


@pytest.mark.parametrize(
    ("key", "needle"),
    [
        ("nan", "non-finite"),
        ("shapes", "shape"),
        ("missing", "hbias"),
        ("truncated", "truncated"),
        ("foreign", "not a boltzkit model file"),
        ("foreign_npz", "npz"),
        ("absent", "not found"),
    ],
)
def test_bad_model_files(bad_files, key, needle):
    err = assert_clean_failure(run("logz", bad_files[key]))
    assert needle in err


def test_intractable_exact_log_z(bad_files):
    err = assert_clean_failure(run("logz", bad_files["big"], "--method", "exact", "--max-bits", 20))
    assert "intractable" in err and "--method ais" in err


@pytest.mark.parametrize(("key", "needle"), [("nonbinary", "binary"), ("wide", "columns")])
def test_bad_data_for_evaluate(bas_model, bad_files, key, needle):
    err = assert_clean_failure(run("evaluate", bas_model, "--data", bad_files[key]))
    assert needle in err


def test_bad_data_for_train(bad_files, tmp_path):
    result = run("train", "--data", bad_files["nonbinary"], "--out", tmp_path / "m.safetensors")
    err = assert_clean_failure(result)
    assert "binary" in err


def test_unknown_data_set(bas_model):
    err = assert_clean_failure(run("evaluate", bas_model, "--data", "bars-and-stipes"))
    assert "bars-and-stripes" in err  # suggests the closest name


@pytest.mark.parametrize(
    "args",
    [
        ("sample", "MODEL", "--chains", "-1", "--out", "x.npy"),
        ("sample", "MODEL", "--steps", "-1", "--out", "x.npy"),
        ("logz", "MODEL", "--method", "magic"),
        ("logz", "MODEL", "--method", "ais", "--chains", "0"),
        ("logz", "MODEL", "--method", "ais", "--sweeps", "0"),
        ("train", "--data", "bars-and-stripes", "--lr", "0", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes", "--lr", "-0.1", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes", "--lr", "nan", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes", "--epochs", "0", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes", "--method", "sgd", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes", "--hidden", "0,5", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes", "--weight-decay", "-1", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes", "--momentum", "1", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes", "--hidden", "3,x", "--out", "m.safetensors"),
        ("train", "--data", "bars-and-stripes"),  # --out missing
    ],
)
def test_invalid_option_values_are_usage_errors(bas_model, args):
    assert_clean_failure(run(*(bas_model if a == "MODEL" else a for a in args)), code=2)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("sample", "MODEL", "--sampler", "metropolis", "--out", "x.npy"), "unknown sampler"),
        (("sample", "MODEL", "--out", "x.jpg"), ".npy, .png or .fasta"),
        (("sample", "MODEL", "--out", "/no/such/dir/x.npy", "--steps", "1"), "directory"),
        (("logz", "MODEL", "--device", "gpu"), "device"),
        (("logz", "MODEL", "--method", "ais", "--betas", "sideways"), "beta schedule"),
        (("train", "--data", "bars-and-stripes", "--k-schedule", "x", "--out", "m.npz"), "k schedule"),
        (("train", "--data", "bars-and-stripes", "--out", "m.pt"), ".safetensors"),
        (("train", "--data", "bars-and-stripes", "--sampler", "hmc", "--out", "m.safetensors"), "sampler"),
        (("evaluate", "MODEL", "--data", "bars-and-stripes", "--split", "holdout"), "split"),
        (("evaluate", "MODEL", "--data", "bars-and-stripes", "--per-example", "x.json"), "per-example"),
    ],
)
def test_invalid_values_checked_by_boltzkit(bas_model, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    err = assert_clean_failure(run(*(bas_model if a == "MODEL" else a for a in args)))
    assert needle in err


def test_debug_flag_raises_the_original_error(bad_files):
    result = run("--debug", "logz", bad_files["big"], "--max-bits", 20)
    assert isinstance(result.exception, IntractableError)


def test_console_script_error_has_no_traceback(bad_files):
    """The real process: one line on stderr, exit status 1."""
    proc = subprocess.run(
        [sys.executable, "-m", "boltzkit.cli.main", "logz", str(bad_files["absent"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("error: model file not found")


# --------------------------------------------------------------------------------------- JSON
def test_json_line_writes_non_finite_numbers_as_null():
    record = {"a": math.nan, "b": [math.inf, 1.5], "c": np.float64(-math.inf), "d": torch.tensor([1.0])}
    assert jsonable(record) == {"a": None, "b": [None, 1.5], "c": None, "d": [1.0]}
    assert json.loads(json_line(record))["a"] is None


def test_boltzkit_errors_are_value_errors():
    # The CLI catches BoltzkitError; library users may catch ValueError.
    assert issubclass(BoltzkitError, ValueError)


def test_train_init_continues_a_finished_model(tmp_path):
    first = tmp_path / "first.safetensors"
    base = ("train", "--data", "bars-and-stripes", "--hidden", 3, "--epochs", 2, "--lr", 0.1)
    last_json(run(*base, "--out", first, "--json"))
    more = tmp_path / "more.safetensors"
    record = last_json(run(*base, "--init", first, "--out", more, "--json"))
    a, _ = load_model(first)
    b, _ = load_model(more)
    assert not torch.equal(a.W, b.W) and record["log_z"] is not None
    wrong = run(
        "train", "--data", "bars-and-stripes", "--hidden", 4, "--init", first, "--out", tmp_path / "w.npz"
    )
    assert "does not match" in assert_clean_failure(wrong)
    np.save(tmp_path / "wide.npy", np.zeros((4, 20), dtype=np.uint8))  # the data's width is what is wrong
    wide = run("train", "--data", tmp_path / "wide.npy", "--init", first, "--out", tmp_path / "x.safetensors")
    assert "data's columns" in assert_clean_failure(wide)


def test_ctrl_c_names_the_checkpoint_and_exits_130(tmp_path, monkeypatch):
    """Interrupted with a checkpoint written, it says to resume from it; before the first one, it
    says there is nothing to resume (it used to name a checkpoint that did not exist)."""
    import boltzkit.cli.train as train_cli

    out = tmp_path / "m.safetensors"

    def interrupted(*args, **kwargs):
        if written:
            (tmp_path / "m.safetensors.ckpt").write_bytes(b"")
        raise KeyboardInterrupt

    monkeypatch.setattr(train_cli, "train_model", interrupted)
    for written in (True, False):
        (tmp_path / "m.safetensors.ckpt").unlink(missing_ok=True)
        result = run("train", "--data", "bars-and-stripes", "--hidden", 3, "--out", out)
        assert result.exit_code == 130 and "Traceback" not in result.output
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith("error: interrupted")
        if written:
            assert "m.safetensors.ckpt" in line and "--resume" in line
        else:
            assert "no epoch of this run was checkpointed yet" in line and "--resume" not in line


def test_the_human_summaries_print_no_band_for_an_unreliable_log_z() -> None:
    """``evaluate``, a DBN's bound and ``zoo show`` put a band beside an estimate only where its
    verdict holds; an unreliable one says why there is none (the JSON keeps every field)."""
    from boltzkit.cli.common import band_text
    from boltzkit.cli.evaluate import _summary
    from boltzkit.cli.stack import _bound_summary

    record = {
        "data": "x", "split": "test", "n": 10, "mean_log_prob": -90.0, "mean_log_prob_minus_3sigma": -91.0,
        "mean_log_prob_plus_3sigma": -89.0, "log_z_method": "ais", "log_z": 300.0, "seconds": 1.0,
        "data_stderr": 0.2,
    }  # fmt: skip
    assert "[-91.0000, -89.0000]" in _summary({**record, "reliable": True})
    text = _summary({**record, "reliable": False})
    assert "-89.0000" not in text and "no band" in text and "-90.0000" in text
    bound = {
        **record, "n_samples": 5, "mc_error_3std": 0.1, "pooled_error_3std": 0.2,
        "ais_error_minus_3sigma": -0.5, "ais_error_plus_3sigma": 0.4, "total_error_3std": 0.6,
    }  # fmt: skip
    assert "[-91.0000, -89.0000]" in _bound_summary({**bound, "logz": {"reliable": True}})
    text = _bound_summary({**bound, "logz": {"reliable": False}})
    assert "-89.0000" not in text and "0.4000" not in text and "no band" in text
    log_z = {"log_z": 1.0, "log_z_minus_3sigma": 0.5, "log_z_plus_3sigma": 1.5}
    assert band_text(log_z, "log_z") == "[0.5000, 1.5000] (±3σ)"
    assert "no band" in band_text({**log_z, "reliable": False}, "log_z")


# ------------------------------------------------------------------------------------- devices
@pytest.mark.parametrize("device", ["mps", "meta", "xpu", "hpu", "cpu:5", "cpu:0", "CPU", "cuda:-1", "gpu"])
def test_only_documented_devices_are_accepted(small_model, device):
    """auto, cpu, cuda and cuda:N only: torch's other device types fail deep inside torch."""
    err = assert_clean_failure(run("logz", small_model[0], "--method", "ais", "--device", device))
    assert err.startswith("error: unknown device") and repr(device) in err and "'cuda:N'" in err


def test_a_cuda_index_beyond_the_devices_is_named(monkeypatch):
    from boltzkit._numerics import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(BoltzkitError, match="no such CUDA device") as info:
        resolve_device("cuda:2")
    assert "'cuda:0' to 'cuda:1' (2 devices)" in str(info.value)
    with pytest.raises(BoltzkitError, match="unknown device"):
        resolve_device(torch.device("meta"))


# ------------------------------------------------------------------------ evaluate: n and bound
def test_one_example_has_no_standard_error(small_model, tmp_path):
    """A standard error from one example is undefined: null with a note, n/a in the text."""
    np.save(tmp_path / "one.npy", np.array([[1, 0, 1, 1, 0, 0, 1]], dtype=np.float32))
    args = ("evaluate", small_model[0], "--data", tmp_path / "one.npy")
    record = last_json(run(*args, "--json"))
    assert record["n"] == 1 and record["data_stderr"] is None and "at least two" in record["data_stderr_note"]
    assert record["bound"] == "exact" and math.isfinite(record["mean_log_prob"])
    text = run(*args)
    assert (
        text.exit_code == 0
        and "sampling error: n/a (one example" in text.stdout
        and "±0.0000" not in text.stdout
    )
    np.save(tmp_path / "two.npy", np.array([[1, 0, 1, 1, 0, 0, 1], [0, 0, 1, 0, 1, 1, 1]], dtype=np.float32))
    two = last_json(run("evaluate", small_model[0], "--data", tmp_path / "two.npy", "--json"))
    assert two["data_stderr"] > 0 and "data_stderr_note" not in two


@pytest.mark.parametrize("method", ["ais", "sis"])
def test_a_sampled_log_z_makes_the_mean_log_prob_an_estimate(small_model, tmp_path, method):
    """An exact log p*(v) less a sampled log Z is not exact: bound "estimate", with the note."""
    np.save(tmp_path / "x.npy", (np.random.default_rng(0).random((20, 7)) < 0.5).astype(np.float32))
    args = ("evaluate", small_model[0], "--data", tmp_path / "x.npy", "--json")
    exact = last_json(run(*args))
    sampled = last_json(run(*args, "--logz", method, "--chains", 20))
    assert exact["bound"] == "exact" and "bound_note" not in exact
    assert sampled["bound"] == "estimate" and sampled["log_z_method"] == method
    assert f"sampled by {method}" in sampled["bound_note"]
    assert sampled["mean_log_prob"] == pytest.approx(exact["mean_log_prob"], abs=1.0)


def test_evaluate_warns_that_damping_is_unused_where_log_p_is_exact(small_model, tmp_path):
    np.save(tmp_path / "x.npy", (np.random.default_rng(1).random((9, 7)) < 0.5).astype(np.float32))
    result = run("evaluate", small_model[0], "--data", tmp_path / "x.npy", "--damping", 0.9, "--json")
    assert "warning: --log-p auto does not use --damping: ignored" in result.stderr
    assert last_json(result)["damping"] is None
    quiet = run("evaluate", small_model[0], "--data", tmp_path / "x.npy", "--json")
    assert "damping" not in quiet.stderr and last_json(quiet)["damping"] is None


def test_evaluate_split_asked_of_a_file_without_splits_warns_and_an_archive_gives_its_split(tmp_path):
    """``--split valid`` on a plain file says that all of it is used; an archive of arrays named by
    split gives the one asked for; the default split says nothing."""
    model = tmp_path / "m.safetensors"
    save_model(random_rbm(6, 3, seed=1), model)
    g = np.random.default_rng(0)
    rows = {name: (g.random((n, 6)) < 0.5).astype(np.float32) for name, n in (("train", 9), ("valid", 5))}
    np.save(tmp_path / "plain.npy", rows["train"])
    np.savez(tmp_path / "splits.npz", **rows)
    asked = run("evaluate", model, "--data", tmp_path / "plain.npy", "--split", "valid", "--json")
    assert asked.exit_code == 0 and "no 'valid' split of its own" in asked.stderr
    assert json.loads(asked.stdout.strip().splitlines()[-1])["n"] == 9
    quiet = run("evaluate", model, "--data", tmp_path / "plain.npy", "--json")
    assert quiet.exit_code == 0 and "split of its own" not in quiet.stderr
    archive = run("evaluate", model, "--data", tmp_path / "splits.npz", "--split", "valid", "--json")
    assert archive.exit_code == 0 and json.loads(archive.stdout.strip().splitlines()[-1])["n"] == 5
    # one array named train: the default test split says it takes training rows; train says nothing
    np.savez(tmp_path / "train_only.npz", train=rows["train"])
    lone = run("evaluate", model, "--data", tmp_path / "train_only.npz", "--json")
    assert lone.exit_code == 0 and "(its one array is named 'train')" in lone.stderr
    trained = run("train", "--data", tmp_path / "train_only.npz", "--hidden", 2, "--epochs", 1,
                  "--out", tmp_path / "t.safetensors", "--json")  # fmt: skip
    assert trained.exit_code == 0 and "split of its own" not in trained.stderr


def test_max_bits_bounds_the_exact_log_z_put_beside_a_sampled_one(tmp_path):
    """``--max-bits`` is used by AIS too: it caps the enumeration of the exact value beside the
    estimate (no warning that it is ignored)."""
    model = tmp_path / "m.safetensors"
    save_model(random_rbm(6, 3, seed=2), model)
    args = ("logz", model, "--method", "ais", "--betas", 50, "--chains", 8, "--json")
    beside = run(*args)
    assert beside.exit_code == 0 and "exact_log_z" in json.loads(beside.stdout.strip().splitlines()[-1])
    capped = run(*args, "--max-bits", 2)
    assert capped.exit_code == 0 and "does not use --max-bits" not in capped.stderr
    assert "exact_log_z" not in json.loads(capped.stdout.strip().splitlines()[-1])


def test_train_on_an_archive_of_splits_takes_its_test_split_only_where_it_has_one(tmp_path):
    g = np.random.default_rng(1)
    arrays = {name: (g.random((n, 6)) < 0.5).astype(np.float32) for name, n in (("train", 12), ("valid", 4))}
    np.savez(tmp_path / "tv.npz", **arrays)
    np.savez(tmp_path / "tvt.npz", **arrays, test=arrays["valid"][:3])
    args = ("train", "--hidden", 2, "--epochs", 1, "--json")
    without = last_json(run(*args, "--data", tmp_path / "tv.npz", "--out", tmp_path / "a.safetensors"))
    assert without["test_log_lik"] is None and without["train_log_lik"] is not None
    held = last_json(run(*args, "--data", tmp_path / "tvt.npz", "--out", tmp_path / "b.safetensors"))
    assert held["test_log_lik"] is not None


def test_every_output_file_is_refused_when_it_exists_unless_forced(tmp_path: Path, small_model) -> None:
    """A review's finding: ``train`` and ``convert`` refused to overwrite, while ``sample --out``,
    ``logz --out``/``--trace``, ``evaluate --per-example`` and ``mixing --out`` replaced earlier
    results without a word. One check now holds for all, before the work; ``--force`` replaces."""
    model = small_model[0]
    data = tmp_path / "x.npy"
    n_visible = small_model[1].n_visible
    np.save(data, (np.random.default_rng(0).random((12, n_visible)) < 0.5).astype(np.float32))
    commands = {
        "sample --out": (["sample", model, "--chains", 3, "--steps", 2], "--out", "s.npy"),
        "logz --out": (["logz", model, "--method", "exact"], "--out", "l.json"),
        "logz --trace": (
            ["logz", model, "--method", "ais", "--betas", 20, "--chains", 4],
            "--trace",
            "t.npz",
        ),
        "evaluate --per-example": (["evaluate", model, "--data", data], "--per-example", "p.npy"),
        "mixing --out": (["mixing", model, "--chains", 2, "--steps", 50], "--out", "m.npz"),
    }
    for what, (args, option, name) in commands.items():
        target = tmp_path / name
        first = run(*args, option, target)
        assert first.exit_code == 0, (what, first.output)
        stamp = target.stat().st_mtime_ns
        again = assert_clean_failure(run(*args, option, target))
        assert "the output file exists" in again and f"choose another {option}" in again, what
        assert target.stat().st_mtime_ns == stamp, what  # untouched
        assert run(*args, option, target, "--force").exit_code == 0, what
        missing = assert_clean_failure(run(*args, option, tmp_path / "no" / name))
        assert f"the directory of {option} does not exist" in missing and "mkdir -p" in missing, what


def test_evaluate_warns_of_sampling_options_its_log_z_method_does_not_use(
    tmp_path: Path, small_model
) -> None:
    """A review's finding: ``logz --method exact --chains 5`` warned, ``evaluate --logz exact
    --chains 7`` did not."""
    model, rbm = small_model
    data = tmp_path / "x.npy"
    np.save(data, (np.random.default_rng(1).random((10, rbm.n_visible)) < 0.5).astype(np.float32))
    exact = run("evaluate", model, "--data", data, "--logz", "exact", "--betas", 200, "--chains", 7)
    assert (
        exact.exit_code == 0
        and "warning: --logz exact does not use --chains, --betas: ignored" in exact.stderr
    )
    sampled = run("evaluate", model, "--data", data, "--logz", "ais", "--betas", 200, "--chains", 7)
    assert sampled.exit_code == 0 and "does not use" not in sampled.stderr


def test_a_run_that_starts_over_on_an_earlier_runs_checkpoint_says_so(tmp_path, monkeypatch):
    """Without --resume, a checkpoint an interrupted run left is replaced: the run says so and how
    to continue that run instead (a probe of 2026-12-07: it was replaced without a word)."""
    from boltzkit.learning.trainer import Trainer

    original = Trainer.save_checkpoint

    def stop_after_one(self, path):
        original(self, path)
        raise KeyboardInterrupt

    args = ("train", "--data", "bars-and-stripes", "--hidden", 3, "--epochs", 2, "--batch-size", 8)
    ckpt, out = tmp_path / "run.ckpt", tmp_path / "m.safetensors"
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "save_checkpoint", stop_after_one)
        assert run(*args, "--checkpoint", ckpt, "--out", out).exit_code == 130
    assert ckpt.exists()
    again = run(*args, "--checkpoint", ckpt, "--out", out)
    assert again.exit_code == 0, again.output
    assert "holds a checkpoint of an earlier, interrupted run" in again.stderr and "--resume" in again.stderr
    quiet = run(*args, "--checkpoint", ckpt, "--out", tmp_path / "other.safetensors")
    assert "earlier, interrupted run" not in quiet.stderr  # the finished run removed it


def test_sigterm_ends_a_command_as_ctrl_c_does_with_the_checkpoint_to_resume(tmp_path):
    """``kill`` (or a session's time limit) ends ``train`` with ``error: interrupted`` and where its
    checkpoint is, as Ctrl-C does, not silently; its status is SIGTERM's, 128 + 15 (it was Ctrl-C's
    130 until a review of 2026-12-07)."""
    import os
    import signal

    out, ckpt = tmp_path / "m.safetensors", tmp_path / "m.safetensors.ckpt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "boltzkit", "--threads", "1", "train", "--data", "bars-and-stripes",
               "--hidden", "4", "--epochs", "100000", "--checkpoint-every", "1", "--no-progress",
               "--out", str(out)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120.0
    while not ckpt.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert "error: interrupted" in stderr and "--resume" in stderr and str(ckpt) in stderr


def test_an_option_neither_a_mixture_nor_a_dbn_takes_is_not_said_to_apply_to_dbns():
    result = run("train", "--data", "bars-and-stripes", "--model", "mixture", "--components", 2,
                 "--checkpoint-every", 2, "--out", "never.safetensors")  # fmt: skip
    assert result.exit_code != 0
    assert "single Boltzmann machines, not a mixture" in result.stderr and "DBNs" not in result.stderr


def _dbn_and_data(tmp_path, g, sizes, scales, n_rows):
    """A two-layer DBN of layer ``sizes`` (weights N(0, scale^2) per layer, biases N(0, 1)) saved as
    ``dbn.npz``, and ``n_rows`` random binary rows as ``data.npy``."""
    arrays = {}
    for l, scale in enumerate(scales):
        arrays[f"W_{l}"] = g.normal(0, scale, (sizes[l], sizes[l + 1]))
        arrays[f"vbias_{l}"], arrays[f"hbias_{l}"] = g.normal(0, 1, sizes[l]), g.normal(0, 1, sizes[l + 1])
    np.savez(tmp_path / "dbn.npz", **arrays)
    np.save(tmp_path / "data.npy", (g.random((n_rows, sizes[0])) < 0.5).astype(float))
    return tmp_path / "dbn.npz", tmp_path / "data.npy"


def test_a_dbn_evaluated_with_an_unreliable_top_log_z_says_so_in_its_text(tmp_path):
    """The DBN's text named the top RBM's log Z without its verdict (a probe of 2026-12-07), where an
    RBM's evaluation gives it; a mixture says the log Z options do not apply to it."""
    g = np.random.default_rng(1)
    dbn, data = _dbn_and_data(tmp_path, g, (10, 6, 8), (2.0, 3.0), 30)
    result = run("evaluate", dbn, "--data", data, "--logz", "ais", "--chains", 3, "--betas", 5,
                 "--max-bits", 4, "--samples", 2)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "(unreliable)" in result.stdout and "reliable: NO: only 3 runs" in result.stdout
    mixture = tmp_path / "mix.npz"
    np.savez(mixture, weights=np.array([0.3, 0.7]), means=g.random((2, 10)))
    said = run("evaluate", mixture, "--data", data, "--logz", "ais", "--chains", 3)
    assert said.exit_code == 0 and "does not use --logz, --chains: ignored" in said.stderr


def test_a_dbn_top_log_z_without_data_names_the_base_the_estimator_chose(tmp_path):
    """Without base-rate data the record said "top RBM visible biases" beside a ``base`` of
    "Ising fields" (a review of 2026-12-07): the estimator chose the base, and only its own record
    of it is kept."""
    dbn, data = _dbn_and_data(tmp_path, np.random.default_rng(3), (6, 5, 4), (1.0, 1.0), 20)
    result = run("evaluate", dbn, "--data", data, "--logz", "ais", "--chains", 20, "--betas", 50,
                 "--max-bits", 4, "--samples", 2, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    settings = json.loads(result.stdout)["log_z_settings"]
    assert "base_data" not in settings
    assert settings["base"] in ("model visible biases", "Ising fields", "uniform")


@pytest.mark.parametrize("visible", ["gaussian", "categorical:3"])
def test_held_out_data_of_another_width_is_refused_before_training(tmp_path, visible):
    """A unit model's --test-data of the wrong width failed only after the training, leaving its
    checkpoint behind (a probe of 2026-12-07); it is refused first, and named."""
    g = np.random.default_rng(0)
    categorical = visible.startswith("categorical")
    train = g.integers(0, 3, (50, 4)) if categorical else g.normal(size=(50, 4))
    np.save(tmp_path / "train.npy", train)
    np.save(tmp_path / "wide.npy", train[:, :3])
    out = tmp_path / "m.safetensors"
    result = run("train", "--data", tmp_path / "train.npy", "--test-data", tmp_path / "wide.npy",
                 "--visible", visible, "--hidden", 2, "--epochs", 1, "--out", out)  # fmt: skip
    assert result.exit_code == 1 and "wide.npy" in result.stderr and "(n_examples, 4)" in result.stderr
    assert not out.exists() and not out.with_name(out.name + ".ckpt").exists()
