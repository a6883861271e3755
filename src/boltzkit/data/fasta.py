"""Aligned sequences in FASTA format, as category indices for categorical (Potts) units.

A multiple sequence alignment in FASTA (``.fasta``, ``.fa``, ``.faa``, ``.afa``, ``.aln``) holds
records of a header line ``>name`` and sequence lines, all sequences of one length. Each letter
becomes its index in an *alphabet*; the alphabet's last letter is the gap:

========== ============================ ====
name       letters                      Q
========== ============================ ====
protein    ``ACDEFGHIKLMNPQRSTVWY-``    21
dna        ``ACGT-``                    5
rna        ``ACGU-``                    5
========== ============================ ====

A string of letters is also an alphabet (its own Q). Letters are read case-insensitively and ``.``
is a gap (the insert columns of A2M files are kept as aligned). Ambiguity codes that stand for no
single residue (``X B Z J U O`` for proteins, ``N`` and the IUPAC codes for nucleotides) become
gaps, as in protein-family models (e.g. Tubiana, Cocco & Monasson 2019); any other character is an
error that names the record and column.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from boltzkit.atomic import atomic_open
from boltzkit.errors import DataError

#: The named alphabets; the last letter is the gap.
ALPHABETS = {"protein": "ACDEFGHIKLMNPQRSTVWY-", "dna": "ACGT-", "rna": "ACGU-"}

#: Letters read as a gap, per named alphabet (besides ``-`` and ``.``).
_AS_GAP = {"protein": "XBZJUO*", "dna": "NRYSWKMBDHV", "rna": "NRYSWKMBDHV"}

#: File extensions read as FASTA.
FASTA_EXTENSIONS = (".fasta", ".fa", ".faa", ".fna", ".afa", ".aln", ".a2m")


def is_fasta(path: str | os.PathLike[str]) -> bool:
    return Path(path).suffix.lower() in FASTA_EXTENSIONS


def alphabet_letters(alphabet: str) -> str:
    """The letters of a named alphabet (``protein``, ``dna``, ``rna``) or of a string of letters."""
    text = str(alphabet).strip()
    if text.lower() in ALPHABETS:
        return ALPHABETS[text.lower()]
    letters = text.upper()
    if len(letters) < 2 or len(set(letters)) != len(letters):
        raise DataError(
            "unknown alphabet",
            got=repr(alphabet),
            expected=f"{', '.join(ALPHABETS)}, or a string of at least 2 distinct letters (e.g. ACGT-)",
        )
    return letters


def gap_codes(alphabet: str) -> str:
    """The ambiguity codes read as a gap in ``alphabet`` (a name or its letters: a model file
    records the letters, and reads the same sequences as the name did); none for other alphabets."""
    letters = alphabet_letters(alphabet)
    return next((_AS_GAP[name] for name, known in ALPHABETS.items() if known == letters), "")


def _gap_words(as_gap: str) -> str:
    """What reads as a gap, in words: ``-``, ``.`` and a named alphabet's ambiguity codes."""
    codes = as_gap[2:]
    also = f" (the ambiguity codes {' '.join(codes)} read as gaps too)" if codes else ""
    return ", '.' or '-' for gaps" + also


def read_fasta(path: str | os.PathLike[str], alphabet: str) -> tuple[np.ndarray, list[str]]:
    """The aligned sequences of a FASTA file as category indices.

    Parameters
    ----------
    path
        The FASTA file.
    alphabet
        ``protein``, ``dna``, ``rna`` or a string of letters; where the last is ``-`` or ``.`` it
        is the gap, and ``-`` and ``.`` (and, in a named alphabet, its ambiguity codes) read as it.

    Returns
    -------
    (x, names)
        ``x``: ``int16`` array of shape ``(n_sequences, length)`` with values ``0..Q-1``;
        ``names``: the header of each record.
    """
    letters = alphabet_letters(alphabet)
    gap = len(letters) - 1
    table = np.full(256, -1, dtype=np.int16)
    for i, letter in enumerate(letters):
        table[ord(letter)] = table[ord(letter.lower())] = i
    # '-' and '.' are gaps only in an alphabet with a gap symbol ('ACGT' has none: a gap there is
    # a letter outside the alphabet, not its last letter)
    as_gap = "-." + gap_codes(letters) if letters[-1] in "-." else ""
    for letter in as_gap:
        if table[ord(letter)] < 0:
            table[ord(letter)] = table[ord(letter.lower())] = gap
    p = Path(path)
    try:
        text = p.read_text(encoding="ascii", errors="strict")
    except UnicodeDecodeError as exc:
        raise DataError(f"{p}: a FASTA file holds ASCII text", got=str(exc)) from None
    names: list[str] = []
    chunks: list[list[str]] = []
    for line_no, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(";"):
            continue
        if line.startswith(">"):
            names.append(line[1:].strip())
            chunks.append([])
        elif not chunks:
            raise DataError(
                f"{p}: sequence before the first header (line {line_no})", expected="'>name' first"
            )
        else:
            chunks[-1].append(line)
    if not names:
        raise DataError(f"{p}: no FASTA records", expected="records '>name' followed by sequence lines")
    sequences = ["".join(c) for c in chunks]
    length = len(sequences[0])
    for name, seq in zip(names, sequences, strict=True):
        if len(seq) != length:
            raise DataError(
                f"{p}: the sequences are not aligned",
                got=f"{name!r} has {len(seq)} columns, the first record {length}",
                expected="sequences of one length (a multiple sequence alignment)",
            )
    if length == 0:
        raise DataError(f"{p}: the sequences are empty")
    codes = np.frombuffer("".join(sequences).encode("ascii"), dtype=np.uint8).reshape(len(sequences), length)
    x = table[codes]
    if (x < 0).any():
        row, col = (int(i) for i in np.argwhere(x < 0)[0])
        raise DataError(
            f"{p}: a letter outside the alphabet",
            got=f"{chr(codes[row, col])!r} in {names[row]!r}, column {col + 1}",
            expected=f"letters of {letters!r} (Q = {len(letters)})"
            + (_gap_words(as_gap) if as_gap else ", which has no gap (end it with '-' for one)"),
            hint="choose the alphabet with --alphabet (protein, dna, rna, or the letters themselves).",
        )
    return x, names


def write_fasta(
    path: str | os.PathLike[str], x: np.ndarray, alphabet: str, *, prefix: str = "sample"
) -> None:
    """Write category indices ``x`` (``(n, length)``) as FASTA records ``>prefix_i``, atomically."""
    letters = np.frombuffer(alphabet_letters(alphabet).encode("ascii"), dtype=np.uint8)
    idx = np.asarray(x, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= len(letters)):
        raise DataError(
            "categories out of the alphabet's range", got=f"max {idx.max()}", expected=f"< {len(letters)}"
        )
    with atomic_open(Path(path), "w") as f:
        for i, row in enumerate(letters[idx]):
            f.write(f">{prefix}_{i}\n{row.tobytes().decode('ascii')}\n")


__all__ = ["ALPHABETS", "FASTA_EXTENSIONS", "alphabet_letters", "is_fasta", "read_fasta", "write_fasta"]
