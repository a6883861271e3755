"""``boltzkit convert`` for every kind, the zoo (``zoo:NAME``, cards, verify, add) and the zoo's own
models (each card against its file, and its check log-probability recomputed)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_machine, random_rbm, unit_rbm
from test_cli import assert_clean_failure, last_json, run
from test_unit_dbm import unit_dbm

import boltzkit.zoo as zoo
from boltzkit.data.mnist import mnist_available
from boltzkit.errors import BoltzkitWarning, ModelFileError
from boltzkit.experiments.zoo_cards import recompute_check
from boltzkit.io import load_model, save_model
from boltzkit.models.dbn import DBN
from boltzkit.models.mixture import MixtureOfBernoullis


def _models() -> dict[str, object]:
    g = torch.Generator().manual_seed(0)
    return {
        "rbm": random_rbm(7, 5, seed=1),
        "srbm": random_machine("srbm", (5, 3), seed=2),
        "bm": random_machine("bm", (5, 3), seed=3),
        "dbm": random_machine("dbm", (5, 3, 2), seed=4),
        "dbn": DBN([random_rbm(7, 5, seed=5), random_rbm(5, 3, seed=6)]),
        "mixture": MixtureOfBernoullis(
            torch.tensor([0.3, 0.7]), torch.rand(2, 7, generator=g, dtype=torch.float64)
        ),
        "gaussian-rbm": unit_rbm("gaussian", 7, 5, seed=7),
        "categorical-rbm": unit_rbm("categorical:3", 7, 5, seed=8),
        "gaussian-dbm": unit_dbm("gaussian", (5, 3, 2), seed=9),
        "categorical-dbm": unit_dbm("categorical:4", (5, 3, 2), seed=10),
        "gaussian-dbn": DBN([unit_rbm("gaussian", 7, 5, seed=11), random_rbm(5, 3, seed=12)]),
        "categorical-dbn": DBN([unit_rbm("categorical:3", 7, 5, seed=13), random_rbm(5, 3, seed=14)]),
    }


#: The arrays of each kind's .npz, as the README and the convert issue name them.
NPZ_ARRAYS = {
    "rbm": {"W", "vbias", "hbias"},
    "srbm": {"W", "L", "vbias", "hbias"},
    "bm": {"W", "L", "J", "vbias", "hbias"},
    "dbm": {"W_0", "W_1", "bias_0", "bias_1", "bias_2"},
    "dbn": {"W_0", "vbias_0", "hbias_0", "W_1", "vbias_1", "hbias_1"},
    "mixture": {"weights", "means"},
    "gaussian-rbm": {"W", "vbias", "hbias", "sigma"},  # W: n_visible x n_hidden
    "categorical-rbm": {"W", "vbias", "hbias"},  # W: n_visible x Q x n_hidden, vbias: n_visible x Q
    "gaussian-dbm": {"W_0", "W_1", "bias_0", "bias_1", "bias_2", "sigma"},
    "categorical-dbm": {"W_0", "W_1", "bias_0", "bias_1", "bias_2"},
    "gaussian-dbn": {"W_0", "vbias_0", "hbias_0", "sigma_0", "W_1", "vbias_1", "hbias_1"},
    "categorical-dbn": {"W_0", "vbias_0", "hbias_0", "W_1", "vbias_1", "hbias_1"},
}


@pytest.mark.parametrize("kind", list(NPZ_ARRAYS))
def test_convert_round_trip_for_every_kind(kind: str, tmp_path) -> None:
    model = _models()[kind]
    source = tmp_path / "model.safetensors"
    save_model(model, source, metadata={"data": "somewhere", "created": "2001-02-03T04:05:06+00:00"})
    npz, back = tmp_path / "model.npz", tmp_path / "back.safetensors"
    record = last_json(run("convert", source, npz, "--json"))
    assert record["kind"] == ("dbn" if kind.endswith("dbn") else kind) and record["to"] == "npz"
    with np.load(npz) as archive:
        assert set(archive.files) - {"boltzkit"} == NPZ_ARRAYS[kind]
    last_json(run("convert", npz, back, "--json"))
    again = load_model(back)[0].state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(again[name], tensor), name
    assert load_model(back)[1]["data"] == "somewhere"  # the metadata travels
    assert load_model(back)[1]["created"] == "2001-02-03T04:05:06+00:00"  # the model's, not the file's


def test_convert_reports_the_dtype_it_writes_and_keeps_the_widest(tmp_path) -> None:
    """A half-precision archive is read, and written, as float32; a float64 bias beside float32
    weights keeps its precision (the model takes the widest dtype of its arrays)."""
    g = np.random.default_rng(0)
    w = g.normal(0, 1, (6, 3))
    np.savez(
        tmp_path / "half.npz",
        W=w.astype(np.float16),
        vbias=np.zeros(6, np.float16),
        hbias=np.zeros(3, np.float16),
    )
    bias = np.full(6, 1 / 3)  # not a float32 number
    np.savez(tmp_path / "mixed.npz", W=w.astype(np.float32), vbias=bias, hbias=np.zeros(3, np.float32))
    record = last_json(run("convert", tmp_path / "half.npz", tmp_path / "half.safetensors", "--json"))
    assert (
        record["dtype"] == "float32" and load_model(tmp_path / "half.safetensors")[0].W.dtype == torch.float32
    )
    record = last_json(run("convert", tmp_path / "mixed.npz", tmp_path / "mixed.safetensors", "--json"))
    model = load_model(tmp_path / "mixed.safetensors")[0]
    assert record["dtype"] == "float64" and model.vbias.dtype == torch.float64
    assert np.array_equal(model.vbias.detach().numpy(), bias)


def test_convert_refuses_what_it_cannot_do(tmp_path) -> None:
    source = tmp_path / "m.safetensors"
    save_model(random_rbm(4, 3, seed=0), source)
    target = tmp_path / "m.npz"
    target.write_bytes(b"")
    assert "--force" in assert_clean_failure(run("convert", source, target))
    assert "format" in assert_clean_failure(run("convert", source, tmp_path / "m.pt"))
    assert "same file" in assert_clean_failure(run("convert", source, source, "--force"))
    assert "same file" in assert_clean_failure(run("convert", source, source))  # said before --force
    os.link(source, tmp_path / "linked.safetensors")
    assert "same file" in assert_clean_failure(
        run("convert", source, tmp_path / "linked.safetensors", "--force")
    )
    last_json(run("convert", source, target, "--force", "--dtype", "float64", "--json"))
    assert load_model(target)[0].W.dtype == torch.float64
    (tmp_path / "d.npz").mkdir()  # a review's finding: this asked for --force, which then refused it
    assert "OUT names a folder" in assert_clean_failure(run("convert", source, tmp_path / "d.npz"))
    np.save(tmp_path / "x.npy", np.zeros((4, 3)))  # read as a safetensors file before
    refused = assert_clean_failure(run("convert", tmp_path / "x.npy", target, "--force"))
    assert "a single .npy array" in refused


# ------------------------------------------------------------------------------------------ zoo
@pytest.fixture
def tiny_zoo(tmp_path, monkeypatch):
    """A zoo folder with one RBM trained on Bars and Stripes, added through the command line."""
    folder = tmp_path / "zoo"
    monkeypatch.setenv("BOLTZKIT_ZOO_DIR", str(folder))
    model = tmp_path / "bas.safetensors"
    last_json(
        run("train", "--data", "bars-and-stripes", "--hidden", 4, "--recipe", "sm2008-cd1", "--epochs", 5,
            "--batch-size", 4, "--out", model, "--json")
    )  # fmt: skip
    card = last_json(
        run("zoo", "add", "bas-rbm", model, "--data", "bars-and-stripes", "--test-data", "bars-and-stripes",
            "--paper-source", "none", "--json")
    )  # fmt: skip
    return folder, card


def test_zoo_add_list_show_and_use_by_name(tiny_zoo) -> None:
    folder, card = tiny_zoo
    assert (folder / "bas-rbm.safetensors").is_file() and card["log_z"]["method"] == "exact"
    assert card["recipe"] == "sm2008-cd1" and card["command"].startswith("boltzkit train")
    assert card["sha256"] == zoo.file_sha256(folder / "bas-rbm.safetensors")
    listed = last_json(run("zoo", "--json"))
    assert [m["name"] for m in listed["models"]] == ["bas-rbm"] and listed["models"][0]["file_matches_card"]
    assert last_json(run("zoo", "show", "bas-rbm", "--json"))["name"] == "bas-rbm"
    assert last_json(run("zoo", "--json", "show", "bas-rbm"))["name"] == "bas-rbm"  # --json before, too
    model, metadata = zoo.load("bas-rbm")
    assert metadata["zoo_name"] == "bas-rbm" and model.W.dtype == torch.float32
    evaluated = last_json(run("evaluate", "zoo:bas-rbm", "--data", "bars-and-stripes", "--json"))
    assert evaluated["mean_log_prob"] == pytest.approx(card["test"]["mean_log_prob"], abs=1e-5)
    assert load_model("zoo:bas-rbm")[0].n_hidden == 4
    with pytest.raises(ModelFileError, match="bas-rbm"):  # the error lists the known models
        load_model("zoo:nope")


def test_a_reproduction_names_where_a_zoo_model_departs_from_its_recipe(tiny_zoo, tmp_path) -> None:
    """The zoo's model was trained by sm2008-cd1 with --epochs 5 --batch-size 4: a reproduction
    that takes it for sm2008-cd1 says so, and one whose recipe has those settings sees none."""
    from boltzkit.experiments.engine import Context, train_stage
    from boltzkit.experiments.report import recipe_label
    from boltzkit.learning.recipes import RECIPES

    ctx = Context(out_dir=tmp_path / "run", seed=0, device=torch.device("cpu"), progress=False)
    kw = {
        "kind": "rbm",
        "hidden": 4,
        "train_x": torch.zeros(1, 16),
        "data": "bars-and-stripes",
        "zoo": "bas-rbm",
    }
    _, training = train_stage(ctx, "m", recipe=RECIPES["sm2008-cd1"], **kw)
    assert training["source"] == "zoo:bas-rbm"
    assert training["recipe_differences"] == {"epochs": 5, "batch_size": 4}
    assert recipe_label("sm2008-cd1", training) == "sm2008-cd1 (epochs 5, batch_size 4)"
    same = RECIPES["sm2008-cd1"].replace(epochs=5, batch_size=4)
    _, training = train_stage(ctx, "m", recipe=same, **kw)
    assert training["recipe_differences"] == {} and recipe_label("sm2008-cd1", training) == "sm2008-cd1"


def test_zoo_verify_catches_a_changed_file(tiny_zoo) -> None:
    folder, _ = tiny_zoo
    assert last_json(run("zoo", "verify", "--json"))["ok"]
    model, _ = zoo.load("bas-rbm")
    with torch.no_grad():
        model.hbias.add_(0.5)  # (the check image of Bars and Stripes is blank: vbias would not show)
    save_model(model, folder / "bas-rbm.safetensors")
    result = run("zoo", "verify", "--json")
    assert result.exit_code == 1
    record = json.loads(result.stdout.strip().splitlines()[-1])
    problems = " ".join(record["models"][0]["problems"])
    assert "sha256" in problems and "outside the card" in problems


def test_a_zoo_model_loaded_by_name_warns_where_its_card_does_not_describe_it(tiny_zoo) -> None:
    """A review's finding: a file replaced under a card's name loaded silently by ``zoo:NAME``, and
    a file without a card loaded as well; both now warn, the list shows no figure for the changed
    file, and ``zoo show`` says the card is missing."""
    folder, _ = tiny_zoo
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoltzkitWarning)
        zoo.load("bas-rbm")  # the published file: no warning
    save_model(random_rbm(16, 3, seed=0), folder / "bas-rbm.safetensors")
    for load in (lambda: zoo.load("bas-rbm"), lambda: load_model("zoo:bas-rbm")):
        with pytest.warns(BoltzkitWarning, match="not the file its card describes.*zoo verify bas-rbm"):
            assert load()[0].n_hidden == 3
    with pytest.warns(BoltzkitWarning) as caught:
        zoo.load("bas-rbm")
    assert caught[0].filename == __file__  # at the caller's line (review of 2026-12-04: zoo.py's)
    row = last_json(run("zoo", "--json"))["models"][0]
    assert not row["file_matches_card"] and row["test_log_prob"] is None and row["cell"] is None
    assert "the file is not its card's" in run("zoo").output  # no figure the card holds for another file
    shown = run("zoo", "show", "bas-rbm")  # the card, said not to be the file's (review of 2026-12-04)
    assert "FILE CHANGED" in shown.stdout and "is not the one its card describes" in shown.output
    assert last_json(run("zoo", "show", "bas-rbm", "--json"))["file_matches_card"] is False
    shutil.copy(folder / "bas-rbm.safetensors", folder / "nocard.safetensors")
    with pytest.warns(BoltzkitWarning, match="has no readable card"):
        load_model("zoo:nocard")
    assert "the zoo model has no card" in assert_clean_failure(run("zoo", "show", "nocard"))
    # half a pair is listed and fails verify (it was left out of both)
    rows = {r["name"]: r for r in last_json(run("zoo", "--json"))["models"]}
    assert "has no card" in rows["nocard"]["problem"]
    verified = run("zoo", "verify", "--quick", "--json")
    assert verified.exit_code == 1
    failed = {r["name"]: r for r in json.loads(verified.stdout.strip().splitlines()[-1])["models"]}
    assert not failed["nocard"]["ok"] and "has no card" in failed["nocard"]["problems"][0]


def test_an_unknown_or_missing_zoo_says_what_to_do(tiny_zoo, tmp_path, monkeypatch) -> None:
    assert zoo.load("BAS-RBM")[1]["zoo_name"] == "bas-rbm"  # a name in other letter case is found
    assert load_model("ZOO:bas-rbm")[1]["zoo_name"] == "bas-rbm"
    assert zoo.load("ZOO:bas-rbm")[1]["zoo_name"] == "bas-rbm"
    for typed in ("BAS-RBM", "ZOO:bas-rbm"):  # verified and shown as the name it is published under
        assert last_json(run("zoo", "verify", typed, "--quick", "--json"))["ok"]
        assert last_json(run("zoo", "show", typed, "--json"))["name"] == "bas-rbm"
    with pytest.raises(ModelFileError, match="did you mean 'bas-rbm'"):
        zoo.load("bas-rb")
    with pytest.raises(ModelFileError, match="named with its prefix: zoo:bas-rbm"):
        load_model("bas-rbm")  # a zoo name given as a path
    monkeypatch.setenv("BOLTZKIT_ZOO_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(ModelFileError, match="names .*nowhere, which is not a directory"):
        load_model("zoo:bas-rbm")
    monkeypatch.delenv("BOLTZKIT_ZOO_DIR")
    monkeypatch.setattr("boltzkit.io.zoo.zoo_dir", lambda: tmp_path / "site-packages" / "zoo")
    with pytest.raises(ModelFileError, match="ship with the source checkout"):
        load_model("zoo:bas-rbm")
    assert "ship with the source checkout" in run("zoo").output


def test_zoo_rename_publishes_the_same_model_under_the_new_name_only(tiny_zoo) -> None:
    folder, card = tiny_zoo
    renamed = last_json(run("zoo", "rename", "bas-rbm", "bas-rbm-2", "--json"))
    assert (
        renamed["name"] == "bas-rbm-2"
        and renamed["test"] == card["test"]
        and renamed["log_z"] == card["log_z"]
    )
    assert renamed["sha256"] == zoo.file_sha256(folder / "bas-rbm-2.safetensors") != card["sha256"]
    assert sorted(p.name for p in folder.iterdir()) == ["bas-rbm-2.json", "bas-rbm-2.safetensors"]
    assert last_json(run("zoo", "verify", "--json"))["ok"]  # zoo_name, sha256 and the check agree
    model, metadata = zoo.load("bas-rbm-2")
    assert metadata["zoo_name"] == "bas-rbm-2" and metadata["training"]["recipe"] == "sm2008-cd1"
    (folder / "other.json").write_text("{}")  # a name that is taken, or not a name, is refused
    assert "already holds" in assert_clean_failure(run("zoo", "rename", "bas-rbm-2", "other"))
    for bad in ("a b", "a*b?", "tab\there", ".hidden"):
        assert "one word" in assert_clean_failure(run("zoo", "rename", "bas-rbm-2", bad))
    assert "no such model" in assert_clean_failure(run("zoo", "rename", "nope", "new"))


def test_zoo_rename_renames_the_references_of_other_models(tiny_zoo, tmp_path) -> None:
    """A DBN trained on zoo:bas-rbm names its bottom so in its card and file: after the bottom's
    rename both name the new name, and the zoo still verifies (the DBN's file, written again, has
    a new sha256 on its card)."""
    dbn = tmp_path / "dbn.safetensors"
    last_json(
        run("train", "--model", "dbn", "--data", "bars-and-stripes", "--bottom", "zoo:bas-rbm",
            "--hidden", "4,3", "--epochs", 2, "--batch-size", 4, "--out", dbn, "--json")
    )  # fmt: skip
    last_json(
        run("zoo", "add", "bas-dbn", dbn, "--data", "bars-and-stripes", "--test-data", "bars-and-stripes",
            "--paper-source", "none", "--json")
    )  # fmt: skip
    assert "zoo:bas-rbm" in json.dumps(zoo.read_card("bas-dbn"))
    run("zoo", "rename", "bas-rbm", "bas-rbm-2", "--json")
    card, (_, metadata) = zoo.read_card("bas-dbn"), zoo.load("bas-dbn")
    for text in (json.dumps(card), json.dumps(metadata)):
        assert "zoo:bas-rbm-2" in text and 'zoo:bas-rbm"' not in text and "zoo:bas-rbm " not in text
    assert last_json(run("zoo", "verify", "--json"))["ok"]


def test_zoo_add_verify_and_outputs_refuse_what_they_cannot_do(tiny_zoo, tmp_path) -> None:
    """A mixture is not published (no deep AttributeError); a bad name, and a name the zoo has
    without --force, are refused before any measuring; ``zoo:NAME`` is not an output path; verify
    goes on past a card whose check cannot be recomputed (and names it), and flags a card whose own
    name is another."""
    folder, _ = tiny_zoo
    mixture = tmp_path / "mix.safetensors"
    last_json(run("train", "--data", "bars-and-stripes", "--model", "mixture", "--components", 3,
                  "--epochs", 2, "--out", mixture, "--json"))  # fmt: skip
    add = ("--data", "bars-and-stripes", "--test-data", "bars-and-stripes", "--paper-source", "none")
    assert "Boltzmann machines and DBNs" in assert_clean_failure(run("zoo", "add", "mix", mixture, *add))
    assert "one word" in assert_clean_failure(
        run("zoo", "add", "bad name", tmp_path / "missing.safetensors", *add)
    )
    out = tmp_path / "zoo:new.safetensors"
    assert "zoo add" in assert_clean_failure(
        run("train", "--data", "bars-and-stripes", "--out", "zoo:new.safetensors")
    )
    assert "zoo add" in assert_clean_failure(run("convert", "zoo:bas-rbm", "zoo:copy.npz"))
    assert not out.exists() and not Path("zoo:new.safetensors").exists() and not Path("zoo:copy.npz").exists()
    shutil.copy(folder / "bas-rbm.safetensors", tmp_path / "again.safetensors")
    card_before = (folder / "bas-rbm.json").read_bytes()
    again = tmp_path / "again.safetensors"
    assert "--force" in assert_clean_failure(run("zoo", "add", "bas-rbm", again, *add))
    assert (folder / "bas-rbm.json").read_bytes() == card_before  # nothing measured or replaced
    model_before = (folder / "bas-rbm.safetensors").read_bytes()
    last_json(run("zoo", "add", "bas-rbm", "zoo:bas-rbm", *add, "--force", "--json"))  # in place
    assert (folder / "bas-rbm.safetensors").read_bytes() == model_before
    last_json(run("zoo", "add", "bas-rbm-b", tmp_path / "again.safetensors", *add, "--json"))
    card = json.loads((folder / "bas-rbm.json").read_text())
    (folder / "bas-rbm.json").write_text(json.dumps({**card, "test_data": str(tmp_path / "nothing.npy")}))
    renamed = json.loads((folder / "bas-rbm-b.json").read_text())
    (folder / "bas-rbm-b.json").write_text(json.dumps({**renamed, "name": "other"}))
    result = run("zoo", "verify", "--json")
    assert result.exit_code == 1
    models = {m["name"]: m for m in json.loads(result.stdout.strip().splitlines()[-1])["models"]}
    assert "not recomputed" in " ".join(models["bas-rbm"]["problems"])
    assert "the card names the model 'other'" in " ".join(models["bas-rbm-b"]["problems"])
    (folder / "bas-rbm-b.json").write_text(
        json.dumps({**renamed, "log_z": {**renamed["log_z"], "log_z": float("nan")}})
    )
    assert "finite" in assert_clean_failure(run("zoo", "show", "bas-rbm-b"))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{bad", "the zoo card is not valid JSON"),
        ("[1, 2]", "a list, not a JSON object"),
        ("{}", "no 'name'"),
        ("BAD_TEST", "test.mean_log_prob is 'x', not a number"),
    ],
)
def test_a_malformed_card_is_named_and_the_rest_of_the_zoo_still_lists(tiny_zoo, text, problem) -> None:
    folder, card = tiny_zoo
    shutil.copy(folder / "bas-rbm.safetensors", folder / "bad.safetensors")
    if text == "BAD_TEST":
        text = json.dumps({**card, "name": "bad", "test": {**card["test"], "mean_log_prob": "x"}})
    (folder / "bad.json").write_text(text)
    for args in (("zoo",), ("zoo", "list")):
        result = run(*args, "--json")
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        rows = {row["name"]: row for row in json.loads(result.stdout.strip().splitlines()[-1])["models"]}
        assert problem in rows["bad"]["problem"] and rows["bas-rbm"]["kind"] == "rbm"
    assert problem in assert_clean_failure(run("zoo", "show", "bad"))
    assert "Missing argument" in assert_clean_failure(run("zoo", "show"), code=2)  # click's usage error
    result = run("zoo", "verify", "--quick", "--json")
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.exit_code == 1 and [m["ok"] for m in record["models"]] == [False, True]
    with pytest.raises(ModelFileError, match="zoo card"):
        zoo.read_card("bad")


# --------------------------------------------------------------------------- the zoo's models
ZOO_NAMES = zoo.names()


@pytest.mark.mnist
@pytest.mark.skipif(not mnist_available(), reason="needs the binarized MNIST files (BOLTZKIT_DATA_DIR)")
@pytest.mark.parametrize("name", ZOO_NAMES or ["(empty)"])
def test_each_zoo_card_matches_its_file(name: str) -> None:
    if name == "(empty)":
        pytest.skip("the zoo is empty")
    assert zoo.verify_file(name) == []
    card = zoo.read_card(name)
    assert card["dtype"] == "float32" and card["log_z"]["log_z"] is not None
    check = recompute_check(name)
    assert check["within"], check
    assert card["test"]["mean_log_prob"] is not None and card["train"]["mean_log_prob"] is not None


def test_the_zoo_stays_small() -> None:
    total = sum(p.stat().st_size for p in zoo.zoo_dir().glob("*")) if zoo.zoo_dir().is_dir() else 0
    assert total <= 60_000_000, f"the zoo holds {total:,} bytes; the issue allows 60 MB"


#: The paper-grade models issue's names for the zoo and its targets for them: the least test mean
#: log-probability (a lower bound for DBNs and the BM), and the model each must lie above.
PAPER_NAMES = {
    "sm2008-cd1-25": (-153.6, None),
    "sm2008-cd3-25": (-145.0, None),
    "sm2008-cd1-20": (-166.5, None),
    "sm2008-cd1-500": (-128.5, None),
    "sm2008-cd3-500": (-108.5, "sm2008-cd1-500"),
    "sm2008-cd25-500": (-88.3, "sm2008-cd3-500"),
    "sm2008-dbn-cd1": (-102.6, "sm2008-cd1-500"),
    "sm2008-dbn-cd3": (-100.3, "sm2008-cd3-500"),
    "sm2008-dbn-cd25": (-88.2, None),
    "s2008-rbm-500": (-88.9, None),
    "s2008-srbm-500": (-88.1, None),
    "s2008-bm-500": (-87.6, None),
}


@pytest.mark.skipif(not ZOO_NAMES, reason="the zoo is empty")
def test_the_zoo_holds_the_paper_named_models_and_their_cards_meet_the_targets() -> None:
    """Under the issue's names the zoo holds models whose cards meet its targets with a reliable
    estimate (CD3(500) and CD25(500) each 10 nats above the one before, DBN-CD1 and DBN-CD3 above
    their RBMs): a rename or a replaced file that breaks that shows here, not in a reader's check."""
    missing = sorted(set(PAPER_NAMES) - set(ZOO_NAMES))
    assert not missing, f"the zoo lacks {missing}"
    for name, (target, above) in PAPER_NAMES.items():
        card = zoo.read_card(name)
        assert card["log_z"]["method"] == "exact" or card["log_z"]["reliable"] is True, name
        test = card["test"]["mean_log_prob"]
        assert test >= target, f"{name}: {test:.2f} < {target}"
        if above is not None:
            margin = 10.0 if name.startswith("sm2008-cd") else 0.0
            below = zoo.read_card(above)["test"]["mean_log_prob"]
            assert test > below + margin, f"{name}: {test:.2f} not {margin} above {above}'s {below:.2f}"


@pytest.mark.mnist
@pytest.mark.skipif(not mnist_available(), reason="needs the binarized MNIST files (BOLTZKIT_DATA_DIR)")
@pytest.mark.parametrize(
    "name", [n for n in ZOO_NAMES if zoo.read_card(n)["kind"] in ("rbm", "srbm")] or ["(none)"]
)
def test_an_independent_implementation_reads_the_zoo_files_as_the_cards_say(name: str) -> None:
    """The arrays read by safetensors' numpy loader alone and log p*(v) = b'v + v'Lv / 2 +
    sum_j softplus(c_j + (v W)_j) written here in numpy (S2 Eqs. 44-46, the hidden units summed
    out): the check images' mean log-probability with the card's log Z is the card's."""
    if name == "(none)":
        pytest.skip("no RBM or SRBM in the zoo")
    from safetensors.numpy import load_file

    from boltzkit.data import load_dataset

    card = zoo.read_card(name)
    arrays = {k: v.astype(np.float64) for k, v in load_file(zoo.zoo_dir() / card["file"]).items()}
    stride = int(card["check"]["images"].split("::")[1].rstrip("]"))
    v = load_dataset(card["test_data"], split="test").x.numpy().astype(np.float64)[::stride]
    log_p_star = v @ arrays["vbias"] + np.logaddexp(0.0, arrays["hbias"] + v @ arrays["W"]).sum(1)
    if "L" in arrays:
        log_p_star += 0.5 * np.einsum("ni,ij,nj->n", v, arrays["L"], v)
    mean = float(log_p_star.mean()) - float(card["log_z"]["log_z"])
    assert v.shape[0] == card["check"]["n"] and mean == pytest.approx(
        card["check"]["mean_log_prob"], abs=1e-3
    )


def test_zoo_add_refuses_a_model_of_other_units_in_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BOLTZKIT_ZOO_DIR", str(tmp_path / "zoo"))
    model = tmp_path / "potts.safetensors"
    save_model(unit_rbm("categorical:3", 16, 2, seed=0), model)
    message = assert_clean_failure(
        run("zoo", "add", "potts", model, "--data", "bars-and-stripes", "--test-data", "bars-and-stripes")
    )
    assert "binary units" in message and "categorical:3" in message
