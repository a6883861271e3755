"""Real-valued and categorical visible units (the unit-type seam, boltzkit.units): exact log Z against
numerical integration and brute force, conditionals against their formulas, the annealed Gibbs
kernel against its invariant distribution, AIS and the sandwich against exact log Z, files, data
checks, learning and the command line."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
from conftest import exact_visible_samples, unit_rbm
from scipy import integrate
from test_cli import assert_clean_failure, last_json, run

from boltzkit.errors import BoltzkitError, ModelFileError
from boltzkit.estimators import dataset_log_prob, estimate_log_z, exact_log_z
from boltzkit.estimators.unit_rbm import exact_sample_units, unit_base_rate_path
from boltzkit.io import load_model, save_model
from boltzkit.learning import train_unit_rbm
from boltzkit.learning.unit_rbm import init_unit_rbm
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.units import Bernoulli, Categorical, Gaussian, unit_type

F64 = torch.float64


def gaussian_rbm(n_visible: int, n_hidden: int, seed: int, scale: float = 1.0) -> UnitRBM:
    return unit_rbm("gaussian", n_visible, n_hidden, seed, scale=scale)


def categorical_rbm(n_visible: int, q: int, n_hidden: int, seed: int, scale: float = 1.0) -> UnitRBM:
    return unit_rbm(f"categorical:{q}", n_visible, n_hidden, seed, scale=scale)


def density(model: UnitRBM, *xs: float) -> float:
    with torch.no_grad():
        return math.exp(float(model.log_unnormalized(torch.tensor([xs], dtype=F64))[0]))


# ------------------------------------------------------------------------------ exact log Z
def test_gaussian_log_z_matches_numerical_integration_in_one_and_two_dimensions() -> None:
    one = gaussian_rbm(1, 3, seed=0)
    z1, _ = integrate.quad(lambda x: density(one, x), -40, 40, limit=400, epsabs=0, epsrel=1e-12)
    assert exact_log_z(one).log_z == pytest.approx(math.log(z1), abs=1e-6)
    # two units: the trapezoid rule on a grid, which converges geometrically for a smooth density
    # that vanishes at the ends (one batch of log p*(v) instead of a Python callback per point)
    two = gaussian_rbm(2, 3, seed=1)
    grid = torch.linspace(-30, 30, 2401, dtype=F64)
    with torch.no_grad():
        values = two.log_unnormalized(torch.cartesian_prod(grid, grid)).exp().reshape(2401, 2401).numpy()
    z2 = integrate.trapezoid(integrate.trapezoid(values, grid.numpy(), axis=1), grid.numpy())
    assert exact_log_z(two).log_z == pytest.approx(math.log(z2), abs=1e-6)


def test_categorical_log_z_matches_brute_force_on_either_enumerated_side() -> None:
    model = categorical_rbm(3, 3, 4, seed=2)
    joint = []
    for v in itertools.product(range(3), repeat=3):
        for h in itertools.product(range(2), repeat=4):
            e = model.energy(torch.tensor([v], dtype=F64), torch.tensor([h], dtype=F64))
            joint.append(-float(e[0]))
    truth = float(torch.logsumexp(torch.tensor(joint, dtype=F64), 0))
    result = exact_log_z(model)  # 27 visible states against 16 hidden: the hidden side
    assert result.settings["enumerated_layer"] == "hidden" and result.log_z == pytest.approx(truth, abs=1e-9)
    wide = categorical_rbm(3, 3, 6, seed=2)  # 27 visible states against 64: the visible side
    by_visible = exact_log_z(wide)
    assert by_visible.settings["enumerated_layer"].startswith("visible")
    states = torch.cat([wide.log_marginal_hidden(h) for h in (Bernoulli().states(6, dtype=F64),)])
    assert by_visible.log_z == pytest.approx(float(torch.logsumexp(states, 0)), abs=1e-9)


def test_log_probabilities_are_normalised() -> None:
    model = categorical_rbm(3, 4, 5, seed=3)
    log_z = exact_log_z(model).log_z
    states = Categorical(4).states(3, dtype=F64)
    total = dataset_log_prob(model, states, log_z, per_example=True).per_example
    assert float(torch.logsumexp(total, 0)) == pytest.approx(0.0, abs=1e-9)
    one = gaussian_rbm(1, 2, seed=4)
    log_z = exact_log_z(one).log_z
    mass, _ = integrate.quad(lambda x: density(one, x) * math.exp(-log_z), -40, 40, limit=400)
    assert mass == pytest.approx(1.0, abs=1e-8)


# ------------------------------------------------------------------------------ conditionals
def test_conditionals_sample_their_formulas() -> None:
    g = torch.Generator().manual_seed(5)
    n = 40_000
    field = torch.tensor([[[0.7], [-1.2]]], dtype=F64).expand(n, 2, 1)
    params = {"bias": torch.tensor([0.3, -0.5], dtype=F64), "sigma": torch.tensor([0.5, 2.0], dtype=F64)}
    x = Gaussian().sample(field, params, g)
    mean = params["bias"] + params["sigma"] * field[0, :, 0]
    se = params["sigma"] / math.sqrt(n)
    assert bool(((x.mean(0) - mean).abs() < 4 * se).all())
    var_se = params["sigma"] ** 2 * math.sqrt(2.0 / n)
    assert bool(((x.var(0) - params["sigma"] ** 2).abs() < 4 * var_se).all())
    cat = Categorical(3)
    cfield = torch.tensor([[[0.5, -1.0, 0.2]]], dtype=F64).expand(n, 1, 3)
    cparams = {"bias": torch.tensor([[0.1, 0.4, -0.3]], dtype=F64)}
    draws = cat.sample(cfield, cparams, g)[:, 0].long()
    freq = torch.bincount(draws, minlength=3).to(F64) / n
    p = cat.mean(cfield[:1], cparams)[0, 0]
    assert bool(((freq - p).abs() < 4 * torch.sqrt(p * (1 - p) / n)).all())


@pytest.mark.parametrize("beta", [0.0, 0.35, 1.0])
def test_annealed_gibbs_kernel_leaves_the_intermediate_distribution_invariant(beta: float) -> None:
    """The exact transition matrix over visible states of the block-Gibbs kernel at beta (h | v, then
    v | h from the unit type's annealed conditional) has p_beta as its stationary distribution."""
    model = categorical_rbm(2, 3, 3, seed=6)
    path = unit_base_rate_path(model, data=Categorical(3).states(2, dtype=F64)[[0, 4, 5, 8]])
    vs = Categorical(3).states(2, dtype=F64)
    hs = Bernoulli().states(3, dtype=F64)
    from boltzkit.state import ChainState

    log_pi = path.log_f(ChainState.of(vs, torch.zeros(len(vs), 3, dtype=F64)), beta)
    pi = torch.softmax(log_pi, 0)
    p_h = torch.sigmoid(beta * model.hidden_input(vs))  # (9, 3)
    h_given_v = torch.stack([torch.prod(torch.where(h.bool(), p_h, 1 - p_h), -1) for h in hs], 1)  # (9, 8)
    logits = beta * (model.visible_field(hs) + model.vbias) + (1 - beta) * path.base["bias"]  # (8, 2, 3)
    probs = torch.softmax(logits, -1)
    v_given_h = torch.stack(
        [probs[:, 0, int(v[0])] * probs[:, 1, int(v[1])] for v in vs], 1
    )  # (8 hidden states, 9 visible states)
    transition = h_given_v @ v_given_h
    assert torch.allclose(transition.sum(1), torch.ones(9, dtype=F64))
    assert torch.allclose(pi @ transition, pi, atol=1e-12)


# ------------------------------------------------------------------------------ AIS
@pytest.mark.parametrize("units", ["binary", "gaussian", "categorical:4"])
def test_ais_and_the_sandwich_bracket_exact_log_z(units: str) -> None:
    """The same estimators and the same checks on every unit type (the factory takes the type)."""
    model = unit_rbm(units, 5, 8, seed=7, scale=0.5)
    truth = exact_log_z(model).log_z
    data = exact_visible_samples(model, 2000, seed=8)
    res = estimate_log_z(model, "ais", betas=5000, n_chains=100, base_rate_data=data, seed=9)
    assert res.reliability().reliable
    assert res.band.minus_3sigma <= truth <= res.band.plus_3sigma and abs(res.log_z - truth) < 0.1
    both = estimate_log_z(model, "sandwich", betas=1000, n_chains=100, base_rate_data=data, seed=10)
    assert both.settings["upper_bound"].startswith("stochastic upper bound")  # exact start samples
    assert both.band.minus_3sigma <= truth <= both.band.plus_3sigma


def test_methods_for_binary_units_only_are_refused_with_a_clear_error() -> None:
    from boltzkit.variational import variational_log_z

    with pytest.raises(BoltzkitError, match="bridge sampling"):
        estimate_log_z(gaussian_rbm(2, 2, seed=0), "bridge")
    with pytest.raises(BoltzkitError, match="Ising form of binary units, not on gaussian"):
        variational_log_z(gaussian_rbm(2, 2, seed=0), "trw")


# ------------------------------------------------------------------------------ files and data
def test_npz_files_round_trip_and_bad_files_are_refused(tmp_path) -> None:
    g = np.random.default_rng(0)
    np.savez(tmp_path / "g.npz", W=g.normal(size=(4, 3)), vbias=g.normal(size=4), hbias=g.normal(size=3),
             sigma=1 + g.random(4))  # fmt: skip
    np.savez(
        tmp_path / "c.npz", W=g.normal(size=(4, 5, 3)), vbias=g.normal(size=(4, 5)), hbias=g.normal(size=3)
    )
    for name, kind, units in (("g", "gaussian-rbm", "gaussian"), ("c", "categorical-rbm", "categorical:5")):
        model, md = load_model(tmp_path / f"{name}.npz", dtype=F64)
        assert md["kind"] == kind and model.visible_units == unit_type(units)
        save_model(model, tmp_path / f"{name}.safetensors")
        again, md2 = load_model(tmp_path / f"{name}.safetensors", dtype=F64)
        assert md2["visible_units"] == units and exact_log_z(again).log_z == pytest.approx(
            exact_log_z(model).log_z
        )
    np.savez(tmp_path / "bad.npz", W=g.normal(size=(4, 3)), vbias=g.normal(size=4), hbias=g.normal(size=3),
             sigma=-np.ones(4))  # fmt: skip
    with pytest.raises(ModelFileError, match="not positive"):
        load_model(tmp_path / "bad.npz")
    np.savez(
        tmp_path / "shape.npz",
        W=g.normal(size=(4, 5, 3)),
        vbias=g.normal(size=(4, 4)),
        hbias=g.normal(size=3),
    )
    with pytest.raises(ModelFileError, match="inconsistent shapes"):
        load_model(tmp_path / "shape.npz")


def test_data_that_does_not_fit_the_units_gets_a_clear_error() -> None:
    with pytest.raises(BoltzkitError, match="out of range"):
        Categorical(3).check_data(torch.tensor([[0, 3]]), 2)
    with pytest.raises(BoltzkitError, match="not a category index"):
        Categorical(3).check_data(torch.tensor([[0.5, 1.0]]), 2)
    with pytest.raises(BoltzkitError, match="not finite"):
        Gaussian().check_data(torch.tensor([[0.0, float("nan")]]), 2)
    with pytest.raises(BoltzkitError, match="does not fit"):
        Gaussian().check_data(torch.zeros(3, 4), 2)
    with pytest.raises(BoltzkitError, match="unknown unit type"):
        unit_type("poisson")


# ------------------------------------------------------------------------------ learning
@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_cd_and_pcd_raise_the_held_out_log_likelihood(kind: str) -> None:
    """Trained on exact samples of a teacher of the same size, both rules close most of the gap
    between the base-rate start and the teacher's own held-out log-likelihood (exact scores)."""
    teacher = (
        gaussian_rbm(6, 4, seed=11, scale=2.0)
        if kind == "gaussian"
        else categorical_rbm(6, 3, 4, seed=11, scale=2.0)
    )
    g = torch.Generator().manual_seed(12)
    train, test = (exact_sample_units(teacher, n, g).visible for n in (2000, 2000))
    units = teacher.visible_units
    start = init_unit_rbm(train, units, 4, generator=torch.Generator().manual_seed(0), dtype=F64)
    before = dataset_log_prob(start, test, exact_log_z(start)).mean_log_prob
    best = dataset_log_prob(teacher, test, exact_log_z(teacher)).mean_log_prob
    for method in ("cd", "pcd"):
        model, history = train_unit_rbm(
            train,
            units,
            4,
            method=method,
            epochs=15,
            lr=0.05,
            batch_size=20,
            seed=0,
            momentum=0.5,
            init_scale=0.1,
        )
        after = dataset_log_prob(model, test, exact_log_z(model)).mean_log_prob
        assert len(history) == 15 and after - before > 0.7 * (best - before) and after < best + 0.1


def test_a_diverging_run_stops_with_advice() -> None:
    x = torch.randn(200, 3, generator=torch.Generator().manual_seed(0), dtype=F64) * 50
    with pytest.raises(BoltzkitError, match="diverged"):
        train_unit_rbm(x, "gaussian", 4, epochs=3, lr=50.0, batch_size=10, init_scale=1.0)


# ------------------------------------------------------------------------------ command line
def test_command_line_trains_estimates_evaluates_and_samples(tmp_path) -> None:
    g = np.random.default_rng(1)
    data = tmp_path / "cats.csv"
    np.savetxt(data, g.integers(0, 3, size=(300, 5)), delimiter=",", fmt="%d")
    model = tmp_path / "potts.safetensors"
    trained = last_json(
        run("train", "--data", data, "--test-data", data, "--visible", "categorical:3", "--hidden", 4,
            "--epochs", 2, "--batch-size", 50, "--out", model, "--json")
    )  # fmt: skip
    assert trained["kind"] == "categorical-rbm" and math.isfinite(trained["test_log_lik"])
    exact = last_json(run("logz", model, "--method", "exact", "--json"))
    ais = last_json(run("logz", model, "--method", "ais", "--betas", 500, "--base-rate-data", data, "--json"))
    assert abs(ais["log_z"] - exact["log_z"]) < 0.1 and ais["exact_log_z"] == pytest.approx(exact["log_z"])
    scored = last_json(run("evaluate", model, "--data", data, "--json"))
    assert scored["mean_log_prob"] == pytest.approx(trained["test_log_lik"], abs=1e-6)
    out = tmp_path / "s.npy"
    assert run("sample", model, "--out", out, "--chains", 4, "--steps", 10).exit_code == 0
    states = np.load(out)
    assert states.dtype == np.int16 and states.shape == (4, 5) and states.min() >= 0 and states.max() <= 2
    bad = tmp_path / "bad.csv"
    np.savetxt(bad, np.full((3, 5), 7), delimiter=",", fmt="%d")
    assert "out of range" in assert_clean_failure(run("evaluate", model, "--data", bad))
    assert "--visible" in assert_clean_failure(
        run(
            "train",
            "--data",
            data,
            "--visible",
            "categorical:3",
            "--model",
            "bm",
            "--out",
            tmp_path / "x.safetensors",
        )
    )
    json.dumps(trained)


@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_coupling_gradients_are_those_of_the_coupling(kind: str) -> None:
    """``phi(x)' g`` (one product) and ``through_stats_gradients`` equal autograd's gradient of
    ``sum g * phi(x) W`` with respect to the weights and to sigma (Gaussian units)."""
    model = gaussian_rbm(4, 3, seed=21) if kind == "gaussian" else categorical_rbm(4, 3, 3, seed=21)
    g = torch.Generator().manual_seed(22)
    x = model.sample_independent(6, g).detach()
    weights = torch.randn(6, 3, generator=g, dtype=F64)
    units, params = model.visible_units, model.visible_params()
    flat = model.W.reshape(-1, 3)
    coupling = (weights * units.couple(x, flat, params)).sum()
    wanted = [flat, *([params["sigma"]] if kind == "gaussian" else [])]
    direct = torch.autograd.grad(coupling, wanted)
    with torch.no_grad():
        grad_w = units.stats(x, params).flatten(1).t() @ weights
        others = units.through_stats_gradients(flat, grad_w, params)
    assert torch.allclose(grad_w, direct[0], atol=1e-12)
    assert set(others) == ({"sigma"} if kind == "gaussian" else set())
    if kind == "gaussian":
        assert torch.allclose(others["sigma"], direct[1], atol=1e-12)


@pytest.mark.parametrize("units", [Gaussian(), Categorical(4), Bernoulli()], ids=lambda u: u.name)
def test_energy_difference_is_the_difference_of_self_energies(units) -> None:  # noqa: ANN001
    g = torch.Generator().manual_seed(23)

    def params() -> dict[str, torch.Tensor]:
        out = {"bias": torch.randn(units.bias_shape(5), generator=g, dtype=F64)}
        if isinstance(units, Gaussian):
            out["sigma"] = 0.5 + torch.rand(5, generator=g, dtype=F64)
        return out

    a, b = params(), params()
    x = units.sample(torch.zeros(9, 5, units.n_stats, dtype=F64), a, g)
    direct = units.self_energy(x, a) - units.self_energy(x, b)
    assert torch.allclose(units.energy_difference(a, b)(x), direct, atol=1e-10)


@pytest.mark.parametrize("units", [Bernoulli(), Categorical(3)], ids=lambda u: u.name)
def test_discrete_conditionals_log_prob_and_entropy_match_enumeration(units) -> None:  # noqa: ANN001
    g = torch.Generator().manual_seed(24)
    n = 3
    params = {"bias": torch.randn(units.bias_shape(n), generator=g, dtype=F64)}
    field = torch.randn(1, n, units.n_stats, generator=g, dtype=F64)
    states = units.states(n, dtype=F64)
    log_p = units.log_prob(states, field.expand(len(states), -1, -1), params)
    assert float(torch.logsumexp(log_p, 0)) == pytest.approx(0.0, abs=1e-12)
    entropy = float(-(log_p.exp() * log_p).sum())
    assert float(units.entropy(field, params)[0]) == pytest.approx(entropy, abs=1e-12)


def test_gaussian_log_density_and_entropy_match_numerical_integration() -> None:
    units = Gaussian()
    params = {"bias": torch.tensor([0.3], dtype=F64), "sigma": torch.tensor([0.7], dtype=F64)}
    field = torch.tensor([[[1.1]]], dtype=F64)

    def density(x: float) -> float:
        return math.exp(float(units.log_prob(torch.tensor([[x]], dtype=F64), field, params)[0]))

    assert integrate.quad(density, -20, 20)[0] == pytest.approx(1.0, abs=1e-10)
    entropy = integrate.quad(lambda x: -density(x) * math.log(max(density(x), 1e-300)), -20, 20)[0]
    assert float(units.entropy(field, params)[0]) == pytest.approx(entropy, abs=1e-8)


def test_a_gaussian_rbms_conditional_matches_numerical_integration_in_two_dimensions() -> None:
    """``p(v | h)`` of a Gaussian-Bernoulli RBM with two visible units, from its energy alone
    integrated over a grid by the trapezoid rule: the unit type's log-density, mean and entropy."""
    model = gaussian_rbm(2, 3, seed=31)
    h = torch.tensor([[1.0, 0.0, 1.0]], dtype=F64)
    units, params = model.visible_units, model.visible_params()
    field = model.visible_field(h)
    grid = torch.linspace(-15, 15, 1501, dtype=F64)
    xs = torch.cartesian_prod(grid, grid)
    with torch.no_grad():
        log_joint = -model.energy(xs, h.expand(len(xs), -1))  # -E(v, h) on the grid
        log_p = units.log_prob(xs, field.expand(len(xs), -1, -1), params)
    g = grid.numpy()

    def integral(values: torch.Tensor) -> float:
        table = values.reshape(len(grid), len(grid)).numpy()
        return float(integrate.trapezoid(integrate.trapezoid(table, g, axis=1), g))

    log_z_h = math.log(integral(torch.exp(log_joint - log_joint.max()))) + float(log_joint.max())
    assert torch.allclose(log_p, log_joint - log_z_h, atol=1e-8)
    density = torch.exp(log_p)
    assert integral(density) == pytest.approx(1.0, abs=1e-10)
    means = [integral(density * xs[:, i]) for i in range(2)]
    assert means == pytest.approx(units.mean(field, params)[0].detach().tolist(), abs=1e-8)
    entropy = integral(-density * log_p)
    assert float(units.entropy(field, params)[0]) == pytest.approx(entropy, abs=1e-8)


@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_the_trainers_gradients_are_those_of_the_free_energy_gap(kind: str) -> None:
    """``UnitRBMLearner.free_energy_gradients`` (closed forms, one product for the couplings)
    equals autograd's gradient of ``mean F(data) - mean F(negative)`` for every parameter."""
    from boltzkit.learning.unit_rbm import UnitRBMLearner

    model = gaussian_rbm(4, 3, seed=25) if kind == "gaussian" else categorical_rbm(4, 3, 3, seed=25)
    g = torch.Generator().manual_seed(26)
    data, negative = (model.sample_independent(n, g).detach() for n in (7, 5))
    gap = model.free_energy(data).mean() - model.free_energy(negative).mean()
    params = list(model.parameters())
    expected = torch.autograd.grad(gap, params)
    learner = UnitRBMLearner()
    assert learner.free_energy_gradients(model, data, negative) == pytest.approx(float(gap), abs=1e-10)
    for p, e in zip(params, expected, strict=True):
        assert torch.allclose(p.grad, e, atol=1e-10)


@pytest.mark.parametrize("units", ["binary", "gaussian", "categorical:3"])
def test_the_annealed_conditional_is_the_normalised_geometric_mixture(units: str) -> None:
    """``anneal`` writes ``exp(-(1 - beta) E_base(x) - beta (E(x) - phi(x) . f))`` as the type's own
    conditional: its log-probabilities differ from the mixture's unnormalised ones by a constant,
    and (discrete types) sum to 1; a Gaussian's by the quadrature of the mixture."""
    kind = unit_type(units)
    g = torch.Generator().manual_seed(30)
    n = 2
    q = (kind.n_states,) if isinstance(kind, Categorical) else ()
    params = {"bias": torch.randn(n, *q, generator=g, dtype=F64)}
    base = {"bias": torch.randn(n, *q, generator=g, dtype=F64)}
    if isinstance(kind, Gaussian):
        params["sigma"], base["sigma"] = (0.5 + torch.rand(n, generator=g, dtype=F64) for _ in range(2))
    field = torch.randn(1, n, kind.n_stats, generator=g, dtype=F64)
    for beta in (0.0, 0.3, 1.0):
        f2, p2 = kind.anneal(field, params, base, beta)

        def mixture(x: torch.Tensor, beta: float = beta) -> torch.Tensor:
            coupling = (kind.stats(x, params) * field).sum((-2, -1))
            return -(1 - beta) * kind.self_energy(x, base) - beta * (kind.self_energy(x, params) - coupling)

        if kind.discrete:
            xs = kind.states(n, dtype=F64)
            log_p = kind.log_prob(xs, f2.expand(len(xs), -1, -1), p2)
            assert float(torch.logsumexp(log_p, 0)) == pytest.approx(0.0, abs=1e-12)
            diff = log_p - mixture(xs)
            assert torch.allclose(diff, diff[:1].expand_as(diff), atol=1e-12)
        else:  # one unit at a time: x_1 fixed, x_0 integrated numerically
            xs = torch.stack([torch.linspace(-12, 12, 4001, dtype=F64), torch.zeros(4001, dtype=F64)], 1)
            log_z = math.log(np.trapezoid(torch.exp(mixture(xs)).numpy(), xs[:, 0].numpy()))
            log_p = kind.log_prob(xs, f2.expand(len(xs), -1, -1), p2)
            unit1 = float(log_p[0] - (mixture(xs[:1]) - log_z))  # unit 1's own density at 0
            assert torch.allclose(log_p - unit1, mixture(xs) - log_z, atol=1e-9)


@pytest.mark.parametrize("sampler", ["gibbs", "flip", "blend:0.5"])
def test_the_ais_path_moves_by_operators_that_leave_each_intermediate_distribution_invariant(sampler) -> None:
    """The exact transition matrix of the operator's sweep on the path's intermediate model
    (``AnnealedModel``: the visible units annealed towards the base) keeps ``p_beta(v, h) ~
    exp(-(1 - beta) E_base(v) - beta E(v, h))``: Gibbs, Liu's Metropolized Gibbs and a blend."""
    from boltzkit.diagnostics.transition_matrix import all_states, transition_matrix
    from boltzkit.estimators.unit_rbm import AnnealedModel
    from boltzkit.state import ChainState

    model = categorical_rbm(2, 3, 3, seed=6)
    path = unit_base_rate_path(model, data=Categorical(3).states(2, dtype=F64)[[0, 4, 5, 8]])
    target = AnnealedModel(model, path.base)
    states = all_states(model)
    joint = ChainState((states[:, :2], states[:, 2:]))
    units = model.visible_units
    for beta in (0.0, 0.35, 1.0):
        log_pi = -(1 - beta) * units.self_energy(joint.layers[0], path.base) - beta * model.energy(
            *joint.layers
        )
        pi = torch.softmax(log_pi.detach(), 0)
        P = transition_matrix(target, sampler, beta=beta)
        assert torch.allclose(P.sum(1), torch.ones(len(pi), dtype=F64), atol=1e-12)
        assert torch.allclose(pi @ P, pi, atol=1e-12), (sampler, beta)


@pytest.mark.parametrize("units", ["categorical:3", "categorical:2"])
def test_ais_with_flip_the_state_brackets_exact_log_z(units: str) -> None:
    """AIS whose transitions are Liu's Metropolized Gibbs (the binary flip when Q = 2) lands inside
    its own band around exact log Z, as with Gibbs transitions."""
    model = unit_rbm(units, 5, 6, seed=17, scale=0.5)
    truth = exact_log_z(model).log_z
    data = exact_visible_samples(model, 2000, seed=18)
    res = estimate_log_z(model, "ais", betas=5000, n_chains=100, base_rate_data=data, seed=19, sampler="flip")
    assert res.band.minus_3sigma <= truth <= res.band.plus_3sigma and abs(res.log_z - truth) < 0.1


def test_options_for_binary_models_are_refused_on_unit_models_with_the_reason(tmp_path) -> None:
    model = tmp_path / "g.safetensors"
    save_model(unit_rbm("gaussian", 4, 2, seed=0), model)
    message = assert_clean_failure(run("logz", model, "--trace", tmp_path / "t.npz"))
    assert "binary units" in message and "gaussian visible units" in message
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(0).normal(size=(10, 4)))
    message = assert_clean_failure(run("evaluate", model, "--data", data, "--alphabet", "dna"))
    assert "no categorical visible units" in message
    scored = run("evaluate", model, "--data", data, "--log-p", "mean-field", "--json")
    assert last_json(scored)["bound"] == "exact" and "sum out exactly" in scored.stderr


def test_base_rate_data_are_named_and_a_fit_far_off_the_models_scale_is_refused(tmp_path):
    """--base-rate-data of the wrong width is called base-rate data (not train data); one stray
    huge value makes a Gaussian base no AIS can start from: a one-line error, not log Z = -1e51."""
    model = tmp_path / "g.safetensors"
    save_model(unit_rbm("gaussian", 4, 2, seed=0), model)
    g = np.random.default_rng(0)
    np.save(tmp_path / "wide.npy", g.normal(size=(20, 6)))
    huge = g.normal(size=(20, 4))
    huge[3, 1] = 1e30
    np.save(tmp_path / "huge.npy", huge)
    np.save(tmp_path / "fine.npy", g.normal(size=(20, 4)))
    ais = ("logz", model, "--method", "ais", "--chains", 20, "--betas", 50, "--base-rate-data")
    message = assert_clean_failure(run(*ais, tmp_path / "wide.npy"))
    assert "the base-rate data" in message and "wide.npy" in message and "train data" not in message
    message = assert_clean_failure(run(*ais, tmp_path / "huge.npy"))
    assert "far outside the model's scale" in message and "visible unit 1" in message
    with pytest.raises(BoltzkitError, match="far outside"):
        unit_base_rate_path(load_model(model)[0], data=torch.as_tensor(huge))
    record = last_json(run(*ais, tmp_path / "fine.npy", "--json"))
    assert math.isfinite(record["log_z"]) and record["base_data"].endswith("fine.npy")
