"""The command line for every member of the family: train, logz, evaluate and sample an SRBM, a BM
and a DBM, from boltzkit files and from plain ``.npz`` archives, with the same ``--json`` keys."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import F64, random_machine
from typer.testing import CliRunner

from boltzkit.cli.main import app
from boltzkit.data import load_dataset
from boltzkit.estimators import exact_log_z
from boltzkit.estimators.exact import exact_log_unnormalized_visible
from boltzkit.io import export_npz, load_model

runner = CliRunner()
LOGZ_KEYS = {"method", "log_z", "log_z_minus_3sigma", "log_z_plus_3sigma", "log_z_stderr", "ess", "n_chains"}


def run_json(*args) -> dict:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, object]:
    """An SRBM, a BM and a DBM trained briefly on bars and stripes through the CLI."""
    folder = tmp_path_factory.mktemp("kinds")
    out = {}
    for kind, hidden in (("srbm", "5"), ("bm", "3"), ("dbm", "4,3")):
        path = folder / f"{kind}.safetensors"
        record = run_json(
            "train", "--model", kind, "--data", "bars-and-stripes", "--hidden", hidden, "--method", "sap",
            "--k", "2", "--chains", "16", "--epochs", "3", "--batch-size", "8", "--lr", "0.05", "--seed", "1",
            "--out", path, "--json",
        )  # fmt: skip
        out[kind] = (path, record)
    return out


@pytest.mark.parametrize("kind", ["srbm", "bm", "dbm"])
def test_train_reports_exact_metrics_and_records_the_kind(trained, kind):
    path, record = trained[kind]
    model, metadata = load_model(path)
    assert record["kind"] == kind == model.kind == metadata["kind"]
    assert record["layer_sizes"] == list(model.layer_sizes)
    assert record["log_z"] == pytest.approx(exact_log_z(model).log_z, abs=1e-6)
    x = load_dataset("bars-and-stripes").x.to(F64)
    mean = float(exact_log_unnormalized_visible(model.as_float64(), x).mean()) - record["log_z"]
    assert record["train_log_lik"] == pytest.approx(mean, abs=1e-6)
    assert metadata["training"]["method"] == "sap" and len(record["history"]) == 3


@pytest.mark.parametrize("kind", ["srbm", "bm", "dbm"])
def test_logz_exact_and_ais_agree(trained, kind):
    path, _ = trained[kind]
    exact = run_json("logz", path, "--method", "exact", "--json")
    ais = run_json("logz", path, "--method", "ais", "--betas", "300", "--chains", "200", "--json")
    assert LOGZ_KEYS <= set(ais) and ais["method"] == "ais"
    assert abs(ais["log_z"] - exact["log_z"]) <= 5 * ais["log_z_stderr"]


@pytest.mark.parametrize(
    ("kind", "log_p", "bound"),
    [
        ("srbm", "auto", "exact"),
        ("bm", "auto", "exact"),
        ("bm", "mean-field", "lower"),
        ("dbm", "mean-field", "lower"),
    ],
)
def test_evaluate_says_which_log_p_it_reports(trained, kind, log_p, bound):
    path, _ = trained[kind]
    exact = run_json(
        "evaluate", path, "--data", "bars-and-stripes", "--logz", "exact", "--log-p", "auto", "--json"
    )
    rec = run_json(
        "evaluate", path, "--data", "bars-and-stripes", "--logz", "exact", "--log-p", log_p, "--json"
    )
    assert rec["bound"] == bound and rec["n"] == 32
    if bound == "lower":
        assert rec["mean_log_prob"] <= exact["mean_log_prob"] + 1e-9
        assert rec["mean_field_converged"] is True
    else:
        assert rec["mean_log_prob"] == pytest.approx(exact["mean_log_prob"], abs=1e-12)


@pytest.mark.parametrize("kind", ["srbm", "bm", "dbm"])
def test_sample_writes_visible_states(trained, kind, tmp_path):
    path, _ = trained[kind]
    out = tmp_path / "s.npy"
    rec = run_json(
        "sample", path, "--chains", "7", "--steps", "5", "--sampler", "flip", "--out", out, "--json"
    )
    states = np.load(out)
    assert states.shape == (7, 16) and rec["n_visible"] == 16 and set(np.unique(states)) <= {0, 1}


@pytest.mark.parametrize(("kind", "sizes"), [("bm", (7, 3)), ("dbm", (5, 3, 4))])
def test_a_plain_npz_of_any_kind_is_read_with_every_array(kind, sizes, tmp_path):
    model = random_machine(kind, sizes, seed=4)
    path = tmp_path / f"{kind}.npz"
    export_npz(model, path)
    with np.load(path) as archive:
        np.savez(tmp_path / "plain.npz", **{k: archive[k] for k in archive.files if k != "boltzkit"})
    rec = run_json("logz", tmp_path / "plain.npz", "--method", "exact", "--json")
    assert rec["log_z"] == pytest.approx(exact_log_z(model).log_z, abs=1e-9)


@pytest.mark.parametrize("method", ["ais", "sandwich"])
def test_ais_and_the_sandwich_of_a_plain_npz_bm_land_on_exact_log_z(method, tmp_path):
    """The CLI's AIS and sandwich on a general BM read from a plain archive (the README's lattice
    and spin-glass commands, which the default README test leaves out for their time)."""
    model = random_machine("bm", (7, 3), seed=8)
    export_npz(model, tmp_path / "bm.npz")
    rec = run_json(
        "logz", tmp_path / "bm.npz", "--method", method, "--betas", "300", "--chains", "64", "--seed", "0",
        "--json",
    )  # fmt: skip
    exact = exact_log_z(model).log_z
    assert rec["method"] == method
    assert rec["log_z"] == pytest.approx(exact, abs=5 * rec["log_z_stderr"] + 1e-9)
    if method == "sandwich":  # the reverse run's estimate agrees too, within its own error
        reverse = rec["reverse"]
        assert reverse["log_z"] == pytest.approx(exact, abs=5 * reverse["stderr"] + 1e-9)


def test_relative_to_between_two_srbms(tmp_path):
    a, b = random_machine("srbm", (7, 3), seed=5), random_machine("srbm", (7, 4), seed=6)
    export_npz(a, tmp_path / "a.npz")
    export_npz(b, tmp_path / "b.npz")
    rec = run_json(
        "logz",
        tmp_path / "b.npz",
        "--relative-to",
        tmp_path / "a.npz",
        "--method",
        "ais",
        "--betas",
        "300",
        "--json",
    )
    truth = exact_log_z(b).log_z - exact_log_z(a).log_z
    assert abs(rec["log_ratio"] - truth) <= 5 * rec["log_z_stderr"]


def test_several_hidden_sizes_need_a_dbm(tmp_path):
    result = runner.invoke(
        app,
        [
            "train",
            "--model",
            "bm",
            "--data",
            "bars-and-stripes",
            "--hidden",
            "3,2",
            "--out",
            str(tmp_path / "m.safetensors"),
        ],
    )
    assert result.exit_code == 1 and "one hidden layer" in result.stderr


@pytest.mark.parametrize(
    ("kind", "hidden", "method"), [("rbm", "3", "cd"), ("bm", "3", "sap"), ("dbm", "3,2", "sap")]
)
def test_train_without_a_method_learns_as_the_papers_do(tmp_path, kind, hidden, method):
    """CD for an RBM (S1); persistent chains for an SRBM, BM or DBM (S2 Sec. 5), as sklearn's auto."""
    path = tmp_path / "m.safetensors"
    run_json("train", "--model", kind, "--data", "bars-and-stripes", "--hidden", hidden, "--epochs", "1",
             "--out", path, "--json")  # fmt: skip
    assert load_model(path)[1]["training"]["method"] == method


def test_evaluate_damps_only_hidden_layers_with_laterals(tmp_path):
    """--damping changes a mean field whose hidden layer has laterals and is recorded; a DBM (no
    laterals) ignores it with a warning and records null, whatever the value."""
    x = (np.random.default_rng(0).random((12, 6)) < 0.5).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    bm, dbm = tmp_path / "bm.npz", tmp_path / "dbm.npz"
    export_npz(random_machine("bm", (6, 5), 4), bm)
    export_npz(random_machine("dbm", (6, 4, 3), 5), dbm)

    def evaluate(path, damping):
        args = ["evaluate", str(path), "--data", str(tmp_path / "x.npy"), "--log-p", "mean-field", "--json"]
        result = runner.invoke(app, [*args, "--damping", str(damping)])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr

    (a, quiet), (b, _) = evaluate(bm, 0.0), evaluate(bm, 0.9)
    assert (a["damping"], b["damping"]) == (0.0, 0.9) and "damping" not in quiet
    assert a["mean_field_iterations"] != b["mean_field_iterations"] and a["bound"] == b["bound"] == "lower"
    for damping in (0.0, 0.9):
        rec, err = evaluate(dbm, damping)
        assert rec["damping"] is None and rec["mean_field_iterations"] >= 1
        assert "--log-p mean-field does not use --damping: ignored" in err and "lateral" in err
