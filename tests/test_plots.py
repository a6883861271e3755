"""Plots (:mod:`boltzkit.plots`, ``boltzkit plot``) drawn from the files boltzkit writes, and the
records behind them: the AIS trace (:mod:`boltzkit.estimators.trace`) and ``logz --keep-weights``."""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_rbm
from typer.testing import CliRunner

from boltzkit.cli.main import app
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import LogZResult, ais, ais_trace, base_rate_path, log_z_by_runs
from boltzkit.estimators.trace import AISTrace
from boltzkit.learning import History
from boltzkit.plots import plot_ais_course, plot_history, plot_logz_runs, plot_samples
from boltzkit.plots.ais import course_title

pytest.importorskip("matplotlib")

README = Path(__file__).resolve().parents[1] / "README.md"
runner = CliRunner()


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def check_png(path: Path, *, min_bytes: int = 2_000, min_side: int = 150) -> tuple[int, int]:
    """A valid PNG (signature, IHDR, decodable) of plausible size; returns (width, height)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    width, height = struct.unpack(">II", data[16:24])
    assert len(data) >= min_bytes, (path, len(data))
    assert min_side <= width <= 5000 and min_side <= height <= 5000, (width, height)
    from matplotlib import image

    assert image.imread(path).shape[:2] == (height, width)
    return width, height


# ------------------------------------------------------------------------ files boltzkit writes
@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    """A model trained by the command line on bars and stripes, with its history, an AIS trace and
    record with log-weights, and samples."""
    d = tmp_path_factory.mktemp("plots")
    model = d / "bas.safetensors"
    run(
        "train", "--data", "bars-and-stripes", "--hidden", 7, "--epochs", 15, "--lr", 0.1, "--batch-size", 8,
        "--history", d / "hist", "--out", model, "--no-progress",
    )  # fmt: skip
    run(
        "logz", model, "--method", "ais", "--betas", 300, "--chains", 37, "--seed", 5,
        "--trace", d / "course.npz", "--trace-chains", 9, "--out", d / "logz.json", "--keep-weights",
    )  # fmt: skip
    run("sample", model, "--chains", 25, "--steps", 30, "--out", d / "samples.npy")
    return {
        "dir": d,
        "model": model,
        "csv": d / "hist.csv",
        "json": d / "hist.json",
        "trace": d / "course.npz",
        "logz": d / "logz.json",
        "samples": d / "samples.npy",
    }


def test_plot_history_from_csv_and_json(written):
    out = plot_history(written["csv"], written["dir"] / "h.png")
    w, _ = check_png(out)
    w2, _ = check_png(plot_history([written["csv"], written["json"]], written["dir"] / "h2.png", title="BAS"))
    assert w == w2  # two panels each: log-likelihood and reconstruction error


def test_plot_history_of_records_without_log_likelihood(tmp_path):
    records = [{"epoch": e, "recon_error": 5.0 / e} for e in range(1, 6)]
    w, _ = check_png(plot_history(History.from_list(records), tmp_path / "r.png"))
    w_two, _ = check_png(
        plot_history([{**r, "train_log_lik": -10 + r["epoch"]} for r in records], tmp_path / "b.png")
    )
    assert w < w_two  # one panel vs two
    with pytest.raises(BoltzkitError, match="nothing to draw"):
        plot_history([{"epoch": 1, "lr": 0.1}], tmp_path / "x.png")
    with pytest.raises(BoltzkitError, match="history file"):
        plot_history(tmp_path / "hist.txt", tmp_path / "x.png")


def test_ais_trace_is_the_ais_estimate_with_its_course(tmp_path):
    model = random_rbm(11, 5, 0)
    path = base_rate_path(model)
    plain = ais(path, n_chains=13, betas=101, seed=7, check=False)
    trace = ais_trace(path, n_chains=13, betas=101, seed=7, at=(0.0, 0.33, 1.0), n_show=4, check=False)
    assert torch.equal(trace.result.log_weights, plain.log_weights)
    assert trace.result.log_z == plain.log_z
    assert trace.snapshots.shape == (3, 4, 11) and trace.snapshots.dtype == np.uint8
    np.testing.assert_allclose(trace.snapshot_betas, [0.0, 0.33, 1.0])
    assert trace.betas.shape == trace.log_weight_var.shape == trace.ess.shape == (101,)
    assert trace.log_weight_var[0] == 0 and trace.ess[0] == pytest.approx(13)
    lw = plain.log_weights
    assert trace.log_weight_var[-1] == pytest.approx(float(lw.var(correction=0)))
    assert trace.ess[-1] == pytest.approx(plain.ess)
    again = AISTrace.load(trace.with_metadata(image_shape=[1, 11]).save(tmp_path / "t.npz"))
    assert torch.equal(again.result.log_weights, lw) and again.result.log_z == plain.log_z
    assert again.result.settings == plain.settings and again.metadata == {"image_shape": [1, 11]}
    np.testing.assert_array_equal(again.snapshots, trace.snapshots)
    check_png(plot_ais_course(again, tmp_path / "course.png"))  # drawn as rows of units
    np.savez(tmp_path / "not-a-trace.npz", x=np.zeros(3))
    with pytest.raises(BoltzkitError, match="AIS trace"):
        AISTrace.load(tmp_path / "not-a-trace.npz")


def test_the_course_title_gives_a_band_only_to_a_reliable_estimate():
    ok = LogZResult.from_log_weights(
        "ais", torch.zeros(50, dtype=torch.float64) + 0.01 * torch.arange(50), log_z_start=0.0, n_steps=100
    )
    heavy = torch.zeros(50, dtype=torch.float64)
    heavy[0] = 40.0  # one run carries the estimate
    bad = LogZResult.from_log_weights("ais", heavy, log_z_start=0.0, n_steps=100)
    assert ok.reliability().reliable and not bad.reliability().reliable
    assert "(±3σ)" in course_title(ok, 4) and "50 chains (4 shown), 100 steps" in course_title(ok, 4)
    title = course_title(bad, 4)
    assert "(±3σ)" not in title and "unreliable" in title and bad.reliability().reason in title


def test_plot_ais_course_from_logz_trace(written):
    trace = AISTrace.load(written["trace"])
    assert trace.metadata["image_shape"] == [4, 4] and trace.snapshots.shape == (4, 9, 16)
    record = json.loads(written["logz"].read_text())
    assert trace.result.log_z == pytest.approx(record["log_z"])  # the same run
    untraced = run(
        "logz", written["model"], "--method", "ais", "--betas", 300, "--chains", 37, "--seed", 5, "--json"
    )
    assert (
        json.loads(untraced.stdout.strip().splitlines()[-1])["log_z"] == record["log_z"]
    )  # tracing changes nothing
    assert [c["name"] for c in record["checks"]] == [
        c["name"] for c in json.loads(untraced.stdout.strip().splitlines()[-1])["checks"]
    ]
    check_png(plot_ais_course(written["trace"], written["dir"] / "course.png"))


def test_a_traced_estimate_is_judged_as_an_untraced_one(tmp_path):
    """An AIS run far too short for its sharp model (5 steps; unreliable on 10 of 10 seeds, traced
    or not) is judged unreliable traced as untraced (review of 2026-12-04: ``logz --trace``
    skipped the checks and printed a band where ``logz`` withheld it)."""
    model = random_rbm(12, 6, 3, scale=3.0)
    path = base_rate_path(model)
    plain = ais(path, n_chains=20, betas=5, seed=1, check=True)
    traced = ais_trace(path, n_chains=20, betas=5, seed=1, n_show=2, check=True).result
    assert not plain.reliability().reliable
    assert traced.log_z == plain.log_z and not traced.reliability().reliable
    # the same checks; their draws follow the trace's final move at beta = 1
    assert [c["name"] for c in traced.settings["checks"]] == [c["name"] for c in plain.settings["checks"]]


def test_log_z_by_runs_pools_the_first_runs():
    lw = torch.randn(40, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    curve = log_z_by_runs(lw, 3.0)
    assert list(curve.counts) == [2, 5, 10, 20, 40]
    full = LogZResult.from_log_weights("ais", lw, log_z_start=3.0, n_steps=0)
    assert curve.log_z[-1] == pytest.approx(full.log_z)
    assert curve.plus_3sigma[-1] == pytest.approx(full.band.plus_3sigma)
    assert (curve.minus_3sigma <= curve.log_z).all() or np.isnan(curve.minus_3sigma).any()
    assert list(log_z_by_runs(lw, 0.0, counts=[1, 7, 99]).counts) == [1, 7]


def test_plot_logz_runs_from_kept_weights(written):
    record = json.loads(written["logz"].read_text())
    assert len(record["log_weights"]) == 37 and record["reciprocal"] is False
    lw = torch.tensor(record["log_weights"], dtype=torch.float64)
    assert record["log_z_start"] + math.log(float(torch.exp(lw).mean())) == pytest.approx(record["log_z"])
    check_png(plot_logz_runs(written["logz"], written["dir"] / "runs.png"))


def test_plot_logz_runs_from_experiment_records_and_results(tmp_path):
    """The per-model records of the experiments keep the weights beside nested estimates."""
    model = random_rbm(9, 4, 1)
    result = ais(base_rate_path(model), n_chains=30, betas=50, seed=0, check=False)
    experiment = {
        "model": "CD1(4)",
        "exact": {"log_z": result.log_z + 0.01},
        "ais_100": {"log_z": result.log_z},
        "log_weights": result.log_weights.tolist(),
    }
    (tmp_path / "exp.json").write_text(json.dumps({"models": [experiment, {**experiment, "model": "B"}]}))
    w1, _ = check_png(plot_logz_runs(tmp_path / "exp.json", tmp_path / "a.png"))
    w2, _ = check_png(plot_logz_runs([result, experiment], tmp_path / "b.png", counts=[2, 10, 30]))
    assert w1 == w2  # two panels each
    (tmp_path / "plain.json").write_text(json.dumps(result.to_dict()))
    with pytest.raises(BoltzkitError, match="--keep-weights"):
        plot_logz_runs(tmp_path / "plain.json", tmp_path / "c.png")


def test_plot_logz_runs_lays_out_rows_and_withholds_an_unreliable_band(tmp_path, monkeypatch):
    """Five panels go in two rows of at most four; a record whose estimate from all its runs is
    unreliable keeps the bands of its smaller pools, and its last point is drawn without one."""
    import boltzkit.plots.ais as plots_ais
    from boltzkit.plots.ais import RunsRecord

    drawn = {}
    monkeypatch.setattr(plots_ais, "save_png", lambda fig, path: drawn.setdefault("fig", fig) and Path(path))
    lw = torch.randn(40, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    panels = [RunsRecord(f"m{i}", lw.tolist(), 0.0, reliable=(i != 2)) for i in range(5)]
    plot_logz_runs(panels, tmp_path / "r.png")
    axes = drawn["fig"].axes
    assert len(axes) == 5
    rows = sorted({round(ax.get_position().y0, 3) for ax in axes})
    assert len(rows) == 2
    n_counts = len(log_z_by_runs(lw, 0.0).counts)  # 2, 5, 10, 20, 40
    for i, ax in enumerate(axes):
        line = ax.containers[0].lines[0]  # the errorbar's data line
        assert len(line.get_xdata()) == (n_counts - 1 if i == 2 else n_counts)
        labels = ax.get_legend_handles_labels()[1]
        assert ("‡ unreliable: no band" in labels) == (i == 2)


def test_plot_cell_curves_draws_a_panel_per_cell_and_shares_each_rows_axis(tmp_path, monkeypatch):
    """A table's learning curves: rows are algorithms, columns learning rates; a cell without runs
    is an empty panel; a row's y axis starts above the start's value (after the first tenth)."""
    import boltzkit.plots.mixing as plots_mixing
    from boltzkit.plots.mixing import plot_cell_curves

    drawn = {}

    def keep(fig, path):
        drawn["fig"] = fig
        return Path(path)

    monkeypatch.setattr(plots_mixing, "save_png", keep)
    updates = list(range(0, 1001, 100))

    def cell(algorithm, lr, top):
        rise = [top - 50.0 * 0.5**i for i in range(len(updates))]  # from top - 50 up towards top
        return {"algorithm": algorithm, "lr": lr, "updates": updates, "gibbs": rise,
                "flip": [v + 0.1 for v in rise], "runs_by_operator": {"gibbs": 3, "flip": 2}}  # fmt: skip

    cells = [cell("PCD_1", 0.01, -10.0), cell("PCD_1", 0.1, -12.0), cell("PCD_5", 0.01, -8.0)]
    no_runs = [{"algorithm": "PCD_10", "lr": 0.01}, {"algorithm": "PCD_10", "lr": 0.1}]
    plot_cell_curves(cells + no_runs, tmp_path / "c.png", title="t", optimum=-9.0)
    axes = drawn["fig"].axes
    assert len(axes) == 6 and not axes[3].axison  # PCD_5 at 0.1 has no runs
    assert axes[3].get_title() == "PCD_5, η = 0.1: no runs"
    # a row none of whose cells has run is still drawn, as empty panels
    assert [ax.get_title() for ax in axes[4:]] == ["PCD_10, η = 0.01: no runs", "PCD_10, η = 0.1: no runs"]
    assert not axes[4].axison and not axes[5].axison
    notes = [t.get_text() for t in drawn["fig"].texts]
    assert any("first tenth of the updates" in t for t in notes)  # the figure says where y starts
    assert axes[0].get_ylim() == axes[1].get_ylim()  # one row, one axis
    # from the lowest value at update 100 (-12 - 25) to the optimum above every curve, padded by 5%
    assert axes[0].get_ylim() == pytest.approx((-37.0 - 1.4, -9.0 + 1.4))
    assert axes[0].get_legend_handles_labels()[1] == ["G (3 runs)", "T (2 runs)"]
    cells[0]["end_level"] = {"gibbs": -10.123456, "flip": -10.0234}
    plot_cell_curves(cells, tmp_path / "c.png")
    labels = drawn["fig"].axes[0].get_legend_handles_labels()[1]
    assert labels == ["G (3 runs; last quarter -10.123)", "T (2 runs; last quarter -10.023)"]
    monkeypatch.undo()
    check_png(plot_cell_curves(cells, tmp_path / "real.png"))
    with pytest.raises(BoltzkitError, match="no cell"):
        plot_cell_curves([], tmp_path / "none.png")
    with pytest.raises(BoltzkitError, match="no cell"):
        plot_cell_curves(no_runs, tmp_path / "none.png")


def test_plot_samples_as_image_grid(written, tmp_path):
    w, h = check_png(plot_samples(written["samples"], tmp_path / "s.png"), min_bytes=200)
    assert w == h  # 25 square images on a square grid
    rows = (np.arange(35) % 2).reshape(5, 7)
    check_png(plot_samples(rows, tmp_path / "rows.png"), min_bytes=100, min_side=5)  # 7 units: rows
    check_png(plot_samples(rows[:, :6], tmp_path / "r.png", image_shape="2x3"), min_bytes=100, min_side=5)
    with pytest.raises(BoltzkitError, match="image shape does not fit"):
        plot_samples(rows, tmp_path / "x.png", image_shape="2x3")
    for unreadable in ("abc", "2x", "0x7", "1x1x7"):  # not a shape at all: said so, with an example
        with pytest.raises(BoltzkitError, match="cannot read the image shape") as info:
            plot_samples(rows, tmp_path / "x.png", image_shape=unreadable)
        assert "--image-shape 1x7" in str(info.value)
    with pytest.raises(BoltzkitError, match=r"\[0, 1\]"):
        plot_samples(rows * 2.0, tmp_path / "x.png")
    spins = (2 * rows - 1).astype(np.int8)  # an Ising model's samples (boltzkit sample writes them so)
    check_png(plot_samples(spins, tmp_path / "spins.png"), min_bytes=100, min_side=5)
    with pytest.raises(BoltzkitError, match=r"\[0, 1\]"):
        plot_samples(spins * 0.5, tmp_path / "x.png")


def test_sklearn_history_is_plotted(tmp_path):
    pytest.importorskip("sklearn")
    from boltzkit.sklearn import RBMEstimator

    x = (np.random.default_rng(0).random((40, 9)) < 0.3).astype(float)
    est = RBMEstimator(n_components=3, n_iter=4, random_state=0).fit(x)
    est.history_.to_csv(tmp_path / "est.csv")
    check_png(plot_history(tmp_path / "est.csv", tmp_path / "est.png"))


# --------------------------------------------------------------------------- the command line
@pytest.mark.parametrize(
    ("kind", "inputs"),
    [
        ("history", ["csv", "json"]),
        ("ais-course", ["trace"]),
        ("logz-runs", ["logz"]),
        ("samples", ["samples"]),
    ],
)
def test_boltzkit_plot_each_kind(written, kind, inputs):
    out = written["dir"] / f"cli-{kind}.png"
    result = run("plot", kind, *[written[i] for i in inputs], "--out", out, "--json")
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["kind"] == kind and record["out"] == str(out) and record["bytes"] == out.stat().st_size
    check_png(out, min_bytes=200)


def test_boltzkit_plot_keeps_a_plot_that_exists_unless_forced(written):
    """As every command: an existing --out is refused before the work (a probe of 2026-12-06 found a
    history plot replaced by a samples plot), and --force replaces it."""
    out = written["dir"] / "kept.png"
    run("plot", "history", written["csv"], "--out", out)
    before = out.read_bytes()
    again = runner.invoke(app, ["plot", "samples", str(written["samples"]), "--out", str(out)])
    assert again.exit_code == 1 and "--force" in again.stderr and out.read_bytes() == before
    run("plot", "samples", written["samples"], "--out", out, "--force")
    assert out.read_bytes() != before
    check_png(out, min_bytes=200)


def test_boltzkit_plot_errors(written, monkeypatch):
    d = written["dir"]
    bad = [
        (("plot", "samples", written["samples"], "--out", d / "x.jpg"), ".png, .svg or .pdf"),
        (("plot", "samples", written["samples"], written["samples"], "--out", d / "x.png"), "one file"),
        (("plot", "history", d / "missing.csv", "--out", d / "x.png"), "file not found"),
        (("plot", "ais-course", written["logz"], "--out", d / "x.png"), "AIS trace"),
        (("logz", written["model"], "--method", "exact", "--trace", d / "t.npz"), "--method ais"),
    ]
    for args, message in bad:
        result = runner.invoke(app, [str(a) for a in args])
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith("error: ") and message in result.stderr, result.stderr
    unknown = runner.invoke(
        app, ["plot", "autocorrelation", str(written["samples"]), "--out", str(d / "x.png")]
    )
    assert unknown.exit_code == 2
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes "import matplotlib" fail
    result = runner.invoke(app, ["plot", "history", str(written["csv"]), "--out", str(d / "none.png")])
    assert result.exit_code == 1 and 'pip install "boltzkit[plot]"' in result.stderr
    assert not (d / "none.png").exists()
    with pytest.raises(BoltzkitError, match="matplotlib"):
        plot_history(written["csv"], d / "none.png")


# The README's plot commands (README.md, "Plots"): the same commands, run as written.
README_PLOT_COMMANDS = [
    "boltzkit train --data bars-and-stripes --hidden 8 --method pcd --k 5 --chains 32 --lr 0.5 "
    "--momentum 0.5 --epochs 100 --batch-size 4 --history bas-history --out bas.safetensors",
    "boltzkit plot history bas-history.csv --out learning-curves.png",
    "boltzkit logz bas.safetensors --method ais --betas 1000 --trace ais-course.npz "
    "--out logz.json --keep-weights",
    "boltzkit plot ais-course ais-course.npz --out ais-course.png",
    "boltzkit plot logz-runs logz.json --out logz-runs.png",
    "boltzkit sample bas.safetensors --chains 16 --steps 1000 --out bas-samples.npy",
    "boltzkit plot samples bas-samples.npy --out bas-samples.png",
]


def test_readme_plot_commands_run(tmp_path, monkeypatch):
    text = README.read_text()
    if "boltzkit plot " in text:  # once the README carries them, they must be these commands
        for command in README_PLOT_COMMANDS:
            assert command in text, command
    monkeypatch.chdir(tmp_path)
    for command in README_PLOT_COMMANDS:
        run(*command.split()[1:])
    for png in ("learning-curves.png", "ais-course.png", "logz-runs.png", "bas-samples.png"):
        check_png(tmp_path / png, min_bytes=200)


def test_plots_are_written_as_svg_and_pdf_by_extension(tmp_path) -> None:
    from conftest import random_rbm

    from boltzkit.estimators import estimate_log_z
    from boltzkit.plots import plot_logz_runs

    result = estimate_log_z(random_rbm(6, 3, seed=0), "ais", n_chains=20, betas=50, seed=0)
    for suffix, magic in ((".svg", b"<?xml"), (".pdf", b"%PDF")):
        out = plot_logz_runs([result], tmp_path / f"runs{suffix}")
        assert out.read_bytes().startswith(magic)


def test_image_panels_draw_samples_beside_training_images(tmp_path):
    from boltzkit.plots.images import plot_image_panels

    rng = np.random.default_rng(0)
    panels = [
        ("training", rng.random((10, 784))),
        ("model", torch.rand(10, 784, generator=torch.Generator().manual_seed(0))),
    ]
    check_png(plot_image_panels(panels, tmp_path / "p.png", cols=5, suptitle="two panels"))
    check_png(plot_image_panels(panels * 4, tmp_path / "rows.png", shape=(28, 28), panel_cols=3))


def test_the_methods_plot_draws_an_unreliable_ais_estimate_without_its_band(tmp_path):
    from boltzkit.experiments.report import MethodsPanel, plot_logz_methods

    methods = [("mean-field", 9.0, "lower", True), ("TRW", 12.0, "upper", False)]
    panels = [
        MethodsPanel("reliable", 10.0, "exact ln Z", (10.1, 9.9, 10.3), methods),
        MethodsPanel("unreliable", 10.0, "AIS ln Ẑ", (10.0, None, 10.4), methods, ais_reliable=False),
    ]
    assert plot_logz_methods(panels, tmp_path / "m.png", suptitle="methods")
    check_png(tmp_path / "m.png")


@pytest.mark.parametrize(("kind", "message"), [("acf", "energy traces"), ("ais-course", "AIS trace"),
                                               ("logz-runs", "not valid JSON")])  # fmt: skip
def test_plots_given_an_array_file_say_what_they_read(tmp_path, kind, message) -> None:
    from test_cli import assert_clean_failure, run

    np.save(tmp_path / "s.npy", np.zeros((3, 4)))
    assert message in assert_clean_failure(run("plot", kind, tmp_path / "s.npy", "--out", tmp_path / "p.png"))


def test_a_history_that_is_not_text_or_diverged_says_so(tmp_path):
    """A review of 2026-12-07: a binary file named .csv or .json ended in a UnicodeDecodeError, and
    epochs of NaN or inf were left out of the curves without a word (a run that diverged looked like
    one that stopped)."""
    for name in ("bin.csv", "bin.json"):
        (tmp_path / name).write_bytes(b"\xff\xfe[]\x00\x81")
        with pytest.raises(BoltzkitError, match="not text"):
            plot_history(tmp_path / name, tmp_path / "x.png")
    diverged = tmp_path / "h.csv"
    diverged.write_text("epoch,train_log_lik,recon_error\n1,-200,10\n2,-180,9\n3,nan,nan\n4,-inf,1e400\n")
    with pytest.warns(UserWarning, match="train_log_lik is not a finite number at epoch 3, 4"):
        plot_history(diverged, tmp_path / "h.png")


def test_log_weights_that_are_nan_or_empty_are_refused_by_what_they_are(written, tmp_path):
    record = json.loads(written["logz"].read_text())
    record["log_weights"][0] = float("nan")
    (tmp_path / "nan.json").write_text(json.dumps(record))
    with pytest.raises(BoltzkitError, match="log-weights are NaN or \\+inf"):
        plot_logz_runs(tmp_path / "nan.json", tmp_path / "n.png")
    record["log_weights"] = []
    (tmp_path / "empty.json").write_text(json.dumps(record))
    with pytest.raises(BoltzkitError, match="no log-weights") as error:
        plot_logz_runs(tmp_path / "empty.json", tmp_path / "e.png")
    assert "not numbers" not in str(error.value)
