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
from conftest import random_rbm
from safetensors.torch import load_file, safe_open, save_file

import boltzkit
from boltzkit.atomic import STALE_TEMP_SECONDS
from boltzkit.errors import BoltzkitError, ModelFileError
from boltzkit.io import (
    METADATA_KEY,
    ArraySpec,
    ModelKind,
    atomic_open,
    atomic_write_bytes,
    atomic_write_text,
    export_npz,
    import_npz,
    load_model,
    read_metadata,
    register_kind,
    registered_kinds,
    save_model,
    save_result_json,
    to_json_text,
    to_jsonable,
    unregister_kind,
)
from boltzkit.models import BoltzmannMachine
from boltzkit.models.rbm import RBM

N_VISIBLE, N_HIDDEN = 7, 3


def make_rbm(dtype: torch.dtype = torch.float32, seed: int = 5) -> RBM:
    """The 7 x 3 RBM of these tests: W ~ N(0, 0.5^2), b, c ~ N(0, 1), drawn in ``dtype``."""
    return random_rbm(
        N_VISIBLE, N_HIDDEN, seed, scale=0.5, vbias_scale=1.0, hbias_scale=1.0, dtype=dtype, draw_dtype=dtype
    )


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
        "layer_sizes": [N_VISIBLE, N_HIDDEN],
        "arrays": ["W", "vbias", "hbias"],
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
    empty = tmp_path / "empty.npz"  # an empty zip archive is an .npz without arrays, not "no .npz"
    np.savez(empty)
    with pytest.raises(ModelFileError, match="lacks the arrays") as info:
        import_npz(empty)
    assert "not an .npz" not in str(info.value)


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
    path = tmp_path / "hopfield.safetensors"
    save_file(
        {n: torch.from_numpy(x) for n, x in a.items()}, path, metadata={METADATA_KEY: '{"kind": "hopfield"}'}
    )
    with pytest.raises(ModelFileError, match="another kind") as info:
        load_model(path)
    assert "'hopfield'" in str(info.value)
    assert "'rbm', 'srbm', 'bm', 'dbm'" in str(info.value)  # the kinds it can read


def test_kind_disagreeing_with_arrays_is_refused(tmp_path: Path) -> None:
    # RBM arrays in a file that says it holds a DBM: the DBM's arrays are missing.
    a = arrays(make_rbm())
    path = tmp_path / "dbm.safetensors"
    save_file(
        {n: torch.from_numpy(x) for n, x in a.items()}, path, metadata={METADATA_KEY: '{"kind": "dbm"}'}
    )
    with pytest.raises(ModelFileError, match="lacks the arrays 'W_0', 'W_1', 'bias_0'.* of a DBM") as info:
        load_model(path)
    assert "'W'" in str(info.value).split("Expected")[0]  # what the file holds


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


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(tmp_path: Path) -> None:
    if os.name != "posix":
        pytest.skip("SIGKILL")
    import subprocess
    import sys

    path = tmp_path / "record.json"
    killed = (
        "import os, signal, sys\n"
        "from boltzkit.atomic import atomic_open\n"
        "with atomic_open(sys.argv[1]) as f:\n"
        "    f.write('half'); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    run = subprocess.run([sys.executable, "-c", killed, str(path)], capture_output=True)
    assert run.returncode == -9
    (left,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # SIGKILL cannot clean up
    hour_ago = left.stat().st_mtime - STALE_TEMP_SECONDS - 1
    os.utime(left, (hour_ago, hour_ago))
    live = tmp_path / ".record.json.0123456789ab.tmp"  # a concurrent writer's, just touched
    live.write_text("in progress")
    atomic_write_text(path, "whole")
    assert path.read_text() == "whole"
    assert not left.exists() and live.exists()


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


# ---------------------------------------------------------------------- the Boltzmann machine family
def make_machine(kind: str, dtype: torch.dtype = torch.float64, seed: int = 3) -> BoltzmannMachine:
    """A random member of the family with non-zero couplings and biases."""
    gen = torch.Generator().manual_seed(seed)
    keys = {
        "rbm": ((4, 3), [(0, 1)]),
        "srbm": ((4, 3), [(0, 1), (0, 0)]),
        "bm": ((4, 3), [(0, 1), (0, 0), (1, 1)]),
        "dbm": ((4, 3, 2), [(0, 1), (1, 2)]),
        "deep-bm": ((3, 2, 2), [(0, 1), (1, 2), (1, 1), (0, 2)]),
    }
    sizes, structure = keys[kind]
    model = BoltzmannMachine.random(sizes, structure, scale=0.7, bias_scale=0.5, generator=gen, dtype=dtype)
    if kind == "rbm":
        model = RBM(4, 3, weights=model.W, vbias=model.vbias, hbias=model.hbias, dtype=dtype)
    return model


def family_arrays(model: BoltzmannMachine) -> dict[str, np.ndarray]:
    return {name: p.detach().numpy().copy() for name, p in model.named_parameters()}


def assert_same_machine(a: BoltzmannMachine, b: BoltzmannMachine) -> None:
    assert type(a) is type(b)
    assert (a.kind, a.layer_sizes, a.coupling_keys) == (b.kind, b.layer_sizes, b.coupling_keys)
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    assert list(pa) == list(pb)
    for name in pa:
        assert pa[name].dtype == pb[name].dtype, name
        assert torch.equal(pa[name].detach(), pb[name].detach()), name


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["rbm", "srbm", "bm", "dbm", "deep-bm"])
def test_every_kind_round_trips(tmp_path: Path, kind: str, dtype: torch.dtype, suffix: str) -> None:
    model = make_machine(kind, dtype)
    path = tmp_path / f"model{suffix}"
    save_model(model, path, metadata={"data": "toy"})
    loaded, md = load_model(path)
    assert_same_machine(model, loaded)
    assert md["kind"] == model.kind == kind.removeprefix("deep-")
    assert md["layer_sizes"] == list(model.layer_sizes)
    assert md["arrays"] == [name for name, _ in model.named_parameters()]
    assert md["dtype"] == str(dtype).removeprefix("torch.")
    assert md["format"] == "boltzkit.model" and md["format_version"] == 1
    assert md["data"] == "toy"
    assert md["source_format"] == suffix.removeprefix(".")
    if len(model.layer_sizes) == 2:
        assert (md["n_visible"], md["n_hidden"]) == model.layer_sizes
    else:
        assert "n_visible" not in md and "n_hidden" not in md
    assert files_in(tmp_path) == [path.name]
    if suffix == ".npz":  # the archive holds exactly the parameters (and the metadata), no pickle
        with np.load(path, allow_pickle=False) as f:
            assert sorted(f.files) == sorted([*md["arrays"], METADATA_KEY])
        assert_same_machine(model, import_npz(path))


def test_dbm_arrays_are_named_by_layer(tmp_path: Path) -> None:
    path = tmp_path / "dbm.npz"
    export_npz(make_machine("dbm"), path)
    with np.load(path, allow_pickle=False) as f:
        assert sorted(f.files) == ["W_0", "W_1", "bias_0", "bias_1", "bias_2", METADATA_KEY]
        assert f["W_0"].shape == (4, 3) and f["W_1"].shape == (3, 2) and f["bias_2"].shape == (2,)


def test_bm_npz_from_elsewhere_keeps_its_laterals(tmp_path: Path) -> None:
    from boltzkit.estimators.exact import exact_log_z

    bm = make_machine("bm")
    path = tmp_path / "bm.npz"
    np.savez(path, **family_arrays(bm))  # plain arrays W, L, J, vbias, hbias: no metadata
    loaded, md = load_model(path)
    assert loaded.kind == "bm" and md["kind"] == "bm"
    assert_same_machine(bm, loaded)
    log_z = exact_log_z(bm).log_z
    assert exact_log_z(loaded).log_z == log_z
    # what dropping the laterals would give is far off: they must not be ignored
    rbm = RBM(4, 3, weights=bm.W, vbias=bm.vbias, hbias=bm.hbias, dtype=bm.dtype)
    assert abs(exact_log_z(rbm).log_z - log_z) > 0.1


def test_plain_npz_kind_is_recognised_by_names(tmp_path: Path) -> None:
    for kind in ("srbm", "bm", "dbm", "deep-bm"):
        model = make_machine(kind)
        path = tmp_path / f"{kind}.npz"
        np.savez(path, **family_arrays(model))
        loaded, md = load_model(path)
        assert_same_machine(model, loaded)
        assert md["kind"] == model.kind


def test_unknown_extra_array_is_refused(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "extra.npz"
    np.savez(path, **a, momentum=np.zeros((7, 3), np.float32), step=np.zeros(()))
    with pytest.raises(ModelFileError, match=r"does not have: 'momentum', 'step'") as info:
        load_model(path)
    msg = str(info.value)
    assert "no array in a model file is ignored" in msg
    assert "Expected: arrays W (n_visible x n_hidden)" in msg
    # the same in a safetensors file, and a lateral in a file that says it is an RBM
    path = tmp_path / "extra.safetensors"
    save_model(make_machine("srbm"), path)
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        stored = f.metadata()
    md = json.loads(stored[METADATA_KEY])
    md.update(kind="rbm", arrays=["W", "vbias", "hbias"])
    save_file(tensors, path, metadata={METADATA_KEY: json.dumps(md)})
    with pytest.raises(ModelFileError, match=r"an array that a RBM file does not have: 'L'") as info:
        load_model(path)
    assert "records the kind 'rbm', which decides the arrays" in str(info.value)
    assert "records the kind" not in msg  # the plain archive's kind came from its names


def test_the_renaming_hint_covers_names_in_other_case(tmp_path: Path) -> None:
    a = arrays(make_rbm())
    path = tmp_path / "case.npz"
    np.savez(path, w=a["W"], VBIAS=a["vbias"], hbias=a["hbias"])
    with pytest.raises(ModelFileError, match="lacks the arrays 'W', 'vbias'") as info:
        load_model(path)
    assert "W=a['w']" in str(info.value) and "vbias=a['VBIAS']" in str(info.value)


def lateral_npz(tmp_path: Path, name: str, **changes: np.ndarray) -> Path:
    a = family_arrays(make_machine("bm"))
    a.update(changes)
    path = tmp_path / f"{name}.npz"
    np.savez(path, **a)
    return path


def test_asymmetric_laterals_are_refused(tmp_path: Path) -> None:
    L = family_arrays(make_machine("bm"))["L"]
    L[1, 3] += 0.25
    with pytest.raises(ModelFileError, match="lateral couplings L are not symmetric") as info:
        load_model(lateral_npz(tmp_path, "asym", L=L))
    msg = str(info.value)
    assert f"L[1, 3] = {L[1, 3]:g} but L[3, 1] = {L[3, 1]:g}" in msg
    assert "1 of 6 pairs" in msg and "asym.npz" in msg


def test_rounding_level_asymmetry_is_accepted(tmp_path: Path) -> None:
    L = family_arrays(make_machine("bm"))["L"]
    L[1, 3] *= 1 + 1e-12
    loaded, _ = load_model(lateral_npz(tmp_path, "rounding", L=L))
    assert torch.equal(loaded.L.detach(), loaded.L.detach().t())


def test_lateral_diagonal_must_be_zero(tmp_path: Path) -> None:
    J = family_arrays(make_machine("bm"))["J"]
    J[2, 2] = 0.5
    with pytest.raises(ModelFileError, match="lateral couplings J have a non-zero diagonal") as info:
        load_model(lateral_npz(tmp_path, "diag", J=J))
    msg = str(info.value)
    assert "J[2, 2] = 0.5" in msg and "1 of 3 diagonal entries" in msg
    assert "hbias" in msg  # where the diagonal belongs


def test_lateral_of_wrong_shape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="lateral couplings L have the wrong shape") as info:
        load_model(lateral_npz(tmp_path, "shape", L=np.zeros((3, 3))))
    msg = str(info.value)
    assert "L (3, 3)" in msg and "(n_visible, n_visible) = (4, 4)" in msg
    assert "looks like J" in msg  # 3 x 3 is the hidden layer's size


def test_nan_in_a_lateral_is_counted(tmp_path: Path) -> None:
    J = family_arrays(make_machine("bm"))["J"]
    J[0, 1] = np.nan
    with pytest.raises(ModelFileError, match="non-finite") as info:
        load_model(lateral_npz(tmp_path, "nan", J=J))
    msg = str(info.value)
    assert "J has 1 NaN and 0 inf values (of 9)" in msg
    assert "W has" not in msg


def test_integer_lateral_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="J is not floating point"):
        load_model(lateral_npz(tmp_path, "int", J=np.zeros((3, 3), np.int32)))


def test_dbm_with_a_gap_is_refused(tmp_path: Path) -> None:
    z = np.zeros
    path = tmp_path / "gap.npz"
    np.savez(path, W_0=z((4, 3)), W_2=z((2, 2)), bias_0=z(4), bias_1=z(3), bias_2=z(2), bias_3=z(2))
    with pytest.raises(ModelFileError, match=r"DBM arrays have a gap in their numbering: 'W_1' is missing"):
        load_model(path)


def test_a_bm_with_an_uncoupled_layer_and_no_metadata_is_refused_with_the_same_models_arrays(
    tmp_path: Path,
) -> None:
    # bias_0..2 and W_0 alone: a DBM missing W_1, or a BM whose top layer has no couplings. The
    # file is refused, and the hint gives the arrays that hold the BM as a DBM's: W_1 of zeros
    z = np.zeros
    path = tmp_path / "uncoupled.npz"
    arrays = {"W_0": np.ones((4, 3)), "bias_0": z(4), "bias_1": z(3), "bias_2": np.full(2, 0.5)}
    np.savez(path, **arrays)
    with pytest.raises(ModelFileError, match=r"lacks the array 'W_1' of a DBM") as info:
        load_model(path)
    assert "holds that W_l as zeros (the same model)" in str(info.value)
    np.savez(path, **arrays, W_1=z((3, 2)))
    model, meta = load_model(path)
    assert meta["kind"] == "dbm" and model.layer_sizes == (4, 3, 2)


def test_dbm_shapes_must_chain(tmp_path: Path) -> None:
    a = family_arrays(make_machine("dbm"))
    a["W_1"] = np.zeros((2, 2))  # layer 1 has 3 units
    path = tmp_path / "chain.npz"
    np.savez(path, **a)
    with pytest.raises(ModelFileError, match="DBM arrays do not chain: W_1 is 2 x 2") as info:
        load_model(path)
    assert "W_1 (3, 2)" in str(info.value)
    a["W_1"] = np.zeros((2, 3))
    np.savez(path, **a)
    with pytest.raises(ModelFileError, match="W_1 looks transposed"):
        load_model(path)


def test_a_dbm_file_with_one_hidden_layer_is_an_rbm(tmp_path: Path) -> None:
    g = np.random.default_rng(0)
    w, b0, b1 = g.normal(size=(4, 3)), g.normal(size=4), g.normal(size=3)
    path = tmp_path / "short.npz"
    np.savez(path, W_0=w, bias_0=b0, bias_1=b1)
    model, md = load_model(path)
    assert isinstance(model, RBM) and md["kind"] == "rbm"
    np.testing.assert_array_equal(model.W.detach().numpy(), w)
    np.testing.assert_array_equal(model.hbias.detach().numpy(), b1)
    # two deep-named layers with a gap still name the DBM's missing arrays
    np.savez(tmp_path / "gap.npz", W_0=w, bias_0=b0, bias_2=b1)
    with pytest.raises(ModelFileError, match="DBM"):
        load_model(tmp_path / "gap.npz")


def test_one_hidden_layer_reads_alike_from_both_formats_and_says_how_it_was_read(tmp_path: Path) -> None:
    """W_0, bias_0, bias_1 are an RBM's arrays in .npz and .safetensors alike (with sigma a
    Gaussian RBM's), and an error about them says they were read as W, vbias, hbias."""
    g = np.random.default_rng(1)
    w, b0, b1 = g.normal(size=(4, 3)), g.normal(size=4), g.normal(size=3)
    save_file({"W_0": torch.from_numpy(w), "bias_0": torch.from_numpy(b0), "bias_1": torch.from_numpy(b1)},
              tmp_path / "short.safetensors")  # fmt: skip
    np.savez(tmp_path / "short.npz", W_0=w, bias_0=b0, bias_1=b1)
    np.savez(tmp_path / "gauss.npz", W_0=w, bias_0=b0, bias_1=b1, sigma=np.ones(4))
    for name in ("short.safetensors", "short.npz", "gauss.npz"):
        model, md = load_model(tmp_path / name)
        np.testing.assert_array_equal(model.W.detach().numpy(), w)
    assert md["kind"] == "gaussian-rbm"
    np.savez(tmp_path / "transposed.npz", W_0=w.T, bias_0=b0, bias_1=b1)
    with pytest.raises(ModelFileError, match="transposed") as info:
        load_model(tmp_path / "transposed.npz")
    assert "W_0, bias_0 and bias_1 (a DBM of one hidden layer) were read as" in str(info.value)


def test_odd_npz_files_get_short_true_errors(tmp_path: Path) -> None:
    """A fully visible BM of L and vbias loads; a stray array numbered far beyond the file is named
    in a short message (not a list up to its number); a 0-d bias is refused by its stored shape; a
    text file named .npz is not advised to be unpickled."""
    laterals = np.array([[0.0, 0.5, 0.0], [0.5, 0.0, 0.2], [0.0, 0.2, 0.0]])
    np.savez(tmp_path / "fv.npz", L=laterals, vbias=np.zeros(3))
    model, md = load_model(tmp_path / "fv.npz")
    assert md["kind"] == "fvbm" and model.n_hidden == 0
    z = np.zeros
    np.savez(tmp_path / "far.npz", W_0=z((4, 3)), W_1=z((3, 2)), bias_0=z(4), bias_1=z(3), bias_2=z(2),
             bias_100000000=z(2))  # fmt: skip
    np.savez(tmp_path / "far_dbn.npz", W_0=z((4, 3)), vbias_0=z(4), hbias_0=z(3), vbias_100000=z(3))
    for name in ("far.npz", "far_dbn.npz"):
        with pytest.raises(ModelFileError, match="numbered beyond") as info:
            load_model(tmp_path / name)
        assert len(str(info.value)) < 2000
    np.savez(tmp_path / "scalar.npz", W=z((1, 4)), vbias=np.array(0.3), hbias=z(4))
    with pytest.raises(ModelFileError, match=r"vbias \(\)"):
        load_model(tmp_path / "scalar.npz")
    (tmp_path / "text.npz").write_text("hello world, not a zip\n")
    with pytest.raises(ModelFileError, match="not an .npz") as info:
        load_model(tmp_path / "text.npz")
    assert "allow_pickle" not in str(info.value)


def test_a_bfloat16_model_in_npz_records_the_dtype_it_stores(tmp_path: Path) -> None:
    save_model(make_rbm().to(torch.bfloat16), tmp_path / "half.npz")
    with np.load(tmp_path / "half.npz") as archive:
        recorded = json.loads(str(archive[METADATA_KEY]))["dtype"]
        assert archive["W"].dtype == np.float32 and recorded == "float32"


def test_old_format_rbm_file_loads(tmp_path: Path) -> None:
    # Written by boltzkit before layer_sizes and arrays were recorded.
    rbm = make_rbm()
    md = {
        "format": "boltzkit.model",
        "format_version": 1,
        "kind": "rbm",
        "n_visible": N_VISIBLE,
        "n_hidden": N_HIDDEN,
        "dtype": "float32",
        "boltzkit_version": "0.1.0",
        "created": "2024-05-01T12:00:00+00:00",
        "training": {"method": "cd", "k": 1},
        "data": "mnist",
    }
    path = tmp_path / "old.safetensors"
    save_file(
        {n: torch.from_numpy(x) for n, x in arrays(rbm).items()},
        path,
        metadata={METADATA_KEY: json.dumps(md)},
    )
    loaded, out = load_model(path)
    assert isinstance(loaded, RBM)
    assert_same_parameters(rbm, loaded)
    assert out["training"] == md["training"] and out["created"] == md["created"]
    assert out["layer_sizes"] == [N_VISIBLE, N_HIDDEN] and out["arrays"] == ["W", "vbias", "hbias"]
    old_npz = tmp_path / "old.npz"
    np.savez(old_npz, **arrays(rbm), boltzkit=np.array(json.dumps(md)))
    assert_same_parameters(rbm, import_npz(old_npz))


def test_metadata_layer_sizes_must_agree(tmp_path: Path) -> None:
    path = tmp_path / "dbm.safetensors"
    save_model(make_machine("dbm"), path)
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        md = json.loads(f.metadata()[METADATA_KEY])
    md["layer_sizes"] = [4, 3, 5]
    save_file(tensors, path, metadata={METADATA_KEY: json.dumps(md)})
    with pytest.raises(ModelFileError, match="metadata disagrees") as info:
        load_model(path)
    assert "[4, 3, 5]" in str(info.value) and "[4, 3, 2]" in str(info.value)


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.safetensors"
    md = json.dumps({"format": "boltzkit.model", "format_version": 99, "kind": "rbm"})
    save_file(
        {n: torch.from_numpy(x) for n, x in arrays(make_rbm()).items()}, path, metadata={METADATA_KEY: md}
    )
    with pytest.raises(ModelFileError, match="newer version of the format"):
        load_model(path)


def test_model_without_a_file_kind_is_refused(tmp_path: Path) -> None:
    factorial = BoltzmannMachine.independent([torch.zeros(3), torch.zeros(2)])
    refused = (
        "only RBMs, SRBMs, BMs, DBMs, fully visible BMs, Ising models, DBNs, mixtures, "
        "Gaussian-Bernoulli RBMs, categorical RBMs, Gaussian-Bernoulli DBMs and categorical DBMs can be saved"
    )
    with pytest.raises(ModelFileError, match=refused) as info:
        save_model(factorial, tmp_path / "x.safetensors")
    assert "kind 'independent'" in str(info.value)
    assert files_in(tmp_path) == []


def test_registering_a_kind_makes_it_readable_and_writable(tmp_path: Path) -> None:
    # A toy kind: an RBM stored with its weights transposed under another name.
    class TransposedRBM(RBM):
        @property
        def kind(self) -> str:
            return "toy"

    def arrays_(found: object) -> ArraySpec:
        return ArraySpec(("Wt", "vbias", "hbias"), expected="arrays Wt (n_hidden x n_visible), vbias, hbias")

    def check(tensors: dict[str, torch.Tensor], path: Path) -> tuple[int, ...]:
        return (int(tensors["vbias"].shape[0]), int(tensors["hbias"].shape[0]))

    def build(tensors, metadata, dtype, device):  # type: ignore[no-untyped-def]
        n_h, n_v = tensors["Wt"].shape
        return TransposedRBM(
            n_v, n_h, weights=tensors["Wt"].t(), vbias=tensors["vbias"], hbias=tensors["hbias"], dtype=dtype
        )

    def tensors_of(model):  # type: ignore[no-untyped-def]
        return {"Wt": model.W.t(), "vbias": model.vbias, "hbias": model.hbias}

    assert registered_kinds() == (
        "rbm", "srbm", "bm", "dbm", "fvbm", "ising", "dbn", "mixture", "gaussian-rbm", "categorical-rbm",
        "gaussian-dbm", "categorical-dbm",
    )  # fmt: skip
    register_kind(
        ModelKind("toy", "toy RBM", arrays_, check, build, model_type=TransposedRBM, tensors_of=tensors_of)
    )
    try:
        with pytest.raises(BoltzkitError, match="registered already"):
            register_kind(ModelKind("toy", "toy RBM", arrays_, check, build))
        rbm = make_rbm()
        model = TransposedRBM(N_VISIBLE, N_HIDDEN, weights=rbm.W, vbias=rbm.vbias, hbias=rbm.hbias)
        for suffix in (".safetensors", ".npz"):
            path = tmp_path / f"toy{suffix}"
            save_model(model, path)
            loaded, md = load_model(path)
            assert isinstance(loaded, TransposedRBM) and md["kind"] == "toy"
            assert md["arrays"] == ["Wt", "vbias", "hbias"]
            assert torch.equal(loaded.W.detach(), rbm.W.detach())
    finally:
        unregister_kind("toy")
    with pytest.raises(ModelFileError, match="another kind"):
        load_model(tmp_path / "toy.safetensors")


# ------------------------------------------------------------------------------- one JSON encoder
def test_one_json_encoder_writes_a_dtype_one_way(tmp_path: Path) -> None:
    from boltzkit.cli.common import jsonable
    from boltzkit.estimators.result import LogZResult

    assert to_jsonable(torch.float32) == "float32"
    assert to_jsonable(torch.device("cpu")) == "cpu"
    assert jsonable is to_jsonable
    assert jsonable({"dtype": torch.float32}) == {"dtype": "float32"}  # the command line's --json
    assert LogZResult.exact(1.0, dtype=torch.float32).to_dict()["dtype"] == "float32"  # results
    assert json.loads(to_json_text({"dtype": torch.float32})) == {"dtype": "float32"}  # files
    path = tmp_path / "rbm.safetensors"
    save_model(make_rbm(), path, metadata={"training": {"dtype": torch.float64}})
    assert read_metadata(path)["training"] == {"dtype": "float64"}


def test_to_jsonable_converts_the_usual_types(tmp_path: Path) -> None:
    import enum

    class Color(enum.Enum):
        RED = "red"

    value = {
        "nan": math.nan,
        "inf": [math.inf, -math.inf],
        "tensor": torch.tensor([[1.0, 2.0]]),
        "scalar": torch.tensor(3),
        "array": np.arange(3),
        "np_float": np.float32(0.5),
        "np_int": np.int64(7),
        "np_bool": np.bool_(True),
        "path": tmp_path,
        "enum": Color.RED,
        "tuple": (1, None),
        "set": {2, 1},
        "np_dtype": np.dtype("float64"),
        3: "int key",
    }
    assert to_jsonable(value) == {
        "nan": None,
        "inf": [None, None],
        "tensor": [[1.0, 2.0]],
        "scalar": 3,
        "array": [0, 1, 2],
        "np_float": 0.5,
        "np_int": 7,
        "np_bool": True,
        "path": str(tmp_path),
        "enum": "red",
        "tuple": [1, None],
        "set": [1, 2],
        "np_dtype": "float64",
        "3": "int key",
    }
    assert to_jsonable(object()).startswith("<object")  # lenient: anything else as a string
    with pytest.raises(BoltzkitError, match=r"nan at a\[0\]"):
        to_jsonable({"a": [math.nan]}, strict=True)


def _with_metadata(path: Path, **changes) -> None:  # noqa: ANN003
    """Rewrite the safetensors file ``path`` with its metadata changed (a hand-edited file)."""
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        md = json.loads(f.metadata()[METADATA_KEY])
    save_file(tensors, path, metadata={METADATA_KEY: json.dumps({**md, **changes})})


@pytest.mark.parametrize(
    ("units", "key", "label"),
    [
        ("binary", "visible_units", "gaussian"),
        ("gaussian", "visible_units", "categorical:3"),
        ("mixture", "n_components", 7),
    ],
)
def test_metadata_facts_the_model_contradicts_are_refused(
    tmp_path: Path, units: str, key: str, label: str | int
) -> None:
    """A stored fact about the model that its arrays contradict is refused, as a wrong n_visible is
    (review of 2026-12-04: the stored label won, and ``convert`` passed it on or rewrote it); the
    same file with the true fact loads."""
    from conftest import unit_rbm

    from boltzkit.models.mixture import MixtureOfBernoullis

    if units == "mixture":
        model = MixtureOfBernoullis(torch.tensor([0.25, 0.75]), torch.full((2, 5), 0.3))
    else:
        model = unit_rbm(units, 5, 3, seed=0)
    path = tmp_path / "edited.safetensors"
    save_model(model, path)
    true_value = load_model(path)[1].get(key, "binary")
    _with_metadata(path, **{key: label})
    with pytest.raises(ModelFileError, match="metadata disagrees") as info:
        load_model(path)
    assert f"{key}={label!r}" in str(info.value) and repr(true_value) in str(info.value)
    _with_metadata(path, **{key: true_value})
    assert load_model(path)[1][key] == true_value


def test_a_fact_given_to_save_model_cannot_make_a_file_load_model_refuses(tmp_path: Path) -> None:
    """The facts load_model checks are the model's at save too (review of 2026-12-04: a binary
    RBM saved with the metadata of a DBN of Gaussian units stored ``visible_units: gaussian`` and
    then could not be loaded)."""
    path = tmp_path / "top.safetensors"
    save_model(make_rbm(), path, metadata={"visible_units": "gaussian", "alphabet": "ACGT", "note": 1})
    _, md = load_model(path)
    assert "visible_units" not in md and "alphabet" not in md and md["note"] == 1


def test_ising_log_z_constant_comes_from_the_model(tmp_path: Path) -> None:
    """A stored number computed from the parameters is replaced by the model's own value, and a
    descriptive text another tool wrote (its ``convention``) by the model's own."""
    from boltzkit.models.ising import IsingModel

    g = torch.Generator().manual_seed(3)
    J = torch.randn(5, 5, generator=g, dtype=torch.float64).triu(1)
    model = IsingModel(J + J.t(), torch.randn(5, generator=g, dtype=torch.float64))
    path = tmp_path / "ising.safetensors"
    save_model(model, path)
    _with_metadata(path, log_z_constant=99.0, convention="ising +-1")
    md = load_model(path)[1]
    assert md["log_z_constant"] == pytest.approx(model.log_z_constant, abs=1e-12)
    assert md["convention"].startswith("ising: spins s in {-1, +1}")


def test_alphabet_that_is_not_a_string_is_a_clear_error(tmp_path: Path) -> None:
    g = np.random.default_rng(0)
    path = tmp_path / "alphabet.npz"
    md = json.dumps({"kind": "categorical-rbm", "alphabet": 5})
    arrays_of = {"W": g.normal(size=(4, 3, 2)), "vbias": g.normal(size=(4, 3)), "hbias": g.normal(size=2)}
    np.savez(path, **arrays_of, boltzkit=np.array(md))
    with pytest.raises(ModelFileError, match="alphabet") as info:
        load_model(path)
    assert "one letter per state" in str(info.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("training", "abc"),
        ("image_shape", [-4, -4]),
        ("image_shape", [4]),
        ("metrics", "x"),
        ("training.seed", "zero"),
        ("training.seed", 1.5),
        ("training.train_data_fingerprint", 7),
        ("training.sparse_products", "yes"),
    ],
)
def test_metadata_of_the_wrong_type_is_refused_when_saved_and_set_aside_when_loaded(tmp_path, key, value):
    """A review of 2026-12-07: a training record that is a string failed `evaluate` with an
    unexplained AttributeError, a negative image shape `sample` with a ValueError; a seed of "zero"
    passed unread. Each key boltzkit reads is checked: `save_model` refuses a wrong value, and a file
    written elsewhere loads with a warning that names the key, which is set aside."""
    from safetensors.torch import save_file

    from boltzkit.errors import BoltzkitWarning, ModelFileError
    from boltzkit.io import load_model, save_model
    from boltzkit.models import RBM

    metadata: dict = {"training": {"seed": 3}}
    if key.startswith("training."):
        metadata["training"][key.split(".", 1)[1]] = value
    else:
        metadata[key] = value
    with pytest.raises(ModelFileError, match=f"the metadata key '{key}' is one boltzkit reads"):
        save_model(RBM(16, 3), tmp_path / "refused.safetensors", metadata=metadata)
    path = tmp_path / "elsewhere.safetensors"
    save_model(RBM(16, 3), path, metadata={"training": {"seed": 3}})
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
        md = json.loads(f.metadata()["boltzkit"])
    if key.startswith("training."):
        md["training"] = {**md["training"], **metadata["training"]}
    else:
        md[key] = value
    save_file(tensors, str(path), metadata={"boltzkit": json.dumps(md)})
    with pytest.warns(BoltzkitWarning, match=f"the metadata key '{key}' holds .* the key is ignored"):
        _, loaded = load_model(path)
    if key.startswith("training."):
        assert key.split(".", 1)[1] not in loaded["training"]
    else:
        assert key not in loaded


def test_a_negative_seed_recorded_by_an_older_version_still_loads(tmp_path):
    from boltzkit.io import load_model, save_model
    from boltzkit.models import RBM

    save_model(RBM(4, 3), tmp_path / "m.safetensors", metadata={"training": {"seed": -1}})
    assert load_model(tmp_path / "m.safetensors")[1]["training"]["seed"] == -1


def test_an_npz_of_no_kind_names_the_kinds_it_shares_arrays_with(tmp_path):
    """An Ising model's J without its h was told it lacks W, vbias and hbias only."""
    from boltzkit.errors import ModelFileError
    from boltzkit.io import load_model

    path = tmp_path / "only_j.npz"
    np.savez(path, J=np.zeros((3, 3)))
    with pytest.raises(ModelFileError, match="an Ising model \\(arrays J .* and h"):
        load_model(path)
