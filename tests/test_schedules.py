"""Beta schedules for AIS: the paper's, linear, from a file, parsed specs, equal thermodynamic length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import F64

from boltzkit.errors import BoltzkitError
from boltzkit.estimators.schedules import (
    equal_length_betas,
    linear_betas,
    load_betas,
    paper_betas,
    parse_schedule,
    segmented_betas,
    validate_betas,
)


def _check_schedule(betas: torch.Tensor) -> None:
    assert betas.dtype == F64 and betas.dim() == 1
    assert float(betas[0]) == 0.0 and float(betas[-1]) == 1.0
    assert bool((betas[1:] >= betas[:-1]).all())


# ----------------------------------------------------------------------------------- paper
def test_paper_schedule_has_14500_distinct_steps() -> None:
    betas = paper_betas()
    _check_schedule(betas)
    assert betas.numel() == 14_501  # 14,500 steps
    steps = betas[1:] - betas[:-1]
    assert bool((steps > 0).all())  # no duplicated joints (unlike the MATLAB array)
    assert torch.unique(betas).numel() == betas.numel()
    # segment boundaries sit exactly at 0.5 and 0.9
    assert float(betas[500]) == 0.5 and float(betas[4500]) == 0.9
    for lo, hi, width in ((0, 500, 1e-3), (500, 4500, 1e-4), (4500, 14_500, 1e-5)):
        seg = steps[lo:hi]
        torch.testing.assert_close(seg, torch.full_like(seg, width), rtol=1e-9, atol=1e-12)
    assert int((betas <= 0.5).sum()) == 501 and int((betas > 0.9).sum()) == 10_000


def test_scaled_paper_schedule_keeps_its_shape() -> None:
    betas = paper_betas(0.1)
    _check_schedule(betas)
    assert betas.numel() == 50 + 400 + 1000 + 1
    assert float(betas[50]) == 0.5 and float(betas[450]) == 0.9


def test_segmented_betas_do_not_repeat_the_joints() -> None:
    betas = segmented_betas(((0.0, 0.3, 3), (0.3, 1.0, 7)))
    torch.testing.assert_close(
        betas, torch.tensor([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], dtype=F64)
    )


# ---------------------------------------------------------------------------------- linear
@pytest.mark.parametrize("n", [2, 3, 11, 1001])
def test_linear_betas(n: int) -> None:
    betas = linear_betas(n)
    _check_schedule(betas)
    assert betas.numel() == n
    torch.testing.assert_close(betas, torch.arange(n, dtype=F64) / (n - 1), rtol=0, atol=1e-15)


@pytest.mark.parametrize("n", [0, 1, -3])
def test_linear_betas_needs_two_points(n: int) -> None:
    with pytest.raises(BoltzkitError, match="at least two points"):
        linear_betas(n)


# ------------------------------------------------------------------------------------ file
def test_load_betas_reads_numbers_commas_and_comments(tmp_path: Path) -> None:
    f = tmp_path / "betas.txt"
    f.write_text("# my schedule\n0\n0.25, 0.5  # half way\n\n0.5 0.75\n1.0\n")
    betas = load_betas(f)
    torch.testing.assert_close(betas, torch.tensor([0.0, 0.25, 0.5, 0.5, 0.75, 1.0], dtype=F64))
    assert load_betas(str(f)).numel() == 6


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("0\n0.6\n0.4\n1\n", "decreases at position 2"),
        ("0.1\n0.5\n1\n", "runs from 0.1 to 1.0"),
        ("0\n0.5\n0.9\n", "runs from 0.0 to 0.9"),
        ("0\nnan\n1\n", "NaN or infinite"),
        ("0\ninf\n1\n", "NaN or infinite"),
        ("0\n0.5 half\n1\n", "non-number on line 2"),
        ("0\n", "1 value"),
        ("# nothing\n", "0 value"),
    ],
)
def test_load_betas_errors(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(BoltzkitError, match=match):
        load_betas(f)


def test_load_betas_reads_numpy_files_with_the_text_checks(tmp_path: Path) -> None:
    """A 1-D ``.npy`` (or an ``.npz`` of one array) of betas reads as the same schedule as text,
    whatever its name; it passes the same checks, and binary files of other kinds are refused."""
    betas = np.linspace(0.0, 1.0, 50)
    np.save(tmp_path / "b.npy", betas)
    np.savez(tmp_path / "b.npz", betas.astype(np.float32).astype(np.float64))
    np.save(tmp_path / "ints.npy", np.array([0, 1]))
    np.save(tmp_path / "renamed.npy", betas)
    (tmp_path / "renamed.npy").rename(tmp_path / "renamed.dat")
    torch.testing.assert_close(load_betas(tmp_path / "b.npy"), torch.from_numpy(betas))
    torch.testing.assert_close(load_betas(tmp_path / "renamed.dat"), torch.from_numpy(betas))
    assert load_betas(tmp_path / "b.npz").numel() == 50
    torch.testing.assert_close(load_betas(tmp_path / "ints.npy"), torch.tensor([0.0, 1.0], dtype=F64))
    _check_schedule(parse_schedule(str(tmp_path / "b.npy"))[0])
    np.save(tmp_path / "down.npy", betas[::-1].copy())
    np.save(tmp_path / "nan.npy", np.array([0.0, np.nan, 1.0]))
    np.save(tmp_path / "grid.npy", betas.reshape(5, 10))
    np.save(tmp_path / "objects.npy", np.array([0.0, 1.0], dtype=object), allow_pickle=True)
    np.save(tmp_path / "words.npy", np.array(["0", "1"]))
    np.savez(tmp_path / "two.npz", a=betas, b=betas)
    (tmp_path / "noise.bin").write_bytes(bytes(range(256)))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "b.npy").read_bytes()[:100])
    cases = {
        "down.npy": "runs from 1.0 to 0.0",
        "nan.npy": "NaN or infinite",
        "grid.npy": r"1-D array of numbers\. Got: shape \(5, 10\)",
        "objects.npy": "could not read",
        "words.npy": "1-D array of numbers",
        "two.npz": "holds 2 arrays",
        "noise.bin": "binary and not a numpy array file",
        "cut.npy": "could not read",
    }
    for name, match in cases.items():
        with pytest.raises(BoltzkitError, match=match) as info:
            load_betas(tmp_path / name)
        assert "\n" not in str(info.value)  # one line
        if name in ("noise.bin", "objects.npy", "cut.npy"):
            assert ".npy" in str(info.value) and "text file" in str(info.value)  # the formats read


def test_load_betas_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BoltzkitError, match="not found"):
        load_betas(tmp_path / "nope.txt")


def test_validate_betas_accepts_repeats_and_lists() -> None:
    betas = validate_betas(torch.tensor([0.0, 0.5, 0.5, 1.0]))
    assert betas.dtype == F64 and betas.numel() == 4
    with pytest.raises(BoltzkitError, match="invalid beta schedule"):
        validate_betas(torch.tensor([1.0, 0.0]))


# ----------------------------------------------------------------------------------- parse
def test_parse_schedule(tmp_path: Path) -> None:
    betas, name = parse_schedule("paper")
    assert betas.numel() == 14_501 and name.startswith("paper")
    betas, name = parse_schedule("11")
    assert betas.numel() == 11 and "linear" in name
    betas, _ = parse_schedule(7)
    assert betas.numel() == 7
    betas, name = parse_schedule(torch.tensor([0.0, 0.3, 1.0]))
    assert betas.dtype == F64 and name == "custom (2 steps)"
    assert parse_schedule("adaptive") == (None, "adaptive")
    assert parse_schedule(" adaptive:500 ") == (None, "adaptive:500")
    f = tmp_path / "s.txt"
    f.write_text("0 0.2 1\n")
    betas, name = parse_schedule(str(f))
    assert betas.numel() == 3 and name == f"file {f}"


@pytest.mark.parametrize("spec", ["linear", "1e4", "-5"])
def test_parse_schedule_unknown(spec: str) -> None:
    with pytest.raises(BoltzkitError, match="unknown beta schedule"):
        parse_schedule(spec)


def test_a_missing_file_of_betas_is_named_as_such() -> None:
    """A review's finding: a path that does not exist was called an unknown schedule."""
    with pytest.raises(BoltzkitError, match="the file of betas does not exist"):
        parse_schedule(str(Path("/nonexistent/betas.txt")))


@pytest.mark.parametrize("spec", ["adaptive:", "adaptive:0", "adaptive:abc", "adaptive:-3", "adaptive:2.5"])
def test_parse_schedule_refuses_malformed_adaptive_specs(spec: str) -> None:
    with pytest.raises(BoltzkitError, match="adaptive beta schedule needs a positive"):
        parse_schedule(spec)


def test_parse_schedule_adaptive_prefix_alone_is_not_a_schedule() -> None:
    with pytest.raises(BoltzkitError, match="unknown beta schedule"):
        parse_schedule("adaptively")


def test_parse_schedule_refuses_bad_tensors() -> None:
    with pytest.raises(BoltzkitError):
        parse_schedule(torch.tensor([0.0, 0.7, 0.6, 1.0]))
    with pytest.raises(BoltzkitError):
        parse_schedule("1")


# ------------------------------------------------------------------- equal thermodynamic length
def test_equal_length_on_constant_speed_is_linear() -> None:
    grid = torch.tensor([0.0, 0.1, 0.15, 0.5, 0.77, 1.0], dtype=F64)  # non-uniform grid
    betas = equal_length_betas(grid, torch.full((6,), 3.0, dtype=F64), 40)
    torch.testing.assert_close(betas, linear_betas(41), rtol=0, atol=1e-12)


def test_equal_length_steps_have_equal_length() -> None:
    grid = torch.linspace(0.0, 1.0, 101, dtype=F64)
    speed = 1.0 + 50.0 * grid**4  # fast near beta = 1
    betas = equal_length_betas(grid, speed, 64)
    _check_schedule(betas)
    assert betas.numel() == 65
    # the same piecewise-linear length the function integrates (trapezoid rule on the grid)
    seg = 0.5 * (speed[1:] + speed[:-1]) * (grid[1:] - grid[:-1])
    length = np.concatenate([[0.0], np.cumsum(seg.numpy())])
    at = np.interp(betas.numpy(), grid.numpy(), length)
    np.testing.assert_allclose(np.diff(at), length[-1] / 64, rtol=1e-9)
    steps = betas[1:] - betas[:-1]
    assert float(steps[0]) > 3 * float(steps[-1])  # smaller steps where the speed is high


def test_equal_length_with_zero_speed_stays_valid() -> None:
    grid = torch.linspace(0.0, 1.0, 11, dtype=F64)
    betas = equal_length_betas(grid, torch.zeros(11, dtype=F64), 7)
    _check_schedule(betas)
    assert betas.numel() == 8
