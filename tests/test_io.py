"""Model files (safetensors + JSON metadata, .npz), atomic writes and result JSON."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, safe_open, save_file

import boltzkit
from boltzkit.errors import BoltzkitError, ModelFileError
from boltzkit.io import (
    METADATA_KEY,
    atomic_open,
    atomic_write_bytes,
    atomic_write_text,
    export_npz,
    import_npz,
    load_model,
    read_metadata,
    save_model,
    save_result_json,
    to_json_text,
)
from boltzkit.models.rbm import RBM

N_VISIBLE, N_HIDDEN = 7, 3


def make_rbm(dtype: torch.dtype = torch.float32, seed: int = 5) -> RBM:
    gen = torch.Generator().manual_seed(seed)
    rbm = RBM.random(N_VISIBLE, N_HIDDEN, scale=0.5, generator=gen, dtype=dtype)
    with torch.no_grad():
        rbm.vbias.copy_(torch.randn(N_VISIBLE, generator=gen, dtype=dtype))
        rbm.hbias.copy_(torch.randn(N_HIDDEN, generator=gen, dtype=dtype))
    return rbm


def arrays(rbm: RBM) -> dict[str, np.ndarray]:
    return {n: getattr(rbm, n).detach().numpy() for n in ("W", "vbias", "hbias")}


def assert_same_parameters(a: RBM, b: RBM) -> None:
    for name in ("W", "vbias", "hbias"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype
        assert torch.equal(x.detach(), y.detach()), name


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ------------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_safetensors_round_trip_is_exact(tmp_path: Path, dtype: torch.dtype) -> None:
    rbm = make_rbm(dtype)
    path = tmp_path / "rbm.safetensors"
    save_model(rbm, path)
    loaded, md = load_model(path)
    assert isinstance(loaded, RBM)
    assert loaded.layer_sizes == (N_VISIBLE, N_HIDDEN)
    assert_same_parameters(rbm, loaded)
    assert md["kind"] == "rbm"
    assert (md["n_visible"], md["n_hidden"]) == (N_VISIBLE, N_HIDDEN)
    assert md["dtype"] == str(dtype).removeprefix("torch.")
    assert md["boltzkit_version"] == boltzkit.__version__
    assert md["source_format"] == "safetensors"
    assert files_in(tmp_path) == ["rbm.safetensors"]


def test_file_is_plain_safetensors_with_json_metadata(tmp_path: Path) -> None:
    rbm = make_rbm()
    path = tmp_path / "rbm.safetensors"
    save_model(rbm, path, metadata={"data": "bars-and-stripes"})
    tensors = load_file(path)
    assert set(tensors) == {"W", "vbias", "hbias"}
    assert tuple(tensors["W"].shape) == (N_VISIBLE, N_HIDDEN)
    with safe_open(path, framework="pt") as f:
        stored = json.loads(f.metadata()[METADATA_KEY])
    assert stored["data"] == "bars-and-stripes"
    assert stored["kind"] == "rbm"


def test_metadata_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "rbm.safetensors"
    training = {"method": "cd", "k": 1, "lr": 0.05, "epochs": [1, 2], "nested": {"momentum": 0.9}}
    save_model(
        make_rbm(),
        path,
        metadata={
            "training": training,
            "data": "mnist",
            "note": "first try",
            "out_dir": tmp_path,  # a Path is stored as a string
            "score": np.float32(0.5),  # numpy scalars become plain numbers
            "n_visible": 999,  # derived facts cannot be overridden
        },
    )
    _, md = load_model(path)
    assert md["training"] == training
    assert md["data"] == "mnist"
    assert md["note"] == "first try"
    assert md["out_dir"] == str(tmp_path)
    assert md["score"] == 0.5
    assert md["n_visible"] == N_VISIBLE
    created = md["created"]
    assert created.endswith("+00:00") and created[:4].isdigit()

    # Saving the loaded metadata again keeps the original creation time.
    save_model(make_rbm(), path, metadata={**md, "created": "2001-02-03T04:05:06+00:00"})
    assert read_metadata(path)["created"] == "2001-02-03T04:05:06+00:00"


def test_default_metadata_keys(tmp_path: Path) -> None:
    path = tmp_path / "rbm.safetensors"
    save_model(make_rbm(), path)
    md = read_metadata(path)
    assert md["training"] == {}
    assert md["data"] is None


def test_load_converts_dtype_and_device(tmp_path: Path) -> None:
    rbm = make_rbm(torch.float32)
    path = tmp_path / "rbm.safetensors"
    save_model(rbm, path)
    loaded, md = load_model(path, dtype="float64", device="cpu")
    assert loaded.dtype == torch.float64
    assert loaded.device.type == "cpu"
    assert md["dtype"] == "float32"  # the stored dtype
    assert torch.equal(loaded.W.detach(), rbm.W.detach().double())  # widening is exact


def test_half_precision_is_widened_by_default(tmp_path: Path) -> None:
    path = tmp_path / "half.safetensors"
    save_model(make_rbm(torch.float16), path)
    loaded, md = load_model(path)
    assert loaded.dtype == torch.float32
    assert md["dtype"] == "float16"


def test_loaded_model_computes_the_same_free_energy(tmp_path: Path) -> None:
    rbm = make_rbm(torch.float64)
    path = tmp_path / "rbm.safetensors"
    save_model(rbm, path)
    loaded, _ = load_model(path)
    v = (torch.arange(5 * N_VISIBLE).reshape(5, N_VISIBLE) % 3 == 0).double()
    assert torch.equal(rbm.free_energy(v), loaded.free_energy(v))


# ------------------------------------------------------------------------------------------ npz
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_npz_export_import_round_trip(tmp_path: Path, dtype: torch.dtype) -> None:
    rbm = make_rbm(dtype)
    path = tmp_path / "rbm.npz"
    export_npz(rbm, path, metadata={"data": "patches"})
    with np.load(path, allow_pickle=False) as f:  # readable without boltzkit or pickle
        assert tuple(f["W"].shape) == (N_VISIBLE, N_HIDDEN)
        assert f["W"].dtype == np.dtype(str(dtype).removeprefix("torch."))
    assert_same_parameters(rbm, import_npz(path))
    _, md = load_model(path)
    assert md["source_format"] == "npz"
    assert md["data"] == "patches"


def test_plain_npz_from_elsewhere_loads(tmp_path: Path) -> None:
    rbm = make_rbm(torch.float64)
    path = tmp_path / "external.npz"
    np.savez(path, **arrays(rbm))
    loaded, md = load_model(path)
    assert_same_parameters(rbm, loaded)
    assert md == {
        "kind": "rbm",
        "n_visible": N_VISIBLE,
        "n_hidden": N_HIDDEN,
        "dtype": "float64",
        "source_format": "npz",
    }


def test_format_is_chosen_by_content(tmp_path: Path) -> None:
    rbm = make_rbm()
    npz_named_safetensors = tmp_path / "really_npz.safetensors"
    with open(npz_named_safetensors, "wb") as f:
        np.savez(f, **arrays(rbm))
    assert load_model(npz_named_safetensors)[1]["source_format"] == "npz"
    safetensors_named_npz = tmp_path / "really_safetensors.npz"
    save_file({n: torch.from_numpy(a) for n, a in arrays(rbm).items()}, safetensors_named_npz)
    assert load_model(safetensors_named_npz)[1]["source_format"] == "safetensors"


def test_save_model_to_npz_path_writes_npz(tmp_path: Path) -> None:
    path = tmp_path / "rbm.npz"
    save_model(make_rbm(), path, metadata={"data": "modes"})
    assert path.read_bytes()[:4] == b"PK\x03\x04"
    assert read_metadata(path)["data"] == "modes"


def test_npz_with_other_names_lists_found_and_expected(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "other_names.npz"
    np.savez(path, weights=a["W"], visbiases=a["vbias"], hidbiases=a["hbias"])
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    msg = str(info.value)
    assert "'W', 'vbias', 'hbias'" in msg  # what is missing
    assert "'weights'" in msg and "'visbiases'" in msg and "'hidbiases'" in msg  # what was found
    assert "Expected: arrays W (n_visible x n_hidden)" in msg
    assert "W=a['weights']" in msg and "vbias=a['visbiases']" in msg and "hbias=a['hidbiases']" in msg


def test_npz_missing_one_array_is_named(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "partial.npz"
    np.savez(path, W=a["W"], vbias=a["vbias"])
    with pytest.raises(ModelFileError, match=r"lacks the array 'hbias'") as info:
        import_npz(path)
    assert "'W', 'vbias'" in str(info.value)


def test_npz_with_pickled_object_is_refused_cleanly(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "pickled.npz"
    hbias = np.empty(N_HIDDEN, dtype=object)
    hbias[:] = [0.0, 1.0, 2.0]
    np.savez(path, W=a["W"], vbias=a["vbias"], hbias=hbias)
    with pytest.raises(ModelFileError, match="'hbias' cannot be read"):
        load_model(path)


def test_import_npz_refuses_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "rbm.safetensors"
    save_model(make_rbm(), path)
    with pytest.raises(ModelFileError, match="not an .npz"):
        import_npz(path)


# ------------------------------------------------------------------------------------ bad files
def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="model file not found") as info:
        load_model(tmp_path / "nope.safetensors")
    assert "nope.safetensors" in str(info.value)
    with pytest.raises(ModelFileError, match="does not exist either"):
        load_model(tmp_path / "no_dir" / "nope.safetensors")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="is a directory"):
        load_model(tmp_path)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"abc", id="tiny"),
        pytest.param(b"epoch,loss\n1,0.5\n2,0.4\n" * 10, id="text"),
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200), id="png"),
        pytest.param(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}", id="bad-json-header"),
    ],
)
def test_foreign_files_are_not_model_files(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match="not a boltzkit model file"):
        load_model(path)


def test_text_file_named_npz(tmp_path: Path) -> None:
    path = tmp_path / "model.npz"
    path.write_text("this is not an archive\n" * 5)
    with pytest.raises(ModelFileError, match="not a boltzkit model file"):
        load_model(path)


def test_truncated_safetensors_data(tmp_path: Path) -> None:
    path = tmp_path / "rbm.safetensors"
    save_model(make_rbm(), path)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(ModelFileError, match="truncated") as info:
        load_model(path)
    assert "bytes" in str(info.value)


def test_truncated_safetensors_header(tmp_path: Path) -> None:
    path = tmp_path / "rbm.safetensors"
    save_model(make_rbm(), path)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(ModelFileError, match="truncated inside its header"):
        load_model(path)


def test_truncated_npz(tmp_path: Path) -> None:
    path = tmp_path / "rbm.npz"
    export_npz(make_rbm(), path)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(ModelFileError, match="not a boltzkit model file|cannot be read"):
        load_model(path)


def test_safetensors_missing_tensor_is_named(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "partial.safetensors"
    save_file({"W": torch.from_numpy(a["W"]), "vbias": torch.from_numpy(a["vbias"])}, path)
    with pytest.raises(ModelFileError, match="lacks the array 'hbias'") as info:
        load_model(path)
    assert "Got: arrays 'W', 'vbias'" in str(info.value) or "Got: arrays 'vbias', 'W'" in str(info.value)


def test_foreign_safetensors_lists_its_tensors(tmp_path: Path) -> None:
    path = tmp_path / "other.safetensors"
    save_file({"layer.weight": torch.zeros(3, 7), "layer.bias": torch.zeros(3)}, path)
    with pytest.raises(ModelFileError, match="lacks the arrays 'W', 'vbias', 'hbias'") as info:
        load_model(path)
    assert "'layer.weight'" in str(info.value)


def test_inconsistent_shapes_report_got_and_expected(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "bad_shapes.npz"
    np.savez(path, W=a["W"], vbias=np.zeros(5, dtype=np.float32), hbias=a["hbias"])
    with pytest.raises(ModelFileError, match="inconsistent shapes") as info:
        load_model(path)
    msg = str(info.value)
    assert "vbias (5,)" in msg and "W (7, 3)" in msg
    assert "vbias (7,)" in msg  # expected, from W


def test_transposed_weights_get_a_hint(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "transposed.safetensors"
    save_file(
        {
            "W": torch.from_numpy(a["W"].T.copy()),
            "vbias": torch.from_numpy(a["vbias"]),
            "hbias": torch.from_numpy(a["hbias"]),
        },
        path,
    )
    with pytest.raises(ModelFileError, match="W looks transposed"):
        load_model(path)


def test_wrong_number_of_dimensions(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "flat.npz"
    np.savez(path, W=a["W"].ravel(), vbias=a["vbias"], hbias=a["hbias"])
    with pytest.raises(ModelFileError, match="number of dimensions") as info:
        load_model(path)
    assert "W (21,)" in str(info.value)


def test_integer_arrays_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "ints.npz"
    np.savez(path, W=np.ones((7, 3), dtype=np.int64), vbias=np.zeros(7), hbias=np.zeros(3))
    with pytest.raises(ModelFileError, match="W is not floating point") as info:
        load_model(path)
    assert "int64" in str(info.value)


def test_non_finite_parameters_are_counted_per_array(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    a["W"][0, 0] = np.nan
    a["W"][6, 2] = np.nan
    a["hbias"][1] = -np.inf
    path = tmp_path / "diverged.npz"
    np.savez(path, **a)
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    msg = str(info.value)
    assert "non-finite" in msg
    assert "W has 2 NaN and 0 inf values" in msg
    assert "hbias has 0 NaN and 1 inf values" in msg
    assert "vbias" not in msg.split("Expected")[0]
    assert "diverged" in msg and "learning rate" in msg


def test_saving_non_finite_model_is_refused_and_keeps_old_file(tmp_path: Path) -> None:
    path = tmp_path / "rbm.safetensors"
    save_model(make_rbm(), path)
    before = path.read_bytes()
    bad = make_rbm()
    with torch.no_grad():
        bad.vbias[3] = math.inf
    with pytest.raises(ModelFileError, match="vbias has 0 NaN and 1 inf"):
        save_model(bad, path)
    assert path.read_bytes() == before


def test_float64_values_that_overflow_float32(tmp_path: Path) -> None:
    a = {n: x.astype(np.float64) for n, x in arrays(make_rbm()).items()}
    a["W"][1, 1] = 1e300
    path = tmp_path / "huge.npz"
    np.savez(path, **a)
    with pytest.raises(ModelFileError, match="overflow float32"):
        load_model(path, dtype=torch.float32)
    assert load_model(path)[0].dtype == torch.float64


def test_metadata_disagreeing_with_tensors(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    md = json.dumps({"kind": "rbm", "n_visible": 11, "n_hidden": 3})
    path = tmp_path / "tampered.safetensors"
    save_file({n: torch.from_numpy(x) for n, x in a.items()}, path, metadata={METADATA_KEY: md})
    with pytest.raises(ModelFileError, match="metadata disagrees") as info:
        load_model(path)
    assert "n_visible=11" in str(info.value)


def test_other_model_kind_is_refused(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "dbm.safetensors"
    save_file(
        {n: torch.from_numpy(x) for n, x in a.items()}, path, metadata={METADATA_KEY: '{"kind": "dbm"}'}
    )
    with pytest.raises(ModelFileError, match="another kind") as info:
        load_model(path)
    assert "'dbm'" in str(info.value)


def test_corrupt_metadata_json(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "corrupt_md.safetensors"
    save_file({n: torch.from_numpy(x) for n, x in a.items()}, path, metadata={METADATA_KEY: "{oops"})
    with pytest.raises(ModelFileError, match="metadata is corrupt"):
        load_model(path)


def test_unserializable_metadata_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "rbm.safetensors"
    with pytest.raises(ModelFileError, match=r"training\.lr") as info:
        save_model(make_rbm(), path, metadata={"training": {"lr": float("nan")}})
    assert "JSON" in str(info.value)
    with pytest.raises(ModelFileError, match=r"object at training\.callback"):
        save_model(make_rbm(), path, metadata={"training": {"callback": object()}})
    assert not path.exists()
    assert files_in(tmp_path) == []


def test_save_model_refuses_non_rbm(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="only RBMs"):
        save_model(torch.nn.Linear(3, 7), tmp_path / "x.safetensors")  # type: ignore[arg-type]


def test_save_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="directory does not exist"):
        save_model(make_rbm(), tmp_path / "missing" / "rbm.safetensors")


def test_bad_dtype_argument(tmp_path: Path) -> None:
    path = tmp_path / "rbm.safetensors"
    save_model(make_rbm(), path)
    with pytest.raises(BoltzkitError, match="unknown dtype"):
        load_model(path, dtype="float33")
    with pytest.raises(BoltzkitError, match="floating point"):
        load_model(path, dtype=torch.int32)


# ------------------------------------------------------------------------------- atomic writes
def test_atomic_write_text_and_bytes(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    atomic_write_text(path, "first\n")
    atomic_write_text(path, "second\r\nline\n")
    assert path.read_bytes() == b"second\r\nline\n"
    atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert files_in(tmp_path) == ["out.txt"]


def test_atomic_file_gets_ordinary_permissions(tmp_path: Path) -> None:
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    path = tmp_path / "out.txt"
    atomic_write_text(path, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_atomic_open_for_csv(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    with atomic_open(path, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["beta", "log_w"])
        writer.writerow([0.5, -1.25])
    with open(path, newline="") as f:
        assert list(csv.reader(f)) == [["beta", "log_w"], ["0.5", "-1.25"]]


def test_error_inside_block_keeps_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_open(path) as f:
            f.write("new, half written")
            raise RuntimeError("boom")
    assert path.read_text() == "old"
    assert files_in(tmp_path) == ["result.json"]


def test_error_inside_block_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        with atomic_open(tmp_path / "new.csv") as f:
            f.write("x")
            raise KeyError("stop")
    assert files_in(tmp_path) == []


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failed_save_keeps_old_model_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = tmp_path / "rbm.safetensors"
    old = make_rbm(seed=1)
    save_model(old, path)
    before = path.read_bytes()

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(ModelFileError, match="No space left on device") as info:
        save_model(make_rbm(seed=2), path)
    monkeypatch.undo()
    assert "unchanged" in str(info.value)
    assert path.read_bytes() == before
    assert files_in(tmp_path) == ["rbm.safetensors"]
    assert_same_parameters(old, load_model(path)[0])


def test_atomic_open_rejects_other_modes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="modes"):
        with atomic_open(tmp_path / "x", "a"):
            pass


def test_atomic_write_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(BoltzkitError, match="directory does not exist"):
        atomic_write_text(tmp_path / "no" / "x.txt", "x")
    assert atomic_write_text(tmp_path / "no" / "x.txt", "x", parents=True) == tmp_path / "no" / "x.txt"
    assert (tmp_path / "no" / "x.txt").read_text() == "x"


# --------------------------------------------------------------------------------- result JSON
class _FakeResult:
    def to_dict(self) -> dict[str, object]:
        return {"log_z": 12.5, "log_z_minus_3sigma": None}


def test_save_result_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    result = {
        "method": "ais",
        "log_z": np.float64(-3.25),
        "bands": {"minus_3sigma": None, "plus_3sigma": 1.0},
        "n_runs": np.int64(100),
        "dtype": torch.float64,
    }
    save_result_json(result, path)
    text = path.read_text()
    assert text.endswith("\n")
    assert json.loads(text) == {
        "method": "ais",
        "log_z": -3.25,
        "bands": {"minus_3sigma": None, "plus_3sigma": 1.0},
        "n_runs": 100,
        "dtype": "float64",
    }
    save_result_json(_FakeResult(), path)
    assert json.loads(path.read_text()) == {"log_z": 12.5, "log_z_minus_3sigma": None}


def test_save_result_json_refuses_nan_and_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text("{}")
    with pytest.raises(BoltzkitError, match=r"nan at bands\[1\]") as info:
        save_result_json({"bands": [1.0, float("nan")]}, path)
    assert "None" in str(info.value)  # the hint
    assert path.read_text() == "{}"
    with pytest.raises(BoltzkitError, match="mapping"):
        save_result_json([1, 2], path)


def test_to_json_text_is_strict() -> None:
    assert to_json_text({"a": [1, 2.5, None]}, indent=None) == '{"a": [1, 2.5, null]}'
    with pytest.raises(BoltzkitError, match=r"inf at x"):
        to_json_text({"x": math.inf})
