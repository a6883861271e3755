"""scikit-learn estimators for Boltzmann machines: :class:`RBMEstimator` and
:class:`BoltzmannMachineEstimator` (``kind="rbm" | "srbm" | "bm" | "dbm"``).

They follow scikit-learn's conventions, so that they work in a ``Pipeline``, ``GridSearchCV``,
``cross_val_score``, ``clone`` and pickling (and pass ``parametrize_with_checks``, binary units
with ``binarize`` set: the checks feed real-valued data, which binary units refuse without it):

``fit(X)``
    a fresh model, trained ``n_iter`` passes over ``X`` (minibatch SGD, CD-k or persistent chains).
``partial_fit(X)``
    one pass over ``X``, continuing the current model (the first call starts one). The training
    state lives on between calls: the parameters, the optimizer (momentum), the persistent chains
    of PCD/SAP and the random stream, so ``n`` calls of ``partial_fit(X)`` on a fresh estimator give
    exactly the model of ``fit(X)`` with ``n_iter=n``. The learning rate is constant (no decay).
``transform(X)``
    the hidden probabilities ``p(h_j = 1 | v)``: exact for an RBM or SRBM, the mean-field marginals
    (all hidden layers side by side) for a BM or DBM.
``score_samples(X)``
    ``log p(v)`` per row, in nats. ``log Z`` is exact when at most ``exact_max_bits`` units must be
    enumerated, else estimated by AIS (``ais_chains`` runs of the ``ais_betas`` schedule, from the
    base rates of the training data, with the checks of ``boltzkit logz --method ais``: the halved
    schedule and the reverse runs or probe chains); the record is kept on the estimator as
    ``log_z_`` (computed once per fitted model, at the first call, or by :meth:`estimate_log_z`),
    and every call while it is unreliable raises an ``UnreliableEstimateWarning``. For a BM or DBM whose
    hidden units are too many to enumerate (more than 16), ``log p*(v)`` is the mean-field lower
    bound, so the values are lower bounds (up to the AIS error of ``log Z``).
``score(X)``
    the mean of ``score_samples``: the average log-likelihood, so model selection
    (``GridSearchCV``, ``cross_val_score``) picks the most likely model.
``sample(n_samples)``
    visible states after ``n_steps`` sweeps of ``sampler`` from uniform random starts.

**Binary data.** The models are over binary units. With ``binarize=None`` (default) the input must
hold only 0 and 1; anything else is refused with a ``ValueError`` that names the first offending
value. With ``binarize=t`` values above ``t`` become 1 and the others 0 (as
``sklearn.preprocessing.Binarizer(threshold=t)``), which makes any real-valued input usable.

**Real-valued and categorical data.** ``RBMEstimator(visible_units="gaussian")`` is a
Gaussian-Bernoulli RBM over real-valued input as it is (sigma learned; standardise the input, e.g.
with ``StandardScaler`` in a Pipeline), and ``visible_units="categorical"`` a categorical (Potts)
RBM over integer input ``0..Q-1`` (``Q`` from the data at the first fit, or fixed by
``"categorical:Q"``); ``BoltzmannMachineEstimator(kind="dbm", visible_units=...)`` is a DBM over
them (with one hidden layer, an RBM). They train under the same trainer as binary models, by CD-k
or PCD for an RBM (:class:`~boltzkit.learning.unit_rbm.UnitRBMLearner`) and by the mean-field
positive phase and persistent chains for a DBM
(:class:`~boltzkit.learning.unit_dbm.UnitDBMLearner`), with Gibbs or flip-the-state chains
(categorical units); score with exact ``log Z`` (an integral over the real
values) or AIS from the data's base rates (a DBM's ``log p(v)`` a mean-field lower bound when its
hidden units are too many to enumerate), and sample with Gibbs, flip-the-state (categorical units)
or parallel tempering.

**Randomness.** ``random_state`` follows scikit-learn: an int gives the same model on every fit,
``None`` draws a seed from NumPy's global random state; that seed starts the one
``torch.Generator`` behind initialisation, shuffling and sampling (and the AIS estimate).
Training runs on ``device`` (default ``"cpu"``; ``"cuda"`` or ``"auto"`` to use a GPU);
everything returned is a NumPy array.
"""

from __future__ import annotations

import copy
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

try:
    from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
    from sklearn.utils import check_random_state
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'boltzkit.sklearn needs scikit-learn >= 1.6: pip install "boltzkit[sklearn]" (or scikit-learn)'
    ) from _exc

from boltzkit._numerics import resolve_device
from boltzkit.data.dataset import check_binary
from boltzkit.errors import BoltzkitError, DataError, UnreliableEstimateWarning
from boltzkit.estimators import (
    LogZResult,
    ais,
    base_rate_path,
    dataset_log_prob,
    enumeration_plan,
    exact_log_z,
)
from boltzkit.estimators.base_rate import fit_base_rate
from boltzkit.estimators.exact import enumeration_bits
from boltzkit.estimators.reliability import warn_unreliable
from boltzkit.estimators.unit_dbm import unit_dbm_path
from boltzkit.estimators.unit_rbm import unit_base_rate_path
from boltzkit.learning import History, ProgressBar, Trainer, init_model, make_learner
from boltzkit.learning.api import TRAINABLE_KINDS, UNIT_MODELS
from boltzkit.learning.trainer import sgd_optimizer
from boltzkit.learning.unit_dbm import UnitDBMLearner, init_unit_dbm
from boltzkit.learning.unit_rbm import UnitRBMLearner, init_unit_rbm
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.mean_field import mean_field
from boltzkit.models.mean_field import unit_dbm_mean_field as unit_mean_field
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.samplers import sample as run_chains
from boltzkit.units import Categorical, UnitType, unit_type

#: Rows evaluated at once by transform and score_samples.
EVAL_BATCH = 10_000
#: Rows of the training data kept for the base rates of AIS on real-valued or categorical units.
BASE_RATE_ROWS = 10_000
#: The largest ``exact_max_bits`` (the command line's ``--max-bits`` takes 1 to 62 too).
MAX_EXACT_BITS = 62


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def _non_negative_number(value: object, name: str, *, strictly: bool = False) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or (value <= 0 if strictly else value < 0):
        raise ValueError(f"{name} must be a finite number {'> 0' if strictly else '>= 0'}; got {value!r}")
    return float(value)


class _BoltzmannEstimator(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """What both estimators share (the public classes hold the parameters)."""

    # ----------------------------------------------------------------------- parameters
    def _kind(self) -> str:
        raise NotImplementedError

    def _hidden(self, kind: str) -> list[int]:
        n = self.n_components
        sizes = [n] if isinstance(n, numbers.Integral) and not isinstance(n, bool) else n
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) == 0:
            raise ValueError(f"n_components must be a positive integer (or, for a DBM, a tuple); got {n!r}")
        out = [_positive_int(h, "every entry of n_components") for h in sizes]
        if kind != "dbm" and len(out) != 1:
            raise ValueError(f"a {kind} has one hidden layer: n_components must be an integer; got {n!r}")
        return out

    def _method(self, kind: str) -> str:
        method = str(self.method).strip().lower()
        if method == "auto":
            return "cd" if kind == "rbm" else "sap"
        return method

    def _check_params(self) -> None:
        _positive_int(self.n_iter, "n_iter")
        _positive_int(self.batch_size, "batch_size")
        _positive_int(self.k, "k")
        _positive_int(self.n_chains, "n_chains")
        _positive_int(self.ais_chains, "ais_chains")
        _non_negative_number(self.learning_rate, "learning_rate", strictly=True)
        _non_negative_number(self.momentum, "momentum")
        _non_negative_number(self.weight_decay, "weight_decay")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must lie in [0, 1); got {self.momentum!r}")
        b = self.binarize
        if b is not None and (isinstance(b, bool) or not isinstance(b, numbers.Real) or not np.isfinite(b)):
            raise ValueError(f"binarize must be None or a finite threshold; got {b!r}")
        if isinstance(self.exact_max_bits, bool) or not isinstance(self.exact_max_bits, numbers.Integral):
            raise ValueError(f"exact_max_bits must be an integer; got {self.exact_max_bits!r}")
        if not 0 <= self.exact_max_bits <= MAX_EXACT_BITS:  # as the command line's --max-bits
            raise ValueError(
                f"exact_max_bits must lie in [0, {MAX_EXACT_BITS}] (0: always estimate log Z); "
                f"got {self.exact_max_bits!r}"
            )

    # ----------------------------------------------------------------------------- input
    def _validate(self, X: Any, *, reset: bool) -> np.ndarray:
        return validate_data(self, X, dtype="numeric", reset=reset)

    def _units(self, X: np.ndarray | None = None) -> UnitType | None:
        """The visible unit type when it is not binary (``None`` for binary units): ``visible_units``,
        with ``Q`` of a bare ``"categorical"`` from the data of the first fit (``X``), else from the
        fitted model."""
        spec = str(getattr(self, "visible_units", "binary")).strip().lower()
        if spec in ("binary", "bernoulli"):
            return None
        if spec == "categorical":
            if hasattr(self, "model_") and X is None:
                return self.model_.visible_units
            if X is None or X.size == 0:
                raise ValueError("visible_units='categorical' takes Q from the data: fit first")
            return Categorical(max(2, int(np.max(X)) + 1))
        try:
            return unit_type(spec)
        except BoltzkitError as exc:
            raise ValueError(f"visible_units: {exc}") from None

    def _input(self, X: np.ndarray, units: UnitType | None = None) -> Tensor:
        """``X`` as the model's data: 0/1 for binary units (:meth:`_binary`), else checked by the
        visible unit type (real values, or category indices)."""
        units = units or (
            self.model_.visible_units if isinstance(getattr(self, "model_", None), UNIT_MODELS) else None
        )
        if units is None:
            return self._binary(X)
        self._check_params()
        if self.binarize is not None:
            raise ValueError(f"binarize applies to binary units, not visible_units={units.name!r}")
        try:
            return units.check_data(torch.from_numpy(np.array(X, dtype=np.float64)), X.shape[1], "X").float()
        except BoltzkitError as exc:
            raise BoltzkitError(
                f"{type(self).__name__} with {units.name} units: {exc.what}",
                got=exc.got,
                expected=exc.expected,
            ) from None

    def _binary(self, X: np.ndarray) -> Tensor:
        """``X`` as a float32 tensor of 0/1 (binarized at ``binarize``, or checked to be binary)."""
        self._check_params()
        if self.binarize is not None:
            return torch.from_numpy(np.asarray(X > float(self.binarize), dtype=np.float32))
        x = np.array(X)  # a writable copy (X may be a read-only memmap)
        try:
            return check_binary(x, source="X").to(torch.float32)
        except DataError as exc:
            raise DataError(
                f"{type(self).__name__} models binary data: {exc.what}",
                got=exc.got,
                expected=exc.expected,
                hint="pass binarize=THRESHOLD (values above it become 1, the others 0), or put "
                "sklearn.preprocessing.Binarizer before the estimator in a Pipeline.",
            ) from None

    # ------------------------------------------------------------------------- training
    def _start(self, x: Tensor, units: UnitType | None = None) -> None:
        """A fresh model and training state for data ``x`` (initialisation of fit / first partial_fit);
        ``units``: the visible unit type when it is not binary."""
        self._check_params()
        kind = self._kind()
        if kind not in TRAINABLE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(TRAINABLE_KINDS)}; got {kind!r}")
        hidden = self._hidden(kind)
        method = self._method(kind)
        device = resolve_device(self.device)  # a BoltzkitError, a ValueError, names a bad one
        seeds = check_random_state(self.random_state).randint(np.iinfo(np.int32).max, size=2)
        generator = torch.Generator(device=device)
        generator.manual_seed(int(seeds[0]))
        self.history_ = History()
        self.n_iter_ = 0
        self.log_z_: LogZResult | None = None
        self._ais_seed = int(seeds[1])
        if units is not None:  # real-valued or categorical visible units: an RBM or a DBM
            if kind not in ("rbm", "dbm"):
                raise ValueError(f"visible_units={units.name!r} makes an RBM or a DBM; got kind={kind!r}")
            # the couplings are drawn on the CPU (then moved), as train_model draws them
            init_generator = generator
            if device.type != "cpu":
                init_generator = torch.Generator().manual_seed(int(seeds[0]))
            if kind == "rbm" or len(hidden) == 1:  # a DBM of one hidden layer is an RBM, as for binary units
                model = init_unit_rbm(x, units, hidden[0], generator=init_generator)
                learner = UnitRBMLearner(method, int(self.k), self.sampler, n_chains=int(self.n_chains))
            else:
                model = init_unit_dbm(x, units, hidden, generator=init_generator)
                learner = UnitDBMLearner(method, int(self.k), self.sampler, n_chains=int(self.n_chains))
            model = model.to(device)
            couplings, others = learner.parameter_groups(model)
            self._base_data = x[:BASE_RATE_ROWS].clone()
        else:
            model = init_model(kind, x.shape[1], hidden, generator=generator, data=x, device=device)
            learner = make_learner(method, k=int(self.k), sampler=self.sampler, n_chains=int(self.n_chains))
            names = {model.coupling_name(l, m) for l, m in model.coupling_keys}
            named = list(model.named_parameters())
            couplings = [p for n, p in named if n in names]
            others = [p for n, p in named if n not in names]
            self._visible_sum = torch.zeros(x.shape[1], dtype=torch.float64)
            self._n_seen = 0
        optimizer = sgd_optimizer(
            couplings, others, lr=self.learning_rate, momentum=self.momentum, weight_decay=self.weight_decay
        )
        self.model_: BoltzmannMachine | UnitRBM | UnitDBM = model
        self._learner = learner
        self._optimizer = optimizer
        self._generator_state = generator.get_state()

    def _run(self, x: Tensor, epochs: int) -> None:
        """``epochs`` passes over ``x``, continuing the kept training state (the optimizer's
        momentum, the learner's persistent chains, the random stream)."""
        model = self.model_
        generator = torch.Generator(device=model.device)
        generator.set_state(self._generator_state)
        if not isinstance(model, UNIT_MODELS):  # the base rates of AIS, from all binary data seen
            self._visible_sum += x.sum(0, dtype=torch.float64)
            self._n_seen += int(x.shape[0])
        trainer = Trainer(
            model,
            self._learner,
            self._optimizer,
            x.to(device=model.device, dtype=model.dtype),
            epochs=epochs,
            batch_size=_positive_int(self.batch_size, "batch_size"),
            generator=generator,
            callbacks=[ProgressBar(desc=type(self).__name__)] if self.verbose else (),
            check_data=False,
        )
        for record in trainer.fit():
            self.history_.append({**record, "epoch": len(self.history_) + 1})
        model.zero_grad(set_to_none=True)
        self._generator_state = generator.get_state()
        self.n_iter_ += epochs
        self.log_z_ = None  # the model changed

    def fit(self, X: Any, y: Any = None) -> _BoltzmannEstimator:
        """Train a fresh model for ``n_iter`` passes over ``X`` (binary, ``(n_samples, n_features)``).

        ``y`` is ignored. Returns the estimator.
        """
        X = self._validate(X, reset=True)
        units = self._units(X)
        x = self._input(X, units)
        self._start(x, units)
        self._run(x, _positive_int(self.n_iter, "n_iter"))
        return self

    def partial_fit(self, X: Any, y: Any = None) -> _BoltzmannEstimator:
        """One pass over ``X``, continuing the current model and its training state (see the module
        docstring); the first call on an unfitted estimator starts a model. ``y`` is ignored."""
        first = not hasattr(self, "model_")
        X = self._validate(X, reset=first)
        units = self._units(X) if first else None
        x = self._input(X, units)
        if first:
            self._start(x, units)
        self._run(x, 1)
        return self

    # ----------------------------------------------------------------------- evaluation
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "model_")

    @property
    def _n_features_out(self) -> int:
        return int(sum(self.model_.layer_sizes[1:]))

    def _model64(self) -> BoltzmannMachine | UnitRBM | UnitDBM:
        if isinstance(self.model_, UNIT_MODELS):
            return copy.deepcopy(self.model_).double()
        return self.model_.as_float64()

    @torch.no_grad()
    def _hidden_probs(self, model: BoltzmannMachine, v: Tensor) -> Tensor:
        v = v.to(device=model.device, dtype=model.dtype)
        if isinstance(model, UnitRBM):
            return torch.sigmoid(model.hidden_input(v))
        if isinstance(model, UnitDBM):
            return torch.cat(unit_mean_field(model, v, tol=1e-12, max_iter=1000)[0], dim=1)
        if model.n_layers == 2 and not model.has_laterals(1):  # RBM, SRBM: p(h | v) factorises
            return model.conditional_probs(model.state_from_visible(v), 1)
        means = mean_field(model, {0: v}, tol=1e-12, max_iter=1000).means
        return torch.cat(means.layers[1:], dim=1)

    def transform(self, X: Any) -> np.ndarray:
        """Hidden probabilities ``p(h = 1 | v)`` (mean-field marginals for a BM or DBM), float64,
        shape ``(n_samples, n_hidden)``."""
        check_is_fitted(self)
        if self._n_features_out == 0:
            raise ValueError(
                f"a {self.model_.kind} has no hidden units to transform to: transform needs kind='rbm', "
                "'srbm', 'bm' or 'dbm' (score_samples works on any kind)"
            )
        X = self._validate(X, reset=False)
        v = self._input(X)
        model = self._model64()
        parts = [self._hidden_probs(model, v[i : i + EVAL_BATCH]).cpu() for i in range(0, len(v), EVAL_BATCH)]
        return torch.cat(parts).numpy()

    def estimate_log_z(self) -> LogZResult:
        """``log Z`` of the fitted model (exact when at most ``exact_max_bits`` units must be
        enumerated, else AIS); kept as ``log_z_`` until the model changes, or the settings it was
        estimated with (``exact_max_bits``, ``ais_chains``, ``ais_betas``, by ``set_params`` after
        the fit). Returns the record."""
        check_is_fitted(self)
        # the settings it was estimated with: set_params may change them after the fact
        key = (int(self.exact_max_bits), int(self.ais_chains), repr(self.ais_betas), repr(self._ais_seed))
        if self.log_z_ is not None and getattr(self, "_log_z_key", None) == key:
            return self.log_z_
        max_bits = int(self.exact_max_bits)
        if isinstance(self.model_, UNIT_MODELS):  # exact (the fewer-state layers enumerated), else AIS
            if enumeration_bits(self.model_) <= max_bits:
                result = exact_log_z(self._model64(), max_bits=max_bits)
            else:
                make_path = unit_base_rate_path if isinstance(self.model_, UnitRBM) else unit_dbm_path
                path = make_path(self.model_, data=self._base_data, max_bits=max_bits)
                result = ais(
                    path, n_chains=int(self.ais_chains), betas=self.ais_betas, seed=self._ais_seed, check=True
                )
        elif enumeration_plan(self.model_).n_bits <= max_bits:
            result = exact_log_z(self._model64(), max_bits=max_bits)
        else:
            # the smoothed base rates of all training data seen (S&M 2008, Eq. 18); the pseudo-count
            # scales with the number of rows, so fitting to the one row of means is the same fit
            means = (self._visible_sum / max(1, self._n_seen)).unsqueeze(0)
            path = base_rate_path(self.model_, base_vbias=fit_base_rate(means))
            result = ais(
                path, n_chains=int(self.ais_chains), betas=self.ais_betas, seed=self._ais_seed, check=True
            )
        self.log_z_, self._log_z_key = result, key
        return result

    def score_samples(self, X: Any) -> np.ndarray:
        """``log p(v)`` of each row in nats, float64 ``(n_samples,)``; see the module docstring for
        when ``log Z`` is exact and when the values are mean-field lower bounds."""
        check_is_fitted(self)
        X = self._validate(X, reset=False)
        v = self._input(X)
        with warnings.catch_warnings():  # said once below, at every score (the record is kept)
            warnings.simplefilter("ignore", UnreliableEstimateWarning)
            log_z = self.estimate_log_z()
        warn_unreliable("the AIS estimate of log Z behind these scores", log_z.reliability())
        result = dataset_log_prob(self._model64(), v, log_z, per_example=True, batch_size=EVAL_BATCH)
        return result.per_example.numpy()

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-likelihood of the rows of ``X`` (nats per example); ``y`` is ignored."""
        return float(np.mean(self.score_samples(X)))

    def sample(self, n_samples: int = 1, *, n_steps: int = 1000, random_state: Any = None) -> np.ndarray:
        """``n_samples`` visible states (float64, ``(n_samples, n_features)``: 0/1, real values or
        category indices) after ``n_steps`` sweeps of ``sampler`` from random starts (uniform, or
        the visible units' own independent model); ``random_state`` as in scikit-learn."""
        check_is_fitted(self)
        n = _positive_int(n_samples, "n_samples")
        if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Integral) or n_steps < 0:
            raise ValueError(f"n_steps must be a non-negative integer; got {n_steps!r}")
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
        generator = torch.Generator(device=self.model_.device)
        generator.manual_seed(seed)
        with torch.no_grad():
            state = run_chains(
                self.model_, self.sampler, n_chains=n, n_steps=int(n_steps), generator=generator
            )
        return state.visible.detach().cpu().numpy().astype(np.float64)


class RBMEstimator(_BoltzmannEstimator):
    """A restricted Boltzmann machine as a scikit-learn estimator (see :mod:`boltzkit.sklearn`).

    Parameters
    ----------
    n_components
        Hidden units.
    learning_rate, batch_size, n_iter
        SGD step size (constant), examples per update, passes over the data in ``fit``.
    method, k, n_chains
        ``"cd"`` (CD-k), ``"pcd"`` or ``"sap"`` (``n_chains`` persistent chains); ``k`` sweeps per
        update.
    sampler
        Transition operator of training and sampling: ``"gibbs"``, ``"flip"``, ``"blend:A"``, ...
    momentum, weight_decay
        Of ``torch.optim.SGD``; weight decay applies to the couplings only.
    binarize
        ``None``: the input must be binary; a number ``t``: values above ``t`` become 1.
    visible_units
        ``"binary"`` (default), ``"gaussian"`` (real-valued input as it is) or ``"categorical"``
        (integer input ``0..Q-1``; ``"categorical:Q"`` fixes ``Q``).
    exact_max_bits
        ``log Z`` is exact when at most this many units must be enumerated, else AIS.
    ais_chains, ais_betas
        AIS runs and schedule (``"paper"``: 14,500 steps; a number of points; ``"adaptive"``).
    device
        ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
    random_state
        Seed (int), ``numpy.random.RandomState`` or ``None``.
    verbose
        Show a progress bar over epochs.

    Attributes
    ----------
    model_ : RBM
        The trained model (a :class:`~boltzkit.models.BoltzmannMachine`; ``save_model`` writes it).
    history_ : History
        Per-epoch records (reconstruction error, learning rate, ...); ``history_.to_csv(path)``
        writes what ``boltzkit plot history`` draws.
    log_z_ : LogZResult or None
        The ``log Z`` record behind ``score_samples`` (``None`` until it is first needed).
    n_iter_ : int
        Passes over data done (``fit`` and ``partial_fit`` together).
    n_features_in_, feature_names_in_
        As in scikit-learn.
    """

    def __init__(
        self,
        n_components: int = 256,
        *,
        learning_rate: float = 0.1,
        batch_size: int = 10,
        n_iter: int = 10,
        method: str = "cd",
        k: int = 1,
        n_chains: int = 100,
        sampler: str = "gibbs",
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        binarize: float | None = None,
        visible_units: str = "binary",
        exact_max_bits: int = 20,
        ais_chains: int = 100,
        ais_betas: str | int = "paper",
        device: str = "cpu",
        random_state: Any = None,
        verbose: int = 0,
    ) -> None:
        self.n_components = n_components
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.method = method
        self.k = k
        self.n_chains = n_chains
        self.sampler = sampler
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.binarize = binarize
        self.visible_units = visible_units
        self.exact_max_bits = exact_max_bits
        self.ais_chains = ais_chains
        self.ais_betas = ais_betas
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _kind(self) -> str:
        return "rbm"


class BoltzmannMachineEstimator(_BoltzmannEstimator):
    """Any trainable member of the Boltzmann machine family as a scikit-learn estimator.

    Parameters
    ----------
    kind
        ``"rbm"``, ``"srbm"`` (visible laterals), ``"bm"`` (visible and hidden laterals),
        ``"dbm"`` (layers of hidden units) or ``"fvbm"`` (fully visible: no hidden units).
    n_components
        Hidden units: an integer, or for a DBM a tuple with one size per hidden layer (one size
        makes the DBM an RBM, for every unit type: scikit-learn's checks set ``n_components=1``);
        ignored for ``"fvbm"`` (as scikit-learn ignores a parameter its configuration does not use).
    method
        ``"auto"`` (CD for an RBM, SAP, the persistent chains of Salakhutdinov 2008, otherwise),
        ``"cd"``, ``"pcd"`` or ``"sap"``.
    visible_units
        ``"binary"`` (default), ``"gaussian"`` or ``"categorical"`` (``"categorical:Q"``): for an
        RBM or a DBM (mean-field positive phase and persistent chains, S2 Sec. 4.1).
    other parameters
        As for :class:`RBMEstimator`.

    Attributes
    ----------
    model_, history_, log_z_, n_iter_, n_features_in_, feature_names_in_
        As for :class:`RBMEstimator`. ``transform`` returns the mean-field marginals of all hidden
        layers side by side for a BM or DBM.
    """

    def __init__(
        self,
        kind: str = "rbm",
        n_components: int | tuple[int, ...] = 256,
        *,
        learning_rate: float = 0.1,
        batch_size: int = 10,
        n_iter: int = 10,
        method: str = "auto",
        k: int = 1,
        n_chains: int = 100,
        sampler: str = "gibbs",
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        binarize: float | None = None,
        visible_units: str = "binary",
        exact_max_bits: int = 20,
        ais_chains: int = 100,
        ais_betas: str | int = "paper",
        device: str = "cpu",
        random_state: Any = None,
        verbose: int = 0,
    ) -> None:
        self.kind = kind
        self.n_components = n_components
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.method = method
        self.k = k
        self.n_chains = n_chains
        self.sampler = sampler
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.binarize = binarize
        self.visible_units = visible_units
        self.exact_max_bits = exact_max_bits
        self.ais_chains = ais_chains
        self.ais_betas = ais_betas
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _kind(self) -> str:
        return str(self.kind).strip().lower()


__all__ = ["BoltzmannMachineEstimator", "RBMEstimator"]
