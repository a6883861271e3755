"""The scikit-learn estimators (:mod:`boltzkit.sklearn`): scikit-learn's own estimator checks, the
partial_fit semantics, binary input, exact and AIS log-likelihoods, and the README's example."""

from __future__ import annotations

import itertools
import math
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import K_SIGMA

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from boltzkit.estimators import exact_log_z  # noqa: E402
from boltzkit.sklearn import BoltzmannMachineEstimator, RBMEstimator  # noqa: E402

README = Path(__file__).resolve().parents[1] / "README.md"

# small enough for the checks to run in seconds; binarize: scikit-learn's checks feed real values
SMALL = {"n_iter": 2, "batch_size": 5, "binarize": 0.5}


@parametrize_with_checks(
    [
        RBMEstimator(n_components=3, **SMALL),
        RBMEstimator(n_components=3, visible_units="gaussian", n_iter=2, batch_size=5, learning_rate=0.001),
        BoltzmannMachineEstimator(
            kind="srbm", n_components=3, method="pcd", n_chains=5, momentum=0.5, **SMALL
        ),
        BoltzmannMachineEstimator(kind="bm", n_components=2, n_chains=5, **SMALL),
        BoltzmannMachineEstimator(kind="dbm", n_components=(3, 2), n_chains=5, **SMALL),
        # the checks set n_components=1: a DBM of one hidden layer is an RBM for every unit type
        BoltzmannMachineEstimator(
            kind="dbm",
            visible_units="gaussian",
            n_components=(3, 2),
            n_chains=5,
            n_iter=2,
            batch_size=5,
            learning_rate=0.001,
        ),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def binary_data(n: int = 60, d: int = 7, seed: int = 0) -> np.ndarray:
    """Correlated binary rows: two prototypes with 10% of the bits flipped."""
    rng = np.random.default_rng(seed)
    protos = rng.integers(0, 2, size=(2, d))
    rows = protos[rng.integers(0, 2, size=n)]
    flips = rng.random((n, d)) < 0.1
    return np.where(flips, 1 - rows, rows).astype(np.float64)


def all_states(d: int) -> np.ndarray:
    return np.array(list(itertools.product([0.0, 1.0], repeat=d)))


def params(est) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in est.model_.state_dict().items()}


@pytest.mark.parametrize(
    "estimator",
    [
        RBMEstimator(n_components=5, n_iter=3, batch_size=7, random_state=0),
        BoltzmannMachineEstimator(
            kind="srbm",
            n_components=5,
            n_iter=3,
            batch_size=7,
            method="pcd",
            n_chains=11,
            momentum=0.5,
            random_state=0,
        ),
    ],
    ids=["rbm-cd", "srbm-pcd-momentum"],
)
def test_partial_fit_continues_exactly_where_fit_would(estimator):
    """n partial_fit calls on a fresh estimator = fit with n_iter=n: the optimizer's momentum, the
    persistent chains and the random stream carry over between calls (and survive pickling)."""
    x = binary_data()
    fitted = clone(estimator).fit(x)
    stepped = clone(estimator)
    for i in range(3):
        stepped.partial_fit(x)
        if i == 0:
            stepped = pickle.loads(pickle.dumps(stepped))
    for name, value in params(fitted).items():
        torch.testing.assert_close(params(stepped)[name], value, rtol=0, atol=0)
    assert stepped.n_iter_ == fitted.n_iter_ == 3
    assert [r["epoch"] for r in stepped.history_] == [1, 2, 3]


def test_partial_fit_after_fit_changes_the_model_and_forgets_log_z():
    x = binary_data()
    est = RBMEstimator(n_components=4, n_iter=2, random_state=0).fit(x)
    before = est.score(x)
    assert est.log_z_ is not None and est.log_z_.method == "exact"
    w = est.model_.W.detach().clone()
    est.partial_fit(x[:20])
    assert est.log_z_ is None and est.n_iter_ == 3 and len(est.history_) == 3
    assert not torch.equal(w, est.model_.W.detach())
    assert est.score(x) != before


def test_non_binary_input_is_refused_unless_binarize_is_set():
    x = binary_data()
    est = RBMEstimator(n_components=3, n_iter=1, random_state=0)
    with pytest.raises(ValueError, match=r"binary data.*binarize=THRESHOLD"):
        est.fit(x * 0.9)
    est.fit(x.astype(bool))  # booleans and integers are binary too
    est.fit(x.astype(np.uint8))
    with pytest.raises(ValueError, match="binary"):
        est.transform(x + 0.5)
    real = 3 * x + np.random.default_rng(1).random(x.shape)  # in [0, 4): above 1.5 -> 1
    a = RBMEstimator(n_components=3, n_iter=1, binarize=1.5, random_state=0).fit(real)
    b = RBMEstimator(n_components=3, n_iter=1, random_state=0).fit(real > 1.5)
    np.testing.assert_array_equal(a.transform(real), b.transform(x))
    with pytest.raises(ValueError, match="binarize"):
        RBMEstimator(binarize="0.5").fit(x)
    for bits in (-1, 100):  # 100 was taken, and a score then enumerated for "637 days" (2026-12-07)
        with pytest.raises(ValueError, match="exact_max_bits must lie in"):
            RBMEstimator(exact_max_bits=bits).fit(x)


@pytest.mark.parametrize(
    "estimator",
    [
        RBMEstimator(n_components=5, n_iter=5, random_state=0),
        BoltzmannMachineEstimator(kind="srbm", n_components=3, n_iter=5, random_state=0),
        BoltzmannMachineEstimator(kind="bm", n_components=3, n_iter=5, random_state=0),
        BoltzmannMachineEstimator(kind="dbm", n_components=(3, 2), n_iter=5, random_state=0),
    ],
    ids=["rbm", "srbm", "bm", "dbm"],
)
def test_score_samples_is_a_normalised_log_probability(estimator):
    """With exact log Z the probabilities of all 2^7 visible states sum to 1, and score is their
    mean log over the data."""
    x = binary_data()
    est = clone(estimator).fit(x)
    states = all_states(x.shape[1])
    log_p = est.score_samples(states)
    assert log_p.dtype == np.float64 and log_p.shape == (len(states),)
    assert est.log_z_.method == "exact"
    assert math.fsum(np.exp(log_p)) == pytest.approx(1.0, abs=1e-9)
    assert est.score(x) == pytest.approx(float(np.mean(est.score_samples(x))))


def test_log_z_is_estimated_by_ais_when_enumeration_is_refused():
    x = binary_data(d=11)
    est = RBMEstimator(
        n_components=7, n_iter=5, exact_max_bits=0, ais_chains=200, ais_betas=1000, random_state=0
    ).fit(x)
    log_p = est.score_samples(x)
    record = est.log_z_
    assert record.method == "ais" and record.n_chains == 200 and record.n_steps == 999
    exact = exact_log_z(est.model_.as_float64()).log_z
    assert record.log_z == pytest.approx(exact, abs=K_SIGMA * record.log_z_stderr + 1e-9)
    exact_est = clone(est).set_params(exact_max_bits=20).fit(x)
    np.testing.assert_allclose(log_p - log_p[0], exact_est.score_samples(x) - exact_est.score_samples(x)[0])
    assert est.score_samples(x[:3]) == pytest.approx(log_p[:3])  # the record is kept: same log Z
    # set_params after the fit is seen (review of 2026-12-04: the AIS record stayed in use)
    est.set_params(exact_max_bits=20)
    assert est.score_samples(x[:3]) == pytest.approx(exact_est.score_samples(x[:3]), abs=1e-9)
    assert est.log_z_.method == "exact"


def test_every_score_from_an_unreliable_ais_log_z_warns_and_the_checks_run():
    """A review of 2026-12-07: the estimator ran AIS without its checks, so a schedule of 10 steps
    gave a score 1.65 nats too high as reliable, and only the first score warned (the record is
    kept)."""
    from boltzkit.errors import UnreliableEstimateWarning

    rng = np.random.default_rng(1)
    patterns = rng.integers(0, 2, (4, 12))
    x = patterns[rng.integers(0, 4, 1000)]
    noise = rng.random(x.shape) < 0.03
    x[noise] = 1 - x[noise]
    x = x.astype(float)
    est = RBMEstimator(8, n_iter=20, learning_rate=0.1, random_state=1).fit(x)
    est.set_params(exact_max_bits=0, ais_betas=10, ais_chains=20)
    for rows in (x, x[:100]):  # the first score and one from the kept record
        with pytest.warns(UnreliableEstimateWarning, match="unreliable"):
            est.score(rows)
    record = est.log_z_
    assert [c["name"] for c in record.settings["checks"]]  # the checks of logz --method ais ran
    assert record.reliability().reliable is False


def test_transform_gives_hidden_probabilities():
    x = binary_data()
    rbm = RBMEstimator(n_components=5, n_iter=2, random_state=0).fit(x)
    h = rbm.transform(x)
    assert h.shape == (len(x), 5) and h.dtype == np.float64
    expected = rbm.model_.as_float64().prob_h_given_v(torch.from_numpy(x))
    np.testing.assert_allclose(h, expected.detach().numpy(), rtol=1e-12)
    assert list(rbm.get_feature_names_out()) == [f"rbmestimator{i}" for i in range(5)]
    dbm = BoltzmannMachineEstimator(kind="dbm", n_components=(4, 3), n_iter=2, random_state=0).fit(x)
    mf = dbm.transform(x)
    assert mf.shape == (len(x), 7) and ((mf > 0) & (mf < 1)).all()
    fvbm = BoltzmannMachineEstimator(kind="fvbm", n_iter=1, random_state=0).fit(x)
    with pytest.raises(ValueError, match="no hidden units"):
        fvbm.transform(x)


def test_sample_draws_binary_states_reproducibly():
    x = binary_data()
    est = RBMEstimator(n_components=4, n_iter=3, random_state=0).fit(x)
    s = est.sample(9, n_steps=20, random_state=3)
    assert s.shape == (9, x.shape[1]) and set(np.unique(s)) <= {0.0, 1.0}
    np.testing.assert_array_equal(s, est.sample(9, n_steps=20, random_state=3))
    with pytest.raises(ValueError, match="n_samples"):
        est.sample(0)


def test_bad_parameters_are_refused_at_fit():
    x = binary_data()
    for bad in (
        {"n_components": 0},
        {"n_iter": 0},
        {"learning_rate": -1.0},
        {"momentum": 1.0},
        {"method": "nope"},
    ):
        with pytest.raises(ValueError):
            RBMEstimator(**bad).fit(x)
    with pytest.raises(ValueError, match="kind"):
        BoltzmannMachineEstimator(kind="dbn").fit(x)
    with pytest.raises(ValueError, match="one hidden layer"):
        BoltzmannMachineEstimator(kind="bm", n_components=(3, 2)).fit(x)


# The README's example (README.md, "scikit-learn"): the same code, run as written.
README_EXAMPLE = """\
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import Binarizer

from boltzkit.sklearn import RBMEstimator

X, y = load_digits(return_X_y=True)  # 1,797 8x8 digits, grey levels 0..16
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)

# A density model of the binarized digits; GridSearchCV scores it by the mean log p(v)
density = Pipeline([
    ("binarize", Binarizer(threshold=7.5)),
    ("rbm", RBMEstimator(n_iter=10, learning_rate=0.05, batch_size=20, random_state=0)),
])
search = GridSearchCV(density, {"rbm__n_components": [4, 8, 16]}, cv=3)
search.fit(X_train)
rbm = search.best_estimator_["rbm"]
print(search.best_params_, f"test mean log p(v): {search.score(X_test):.2f} nats")
print(f"log Z ({rbm.log_z_.method}): {rbm.log_z_.log_z:.3f}")  # exact: 2^16 hidden states summed

# The hidden probabilities as features for a classifier
classify = Pipeline([
    ("binarize", Binarizer(threshold=7.5)),
    ("rbm", RBMEstimator(n_components=100, n_iter=20, batch_size=20, random_state=0)),
    ("logistic", LogisticRegression(C=100.0, max_iter=2000)),
])
print(f"accuracy: {classify.fit(X_train, y_train).score(X_test, y_test):.3f}")
"""


def test_readme_sklearn_example_runs(capsys):
    readme_blocks = [
        b
        for b in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
        if "boltzkit.sklearn" in b
    ]
    if readme_blocks:  # once the README carries the example, it must be this code
        assert readme_blocks[0] == README_EXAMPLE
    namespace: dict = {}
    exec(compile(README_EXAMPLE, "README_EXAMPLE", "exec"), namespace)  # noqa: S102 - the README's example
    search, rbm = namespace["search"], namespace["rbm"]
    assert search.best_params_ == {"rbm__n_components": 16}  # likelihood prefers the largest here
    assert rbm.log_z_.method == "exact"
    assert -30 < search.score(namespace["X_test"]) < -15
    assert namespace["classify"].score(namespace["X_test"], namespace["y_test"]) > 0.85
    assert "accuracy" in capsys.readouterr().out


# ------------------------------------------------------------------ real-valued and categorical input
def test_gaussian_and_categorical_units_take_their_data_without_a_binarizer() -> None:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from boltzkit.units import Categorical

    rng = np.random.default_rng(4)
    real = rng.normal(size=(120, 5)) @ rng.normal(size=(5, 5)) + 3.0
    pipe = make_pipeline(
        StandardScaler(),
        RBMEstimator(
            4, visible_units="gaussian", learning_rate=0.001, n_iter=3, batch_size=20, random_state=0
        ),
    ).fit(real)
    rbm = pipe[-1]
    scored = rbm.score_samples(StandardScaler().fit(real).transform(real))
    truth = exact_log_z(rbm._model64()).log_z
    expected = rbm._model64().log_unnormalized(torch.from_numpy(StandardScaler().fit_transform(real))) - truth
    assert np.allclose(
        scored, expected.detach().numpy(), atol=1e-9
    )  # a log-density: exact log Z as an integral
    assert pipe.transform(real).shape == (120, 4)
    cats = rng.integers(0, 3, size=(90, 4))
    fitted = RBMEstimator(3, visible_units="categorical", n_iter=2, batch_size=10, random_state=1).fit(cats)
    assert fitted.model_.visible_units == Categorical(3)  # Q from the data
    states = fitted.sample(5, n_steps=3, random_state=0)
    assert states.shape == (5, 4) and set(np.unique(states)) <= {0.0, 1.0, 2.0}
    with pytest.raises(ValueError, match="category out of range"):
        fitted.score(cats + 3)
    with pytest.raises(ValueError, match="binarize applies to binary units"):
        RBMEstimator(3, visible_units="gaussian", binarize=0.5).fit(real)


def test_partial_fit_of_a_categorical_rbm_continues_exactly_like_fit() -> None:
    cats = np.random.default_rng(5).integers(0, 4, size=(60, 5))
    kw = {
        "visible_units": "categorical:4",
        "method": "pcd",
        "n_chains": 7,
        "momentum": 0.5,
        "random_state": 2,
    }
    whole = RBMEstimator(3, n_iter=3, batch_size=10, **kw).fit(cats)
    steps = RBMEstimator(3, n_iter=1, batch_size=10, **kw)
    for _ in range(3):
        steps.partial_fit(cats)
    assert torch.equal(whole.model_.W, steps.model_.W) and steps.n_iter_ == 3
    assert whole.score(cats) == pytest.approx(steps.score(cats), abs=1e-12)


def test_an_unknown_device_is_a_value_error_that_names_it() -> None:
    """scikit-learn's convention: a bad parameter raises ValueError at fit; boltzkit's own error
    is one, and says what devices there are."""
    x = binary_data(20, 5)
    with pytest.raises(ValueError, match="unknown device") as info:
        RBMEstimator(n_components=2, n_iter=1, device="mps").fit(x)
    assert "'cuda:N'" in str(info.value)
