"""DBNs over Gaussian and categorical data: a UnitRBM at the bottom, binary layers above.

Checked against exact answers on tiny models: the exact ``log p(v)`` of the DBN is a normalised
distribution (a sum over every categorical state, a numerical integral for Gaussian units), the
exact bound lies below it, the Monte Carlo bound of S1 Eq. 24 estimates the exact bound within its
own standard error, and the DBN's samples have the exact visible marginals.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import F64, random_rbm, unit_rbm
from scipy import integrate
from typer.testing import CliRunner

from boltzkit.cli.main import app
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import dbn_bound, dbn_exact_bound, dbn_exact_log_prob
from boltzkit.io import load_model, save_model
from boltzkit.learning import train_dbn, train_unit_rbm
from boltzkit.models import DBN
from boltzkit.samplers import sample_dbn
from boltzkit.units import unit_type

K_SIGMA = 5.0
UNITS = ["gaussian", "categorical:3"]


def unit_dbn(units: str, n_visible: int = 4, seed: int = 1) -> DBN:
    """A random float64 DBN: a UnitRBM of 3 hidden units below a 3 x 4 binary top."""
    return DBN([unit_rbm(units, n_visible, 3, seed=seed), random_rbm(3, 4, seed=seed + 1)])


def data_for(units: str, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if units == "gaussian":
        return torch.randn(n, 4, generator=g, dtype=F64)
    return torch.randint(0, 3, (n, 4), generator=g).to(F64)


def test_a_categorical_dbn_is_a_normalised_distribution_and_its_bound_lies_below() -> None:
    dbn = unit_dbn("categorical:3")
    states = unit_type("categorical:3").states(4, dtype=F64)  # all 81 visible states
    log_p = dbn_exact_log_prob(dbn, states)
    assert float(torch.logsumexp(log_p, 0)) == pytest.approx(0.0, abs=1e-12)
    assert bool((dbn_exact_bound(dbn, states) <= log_p + 1e-12).all())


def test_a_gaussian_dbn_is_a_normalised_density() -> None:
    dbn = DBN([unit_rbm("gaussian", 1, 3, seed=3), random_rbm(3, 2, seed=4)])

    def density(t: float) -> float:
        return float(dbn_exact_log_prob(dbn, torch.tensor([[t]], dtype=F64)).exp())

    assert integrate.quad(density, -40, 40, limit=200)[0] == pytest.approx(1.0, abs=1e-8)
    x = torch.linspace(-3, 3, 13, dtype=F64).unsqueeze(1)
    assert bool((dbn_exact_bound(dbn, x) <= dbn_exact_log_prob(dbn, x) + 1e-12).all())


@pytest.mark.parametrize("units", UNITS)
def test_the_monte_carlo_bound_estimates_the_exact_bound(units: str) -> None:
    dbn = unit_dbn(units)
    x = data_for(units, 2000, seed=5)
    res = dbn_bound(dbn, x, "exact", n_samples=5, seed=6)
    exact = float(dbn_exact_bound(dbn, x).mean())
    assert res.bound == "lower" and abs(res.mean_bound - exact) <= K_SIGMA * res.mc_stderr


def test_dbn_samples_have_the_exact_visible_marginals() -> None:
    dbn = unit_dbn("categorical:3")
    states = unit_type("categorical:3").states(4, dtype=F64)
    p = dbn_exact_log_prob(dbn, states).exp()
    exact = torch.stack([(p.unsqueeze(1) * (states == q)).sum(0) for q in range(3)], 1)  # (unit, state)
    n = 20_000
    v = sample_dbn(dbn, n_chains=n, n_steps=30, generator=torch.Generator().manual_seed(7)).visible
    assert v.shape == (n, 4) and set(torch.unique(v).tolist()) <= {0.0, 1.0, 2.0}
    freq = torch.stack([(v == q).to(F64).mean(0) for q in range(3)], 1)
    se = torch.sqrt(exact * (1 - exact) / n)
    assert bool(((freq - exact).abs() <= K_SIGMA * se).all())


def test_the_layers_refuse_unit_rbms_above_the_bottom_and_a_one_layer_unit_dbn() -> None:
    with pytest.raises(BoltzkitError, match="only the bottom RBM"):
        DBN([random_rbm(4, 3, seed=0), unit_rbm("gaussian", 3, 2, seed=1)])
    with pytest.raises(BoltzkitError, match="one-layer DBN"):
        DBN([unit_rbm("gaussian", 4, 3, seed=1)])
    with pytest.raises(BoltzkitError, match="field, not logits"):
        unit_dbn("gaussian").down_logits(0, torch.zeros(1, 3, dtype=F64))


@pytest.mark.parametrize("units", UNITS)
def test_greedy_training_stacks_binary_layers_on_a_frozen_unit_bottom(units: str, tmp_path) -> None:
    teacher = unit_dbn(units, seed=11)
    x = sample_dbn(teacher, n_chains=1500, n_steps=30, generator=torch.Generator().manual_seed(12)).visible
    bottom, _ = train_unit_rbm(x, units, 3, epochs=10, lr=0.05, batch_size=20, seed=0, init_scale=0.1)
    bottom = bottom.to(F64)
    start = bottom.W.detach().clone()
    kw = dict(bottom=[bottom], batch_size=20, seed=1, dtype=F64, device="cpu", progress=False)
    untrained, _ = train_dbn(x, [3, 4], epochs=1, lr=1e-12, **kw)
    dbn, hists = train_dbn(x, [3, 4], epochs=10, lr=0.05, **kw)
    assert dbn.layer_sizes == (4, 3, 4) and dbn.visible_units == unit_type(units)
    assert hists[0] is None and len(hists[1]) == 10 and torch.equal(dbn.rbms[0].W, start)  # bottom frozen
    assert float((dbn.top.W - untrained.top.W).detach().abs().max()) > 0.01  # the top was trained
    bound = dbn_exact_bound(dbn, x)
    assert bool(torch.isfinite(bound).all()) and bool((bound <= dbn_exact_log_prob(dbn, x) + 1e-10).all())
    with pytest.raises(BoltzkitError, match="transposed"):
        train_dbn(x, [3, 4], init_transpose=True, **kw)
    with pytest.raises(BoltzkitError):
        train_dbn(x + 10 if units != "gaussian" else x[:, :3], [3, 4], bottom=[bottom], progress=False)
    # the file round trip keeps the unit bottom, and the bound of the loaded DBN is the same
    save_model(dbn, tmp_path / "d.safetensors")
    again, md = load_model(tmp_path / "d.safetensors", dtype=F64)
    assert again.visible_units == unit_type(units) and md["visible_units"] == units
    torch.testing.assert_close(dbn_exact_bound(again, x), bound)


@pytest.mark.parametrize("units", UNITS)
def test_the_cli_trains_a_dbn_on_a_unit_bottom_and_evaluates_it(units: str, tmp_path) -> None:
    runner = CliRunner()
    rng = np.random.default_rng(0)
    if units == "gaussian":
        data = rng.normal(size=(300, 6))
    else:
        data = rng.integers(0, 3, size=(300, 6))
    np.save(tmp_path / "x.npy", data)
    args = ["train", "--data", str(tmp_path / "x.npy"), "--visible", units, "--hidden", "5", "--epochs", "2",
            "--out", str(tmp_path / "bottom.safetensors"), "--test-data", "none"]  # fmt: skip
    assert runner.invoke(app, args).exit_code == 0
    args = ["train", "--model", "dbn", "--data", str(tmp_path / "x.npy"), "--bottom",
            str(tmp_path / "bottom.safetensors"), "--hidden", "5,4", "--epochs", "2",
            "--out", str(tmp_path / "dbn.safetensors"), "--test-data", "none"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    mixture = ["train", "--model", "mixture", "--data", str(tmp_path / "x.npy"), "--bottom",
               str(tmp_path / "bottom.safetensors"), "--out", str(tmp_path / "m.safetensors")]  # fmt: skip
    refused = runner.invoke(app, mixture)
    assert refused.exit_code != 0 and "--bottom applies to DBNs" in refused.output
    dbn, md = load_model(tmp_path / "dbn.safetensors")
    assert isinstance(dbn, DBN) and dbn.visible_units == unit_type(units)
    result = runner.invoke(
        app, ["evaluate", str(tmp_path / "dbn.safetensors"), "--data", str(tmp_path / "x.npy"), "--json"]
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    exact = float(dbn_exact_bound(dbn, dbn.check_data(torch.as_tensor(data))).mean())
    assert (
        record["bound"] == "lower" and abs(record["mean_log_prob"] - exact) <= K_SIGMA * record["mc_stderr"]
    )
    result = runner.invoke(
        app, ["sample", str(tmp_path / "dbn.safetensors"), "--chains", "50", "--steps", "5", "--out",
              str(tmp_path / "s.npy")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    samples = np.load(tmp_path / "s.npy")
    if units == "gaussian":  # real values, not bits
        assert samples.dtype == np.float32 and len(np.unique(samples)) > 100
    else:
        assert samples.dtype == np.int16 and set(np.unique(samples)) <= {0, 1, 2}


def test_a_dbn_file_must_hold_the_units_its_metadata_name_and_npz_files_need_none(tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    from boltzkit.errors import ModelFileError
    from boltzkit.io import export_npz

    dbn = unit_dbn("gaussian")
    save_model(dbn, tmp_path / "d.safetensors")
    export_npz(dbn, tmp_path / "d.npz")
    np.savez(
        tmp_path / "bare.npz", **{k: v for k, v in np.load(tmp_path / "d.npz").items() if k != "boltzkit"}
    )
    again, _ = load_model(tmp_path / "bare.npz", dtype=F64)  # no metadata: sigma_0 says Gaussian
    assert again.visible_units == unit_type("gaussian")
    x = data_for("gaussian", 5, seed=0)
    torch.testing.assert_close(dbn_exact_log_prob(again, x), dbn_exact_log_prob(dbn, x))
    from safetensors import safe_open

    with safe_open(tmp_path / "d.safetensors", "pt") as f:
        metadata = f.metadata()
    tensors = {k: v for k, v in load_file(tmp_path / "d.safetensors").items() if k != "sigma_0"}
    record = json.loads(metadata["boltzkit"])  # a hand-edited file: sigma_0 gone, metadata still Gaussian
    record["arrays"] = [a for a in record["arrays"] if a != "sigma_0"]
    save_file(tensors, tmp_path / "broken.safetensors", metadata={"boltzkit": json.dumps(record)})
    with pytest.raises(ModelFileError, match="do not hold the visible units its metadata name"):
        load_model(tmp_path / "broken.safetensors")
    with pytest.raises(BoltzkitError, match="not one probability"):
        unit_dbn("categorical:3").generate_down(
            torch.zeros(2, 3, dtype=F64), generator=torch.Generator().manual_seed(0), visible="probs"
        )
