"""Aligned sequences (FASTA) as categorical data: reading, errors, and the command line from an
alignment to a trained Potts RBM, its exact log-likelihood and sampled sequences."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_cli import assert_clean_failure, last_json, run

from boltzkit.data import ALPHABETS, read_fasta, write_fasta
from boltzkit.errors import DataError
from boltzkit.io import load_model

PROTEIN = ALPHABETS["protein"]


def test_letters_map_to_their_index_and_gaps_and_ambiguity_codes_to_the_gap(tmp_path) -> None:
    path = tmp_path / "a.fasta"
    path.write_text(">one first\nACD-\nY.\n; a comment\n>two\nacdx\nwV\n")
    x, names = read_fasta(path, "protein")
    assert names == ["one first", "two"] and x.dtype == np.int16
    gap = PROTEIN.index("-")
    assert x.tolist() == [
        [0, 1, 2, gap, PROTEIN.index("Y"), gap],
        [0, 1, 2, gap, PROTEIN.index("W"), PROTEIN.index("V")],
    ]
    out = tmp_path / "b.fasta"
    write_fasta(out, x, "protein")
    assert read_fasta(out, "protein")[0].tolist() == x.tolist()
    dna, _ = read_fasta(_write(tmp_path / "d.fa", [">s", "ACGTN"]), "dna")
    assert dna.tolist() == [[0, 1, 2, 3, 4]]
    own, _ = read_fasta(_write(tmp_path / "o.fa", [">s", "abba"]), "AB")
    assert own.tolist() == [[0, 1, 1, 0]]
    # a model file records the letters, not the name: they read ambiguity codes the same way
    assert read_fasta(path, PROTEIN)[0].tolist() == x.tolist()


def _write(path, lines):  # noqa: ANN001, ANN202
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("lines", "alphabet", "message"),
    [
        ([">a", "ACD", ">b", "AC"], "protein", "not aligned"),
        ([">a", "AC1"], "protein", "outside the alphabet"),
        (["ACD"], "protein", "before the first header"),
        ([], "protein", "no FASTA records"),
        ([">a", "AC"], "AA", "unknown alphabet"),
    ],
)
def test_bad_alignments_get_a_clear_error(tmp_path, lines, alphabet, message) -> None:  # noqa: ANN001
    with pytest.raises(DataError, match=message):
        read_fasta(_write(tmp_path / "x.fasta", lines), alphabet)


def test_a_letter_outside_the_alphabet_names_what_reads_as_a_gap(tmp_path) -> None:  # noqa: ANN001
    """The error lists the ambiguity codes a named alphabet reads as gaps (``N`` for DNA), which
    the letters alone do not show."""
    with pytest.raises(DataError, match="outside the alphabet") as info:
        read_fasta(_write(tmp_path / "x.fasta", [">a", "ACGTQ", ">b", "ACGTN"]), "dna")
    assert "'Q'" in str(info.value) and "ambiguity codes N R Y" in str(info.value)
    with pytest.raises(DataError) as plain:  # letters of its own: only '-' and '.'
        read_fasta(_write(tmp_path / "y.fasta", [">a", "ABQ"]), "AB-")
    assert "ambiguity" not in str(plain.value) and "'.' or '-' for gaps" in str(plain.value)


def test_command_line_trains_on_an_alignment_and_writes_sequences(tmp_path) -> None:
    rng = np.random.default_rng(3)
    prototypes = rng.integers(0, 21, size=(2, 8))
    seqs = prototypes[rng.integers(0, 2, 300)]
    mutate = rng.random(seqs.shape) < 0.1
    seqs = np.where(mutate, rng.integers(0, 21, seqs.shape), seqs)
    family = tmp_path / "family.fasta"
    write_fasta(family, seqs, "protein")
    with family.open("a") as f:  # ambiguity codes read as gaps, in training and evaluation alike
        f.write(">ambiguous\nXBZACDEF\n")
    model = tmp_path / "potts.safetensors"
    trained = last_json(
        run("train", "--data", family, "--alphabet", "protein", "--hidden", 3, "--epochs", 3,
            "--test-data", family, "--out", model, "--json")
    )  # fmt: skip
    assert trained["visible_units"] == "categorical:21" and math.isfinite(trained["test_log_lik"])
    rbm, _ = load_model(model)
    assert rbm.alphabet == PROTEIN  # recorded, so evaluate and sample read and write letters
    scored = last_json(run("evaluate", model, "--data", family, "--json"))
    assert scored["mean_log_prob"] == pytest.approx(trained["test_log_lik"], abs=1e-6)
    out = tmp_path / "samples.fasta"
    sampled_ok = run("sample", model, "--out", out, "--sampler", "flip", "--chains", 6, "--steps", 20)
    assert sampled_ok.exit_code == 0
    sampled, names = read_fasta(out, "protein")
    assert sampled.shape == (6, 8) and names[0] == "sample_0"
    assert "alphabet" in assert_clean_failure(run("evaluate", model, "--data", family, "--alphabet", "dna"))
    assert "--alphabet" in assert_clean_failure(
        run("train", "--data", family, "--out", tmp_path / "x.safetensors", "--visible", "categorical:21")
    )
    assert "does not fit" in assert_clean_failure(
        run("train", "--data", family, "--alphabet", "protein", "--visible", "categorical:5",
            "--out", tmp_path / "y.safetensors")
    )  # fmt: skip


def test_a_gap_is_refused_by_an_alphabet_without_one(tmp_path) -> None:
    """'ACGT' has no gap symbol: a '-' is a letter outside it, not its last letter T."""
    path = _write(tmp_path / "g.fa", [">s", "ACG-T"])
    with pytest.raises(DataError, match="which has no gap"):
        read_fasta(path, "ACGT")
    assert read_fasta(path, "ACGT-")[0].tolist() == [[0, 1, 2, 4, 3]]


def test_a_model_reads_and_trains_on_its_own_letters_only(tmp_path) -> None:
    rng = np.random.default_rng(4)
    family = tmp_path / "dna.fasta"
    write_fasta(family, rng.integers(0, 5, size=(60, 6)), "dna")
    model = tmp_path / "m.safetensors"
    run("train", "--data", family, "--alphabet", "dna", "--hidden", 2, "--epochs", 2, "--out", model)
    # the same letters in another order would map every residue to another state
    for command in (
        ("evaluate", model, "--data", family, "--alphabet", "TGCA-"),
        (
            "train",
            "--data",
            family,
            "--alphabet",
            "TGCA-",
            "--init",
            model,
            "--out",
            tmp_path / "b.safetensors",
        ),
    ):
        assert "another alphabet" in assert_clean_failure(run(*command))
    assert math.isfinite(
        last_json(run("evaluate", model, "--data", family, "--alphabet", "ACGT-", "--json"))["mean_log_prob"]
    )
    # --init alone takes the model's units, letters and sizes
    further = tmp_path / "c.safetensors"
    record = last_json(
        run("train", "--data", family, "--init", model, "--epochs", 1, "--out", further, "--json")
    )
    assert record["visible_units"] == "categorical:5"
    again, _ = load_model(further)
    assert again.alphabet == ALPHABETS["dna"] and again.layer_sizes == (6, 2)


def test_a_model_of_binary_units_refuses_an_alphabet(tmp_path) -> None:
    model = tmp_path / "b.safetensors"
    run("train", "--data", "bars-and-stripes", "--hidden", 2, "--epochs", 1, "--out", model)
    for command in (
        ("evaluate", model, "--data", "bars-and-stripes", "--alphabet", "dna"),
        ("sample", model, "--alphabet", "dna", "--out", tmp_path / "s.npy"),
    ):
        assert "no categorical visible units" in assert_clean_failure(run(*command))
