"""What the Python API takes and refuses: numpy integers count as whole numbers, betas come as
arrays or lists too, a sampler takes a seed; NaN parameters, fractional sizes, integer dtypes,
DBNs where a Boltzmann machine is needed and unknown devices are refused with a clear error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import F64, random_rbm

from boltzkit.errors import BoltzkitError
from boltzkit.estimators import ais, base_rate_path, dataset_log_prob, exact_log_z
from boltzkit.learning import train_dbn, train_model
from boltzkit.models import RBM, BoltzmannMachine
from boltzkit.models.dbn import DBN
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.samplers import sample


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: RBM(4, 3, weights=torch.full((4, 3), float("nan"))), "NaN or infinite"),
        (lambda: RBM(4, 3, vbias=torch.tensor([0.0, float("inf"), 0.0, 0.0])), "NaN or infinite"),
        (lambda: RBM(4, 3, weights=torch.full((4, 3), 1e300, dtype=F64)), "overflows float32"),
        (lambda: RBM(2.5, 3), "whole number"),
        (lambda: RBM("4", 3), "whole number"),
        (lambda: RBM(4, 3, dtype=torch.int64), "floating point"),
        (lambda: BoltzmannMachine((4, 2.0)), "whole number"),
        # the models of other unit types, as the binary family (a review of 2026-12-07: NaN
        # weights gave a NaN "exact" log Z, and 4.7 visible units became 4)
        (
            lambda: UnitRBM("categorical:3", 4, 3, weights=torch.full((4, 3, 3), float("nan"))),
            "NaN or infinite",
        ),
        (
            lambda: UnitRBM("gaussian", 4, 3, sigma=torch.tensor([1.0, 1.0, float("inf"), 1.0])),
            "NaN or infinite",
        ),
        (
            lambda: UnitRBM("gaussian", 4, 3, vbias=torch.tensor([0.0, float("nan"), 0.0, 0.0])),
            "NaN or infinite",
        ),
        (lambda: UnitRBM("gaussian", 4.7, 3), "whole number"),
        (lambda: UnitRBM("gaussian", "4", 3), "whole number"),
        (
            lambda: UnitDBM(
                "gaussian", [4, 3, 2], biases=[torch.zeros(4), torch.full((3,), float("nan")), torch.zeros(2)]
            ),
            "NaN or infinite",
        ),
        (lambda: UnitDBM("gaussian", [4, 3.0, 2]), "whole number"),
        # finite as given, infinite once cast (as RBM refuses it)
        (
            lambda: UnitRBM("gaussian", 4, 3, vbias=torch.tensor([1e39, 0.0, 0.0, 0.0], dtype=F64)),
            "overflows float32",
        ),
        (
            lambda: UnitDBM(
                "gaussian", [4, 3, 2], weights=[torch.full((4, 3), 1e39, dtype=F64), torch.zeros(3, 2)]
            ),
            "overflows float32",
        ),
    ],
)
def test_a_model_refuses_what_would_make_every_answer_wrong(build, match) -> None:
    with pytest.raises(BoltzkitError, match=match):
        build()


def test_numpy_integers_are_whole_numbers() -> None:
    assert RBM(np.int64(4), np.int32(3)).layer_sizes == (4, 3)
    x = (torch.rand(20, 6, generator=torch.Generator().manual_seed(0)) < 0.4).to(torch.float32)
    a, _ = train_model(
        x, hidden=3, epochs=np.int64(2), batch_size=np.int64(5), seed=np.int64(3), progress=False
    )
    b, _ = train_model(x, hidden=3, epochs=2, batch_size=5, seed=3, progress=False)
    assert torch.equal(a.W, b.W)
    dbn, _ = train_dbn(x, 3, epochs=1, progress=False)  # one number: one layer above the bottom
    assert dbn.layer_sizes == (6, 3)
    with pytest.raises(BoltzkitError, match="positive integer"):
        train_model(x, hidden=3, epochs=2.0, progress=False)
    with pytest.raises(BoltzkitError, match="unknown device"):
        train_model(x, hidden=3, device="tpu", progress=False)


def test_betas_as_an_array_or_a_list_and_a_sampler_seed() -> None:
    rbm = random_rbm(6, 3, 1)
    path = base_rate_path(rbm)
    grid = np.linspace(0.0, 1.0, 60)
    a = ais(path, n_chains=20, betas=grid, seed=0, check=False).log_z
    assert (
        a
        == ais(path, n_chains=20, betas=list(grid), seed=0, check=False).log_z
        == ais(path, n_chains=20, betas=torch.tensor(grid), seed=0, check=False).log_z
    )
    with pytest.raises(BoltzkitError, match="betas must be numbers"):
        ais(path, n_chains=5, betas=[0.0, "a", 1.0], seed=0, check=False)
    by_seed = sample(rbm, "gibbs", n_chains=3, n_steps=2, generator=5).visible
    by_generator = sample(
        rbm, "gibbs", n_chains=3, n_steps=2, generator=torch.Generator().manual_seed(5)
    ).visible
    assert torch.equal(by_seed, by_generator)
    with pytest.raises(BoltzkitError, match="sweeps"):
        sample(rbm, "gibbs", n_chains=2, n_steps=-5, generator=0)


def test_a_dbn_is_pointed_to_its_own_estimators() -> None:
    dbn = DBN([random_rbm(6, 4, 2), random_rbm(4, 3, 3)])
    with pytest.raises(BoltzkitError, match="dbn_bound"):
        dataset_log_prob(dbn, torch.zeros(2, 6), 0.0)
    with pytest.raises(BoltzkitError, match="top RBM"):
        base_rate_path(dbn)
    assert base_rate_path(dbn.top) is not None and exact_log_z(dbn.top).log_z is not None


def test_constant_real_valued_data_is_refused_for_what_it_is() -> None:
    """Not "the learning rate is too large": Gaussian units cannot fit a spread that is not there."""
    from boltzkit.errors import DataError

    with pytest.raises(DataError, match="every column of the data is constant"):
        train_model(torch.ones(20, 3, dtype=F64), hidden=2, visible="gaussian", epochs=1, progress=False)


def test_train_model_passes_probabilities_as_data_to_train() -> None:
    x = 0.5 * torch.rand(20, 6, generator=torch.Generator().manual_seed(0), dtype=F64)
    model, _ = train_model(x, hidden=3, epochs=1, probabilities=True, progress=False)
    assert model.layer_sizes == (6, 3)
    with pytest.raises(BoltzkitError, match="binary"):
        train_model(x, hidden=3, epochs=1, progress=False)


@pytest.mark.parametrize("name", ["ais", "reverse_ais", "sandwich", "bridge", "sis", "ais_trace"])
def test_path_estimators_given_a_model_say_how_to_make_its_path(name) -> None:
    import boltzkit.estimators as est
    from boltzkit.estimators.trace import ais_trace

    estimator = ais_trace if name == "ais_trace" else getattr(est, name)
    with pytest.raises(BoltzkitError, match=rf"{name}\(base_rate_path\(model\)\)") as caught:
        estimator(RBM(4, 3), n_chains=2)
    assert "Got: RBM" in str(caught.value) and "estimate_log_z" in str(caught.value)


def test_samplers_take_a_seed_and_refuse_chains_that_disagree_with_init() -> None:
    from boltzkit.samplers import sample_dbn

    dbn = DBN([RBM(4, 3), RBM(3, 2)])
    a = sample_dbn(dbn, "gibbs", n_chains=3, n_steps=2, generator=0)
    b = sample_dbn(dbn, "gibbs", n_chains=3, n_steps=2, generator=0)
    assert torch.equal(a.layers[0], b.layers[0]) and a.layers[0].shape == (3, 4)
    rbm = RBM(4, 3)
    with pytest.raises(BoltzkitError, match="another number of chains"):
        sample(rbm, "gibbs", n_chains=3, n_steps=1, generator=0, init=rbm.random_state(5, torch.Generator()))
    with pytest.raises(BoltzkitError, match="number of chains"):
        sample(rbm, "gibbs", n_chains=-1, n_steps=1, generator=0)


def test_values_that_are_no_seed_or_path_are_refused_plainly() -> None:
    """A review's finding: ``ais(..., seed='a')``, a seed of 10^20 and ``load_model(5)`` ended in
    raw Python errors; 2.5 AIS chains ran as 2."""
    from boltzkit.errors import BoltzkitError
    from boltzkit.estimators import ais
    from boltzkit.estimators.paths import base_rate_path
    from boltzkit.io import load_model
    from boltzkit.models import RBM

    path = base_rate_path(RBM(4, 2))
    for seed, match in (
        ("a", "a seed must be a whole number"),
        (2.5, "whole number"),
        (10**20, "out of range"),
    ):
        with pytest.raises(BoltzkitError, match=match):
            ais(path, n_chains=4, betas=10, seed=seed, check=False)
    with pytest.raises(BoltzkitError, match="the number of AIS chains must be a positive integer"):
        ais(path, n_chains=2.5, betas=10, seed=0, check=False)
    with pytest.raises(BoltzkitError, match="a model path must be a string or a path"):
        load_model(5)


@pytest.mark.parametrize(
    ("v", "match"),
    [
        (lambda v: v[0], "2-D"),  # one row as a 1-D vector: before, n_visible copies of log p(v)
        (lambda v: v * 0.5, "binary"),
        (lambda v: v * 2, "binary"),
        (lambda v: v[:, :5], "columns"),
    ],
)
def test_exact_log_probabilities_refuse_what_is_not_a_binary_state(v, match) -> None:
    """``exact_log_prob``, ``exact_log_unnormalized_visible`` and ``log_unnormalized_visible``
    check their states as ``dataset_log_prob`` does (a review of 2026-12-07: 0.5s and 2s gave
    numbers, a 1-D row gave one value per unit)."""
    from boltzkit.estimators import exact_log_prob, exact_log_unnormalized_visible
    from boltzkit.estimators.likelihood import log_unnormalized_visible

    rbm = random_rbm(6, 4, 3)
    data = (torch.rand(20, 6, generator=torch.Generator().manual_seed(0)) < 0.5).to(F64)
    for fn in (exact_log_prob, exact_log_unnormalized_visible, log_unnormalized_visible):
        with pytest.raises(BoltzkitError, match=match):
            fn(rbm, v(data))
    # bool and integer states are states: the same numbers as float ones
    expected = exact_log_prob(rbm, data)
    torch.testing.assert_close(exact_log_prob(rbm, data.bool()), expected)
    torch.testing.assert_close(exact_log_prob(rbm, data.to(torch.int64)), expected)


def test_dataset_log_prob_takes_a_variational_record_with_its_bound() -> None:
    """A mean-field log Z (a lower bound) gives an upper bound of log p(v), TRW's (an upper bound)
    a lower one; anything but a record or a number is refused plainly (before: a raw TypeError)."""
    from boltzkit.estimators.exact import exact_log_unnormalized_visible
    from boltzkit.variational import variational_log_z

    rbm = random_rbm(6, 4, 3)
    data = (torch.rand(20, 6, generator=torch.Generator().manual_seed(0)) < 0.5).to(F64)
    exact = dataset_log_prob(rbm, data, exact_log_z(rbm)).mean_log_prob
    log_p_star = float(exact_log_unnormalized_visible(rbm, data).mean())
    for method, bound in (("mean-field", "upper"), ("trw", "lower")):
        record = variational_log_z(rbm, method)
        result = dataset_log_prob(rbm, data, record)
        assert result.bound == bound
        assert result.mean_log_prob == pytest.approx(log_p_star - record.log_z, abs=1e-12)
        assert (result.mean_log_prob >= exact) if bound == "upper" else (result.mean_log_prob <= exact)
    for bad in (None, "3.0", True):
        with pytest.raises(BoltzkitError, match="a log Z record or a number"):
            dataset_log_prob(rbm, data, bad)
    given = dataset_log_prob(rbm, data, 3.0).mean_log_prob  # a number in any of its forms is taken
    for number in (np.float32(3.0), np.array(3.0), torch.tensor(3.0), np.array([3.0])):
        assert dataset_log_prob(rbm, data, number).mean_log_prob == pytest.approx(given)


def test_exact_log_prob_checks_its_states_before_it_enumerates_log_z(monkeypatch) -> None:
    from boltzkit.estimators import exact as exact_module

    monkeypatch.setattr(exact_module, "exact_log_z", lambda *a, **k: pytest.fail("enumerated first"))
    with pytest.raises(BoltzkitError, match="binary"):
        exact_module.exact_log_prob(random_rbm(6, 4, 3), torch.full((2, 6), 0.5, dtype=F64))


def test_a_lateral_pair_is_judged_against_its_own_size() -> None:
    """0.4 against -0.4 beside an entry of 1e6 was within 1e-6 of the largest entry, and averaged to
    zero without a word (a probe of 2026-12-07); the rounding of X @ X.T, near-zero pairs included,
    still passes."""
    from boltzkit.models.boltzmann import asymmetric_pairs

    lateral = torch.zeros(4, 4, dtype=F64)
    lateral[0, 1] = lateral[1, 0] = 1e6
    lateral[2, 3], lateral[3, 2] = 0.4, -0.4
    with pytest.raises(BoltzkitError, match="symmetric"):
        BoltzmannMachine.srbm(4, 3, L=lateral, dtype=F64)
    x = torch.randn(30, 7, generator=torch.Generator().manual_seed(0), dtype=F64)
    rounded = x @ x.t()  # symmetric up to the rounding of its sums
    rounded.fill_diagonal_(0.0)
    assert not bool(asymmetric_pairs(rounded).any())


def test_exact_log_z_beyond_float64_is_refused() -> None:
    """Finite weights of 1e308 gave log Z = inf, and `logz` printed no log Z line at exit 0."""
    w = torch.zeros(4, 3, dtype=F64)
    w[0, 0] = w[0, 1] = 1e308
    with pytest.raises(BoltzkitError, match="not a finite number in float64"):
        exact_log_z(RBM(4, 3, weights=w, dtype=F64))


def test_base_rate_data_is_checked_as_data_and_may_be_an_array() -> None:
    """A review of 2026-12-07: a NumPy array ended in an AttributeError, values of 2 or NaN were
    blamed on the model's biases. Arrays and integer tensors are taken; values outside [0, 1] are
    refused as data (probabilities, as a DBN passes up to its top, are data too)."""
    rbm = random_rbm(6, 3, 0)
    x = np.random.default_rng(0).random((20, 6)) < 0.5
    from_array = base_rate_path(rbm, data=x)
    from_ints = base_rate_path(rbm, data=torch.from_numpy(x).long())
    assert torch.equal(from_array.model_a.bias(0), from_ints.model_a.bias(0))
    assert base_rate_path(rbm, data=np.full((3, 6), 0.3)).base_name == "base rates of the data"
    for bad, match in ((np.full((3, 6), 2.0), "in \\[0, 1\\]"), (np.full((3, 6), np.nan), "in \\[0, 1\\]"),
                       (torch.full((3, 6), -1e9), "in \\[0, 1\\]"), (np.zeros((3, 5)), "wrong width"),
                       (np.zeros(6), "2-D"), ("abc", "array of numbers")):  # fmt: skip
        with pytest.raises(BoltzkitError, match=match):
            base_rate_path(rbm, data=bad)


def test_a_log_z_record_of_another_model_is_refused() -> None:
    """``dataset_log_prob(rbm2, x, exact_log_z(rbm))`` gave rbm2's log p with rbm's log Z (a
    review of 2026-12-07): a record knows its model's fingerprint; a float64 copy shares it."""
    a, b = random_rbm(6, 3, 0), random_rbm(6, 3, 1)
    x = (torch.rand(10, 6, generator=torch.Generator().manual_seed(0)) < 0.5).to(F64)
    own = dataset_log_prob(a, x, exact_log_z(a.as_float64())).mean_log_prob
    assert own == pytest.approx(dataset_log_prob(a, x, exact_log_z(a)).mean_log_prob)
    with pytest.raises(BoltzkitError, match="of another model"):
        dataset_log_prob(b, x, exact_log_z(a))
    from boltzkit.estimators import estimate_log_z

    with pytest.raises(BoltzkitError, match="of another model"):
        dataset_log_prob(b, x, estimate_log_z(a, "ais", n_chains=10, betas=20, check=False))
    assert dataset_log_prob(b, x, float(exact_log_z(b).log_z)).mean_log_prob < 0  # a number is taken


def test_a_negative_seed_is_refused_as_on_the_command_line() -> None:
    with pytest.raises(BoltzkitError, match="out of range"):
        ais(base_rate_path(RBM(4, 2)), n_chains=4, betas=10, seed=-1, check=False)
