"""Reading binary data matrices from files.

Supported formats, one sample a row:

=========== ==============================================================================
extension   contents
=========== ==============================================================================
``.npy``    one 2-D array (``numpy.save``; pickled object arrays are refused)
``.npz``    one array, or several of which one is named (``file.npz:NAME``) or, when they are
            named ``train``, ``valid``, ``test``, picked by the split (:func:`split_key`)
``.mat``    MATLAB file read by :func:`scipy.io.loadmat`; the variable ``X`` unless named
``.amat``   text, whitespace-separated values (the binarized MNIST distribution format)
``.txt``    text, whitespace-separated values; lines starting with ``#`` are comments
``.csv``    text, comma-separated values (a file without a comma: ``;``-, else whitespace-
            separated, as some spreadsheets and ``numpy.savetxt`` write it); lines starting
            with ``#`` are comments, and a first
            line of column names (no number in it, or pandas' default names ``0,1,...,d-1``)
            is a header and skipped; a header whose first name is empty or a name before
            ``0,1,...`` (pandas' ``to_csv`` with its index) marks the first column as row
            labels, which are dropped (numbers or words); so does a first column of words
            under a header of names. ``0`` or ``0,1`` alone reads as a sample too: it is
            taken as names only above rows that are not binary
=========== ==============================================================================

Text files of single-character 0/1 tokens separated by exactly one separator (the layout of
the canonical ``binarized_mnist_*.amat`` files) are parsed by a vectorized fast path: about
0.3 s for the 78 MB training file, against 0.55 s for ``numpy.loadtxt(dtype=uint8)`` and
5.5 s for ``numpy.loadtxt`` with floats (numpy 2.4, one core). Any other layout falls back to
:func:`numpy.loadtxt`.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import itertools
import os
import warnings
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from boltzkit.data.dataset import as_uint8, check_binary
from boltzkit.data.fasta import is_fasta
from boltzkit.errors import DataError, warn

__all__ = [
    "FILE_EXTENSIONS",
    "FILE_SPLITS",
    "content_sha256",
    "load_binary_file",
    "read_matrix",
    "read_text_matrix",
    "file_splits",
    "lone_split_name",
    "split_key",
    "split_path_and_key",
]

#: File extensions :func:`load_binary_file` understands.
FILE_EXTENSIONS = (".npy", ".npz", ".mat", ".amat", ".txt", ".csv")

#: The splits a data file may hold, as arrays of those names in an ``.npz`` or ``.mat`` file.
FILE_SPLITS = ("train", "valid", "test")

_TEXT_SEPARATORS = {".amat": " ", ".txt": " ", ".csv": ","}


def content_sha256(x: np.ndarray) -> str:
    """Format-independent checksum of a 0/1 matrix.

    Parameters
    ----------
    x
        0/1 array of shape ``(n, d)`` (any integer, bool or float dtype).

    Returns
    -------
    str
        Hex sha256 of ``numpy.packbits(x.astype(uint8), axis=1).tobytes()``, the content checksum
        listed for binarized MNIST in ``data/README.md``.
    """
    packed = np.packbits(np.asarray(x).astype(np.uint8, copy=False), axis=1)
    return hashlib.sha256(packed.tobytes()).hexdigest()


def split_path_and_key(spec: str | os.PathLike[str]) -> tuple[Path, str | None]:
    """Split ``"file.npz:NAME"`` / ``"file.mat:NAME"`` into the path and the array name.

    A path that exists as given is never split (so Windows drive letters and file names holding
    a colon still work).

    Returns
    -------
    (Path, str or None)
        The file and the array name, ``None`` when no name was given.
    """
    text = os.fspath(spec)
    path = Path(text)
    if path.exists() or ":" not in text:
        return path, None
    head, _, key = text.rpartition(":")
    if Path(head).suffix.lower() in (".npz", ".mat") and key:
        return Path(head), key
    return path, None


def split_key(path: str | os.PathLike[str], split: str) -> str | None:
    """The array holding ``split`` in an archive whose arrays are named by split.

    An ``.npz`` or ``.mat`` file of several arrays among which some are named ``train``,
    ``valid`` or ``test`` (:data:`FILE_SPLITS`) holds those splits, one an array.

    Parameters
    ----------
    path
        The data file (without a ``:NAME`` suffix).
    split
        ``"train"``, ``"valid"`` or ``"test"``.

    Returns
    -------
    str or None
        ``split`` when the file holds an array of that name among split-named ones; ``None``
        for a file without splits (one array, arrays of other names, a text file, a file that
        cannot be listed: :func:`read_matrix` reads or refuses it as before).

    Raises
    ------
    DataError
        The file holds split-named arrays but not ``split``.
    """
    path = Path(path)
    splits = file_splits(path)
    if not splits:
        return None
    if split in splits:
        return split
    raise DataError(
        f"{path}: the file holds the splits {', '.join(splits)} but no {split!r} array",
        got=sorted(_archive_names(path) or []),
        expected=" or ".join(repr(name) for name in splits),
        hint=f"give the {split} data as a file of its own, or name an array after a colon, "
        f"e.g. '{path}:{splits[0]}'.",
    )


def _archive_names(path: Path) -> list[str] | None:
    """The array names of an ``.npz`` or ``.mat`` file (``None``: another file, or unreadable)."""
    ext = path.suffix.lower()
    if ext not in (".npz", ".mat") or not path.is_file():
        return None
    try:
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                return list(archive.files)
        import scipy.io

        return [name for name, _, _ in scipy.io.whosmat(path) if not name.startswith("__")]
    except Exception:  # an unreadable file is reported by read_matrix
        return None


def file_splits(path: str | os.PathLike[str]) -> list[str]:
    """The splits (:data:`FILE_SPLITS`, in that order) that an archive of several arrays holds as
    arrays named by split; empty for a file without splits (see :func:`split_key`)."""
    names = _archive_names(Path(path)) or []
    return [name for name in FILE_SPLITS if name in names] if len(names) >= 2 else []


def lone_split_name(path: str | os.PathLike[str]) -> str | None:
    """The name of an archive's one array when it is a split's (``train``, ``valid`` or
    ``test``), else ``None``: such a file holds no splits (:func:`file_splits`), yet its name says
    which split its rows are, so a caller that takes it as another split warns."""
    names = _archive_names(Path(path)) or []
    return names[0] if len(names) == 1 and names[0] in FILE_SPLITS else None


def _parse_01_fixed(raw: bytes, sep: str) -> np.ndarray | None:
    """Vectorized parse of ``"d<sep>d<sep>...d\\n"`` lines, each ``d`` a single 0 or 1.

    Returns ``None`` (caller falls back to a general parser) when the bytes are laid out in any
    other way: other tokens, several separators, ragged lines, ``\\r\\n`` line ends.
    """
    if not raw.endswith(b"\n"):
        raw = raw + b"\n"
    line_len = raw.find(b"\n") + 1
    if line_len < 2 or line_len % 2 != 0 or len(raw) % line_len != 0:
        return None
    grid = np.frombuffer(raw, dtype=np.uint8).reshape(-1, line_len)
    digits = grid[:, 0::2]
    # '0' is 48 and '1' is 49; only those two bytes satisfy (b | 1) == 49.
    if not bool(((digits | 1) == 49).all()):
        return None
    if not bool((grid[:, 1 : line_len - 1 : 2] == ord(sep)).all()):
        return None
    if not bool((grid[:, -1] == ord("\n")).all()):
        return None
    return digits - np.uint8(48)


def read_text_matrix(path: str | os.PathLike[str], *, sep: str = " ") -> np.ndarray:
    """Read a text matrix (``.amat``, ``.txt``, ``.csv``), one row a line.

    Parameters
    ----------
    path
        The file.
    sep
        ``" "`` for whitespace-separated values (any run of spaces or tabs), ``","`` for CSV: a
        file whose values hold no comma is read with ``";"`` when one separates them, else with
        whitespace (:func:`_csv_separator`).

    Returns
    -------
    numpy.ndarray
        Shape ``(n_rows, n_columns)``; ``uint8`` when every value is a small non-negative integer,
        else float64. Not yet checked to be binary (see :func:`~boltzkit.data.dataset.check_binary`).

    Raises
    ------
    DataError
        Empty file, a file whose only line was taken as column names, unparsable token (with its
        row and column), rows of different lengths.
    """
    path = Path(path)
    raw = path.read_bytes()
    source: Path | io.StringIO = path
    if raw.startswith(codecs.BOM_UTF8):  # as spreadsheet programs write UTF-8 CSV
        raw = raw[len(codecs.BOM_UTF8) :]
        source = io.StringIO(raw.decode("utf-8", errors="replace"))
    if not raw.strip():
        raise DataError(f"{path}: file is empty", expected="one sample a line")
    if sep == ",":
        sep = _csv_separator(raw)
    fast = _parse_01_fixed(raw, sep)
    if fast is not None:
        if fast.shape[1] == 2 and fast.shape[0] > 1 and np.array_equal(fast[0], [0, 1]):
            _kept_as_sample(path, fast)
        return fast
    delimiter = None if sep == " " else sep
    lines = raw.decode("utf-8", errors="replace").splitlines()
    header = _header(lines, delimiter)
    header_rows = header.skip
    if header_rows and not any(_content(line) for line in lines[header_rows:]):
        names = _content(lines[header_rows - 1])
        separator = "whitespace" if delimiter is None else repr(delimiter)
        raise DataError(
            f"{path}: no data rows: the file's only line was taken as column names",
            got=repr(names if len(names) <= 60 else names[:57] + "..."),
            expected="one sample a line (below an optional line of column names)",
            hint=f"a sample is numbers separated by {separator}; add the data rows, or check that "
            "the file is the one meant.",
        )
    # row labels are left unread (they may be words): every column but the first
    columns = None
    if header.labelled:
        data_line = next(_content(line) for line in lines[header_rows:] if _content(line))
        columns = range(1, len(_tokens(data_line, delimiter)))
    try:
        with warnings.catch_warnings():
            # A file of comments only: loadtxt warns and returns an empty array; check_binary
            # reports it as empty.
            warnings.simplefilter("ignore", UserWarning)
            read = partial(
                np.loadtxt, source, delimiter=delimiter, ndmin=2, skiprows=header_rows, usecols=columns
            )
            try:
                values = read(dtype=np.uint8)
            except ValueError:
                if isinstance(source, io.StringIO):
                    source.seek(0)
                values = read(dtype=np.float64)
    except ValueError as err:
        where = _first_bad_token(lines, delimiter, header_rows, labelled=header.labelled)
        raise DataError(
            f"{path}: could not parse the text file",
            got=where or str(err).split(";")[0],
            expected=f"numbers separated by {'whitespace' if delimiter is None else repr(delimiter)}, "
            "the same count on every line (one header line of column names is allowed)",
            hint="lines and columns count from 1; lines starting with '#' are comments.",
        ) from err
    binary = _is_binary(values)
    if header.tentative and values.shape[0] > 1 and np.array_equal(values[0], np.arange(values.shape[1])):
        rest = values[1:]
        if not _is_binary(rest):  # pandas' names above rows that are not binary
            values, header = np.ascontiguousarray(rest), _Header(numbered=True)
            binary = False
        elif values.shape[1] == 2:  # (a first 0 of one binary column is too common to be said)
            _kept_as_sample(path, values)
    if header.numbered and not header.labelled and values.size and not binary:
        # no binary row reads 0, 1, 2, ...; a row of other data may, so say what was taken as names
        warn(
            f"{path}: the first line, 0 to {values.shape[1] - 1} in order, was read as column names "
            "(pandas' default) and skipped; if it is a sample, start the file with a line of names",
        )
    return values


def _csv_separator(raw: bytes) -> str:
    """The separator of a ``.csv`` file's values: ``","`` when a line (comments aside) holds a
    comma, else ``";"`` when one holds a semicolon, else ``" "`` (whitespace, as ``.txt``; one
    column reads alike with any of them). Stops at the first comma, so a CSV costs one line."""
    semicolon = False
    for line in io.BytesIO(raw):
        content = line.split(b"#", 1)[0]
        if b"," in content:
            return ","
        semicolon = semicolon or b";" in content
    return ";" if semicolon else " "


def _kept_as_sample(path: Path, values: np.ndarray) -> None:
    """Say that a first row ``0, 1`` of two columns above binary rows, which may be pandas' default
    column names, was kept as a sample."""
    warn(
        f"{path}: the first line, 0 to {values.shape[1] - 1} in order, reads as pandas' default column "
        "names but also as a binary sample, and was kept as a sample; if it is a header, drop it (or "
        "write the file with other column names)",
    )


def _content(line: str) -> str:
    """A text line without its comment and surrounding blanks."""
    return line.split("#", 1)[0].strip()


def _is_binary(values: np.ndarray) -> bool:
    return bool(((values == 0) | (values == 1)).all())


def _tokens(line: str, delimiter: str | None) -> list[str]:
    return [token.strip() for token in line.split(delimiter)]


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class _Header:
    """What leads a text matrix: ``skip`` lines (comments, blanks and a header line), whether the
    header marks the first column as row labels, whether its names were pandas' numbers, and
    whether the first line may be pandas' names of one or two columns (``tentative``: it reads as
    a row too, and is taken as names only where the rows below are not binary)."""

    skip: int = 0
    labelled: bool = False
    numbered: bool = False
    tentative: bool = False


def _first_tokens(lines: list[str], rows: list[int], delimiter: str | None) -> list[str]:
    """The first token of each of ``rows`` (comments cut off)."""
    return [_content(lines[i]).split(delimiter, 1)[0].strip() for i in rows]


def _is_integer(token: str) -> bool:
    """A whole number written as digits, signed or not (``"7"``, ``"-2"``; not ``"7.0"``)."""
    digits = token.strip().removeprefix("-").removeprefix("+")
    return digits.isascii() and digits.isdigit()


def _numbered(names: list[str]) -> bool:
    return bool(names) and names == [str(i) for i in range(len(names))]


def _header(lines: list[str], delimiter: str | None) -> _Header:
    """The lines before the data: comments and blank lines, then one header line of column names,
    as spreadsheets and pandas write it: a line none of whose tokens is a number, or pandas'
    default names, the integers ``0, 1, ..., d - 1`` in order (``DataFrame(x).to_csv(...)``; at
    least three of them, since no binary row reads so, unless the names mark row labels; one or
    two are ``tentative``).

    The first column holds row labels, not values, when the header says so: pandas' unnamed index
    is an empty first name in a CSV file before column names (words, or its columns' numbers,
    rising: a subset keeps them; a line of values whose first one is missing is data), a named
    one a name before ``0, 1, ...``; in a whitespace-separated file (where the empty name leaves
    no token) a header of one name fewer than the data lines, whose first values are then distinct
    whole numbers or words (a ragged file's are not, as a rule); and under a header of names, a
    first column of words. No header:
    ``_Header()`` (comments alone are skipped by :func:`numpy.loadtxt` itself).
    """
    content = [i for i, line in enumerate(lines) if line.strip() and not line.strip().startswith("#")]
    if not content:
        return _Header()
    first = content[0]
    tokens = _tokens(_content(lines[first]), delimiter)
    if len(content) < 2:
        return _Header(first + 1) if not any(_is_number(t) for t in tokens) else _Header()
    width = len(_tokens(_content(lines[content[1]]), delimiter))
    after = tokens[1:]  # pandas' names of columns: words, or their numbers (a subset keeps them) rising
    rising = all(_is_integer(t) for t in after) and all(int(a) < int(b) for a, b in itertools.pairwise(after))
    names_after = rising or not any(_is_number(t) for t in after)
    if len(tokens) >= 2 and tokens[0] == "" and width == len(tokens) and names_after:
        # pandas' unnamed index (CSV): an empty name before column names (a first line of values
        # whose first one is missing is data, refused where that value is)
        return _Header(first + 1, labelled=True, numbered=_numbered(tokens[1:]))
    if len(tokens) >= 2 and not _is_number(tokens[0]) and _numbered(tokens[1:]) and width == len(tokens):
        return _Header(first + 1, labelled=True, numbered=True)  # a named index, then 0, 1, ...
    names_only = not any(_is_number(t) for t in tokens)
    if not (_numbered(tokens) or names_only):
        return _Header()  # a first line of data (its rows' first values are not read twice)
    labels = _first_tokens(lines, content[1:], delimiter)
    # row labels as pandas writes them: distinct, and whole numbers or words (a first column of
    # real values below a short first line of data is no column of labels)
    label_like = all(_is_integer(t) for t in labels) or not any(_is_number(t) for t in labels)
    short = len(tokens) == width - 1 and len(set(labels)) == len(labels) and label_like
    if _numbered(tokens):
        if short or len(tokens) >= 3:
            return _Header(first + 1, labelled=short, numbered=not short)
        return _Header(tentative=len(tokens) == width)
    words = len(tokens) == width and not any(_is_number(t) for t in labels)
    return _Header(first + 1, labelled=short or words)


def _first_bad_token(
    lines: list[str], delimiter: str | None, skip: int, *, labelled: bool = False
) -> str | None:
    """Where parsing fails: the first token that is not a number (row labels aside), or the first
    line whose count of values differs from the first data line's, as ``"line L, column C: 'token'"``."""
    width = None
    for number, line in enumerate(lines[skip:], start=skip + 1):
        stripped = _content(line)
        if not stripped:
            continue
        tokens = _tokens(stripped, delimiter)
        for column, token in enumerate(tokens, start=1):
            if not _is_number(token) and not (labelled and column == 1):
                return f"line {number}, column {column}: {token!r} is not a number"
        if width is None:
            width = len(tokens)
        elif len(tokens) != width:
            return f"line {number} has {len(tokens)} values where the lines above have {width}"
    return None


def _pick_named(
    arrays: dict[str, np.ndarray], key: str | None, path: Path, default: str | None
) -> np.ndarray:
    names = sorted(arrays)
    if key is not None:
        if key not in arrays:
            raise DataError(f"{path}: no array named {key!r}", got=key, expected=f"one of {names}")
        return arrays[key]
    if default is not None and default in arrays:
        return arrays[default]
    if len(names) == 1:
        return arrays[names[0]]
    if not names:
        raise DataError(
            f"{path}: the file holds no arrays",
            expected="one array, one sample a row (or several, one of them named)",
        )
    raise DataError(
        f"{path}: the file holds several arrays and none was named",
        got=names if names else "no arrays",
        expected="exactly one array, or a name",
        hint=f"name the array after a colon, e.g. '{path}:{names[0] if names else 'X'}'.",
    )


def read_matrix(path: str | os.PathLike[str], *, key: str | None = None) -> np.ndarray:
    """Read the raw array stored in a data file (no binary check).

    Parameters
    ----------
    path
        A file with one of the extensions in :data:`FILE_EXTENSIONS`.
    key
        Name of the array in an ``.npz`` or ``.mat`` file; needed when it holds several
        (``.mat`` files default to ``X``, as in the binarized MNIST copies).

    Returns
    -------
    numpy.ndarray
        The stored array, as stored (any shape and dtype).

    Raises
    ------
    DataError
        Missing file, unsupported extension, unreadable content, ambiguous or missing array name.
    """
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in FILE_EXTENSIONS:
        raise DataError(
            f"{path}: unsupported data file type",
            got=ext or "no extension",
            expected=", ".join(FILE_EXTENSIONS),
            hint="aligned sequences (FASTA) are categories: give --alphabet protein, dna, rna or the "
            "letters (train: it implies --visible categorical:Q)."
            if is_fasta(path)
            else None,
        )
    if not path.is_file():
        raise DataError(
            "data file not found",
            got=str(path),
            expected="an existing file",
            hint="check the path (relative paths are taken from the current directory).",
        )
    if key is not None and ext not in (".npz", ".mat"):
        raise DataError(f"{path}: only .npz and .mat files hold named arrays", got=f"array name {key!r}")
    if ext in _TEXT_SEPARATORS:
        return read_text_matrix(path, sep=_TEXT_SEPARATORS[ext])
    try:
        if ext == ".npy":
            return np.load(path, allow_pickle=False)
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
            return _pick_named(arrays, key, path, default=None)
        import scipy.io

        mat = scipy.io.loadmat(path)
        arrays = {name: value for name, value in mat.items() if not name.startswith("__")}
        return _pick_named(arrays, key, path, default="X")
    except DataError:
        raise
    except Exception as err:  # numpy / scipy raise many types for corrupt files
        raise DataError(
            f"{path}: could not read the {ext} file",
            got=f"{type(err).__name__}: {err}",
            hint="check that the file is complete and of the type its extension says.",
        ) from err


def load_binary_file(
    path: str | os.PathLike[str],
    *,
    key: str | None = None,
    n_visible: int | None = None,
) -> np.ndarray:
    """Read and validate a user data file of 0/1 rows (or +-1 spins, read as ``(s + 1) / 2``).

    Parameters
    ----------
    path
        ``.npy``, ``.npz``, ``.mat``, ``.amat``, ``.txt`` or ``.csv`` file; ``"file.npz:NAME"``
        names an array inside an archive.
    key
        Array name inside an ``.npz`` / ``.mat`` (overrides a name given in ``path``).
    n_visible
        When given, the required number of columns.

    Returns
    -------
    numpy.ndarray
        ``uint8`` array of shape ``(n_samples, n_visible)`` with values 0 and 1.

    Raises
    ------
    DataError
        See :func:`read_matrix` and :func:`~boltzkit.data.dataset.check_binary`.
    """
    file, named = split_path_and_key(path)
    key = key if key is not None else named
    array = read_matrix(file, key=key)
    source = str(file) if key is None else f"{file}:{key}"
    bits = spins_to_bits(array)
    if bits is not array:
        warn(
            f"{source} holds +-1 spins: they are read as the 0/1 bits (s + 1) / 2, as an Ising "
            "model's states are",
        )
    return as_uint8(check_binary(bits, source=source, n_visible=n_visible))


def spins_to_bits(array: np.ndarray) -> np.ndarray:
    """An array of +-1 spins (every value -1 or +1, at least one -1: states of an Ising model, as
    ``boltzkit sample`` writes them for one) as 0/1 bits ``(s + 1) / 2``; any other array as it is."""
    a = np.asarray(array)
    if a.dtype.kind in "iuf" and a.size and bool((a == -1).any()) and bool(np.isin(a, (-1, 1)).all()):
        return ((a + 1) // 2).astype(np.uint8)
    return a
