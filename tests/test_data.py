"""Tests of the data layer: file readers, validation, MNIST lookup / checksums / download,
synthetic sets, transforms and the ``load_dataset`` entry point.

Everything runs on small files written to ``tmp_path``; nothing touches the network (downloads
are disabled by an autouse fixture, and the download tests replace ``urlopen``). The tests on the
real binarized MNIST are marked ``mnist`` and run only when ``BOLTZKIT_DATA_DIR`` is set.
"""

from __future__ import annotations

import io
import math
import os
import urllib.error
import warnings
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch

import boltzkit.data.mnist as mnist_module
from boltzkit.data import (
    DATASET_NAMES,
    Dataset,
    artificial_modes,
    artificial_modes_prototypes,
    artificial_modes_with_labels,
    bars_and_stripes,
    binarize,
    check_binary,
    content_sha256,
    default_cache_dir,
    derive_seed,
    extract_patches,
    load_binary_file,
    load_dataset,
    load_mnist,
    mnist_available,
    parse_spec,
)
from boltzkit.data.dataset import as_uint8
from boltzkit.data.files import read_text_matrix
from boltzkit.errors import BoltzkitError, DataError

# Read before the autouse fixture below clears the variable for the other tests.
REAL_MNIST_DIR = os.environ.get("BOLTZKIT_DATA_DIR")


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No real cache, no BOLTZKIT_DATA_DIR, no downloads, unless a test sets them."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("BOLTZKIT_DATA_DIR", raising=False)
    monkeypatch.setenv("BOLTZKIT_OFFLINE", "1")


def _random_binary(rows: int, cols: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((rows, cols)) < 0.3).astype(np.uint8)


def _write_amat(path: Path, x: np.ndarray) -> None:
    """The canonical layout: single-character tokens, one space between, '\\n' line ends."""
    path.write_text("".join(" ".join(str(int(v)) for v in row) + "\n" for row in x))


# --------------------------------------------------------------------------- file readers


def test_amat_fast_path_and_fallback_agree(tmp_path: Path) -> None:
    x = _random_binary(13, 7, seed=1)
    canonical = tmp_path / "a.amat"
    _write_amat(canonical, x)
    loose = tmp_path / "b.amat"  # extra spaces, tabs, CRLF and no final newline: general parser
    loose.write_text("\r\n".join("  " + "\t".join(str(v) for v in row) + " " for row in x))
    for path in (canonical, loose):
        got = load_binary_file(path)
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, x)


def test_mat_file_default_key_and_named_key(tmp_path: Path) -> None:
    x = _random_binary(11, 5, seed=2)
    scipy.io.savemat(tmp_path / "d.mat", {"X": x, "other": np.zeros((2, 2))})
    np.testing.assert_array_equal(load_binary_file(tmp_path / "d.mat"), x)  # "X" by default
    scipy.io.savemat(tmp_path / "e.mat", {"a": x, "b": 1 - x})
    np.testing.assert_array_equal(load_binary_file(f"{tmp_path / 'e.mat'}:b"), 1 - x)
    with pytest.raises(DataError, match="several arrays"):
        load_binary_file(tmp_path / "e.mat")


def test_npy_npz_txt_csv(tmp_path: Path) -> None:
    x = _random_binary(7, 3, seed=3)
    np.save(tmp_path / "x.npy", x.astype(np.float32))
    np.savez(tmp_path / "one.npz", data=x.astype(bool))
    np.savez(tmp_path / "two.npz", first=x, second=1 - x)
    np.savetxt(tmp_path / "x.txt", x, fmt="%d")
    (tmp_path / "x.csv").write_text(
        "# a comment line\n" + "\n".join(",".join(f"{v}.0" for v in r) for r in x)
    )
    for name in ("x.npy", "one.npz", "two.npz:first", "x.txt", "x.csv"):
        np.testing.assert_array_equal(load_binary_file(tmp_path / name), x, err_msg=name)
    np.testing.assert_array_equal(load_binary_file(tmp_path / "two.npz", key="second"), 1 - x)
    with pytest.raises(DataError, match="several arrays") as info:
        load_binary_file(tmp_path / "two.npz")
    assert "first" in str(info.value) and "second" in str(info.value)
    with pytest.raises(DataError, match="no array named 'third'"):
        load_binary_file(f"{tmp_path / 'two.npz'}:third")


def test_non_binary_value_reports_value_and_row(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_text("0 1 1\n1 0 2\n0 0 0\n")
    with pytest.raises(DataError, match="binary") as info:
        load_binary_file(tmp_path / "bad.txt")
    assert info.value.got == "value 2 at row 1, column 2 (counted from 0)"
    x = np.zeros((4, 3))
    x[3, 0] = 0.5
    np.save(tmp_path / "half.npy", x)
    with pytest.raises(DataError, match=r"value 0\.5 at row 3, column 0"):
        load_binary_file(tmp_path / "half.npy")
    x[3, 0] = np.nan
    with pytest.raises(DataError, match=r"nan at row 3"):
        check_binary(x)
    with pytest.raises(DataError, match=r"-1\.0 at row 0"):
        check_binary(np.array([[-1, 0]], dtype=np.float64))


def test_wrong_width_reports_got_and_expected(tmp_path: Path) -> None:
    np.save(tmp_path / "w.npy", np.zeros((3, 5), dtype=np.uint8))
    # check_binary reports the width it got and the one it expected (with what it is)
    with pytest.raises(DataError, match="columns") as info:
        load_binary_file(tmp_path / "w.npy", n_visible=7)
    assert info.value.got == 5 and info.value.expected == "7 (the model's visible units)"
    with pytest.raises(DataError, match="columns") as info:
        load_dataset(str(tmp_path / "w.npy"), n_visible=7)
    assert info.value.got == 5 and info.value.expected == "7 (the model's visible units)"
    with pytest.raises(DataError, match="columns") as info:
        check_binary(torch.zeros(3, 5), n_visible=7)
    assert info.value.got == 5 and info.value.expected == "7 (the model's visible units)"


def test_empty_and_malformed_inputs(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("\n\n")
    (tmp_path / "comments.csv").write_text("# nothing but a comment\n")
    np.save(tmp_path / "norows.npy", np.zeros((0, 5)))
    np.save(tmp_path / "flat.npy", np.zeros(5))
    (tmp_path / "ragged.txt").write_text("0 1 1\n1 0\n")
    (tmp_path / "header.csv").write_text("a,b\n0,1\nx,0\n")
    np.save(tmp_path / "objects.npy", np.array([[0, 1]], dtype=object), allow_pickle=True)
    (tmp_path / "x.json").write_text("[[0, 1]]")
    np.savez(tmp_path / "nothing.npz")
    cases = {
        "nothing.npz": "holds no arrays",
        "empty.txt": "empty",
        "comments.csv": "empty",
        "norows.npy": "empty",
        "flat.npy": "2-D",
        "ragged.txt": "could not parse",
        "header.csv": "line 3, column 1: 'x' is not a number",
        "objects.npy": "could not read",
        "x.json": "unsupported",
        "missing.npy": "not found",
    }
    for name, message in cases.items():
        with pytest.raises(DataError, match=message):
            load_binary_file(tmp_path / name)


def test_a_header_line_of_column_names_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "named.csv").write_text("# spins\nv0,v1,v2\n0,1,1\n1,0,0\n")
    np.testing.assert_array_equal(read_text_matrix(tmp_path / "named.csv", sep=","), [[0, 1, 1], [1, 0, 0]])
    # a first line holding numbers is data, never a header
    (tmp_path / "plain.csv").write_text("0,1,1\n1,0,0\n")
    assert read_text_matrix(tmp_path / "plain.csv", sep=",").shape == (2, 3)
    (tmp_path / "ragged.csv").write_text("v0,v1,v2\n0,1,1\n1,0\n")
    with pytest.raises(DataError, match="line 3 has 2 values where the lines above have 3"):
        read_text_matrix(tmp_path / "ragged.csv", sep=",")


def test_pandas_headers_and_index_columns_are_not_read_as_data(tmp_path: Path) -> None:
    """``pandas.DataFrame(x).to_csv(path)`` names the columns 0, 1, ..., d - 1 and writes the
    row index as an unnamed first column; ``index=False`` leaves the index out. Neither the names
    nor the labels are values (before, the names were a data row and the labels a column)."""
    from boltzkit.data import load_values

    rows = [[0, 1, 1], [1, 0, 0]]
    (tmp_path / "index.csv").write_text(",0,1,2\n0,0,1,1\n1,1,0,0\n")
    (tmp_path / "noindex.csv").write_text("0,1,2\n0,1,1\n1,0,0\n")
    (tmp_path / "named.csv").write_text(",a,b,c\n0,0,1,1\n1,1,0,0\n")
    for name in ("index.csv", "noindex.csv", "named.csv"):
        np.testing.assert_array_equal(read_text_matrix(tmp_path / name, sep=","), rows)
        np.testing.assert_array_equal(load_dataset(str(tmp_path / name)).x.numpy(), rows)
    # real values with an index: the labels 0 and 1 would pass as a column of a Gaussian model
    (tmp_path / "real.csv").write_text(",0,1\n0,0.5,-1.25\n1,2.0,3.5\n")
    np.testing.assert_array_equal(
        load_values(str(tmp_path / "real.csv"))[1].numpy(), [[0.5, -1.25], [2.0, 3.5]]
    )
    # a first line of other numbers is still data
    (tmp_path / "data.csv").write_text("0,1,1\n1,0,0\n")
    assert read_text_matrix(tmp_path / "data.csv", sep=",").shape == (2, 3)
    # whitespace-separated, pandas' empty index name leaves no token: the header is one name short
    (tmp_path / "index.txt").write_text(" 0 1 2\n0 0.5 1.5 2.5\n1 0.1 0.2 0.3\n")
    (tmp_path / "named.txt").write_text("a\tb\n0\t1\t1\n1\t0\t0\n")
    np.testing.assert_array_equal(
        load_values(str(tmp_path / "index.txt"))[1].numpy(), [[0.5, 1.5, 2.5], [0.1, 0.2, 0.3]]
    )
    np.testing.assert_array_equal(read_text_matrix(tmp_path / "named.txt"), [[1, 1], [0, 0]])
    # 0, 1, ..., d - 1 first: names for binary data (no binary row reads so); for other data a row
    # might, so skipping it is said
    (tmp_path / "levels.txt").write_text("0 1 2 3\n3 2 1 0\n1 1 1 1\n")
    with pytest.warns(UserWarning, match="read as column names"):
        assert load_values(str(tmp_path / "levels.txt"))[1].shape == (2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_dataset(str(tmp_path / "noindex.csv")).x.shape == (2, 3)


def test_pandas_row_labels_of_any_kind_and_narrow_default_headers(tmp_path: Path) -> None:
    """An empty first name marks pandas' index whatever the column names (a subset of columns keeps
    its numbers); a named index is a name before 0, 1, ...; labels may be words. Pandas' names of one
    or two columns read as a row too: taken as names above rows that are not binary (said), kept as
    a sample above binary rows (said). A ragged file whose first line is one value short is an
    error, not a header over row labels: its first values repeat, as row labels do not."""
    from boltzkit.data import load_values

    rows = [[0, 1, 1], [1, 0, 0]]
    (tmp_path / "subset.csv").write_text(",1,3,5\n0,0,1,1\n1,1,0,0\n")
    (tmp_path / "words.csv").write_text(",0,1,2\ns0,0,1,1\ns1,1,0,0\n")
    (tmp_path / "named_index.csv").write_text("id,0,1,2\n7,0,1,1\n9,1,0,0\n")
    (tmp_path / "word_index.csv").write_text("id,a,b,c\nr0,0,1,1\nr1,1,0,0\n")
    for name in ("subset.csv", "words.csv", "named_index.csv", "word_index.csv"):
        np.testing.assert_array_equal(read_text_matrix(tmp_path / name, sep=","), rows)
    (tmp_path / "gauss2.csv").write_text("0,1\n0.5,-1.5\n2.25,0.75\n")
    with pytest.warns(UserWarning, match="read as column names"):
        values = load_values(str(tmp_path / "gauss2.csv"))[1].numpy()
    np.testing.assert_array_equal(values, [[0.5, -1.5], [2.25, 0.75]])
    (tmp_path / "binary2.csv").write_text("0,1\n0,1\n1,0\n")
    with pytest.warns(UserWarning, match="kept as a sample"):
        assert read_text_matrix(tmp_path / "binary2.csv", sep=",").shape == (3, 2)
    (tmp_path / "ragged.txt").write_text("0 1\n1 0 1\n0 1 1\n1 1 0\n")
    with pytest.raises(DataError, match="line 2 has 3 values where the lines above have 2"):
        read_text_matrix(tmp_path / "ragged.txt")
    # a first line of data whose first value is missing is no pandas header: refused where it is
    # (review of 2026-12-04: a row and a column were dropped without a word), and real values below
    # a short first line are no row labels
    (tmp_path / "missing.csv").write_text(",1,0,1\n0,0,1,1\n1,1,0,0\n")
    with pytest.raises(DataError, match="line 1, column 1: '' is not a number"):
        read_text_matrix(tmp_path / "missing.csv", sep=",")
    (tmp_path / "short.txt").write_text("0 1\n0.5 -1.5 2.0\n2.25 0.75 1.0\n")
    with pytest.raises(DataError, match="line 2 has 3 values where the lines above have 2"):
        load_values(str(tmp_path / "short.txt"))


def test_one_dimensional_arrays_are_refused_for_every_unit_type(tmp_path: Path) -> None:
    """A 1-D array is one sample or one unit's values: binary and real-valued loading refuse it
    alike (real-valued loading used to read it as one column) and say how to reshape it."""
    from boltzkit.data import load_values

    np.save(tmp_path / "flat.npy", np.array([0.0, 1.0, 1.0, 0.0]))
    for load in (load_dataset, load_values):
        with pytest.raises(DataError, match="1-D") as info:
            load(str(tmp_path / "flat.npy"))
        assert "reshape(1, -1)" in str(info.value) and "reshape(-1, 1)" in str(info.value)


def test_check_binary_accepts_tensors_and_bools() -> None:
    t = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    checked = check_binary(t)
    assert checked is t  # a tensor comes back as it is: not copied, same dtype
    np.testing.assert_array_equal(as_uint8(checked), [[0, 1], [1, 1]])
    assert as_uint8(checked).dtype == np.uint8 and as_uint8(checked).flags.c_contiguous
    bools = check_binary(np.ones((2, 3), dtype=bool))
    assert isinstance(bools, torch.Tensor) and bools.dtype == torch.bool and bools.shape == (2, 3)
    assert as_uint8(bools).dtype == np.uint8
    np.testing.assert_array_equal(as_uint8(bools), np.ones((2, 3), dtype=np.uint8))
    # a NumPy array is wrapped, not copied
    a = np.array([[0, 1, 1]], dtype=np.uint8)
    wrapped = check_binary(a)
    assert wrapped.dtype == torch.uint8 and np.shares_memory(wrapped.numpy(), a)
    assert check_binary(torch.tensor([[True, False]])).dtype == torch.bool
    with pytest.raises(DataError, match="numbers"):
        check_binary(np.array([["0", "1"]]))
    with pytest.raises(DataError, match=r"value 2\.0 at row 0, column 1"):
        check_binary(torch.tensor([[0.0, 2.0]]))


def test_content_checksum_is_format_independent() -> None:
    x = _random_binary(5, 784, seed=4)
    assert content_sha256(x) == content_sha256(x.astype(np.float32)) == content_sha256(np.asfortranarray(x))
    y = x.copy()
    y[2, 100] ^= 1
    assert content_sha256(y) != content_sha256(x)


# --------------------------------------------------------------------------- MNIST lookup


@pytest.fixture()
def fake_mnist(monkeypatch: pytest.MonkeyPatch) -> dict[str, np.ndarray]:
    """Tiny stand-ins for the three splits; the expected sizes and checksums are patched to match."""
    data = {
        "train": _random_binary(7, 784, 10),
        "valid": _random_binary(3, 784, 11),
        "test": _random_binary(5, 784, 12),
    }
    monkeypatch.setattr(mnist_module, "MNIST_SIZES", {k: len(v) for k, v in data.items()})
    monkeypatch.setattr(mnist_module, "MNIST_CONTENT_SHA256", {k: content_sha256(v) for k, v in data.items()})
    return data


def _write_fake_mnist(directory: Path, data: dict[str, np.ndarray], fmt: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for split, x in data.items():
        if fmt == "amat":
            _write_amat(directory / f"binarized_mnist_{split}.amat", x)
        else:
            scipy.io.savemat(directory / f"binarized_mnist_{split}.mat", {"X": x}, do_compression=True)


@pytest.mark.parametrize("fmt", ["amat", "mat"])
def test_mnist_loads_canonical_files_from_explicit_dir(
    tmp_path: Path, fake_mnist: dict[str, np.ndarray], fmt: str
) -> None:
    _write_fake_mnist(tmp_path / "d", fake_mnist, fmt)
    assert mnist_available(tmp_path / "d")
    for split, x in fake_mnist.items():
        ds = load_dataset("mnist", split=split, data_dir=tmp_path / "d", n_visible=784)
        assert (ds.name, ds.split, ds.image_shape) == ("mnist", split, (28, 28))
        assert ds.x.dtype == torch.float32 and ds.x.shape == x.shape
        np.testing.assert_array_equal(ds.x.numpy(), x)


def test_mnist_search_order(tmp_path: Path, fake_mnist: dict[str, np.ndarray], monkeypatch) -> None:
    assert default_cache_dir() == tmp_path / "xdg-cache" / "boltzkit"
    assert not mnist_available()
    _write_fake_mnist(tmp_path / "env", fake_mnist, "mat")
    monkeypatch.setenv("BOLTZKIT_DATA_DIR", str(tmp_path / "env"))
    assert mnist_available()
    np.testing.assert_array_equal(load_mnist("test"), fake_mnist["test"])
    # An explicit directory wins over the environment; the cache is searched after it.
    swapped = {"train": fake_mnist["train"], "valid": fake_mnist["valid"], "test": 1 - fake_mnist["test"]}
    _write_fake_mnist(tmp_path / "explicit", {"test": swapped["test"]}, "amat")
    with pytest.raises(DataError, match="checksum mismatch"):
        load_mnist("test", tmp_path / "explicit")
    np.testing.assert_array_equal(load_mnist("test", tmp_path / "explicit", verify=False), swapped["test"])
    _write_fake_mnist(default_cache_dir(), {"train": fake_mnist["train"]}, "amat")
    np.testing.assert_array_equal(load_mnist("train", tmp_path / "explicit"), fake_mnist["train"])
    # a split missing from the explicit directory is looked for in the environment's next
    np.testing.assert_array_equal(load_mnist("valid", tmp_path / "explicit"), fake_mnist["valid"])
    from boltzkit.data.mnist import mnist_search_dirs

    assert mnist_search_dirs(tmp_path / "explicit") == [
        tmp_path / "explicit",
        tmp_path / "env",
        default_cache_dir(),
    ]


def test_mnist_checksum_and_shape_mismatch(tmp_path: Path, fake_mnist: dict[str, np.ndarray]) -> None:
    tampered = fake_mnist["valid"].copy()
    tampered[0, 0] ^= 1
    scipy.io.savemat(tmp_path / "binarized_mnist_valid.mat", {"X": tampered})
    with pytest.raises(DataError, match="checksum mismatch") as info:
        load_mnist("valid", tmp_path)
    assert info.value.expected == content_sha256(fake_mnist["valid"])
    _write_amat(tmp_path / "binarized_mnist_test.amat", fake_mnist["test"][:-1])
    with pytest.raises(DataError, match="wrong shape") as info:
        load_mnist("test", tmp_path)
    assert info.value.got == (4, 784) and info.value.expected == (5, 784)


def test_mnist_missing_says_where_to_put_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found") as info:
        load_dataset("mnist", split="test", data_dir=tmp_path / "nowhere")
    message = str(info.value)
    assert "binarized_mnist_test.amat" in message and "BOLTZKIT_DATA_DIR" in message
    assert str(tmp_path / "nowhere") in message and "downloads are disabled" in message
    with pytest.raises(DataError, match="unknown binarized MNIST split"):
        load_mnist("validation")


class _FakeResponse(io.BytesIO):
    def __enter__(self) -> _FakeResponse:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


def test_mnist_download_into_cache(tmp_path: Path, fake_mnist: dict[str, np.ndarray], monkeypatch) -> None:
    monkeypatch.setenv("BOLTZKIT_OFFLINE", "0")
    requested: list[str] = []

    def fake_urlopen(url: str, timeout: float) -> _FakeResponse:
        requested.append(url)
        split = url.rsplit("_", 1)[1].removesuffix(".amat")
        rows = "".join(" ".join(map(str, r)) + "\n" for r in fake_mnist[split])
        return _FakeResponse(rows.encode())

    monkeypatch.setattr(mnist_module.urllib.request, "urlopen", fake_urlopen)
    x = load_mnist("valid", tmp_path / "empty")
    np.testing.assert_array_equal(x, fake_mnist["valid"])
    assert requested == [mnist_module.MNIST_URL.format(split="valid")]
    cached = default_cache_dir() / "binarized_mnist_valid.amat"
    assert cached.is_file() and sorted(p.name for p in default_cache_dir().iterdir()) == [cached.name]
    np.testing.assert_array_equal(load_mnist("valid", tmp_path / "empty"), x)  # from the cache now
    assert len(requested) == 1


def test_mnist_download_failures_leave_nothing(tmp_path: Path, fake_mnist, monkeypatch) -> None:
    monkeypatch.setenv("BOLTZKIT_OFFLINE", "0")

    def unreachable(url: str, timeout: float) -> _FakeResponse:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(mnist_module.urllib.request, "urlopen", unreachable)
    with pytest.raises(DataError, match="download failed") as info:
        load_mnist("test", tmp_path)
    assert "no route to host" in str(info.value) and "BOLTZKIT_DATA_DIR" in str(info.value)

    wrong = "".join(" ".join(map(str, r)) + "\n" for r in 1 - fake_mnist["test"]).encode()
    monkeypatch.setattr(mnist_module.urllib.request, "urlopen", lambda url, timeout: _FakeResponse(wrong))
    with pytest.raises(DataError, match="checksum mismatch"):
        load_mnist("test", tmp_path)
    assert list(default_cache_dir().iterdir()) == []


def test_mnist_patches_from_train_plus_valid(tmp_path: Path, fake_mnist: dict[str, np.ndarray]) -> None:
    _write_fake_mnist(tmp_path, fake_mnist, "mat")
    train = load_dataset("mnist-patches", data_dir=tmp_path, seed=5)
    assert train.x.shape == (7 + 3, 16) and train.image_shape == (4, 4) and train.name == "mnist-patches"
    images = np.concatenate([fake_mnist["train"], fake_mnist["valid"]]).reshape(-1, 28, 28)
    for patch, image in zip(train.x.numpy().reshape(-1, 4, 4), images, strict=True):
        windows = np.lib.stride_tricks.sliding_window_view(image, (4, 4))
        assert (windows == patch).all(axis=(2, 3)).any()
    again = load_dataset("mnist-patches", data_dir=tmp_path, seed=5)
    assert torch.equal(again.x, train.x)
    test = load_dataset("mnist-patches:size=5", split="test", data_dir=tmp_path, seed=5)
    assert test.x.shape == (5, 25) and test.image_shape == (5, 5) and test.name == "mnist-patches:size=5"
    with pytest.raises(DataError, match="'train' or 'test'"):
        load_dataset("mnist-patches", split="valid", data_dir=tmp_path)


# --------------------------------------------------------------------------- real MNIST

_needs_mnist = pytest.mark.skipif(
    not REAL_MNIST_DIR,
    reason="binarized MNIST not configured: set BOLTZKIT_DATA_DIR to the folder holding "
    "binarized_mnist_{train,valid,test}.amat or .mat (README, 'Where the data is')",
)


@pytest.mark.mnist
@_needs_mnist
@pytest.mark.parametrize(("split", "n"), [("train", 50_000), ("valid", 10_000), ("test", 10_000)])
def test_real_mnist_shapes_and_checksums(split: str, n: int) -> None:
    assert mnist_available(REAL_MNIST_DIR)
    ds = load_dataset("mnist", split=split, data_dir=REAL_MNIST_DIR, n_visible=784)
    assert ds.x.shape == (n, 784) and ds.x.dtype == torch.float32 and ds.image_shape == (28, 28)
    x = ds.x.numpy().astype(np.uint8)
    assert content_sha256(x) == mnist_module.MNIST_CONTENT_SHA256[split]
    assert 0.05 < float(ds.x.mean()) < 0.25  # digits: mostly background


@pytest.mark.mnist
@_needs_mnist
def test_real_mnist_amat_copy_and_patches(tmp_path: Path) -> None:
    x = load_mnist("test", REAL_MNIST_DIR)
    text = np.full((x.shape[0], 2 * x.shape[1]), ord(" "), dtype=np.uint8)
    text[:, 0::2] = x + ord("0")
    text[:, -1] = ord("\n")
    (tmp_path / "binarized_mnist_test.amat").write_bytes(text.tobytes())
    np.testing.assert_array_equal(load_mnist("test", tmp_path), x)  # checksum verified on load
    patches = load_dataset("mnist-patches", data_dir=REAL_MNIST_DIR, seed=0)
    assert patches.x.shape == (60_000, 16)


# --------------------------------------------------------------------------- synthetic sets


def test_bars_and_stripes_counts_and_structure() -> None:
    full = bars_and_stripes()
    distinct = bars_and_stripes(distinct=True)
    assert full.shape == (32, 16) and distinct.shape == (30, 16)
    assert torch.unique(full, dim=0).shape[0] == 30
    assert torch.unique(distinct, dim=0).shape[0] == 30
    assert {tuple(r) for r in full.tolist()} == {tuple(r) for r in distinct.tolist()}
    images = full.reshape(-1, 4, 4)
    rows_equal = (images == images[:, :1, :]).all(dim=(1, 2))  # stripes: every row the same
    cols_equal = (images == images[:, :, :1]).all(dim=(1, 2))  # bars: every column the same
    assert bool(rows_equal[:16].all()) and bool(cols_equal[16:].all())
    # Best average log-likelihood of the 32-pattern list (duplicates weighted 2/32): -3.3791.
    _, counts = torch.unique(full, dim=0, return_counts=True)
    probs = counts.double() / 32
    assert math.isclose(float((counts * probs.log()).sum()), -108.131, abs_tol=1e-3)
    assert bars_and_stripes(3).shape == (16, 9) and bars_and_stripes(3, distinct=True).shape == (14, 9)
    with pytest.raises(DataError):
        bars_and_stripes(0)


def test_bars_and_stripes_via_load_dataset_any_split() -> None:
    a = load_dataset("bars-and-stripes", split="train", seed=1)
    b = load_dataset("bars-and-stripes", split="test", seed=2)
    assert torch.equal(a.x, b.x) and a.image_shape == (4, 4)
    d = load_dataset("bars-and-stripes:distinct")
    assert d.x.shape == (30, 16) and d.name == "bars-and-stripes:patterns=distinct"


def test_artificial_modes_prototypes() -> None:
    protos = artificial_modes_prototypes().reshape(4, 4, 4)
    assert protos[0].sum() == 0 and protos[1].sum() == 16
    assert bool((protos[2][:, :2] == 0).all()) and bool((protos[2][:, 2:] == 1).all())
    assert torch.equal(protos[3], 1 - protos[2])


@pytest.mark.parametrize("p_mut", [0.01, 0.1])
def test_artificial_modes_flip_rate_within_5_standard_errors(p_mut: float) -> None:
    x, modes = artificial_modes_with_labels(10_000, p_mut, seed=17)
    assert x.shape == (10_000, 16) and x.dtype == torch.float32
    assert torch.bincount(modes, minlength=4).tolist() == [2500] * 4
    flipped = (x != artificial_modes_prototypes()[modes]).double()
    n = flipped.numel()
    se = math.sqrt(p_mut * (1 - p_mut) / n)
    assert abs(float(flipped.mean()) - p_mut) < 5 * se


def test_artificial_modes_seeds_splits_and_edges() -> None:
    assert torch.equal(artificial_modes(50, 0.1, seed=3), artificial_modes(50, 0.1, seed=3))
    assert not torch.equal(artificial_modes(50, 0.1, seed=3), artificial_modes(50, 0.1, seed=4))
    x, modes = artificial_modes_with_labels(10, 0.0, seed=0, shuffle=False)
    assert modes.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]
    assert torch.equal(x, artificial_modes_prototypes()[modes])
    y, modes = artificial_modes_with_labels(8, 1.0, seed=0)
    assert torch.equal(y, 1 - artificial_modes_prototypes()[modes])
    train = load_dataset("artificial-modes", split="train", seed=0)
    test = load_dataset("artificial-modes", split="test", seed=0)
    assert train.x.shape == test.x.shape == (10_000, 16) and not torch.equal(train.x, test.x)
    assert torch.equal(train.x, load_dataset("artificial-modes:0.01", seed=0).x)
    for bad in ({"n": 0}, {"p_mut": 1.5}):
        with pytest.raises(DataError):
            artificial_modes(**bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- transforms


def test_binarize_seeded_and_unbiased() -> None:
    images = torch.full((200, 500), 0.3, dtype=torch.float64)
    a = binarize(images, seed=7)
    assert a.shape == images.shape and a.dtype == torch.float32
    assert set(torch.unique(a).tolist()) <= {0.0, 1.0}
    assert torch.equal(a, binarize(images.numpy(), seed=7))
    assert not torch.equal(a, binarize(images, seed=8))
    se = math.sqrt(0.3 * 0.7 / images.numel())
    assert abs(float(a.double().mean()) - 0.3) < 5 * se
    edges = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    assert torch.equal(binarize(edges, seed=1), torch.tensor(edges, dtype=torch.float32))
    for bad in (np.array([[0.2, 1.5]]), np.array([[np.nan]]), np.array([[-0.1]])):
        with pytest.raises(DataError, match=r"\[0, 1\]"):
            binarize(bad, seed=0)


def test_extract_patches_positions_and_reproducibility() -> None:
    h, w, size, n = 7, 11, 3, 2000
    index_image = torch.arange(h * w, dtype=torch.float32)
    images = index_image.expand(n, -1)
    patches = extract_patches(images, (h, w), size=size, seed=9)
    assert patches.shape == (n, size * size)
    top, left = patches[:, 0] // w, patches[:, 0] % w
    offsets = torch.tensor([r * w + c for r in range(size) for c in range(size)], dtype=torch.float32)
    assert torch.equal(patches, patches[:, :1] + offsets)
    assert set(top.long().tolist()) == set(range(h - size + 1))
    assert set(left.long().tolist()) == set(range(w - size + 1))
    assert torch.equal(patches, extract_patches(images, (h, w), size=size, seed=9))
    assert not torch.equal(patches, extract_patches(images, (h, w), size=size, seed=10))
    with pytest.raises(DataError):
        extract_patches(images, (h, w), size=8)
    with pytest.raises(DataError):
        extract_patches(images[:, :10], (h, w))


# --------------------------------------------------------------------------- load_dataset


def test_load_dataset_user_file(tmp_path: Path) -> None:
    x = _random_binary(5, 3, seed=20)
    np.savez(tmp_path / "pair.npz", a=x, b=1 - x)
    ds = load_dataset(f"{tmp_path / 'pair.npz'}:b", split="test")
    assert ds.name == f"{tmp_path / 'pair.npz'}:b" and ds.split == "test" and ds.image_shape is None
    assert ds.x.dtype == torch.float32
    np.testing.assert_array_equal(ds.x.numpy(), 1 - x)
    with pytest.raises(DataError, match="unknown split") as info:
        load_dataset(str(tmp_path / "pair.npz:a"), split="dev")
    assert "'train' or 'valid' or 'test'" in str(info.value)


def test_load_dataset_spec_errors() -> None:
    with pytest.raises(DataError, match="did you mean 'bars-and-stripes'"):
        load_dataset("bars-and-stripe")
    with pytest.raises(DataError, match="data file not found"):  # a path, not a misspelt name
        load_dataset("mnist.npy")
    with pytest.raises(DataError, match="unknown split") as info:
        load_dataset("artificial-modes", split="validation")
    assert "'train' or 'valid' or 'test'" in str(info.value)
    with pytest.raises(DataError, match="bad value for 'train'"):
        load_dataset("mnist:3")
    with pytest.raises(DataError, match="only the first parameter may be given without"):
        load_dataset("bars-and-stripes:all,4")
    with pytest.raises(DataError, match="bad value for 'p'"):
        load_dataset("artificial-modes:often")
    with pytest.raises(DataError, match="unknown parameter 'q'"):
        load_dataset("artificial-modes:q=1")
    with pytest.raises(DataError, match="without 'key='"):
        load_dataset("artificial-modes:0.1,500")
    for twice in ("artificial-modes:p=0.1,p=0.2", "artificial-modes:0.1,p_mut=0.2"):  # not the last one
        with pytest.raises(DataError, match="parameter 'p' is given twice"):
            load_dataset(twice)
    with pytest.raises(DataError, match="columns") as info:
        load_dataset("bars-and-stripes", n_visible=17)
    assert isinstance(info.value, BoltzkitError) and info.value.got == 16


def test_parse_spec_and_canonical_names_round_trip() -> None:
    assert parse_spec("artificial-modes") == ("artificial-modes", {"p": 0.01, "n": 10_000})
    assert parse_spec("Artificial_Modes:p_mut=0.1,n=40") == ("artificial-modes", {"p": 0.1, "n": 40})
    assert parse_spec("bars-and-stripes:distinct,size=3")[1] == {"patterns": "distinct", "size": 3}
    ds = load_dataset("artificial-modes:n=40,p=0.1", split="valid", seed=4)
    assert ds.name == "artificial-modes:p=0.1,n=40"
    assert torch.equal(load_dataset(ds.name, split="valid", seed=4).x, ds.x)
    assert set(DATASET_NAMES) == {"mnist", "mnist-patches", "bars-and-stripes", "artificial-modes"}


def test_derive_seed_is_stable() -> None:
    assert derive_seed(0, "artificial-modes", "train") == derive_seed(0, "artificial-modes", "train")
    assert derive_seed(0, "artificial-modes", "train") != derive_seed(0, "artificial-modes", "test")
    assert derive_seed(1, "x") != derive_seed(2, "x")
    assert 0 <= derive_seed(123, "x") < 2**63
    assert derive_seed(0, "a") == 8342909361095637454  # pinned: seeds must not change between releases


def test_dataset_record() -> None:
    ds = load_dataset("bars-and-stripes")
    assert (len(ds), ds.n_samples, ds.n_visible) == (32, 32, 16)
    assert "bars-and-stripes" in repr(ds)
    with pytest.raises(FrozenInstanceError):
        ds.split = "test"  # type: ignore[misc]
    with pytest.raises(DataError, match="image_shape"):
        Dataset(name="x", x=torch.zeros(2, 6), image_shape=(2, 2), split="train")
    with pytest.raises(DataError, match="2-D"):
        Dataset(name="x", x=torch.zeros(6), image_shape=None, split="train")


def test_real_valued_loading_refuses_empty_data_and_binary_loading_reads_big_endian(tmp_path: Path) -> None:
    from boltzkit.data import load_dataset, load_values

    np.save(tmp_path / "norows.npy", np.zeros((0, 5)))
    with pytest.raises(DataError, match="empty"):
        load_values(str(tmp_path / "norows.npy"), split="train")
    np.save(tmp_path / "big.npy", np.eye(3).astype(">f8"))  # as a big-endian machine writes it
    np.testing.assert_array_equal(load_dataset(str(tmp_path / "big.npy")).x.numpy(), np.eye(3))


def test_a_csv_with_a_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    """Spreadsheet programs start UTF-8 CSV files with a byte-order mark."""
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf0,1,1\n1,0,0\n")
    (tmp_path / "named.csv").write_bytes(b"\xef\xbb\xbfa,b,c\n0.5,1,1\n1,0,0\n")
    np.testing.assert_array_equal(read_text_matrix(tmp_path / "bom.csv", sep=","), [[0, 1, 1], [1, 0, 0]])
    np.testing.assert_array_equal(read_text_matrix(tmp_path / "named.csv", sep=","), [[0.5, 1, 1], [1, 0, 0]])


def test_a_csv_without_commas_is_read_with_its_own_separator(tmp_path: Path) -> None:
    """Values of a ``.csv`` separated by spaces, tabs or semicolons (``numpy.savetxt``'s default,
    European spreadsheets) read as with commas, header and comments included."""
    rows = [[1, 0, 1, 0, 1, 0, 1, 0, 1, 0], [0, 0, 1, 0, 1, 0, 1, 0, 1, 0]]
    for name, sep in (("space.csv", " "), ("tab.csv", "\t"), ("semi.csv", ";"), ("comma.csv", ",")):
        (tmp_path / name).write_text("".join(sep.join(map(str, r)) + "\n" for r in rows))
        np.testing.assert_array_equal(load_binary_file(tmp_path / name), rows)
    (tmp_path / "one.csv").write_text("1;0;1;0;1;0;1;0;1;0\n")
    np.testing.assert_array_equal(load_binary_file(tmp_path / "one.csv"), rows[:1])
    # a header, a comment holding a comma, and loose spacing: still whitespace-separated
    (tmp_path / "named.csv").write_text("# a, b\nv0  v1\tv2\n0 1  1\n1\t0 0\n")
    np.testing.assert_array_equal(read_text_matrix(tmp_path / "named.csv", sep=","), [[0, 1, 1], [1, 0, 0]])
    (tmp_path / "semi_named.csv").write_text("a;b;c\n0;1;1\n1;0;0\n")
    np.testing.assert_array_equal(load_binary_file(tmp_path / "semi_named.csv"), [[0, 1, 1], [1, 0, 0]])
    np.savetxt(tmp_path / "savetxt.csv", np.eye(4), fmt="%d")
    np.testing.assert_array_equal(load_binary_file(tmp_path / "savetxt.csv"), np.eye(4))
    (tmp_path / "bad.csv").write_text("0;1;1\n1;x;0\n")
    with pytest.raises(DataError, match="line 2, column 2: 'x' is not a number") as info:
        load_binary_file(tmp_path / "bad.csv")
    assert "separated by ';'" in str(info.value)


@pytest.mark.parametrize(
    ("text", "names"), [("a;b;c\n", "a;b;c"), ("a,b,c\n", "a,b,c"), ("# names\nv0 v1 v2\n\n", "v0 v1 v2")]
)
def test_a_file_of_column_names_only_says_so(tmp_path: Path, text: str, names: str) -> None:
    (tmp_path / "names.csv").write_text(text)
    with pytest.raises(DataError, match="only line was taken as column names") as info:
        load_binary_file(tmp_path / "names.csv")
    assert "empty" not in str(info.value) and info.value.got == repr(names)
    (tmp_path / "names.txt").write_text(text.replace(";", " ").replace(",", " "))
    with pytest.raises(DataError, match="only line was taken as column names"):
        load_binary_file(tmp_path / "names.txt")


def test_an_archive_of_split_named_arrays_gives_the_split(tmp_path: Path) -> None:
    from boltzkit.data import load_values

    parts = {s: _random_binary(n, 6, seed=n) for s, n in (("train", 5), ("valid", 6), ("test", 7))}
    np.savez(tmp_path / "splits.npz", **parts)
    scipy.io.savemat(tmp_path / "splits.mat", parts)
    for archive in ("splits.npz", "splits.mat"):
        for split, x in parts.items():
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a file with the split warns of nothing
                ds = load_dataset(str(tmp_path / archive), split=split, named_split=True)
            assert ds.name == f"{tmp_path / archive}:{split}" and ds.split == split
            np.testing.assert_array_equal(ds.x.numpy(), x)
            np.testing.assert_array_equal(load_values(str(tmp_path / archive), split=split)[1].numpy(), x)
    # a name given in the spec wins over the split
    np.testing.assert_array_equal(
        load_dataset(f"{tmp_path / 'splits.npz'}:test", split="train").x, parts["test"]
    )
    # split-named arrays without the asked-for one: refused, with the ones it has
    np.savez(tmp_path / "no_valid.npz", train=parts["train"], test=parts["test"])
    with pytest.raises(DataError, match="holds the splits train, test but no 'valid' array") as info:
        load_dataset(str(tmp_path / "no_valid.npz"), split="valid")
    assert info.value.expected == "'train' or 'test'" and "no_valid.npz:train" in str(info.value)
    # one array is the whole file whatever its name; arrays of other names still need a name
    np.savez(tmp_path / "single.npz", train=parts["train"])
    # a review's finding: its one array's name says its rows are training rows, so taking them as
    # another split warns even where the split was not asked for by name (evaluate's default)
    with pytest.warns(UserWarning, match=r"no 'test' split of its own \(its one array is named 'train'\)"):
        single = load_dataset(str(tmp_path / "single.npz"), split="test")
    np.testing.assert_array_equal(single.x, parts["train"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_dataset(str(tmp_path / "single.npz"), split="train")
    np.savez(tmp_path / "other.npz", a=parts["train"], b=parts["test"])
    with pytest.raises(DataError, match="several arrays and none was named"):
        load_dataset(str(tmp_path / "other.npz"), split="test")


def test_a_split_asked_of_data_without_splits_warns_that_all_of_it_is_used(tmp_path: Path) -> None:
    from boltzkit.data import load_values

    x = _random_binary(50, 4, seed=3)
    np.save(tmp_path / "plain.npy", x)
    plain = str(tmp_path / "plain.npy")
    with pytest.warns(UserWarning, match=r"plain\.npy has no 'valid' split of its own: all of its 50 rows"):
        ds = load_dataset(plain, split="valid", named_split=True)
    np.testing.assert_array_equal(ds.x.numpy(), x)
    with pytest.warns(UserWarning, match="bars-and-stripes has no 'test' split of its own: all of its 32"):
        assert load_dataset("bars-and-stripes", split="test", named_split=True).n_samples == 32
    with pytest.warns(UserWarning, match="no 'test' split of its own"):
        load_values(plain, split="test", named_split=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # the file given as that split (train --test-data FILE), or an array named in the spec
        np.testing.assert_array_equal(load_dataset(plain, split="test").x.numpy(), x)
        np.savez(tmp_path / "pair.npz", a=x, b=1 - x)
        load_dataset(f"{tmp_path / 'pair.npz'}:b", split="valid", named_split=True)
        load_dataset("artificial-modes:n=20", split="valid", named_split=True)  # drawn per split


def test_shared_rows_counts_exact_copies_across_dtypes():
    from boltzkit.data import shared_rows

    reference = torch.tensor([[0.0, 1.0, 0.5], [1.0, 1.0, 1.0], [-0.0, 0.0, 2.0]], dtype=torch.float32)
    x = torch.tensor(
        [[0.0, 0.0, 2.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0 + 1e-7], [0.5, 1.0, 0.0]], dtype=torch.float64
    )
    assert shared_rows(x, reference) == 2  # -0.0 equals 0.0; a 1e-7 change is another row
    assert shared_rows(reference, reference) == 3
    assert shared_rows(x, reference[:, :2]) == 0  # other widths share nothing
    assert shared_rows(x[:0], reference) == 0 and shared_rows(x, reference[:0]) == 0  # no rows
    binary = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    assert shared_rows(binary.double(), binary[[1]]) == 1  # packed bits, across dtypes too
    with pytest.raises(DataError, match="is not one"):
        shared_rows(torch.zeros(3), torch.zeros(3))
