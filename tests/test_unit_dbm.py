"""DBMs with Gaussian or categorical visible units (``UnitDBM``), tested against exact answers:
brute-force sums over every state, numerical integration, exact transition matrices, and
autograd for the learning rule."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import integrate

from boltzkit.errors import BoltzkitError, IntractableError, ModelFileError
from boltzkit.estimators.api import estimate_log_z
from boltzkit.estimators.likelihood import dataset_log_prob
from boltzkit.estimators.unit_dbm import (
    exact_log_unnormalized,
    exact_log_z_unit_dbm,
    exact_sample_unit_dbm,
    mean_field,
    mean_field_log_unnormalized,
)
from boltzkit.io import export_npz, load_model, save_model
from boltzkit.learning import train_unit_dbm
from boltzkit.learning.unit_dbm import UnitDBMLearner, init_unit_dbm
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.state import ChainState

F64 = torch.float64


def unit_dbm(kind: str, sizes: tuple[int, ...], *, seed: int, scale: float = 1.0) -> UnitDBM:
    """A float64 DBM with random couplings and biases (``scale``: their standard deviation)."""
    g = torch.Generator().manual_seed(seed)
    sigma = (0.5 + torch.rand(sizes[0], generator=g, dtype=F64)) if kind == "gaussian" else None
    model = UnitDBM(kind, sizes, init_scale=scale, generator=g, dtype=F64, sigma=sigma)
    with torch.no_grad():
        for b in model.biases:
            b.copy_(0.5 * scale * torch.randn(b.shape, generator=g, dtype=F64))
    return model


def brute_force_log_z(model: UnitDBM) -> float:
    """``log sum exp(-E)`` over every state of a categorical DBM, from the energy alone."""
    q = model.visible_units.n_states
    layers = [torch.tensor(list(itertools.product(range(q), repeat=model.layer_sizes[0])), dtype=F64)]
    layers += [
        torch.tensor(list(itertools.product((0, 1), repeat=n)), dtype=F64) for n in model.layer_sizes[1:]
    ]
    grids = torch.cartesian_prod(*[torch.arange(x.shape[0]) for x in layers])
    state = ChainState(tuple(x[grids[:, i]] for i, x in enumerate(layers)))
    with torch.no_grad():
        return float(torch.logsumexp(-model.energy(state), 0))


def mixture_data(kind: str, n: int, seed: int) -> torch.Tensor:
    """Two prototypes over 6 units: Gaussian blobs at +-1.5, or categories 0 or 2 kept with
    probability 0.8 (else uniform): data no independent model fits."""
    g = torch.Generator().manual_seed(seed)
    z = (torch.rand(n, 1, generator=g) < 0.5).float()
    if kind == "gaussian":
        return (2 * z - 1) * 1.5 + 0.5 * torch.randn(n, 6, generator=g)
    keep = torch.rand(n, 6, generator=g) < 0.8
    return torch.where(keep, (2 * z).expand(n, 6), torch.randint(0, 3, (n, 6), generator=g).float())


@pytest.mark.parametrize("sizes", [(2, 2, 2), (2, 2, 1, 2)])
def test_exact_log_z_of_a_categorical_dbm_is_the_sum_over_every_state(sizes: tuple[int, ...]) -> None:
    model = unit_dbm("categorical:3", sizes, seed=1, scale=1.5)
    assert exact_log_z_unit_dbm(model).log_z == pytest.approx(brute_force_log_z(model), abs=1e-10)
    states = torch.tensor(list(itertools.product(range(3), repeat=sizes[0])), dtype=F64)
    log_p = exact_log_unnormalized(model, states) - exact_log_z_unit_dbm(model).log_z
    assert float(torch.logsumexp(log_p, 0)) == pytest.approx(0.0, abs=1e-10)


def test_exact_log_z_and_density_of_a_gaussian_dbm_are_the_integrals() -> None:
    model = unit_dbm("gaussian", (1, 2, 2), seed=2)
    log_z = exact_log_z_unit_dbm(model).log_z

    def density(*x: float) -> float:
        return math.exp(float(exact_log_unnormalized(model, torch.tensor([x], dtype=F64))[0]))

    assert math.log(integrate.quad(density, -30, 30)[0]) == pytest.approx(log_z, abs=1e-8)
    # two units: the trapezoid rule on a grid, which converges geometrically for a smooth density
    # that vanishes at the ends (one batch instead of a Python callback per point)
    model2 = unit_dbm("gaussian", (2, 2, 1), seed=3)
    grid = torch.linspace(-25, 25, 2001, dtype=F64)
    points = torch.cartesian_prod(grid, grid)
    density2 = exact_log_unnormalized(model2, points).exp().reshape(2001, 2001).numpy()
    total = integrate.trapezoid(integrate.trapezoid(density2, grid.numpy(), axis=1), grid.numpy())
    assert math.log(total) == pytest.approx(exact_log_z_unit_dbm(model2).log_z, abs=1e-6)


@pytest.mark.parametrize("kind", ["gaussian", "categorical:3"])
def test_the_mean_field_bound_lies_below_log_p_and_its_fixed_point_is_reached(kind: str) -> None:
    model = unit_dbm(kind, (4, 3, 2), seed=4, scale=1.5)
    v = exact_sample_unit_dbm(model, 50, torch.Generator().manual_seed(5)).layers[0]
    exact = exact_log_unnormalized(model, v)
    bound, details = mean_field_log_unnormalized(model, v, tol=1e-10, max_iter=500)
    assert details["mean_field_converged"]
    assert bool((bound <= exact + 1e-10).all())
    # at the fixed point each layer is the exact maximiser given its neighbours: one more sweep moves nothing
    mu, _ = mean_field(model, v, tol=1e-10, max_iter=500)
    again, _ = mean_field(model, v, tol=0.0, max_iter=1, mu=mu)
    assert all(torch.allclose(a, b, atol=1e-9) for a, b in zip(mu, again, strict=True))


@pytest.mark.parametrize("spec", ["gibbs", "flip", "blend:0.5,0.3"])
def test_every_operator_leaves_a_categorical_dbm_invariant(spec: str) -> None:
    from boltzkit.diagnostics.transition_matrix import stationary_check

    model = unit_dbm("categorical:3", (2, 2, 2), seed=6, scale=2.0)
    assert stationary_check(model, spec).ok


def test_exact_samples_have_the_exact_visible_marginal() -> None:
    model = unit_dbm("categorical:3", (2, 3, 2), seed=7, scale=1.5)
    states = torch.tensor(list(itertools.product(range(3), repeat=2)), dtype=F64)
    p = (exact_log_unnormalized(model, states) - exact_log_z_unit_dbm(model).log_z).exp()
    n = 20_000
    v = exact_sample_unit_dbm(model, n, torch.Generator().manual_seed(8)).layers[0]
    counts = torch.tensor([float(((v == s).all(1)).sum()) for s in states], dtype=F64)
    stderr = (p * (1 - p) / n).sqrt()
    assert bool(((counts / n - p).abs() <= 5 * stderr).all())


@pytest.mark.parametrize("kind", ["gaussian", "categorical:3"])
@pytest.mark.parametrize("method", ["reverse-ais", "sandwich"])  # the sandwich's forward run is AIS
def test_ais_lands_in_its_band_around_exact_log_z(kind: str, method: str) -> None:
    model = unit_dbm(kind, (6, 5, 4), seed=9, scale=0.5)
    exact = exact_log_z_unit_dbm(model).log_z
    data = exact_sample_unit_dbm(model, 500, torch.Generator().manual_seed(10)).layers[0]
    result = estimate_log_z(model, method=method, n_chains=100, betas=2000, seed=11, base_rate_data=data)
    assert result.band.minus_3sigma <= exact <= result.band.plus_3sigma
    assert abs(result.log_z - exact) < 0.1


@pytest.mark.parametrize("kind", ["gaussian", "categorical:3"])
def test_the_learning_rule_is_the_gradient_of_the_mean_field_energy_gap(kind: str) -> None:
    """``UnitDBMLearner.mean_field_gradients`` equals autograd's gradient of ``mean E(v, mu) - mean
    E(chains)`` with the marginals and samples held fixed, for every parameter (the bound's entropy
    does not depend on them)."""
    model = unit_dbm(kind, (4, 3, 2, 2), seed=12)
    g = torch.Generator().manual_seed(13)
    data = exact_sample_unit_dbm(model, 7, g).layers[0]
    mu, _ = mean_field(model, data)
    chains = ChainState(tuple(x.detach() for x in model.random_state(5, g).layers))
    positive = ChainState((data, *[m.detach() for m in mu]))
    gap = model.energy(positive).mean() - model.energy(chains).mean()
    params = list(model.parameters())
    expected = torch.autograd.grad(gap, params)
    UnitDBMLearner().mean_field_gradients(model, data, mu, chains)
    for p, e in zip(params, expected, strict=True):
        assert torch.allclose(p.grad, e, atol=1e-10)


@pytest.mark.parametrize("kind", ["gaussian", "categorical:3"])
def test_training_learns_data_that_no_independent_model_fits(kind: str) -> None:
    x, held_out = mixture_data(kind, 2000, 14), mixture_data(kind, 2000, 15)
    start = init_unit_dbm(x, kind, [4, 3], generator=torch.Generator().manual_seed(1)).double()
    model, history = train_unit_dbm(
        x, kind, [4, 3], epochs=15, lr=0.01 if kind == "gaussian" else 0.05, batch_size=50, seed=1
    )
    model = model.double()

    def score(m: UnitDBM) -> float:
        return float(exact_log_unnormalized(m, held_out.double()).mean()) - exact_log_z_unit_dbm(m).log_z

    assert len(history) == 15
    assert score(model) > score(start) + 1.0  # the base-rate start: the best independent model


@pytest.mark.parametrize("kind", ["gaussian", "categorical:4"])
@pytest.mark.parametrize("suffix", ["safetensors", "npz"])
def test_the_file_round_trip_holds(kind: str, suffix: str, tmp_path) -> None:
    model = unit_dbm(kind, (5, 3, 2, 2), seed=16)
    path = tmp_path / f"m.{suffix}"
    (save_model if suffix == "safetensors" else export_npz)(model, path)
    back, _ = load_model(path)
    assert isinstance(back, UnitDBM) and back.kind == model.kind and back.layer_sizes == model.layer_sizes
    for a, b in zip(model.parameters(), back.parameters(), strict=True):
        assert torch.allclose(a, b.to(a.dtype), atol=1e-12)


def test_a_dbm_file_with_inconsistent_shapes_or_sigma_is_refused(tmp_path) -> None:
    model = unit_dbm("gaussian", (5, 3, 2), seed=17)
    arrays = {f"W_{l}": w.detach().numpy() for l, w in enumerate(model.weights)}
    arrays.update({f"bias_{l}": b.detach().numpy() for l, b in enumerate(model.biases)})
    np.savez(tmp_path / "bad.npz", **{**arrays, "sigma": -np.ones(5)})
    with pytest.raises(ModelFileError, match="not positive"):
        load_model(tmp_path / "bad.npz")
    np.savez(tmp_path / "bad2.npz", **{**arrays, "sigma": np.ones(4)})
    with pytest.raises(ModelFileError, match="inconsistent shapes"):
        load_model(tmp_path / "bad2.npz")


def test_bad_models_and_data_get_clear_errors() -> None:
    with pytest.raises(BoltzkitError, match="two hidden layers"):
        UnitDBM("gaussian", (3, 2))
    with pytest.raises(BoltzkitError, match="ordinary DBM"):
        UnitDBM("binary", (3, 2, 2))
    model = unit_dbm("categorical:3", (3, 2, 2), seed=18)
    with pytest.raises(BoltzkitError, match="out of range"):
        model.check_data(torch.tensor([[0.0, 1.0, 3.0]]))
    big = unit_dbm("gaussian", (3, 30, 2), seed=19)
    with pytest.raises(IntractableError):
        exact_log_z_unit_dbm(big, max_bits=20)


def test_the_command_line_trains_measures_and_samples_a_gaussian_dbm(tmp_path) -> None:
    from test_cli import last_json, run

    x = mixture_data("gaussian", 600, 20).numpy()
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "dbm.safetensors"
    trained = run(
        "train", "--data", tmp_path / "x.npy", "--visible", "gaussian", "--model", "dbm",
        "--hidden", "4,3", "--epochs", 5, "--lr", 0.01, "--batch-size", 50, "--out", out, "--json",
    )  # fmt: skip
    assert "warning" not in trained.stderr  # a DBM learns by persistent chains by default (S2)
    assert load_model(out)[1]["training"]["method"] == "sap"
    record = last_json(trained)
    assert record["kind"] == "gaussian-dbm" and record["layer_sizes"] == [6, 4, 3]
    model = load_model(out)[0].double()
    exact = exact_log_z_unit_dbm(model).log_z
    assert record["log_z"] == pytest.approx(exact, abs=1e-4)
    lp = dataset_log_prob(model, torch.as_tensor(x), exact)
    assert record["train_log_lik"] == pytest.approx(lp.mean_log_prob, abs=1e-4)
    logz = last_json(run("logz", out, "--method", "sandwich", "--chains", 50, "--betas", 1000, "--json"))
    assert logz["log_z_minus_3sigma"] <= exact <= logz["log_z_plus_3sigma"]
    assert run("sample", out, "--chains", 4, "--steps", 10, "--out", tmp_path / "s.npy").exit_code == 0
    assert np.load(tmp_path / "s.npy").shape == (4, 6)


@pytest.mark.parametrize("kind", ["gaussian", "categorical:3"])
def test_a_dbm_npz_without_metadata_is_read_by_its_arrays(kind: str, tmp_path) -> None:
    """Other tools' files: ``sigma`` marks a Gaussian DBM, a three-dimensional ``W_0`` a categorical one."""
    model = unit_dbm(kind, (4, 3, 2), seed=21)
    arrays = {f"W_{l}": w.detach().numpy() for l, w in enumerate(model.weights)}
    arrays.update({f"bias_{l}": b.detach().numpy() for l, b in enumerate(model.biases)})
    if kind == "gaussian":
        arrays["sigma"] = model.sigma.detach().numpy()
    np.savez(tmp_path / "plain.npz", **arrays)
    back, _ = load_model(tmp_path / "plain.npz")
    assert isinstance(back, UnitDBM) and back.visible_units == model.visible_units
    v = exact_sample_unit_dbm(model, 5, torch.Generator().manual_seed(22)).layers[0]
    assert torch.allclose(
        exact_log_unnormalized(back.double(), v), exact_log_unnormalized(model, v), atol=1e-9
    )


def test_categorical_states_of_the_wrong_width_are_refused_by_the_coupling() -> None:
    """A lookup of W's rows would quietly use the first units of a narrower row: refused instead."""
    from boltzkit.models.unit_rbm import UnitRBM

    dbm = unit_dbm("categorical:3", (4, 3, 2), seed=23)
    with pytest.raises(BoltzkitError, match="do not fit the couplings"):
        exact_log_unnormalized(dbm, torch.tensor([[0.0, 1.0, 2.0]], dtype=F64))
    with pytest.raises(BoltzkitError, match="do not fit the couplings"):
        UnitRBM("categorical:3", 4, 3).log_unnormalized(torch.tensor([[0.0, 1.0, 2.0]]))
