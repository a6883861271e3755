"""Exact partition functions, log-probabilities, samples and distributions by enumeration.

For every member of the Boltzmann machine family some layers sum out in closed form given the
others (layers without laterals and not coupled to each other; see
:mod:`boltzkit.models.boltzmann`), so ``Z`` needs a sum over the states of the *other* layers
only. :func:`enumeration_plan` picks the smallest set of units to enumerate: an RBM's smaller layer
(Salakhutdinov & Murray 2008, Sec. 5.1: "summing out the 784 visible units for each configuration
of the hiddens"), an SRBM's visible layer (S2's toy SRBM, 16 x 500: 2^16 states), every unit of a
BM with laterals in both layers (S2's toy BM, 16 x 5: 2^21 states), the smaller of a DBM's odd and
even layer sets. With ``x`` the enumerated units (all their layers side by side) and ``S`` the
summed-out units::

    log Z = logsumexp_x [ b_x^T x + 1/2 x^T Q x + sum_{j in S} softplus(b_j + (x W_xS)_j) ]

(``Q``: the couplings among enumerated units, ``W_xS``: from them to the summed-out units). The
``2^k`` states are enumerated in chunks, each reduced by log-sum-exp in float64 and merged, so
memory stays bounded and nothing overflows. The softplus sum is evaluated as the log of a product
(see :func:`_log_f_chunks`): per state and summed-out unit the work is one multiply-add and one
multiplication, not an exponential and a logarithm.

Marginals (``log p*(v)`` of data, the marginal of one layer) sum the other layers out the same way
with the given layers fixed (:func:`log_unnormalized_marginal`).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import bernoulli, make_generator, softplus
from boltzkit.data.dataset import check_binary
from boltzkit.errors import BoltzkitError, IntractableError
from boltzkit.estimators.result import LogZResult
from boltzkit.models.base import EnergyModel
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.resources import Forecast
from boltzkit.state import ChainState

#: Largest number of units enumerated by default (2^30 states); raise it with ``max_bits``.
DEFAULT_MAX_BITS = 30
#: States per enumeration chunk (memory: about twice ``chunk * n_summed`` numbers; 2048 x 784
#: float64 stays within a CPU's last-level cache).
DEFAULT_CHUNK = 1 << 11
#: At most ``2^LOW_BITS`` low-order states share one table of exponentials.
LOW_BITS = 9
#: Largest number of (example, state, summed unit) triples held at once by marginal sums.
MARGINAL_BLOCK = 1 << 22


def bit_states(start: int, stop: int, n_bits: int, *, device=None, dtype=torch.float64) -> Tensor:
    """Binary expansions of the integers ``start..stop-1``, shape ``(stop - start, n_bits)``.

    Bit ``j`` of integer ``k`` is column ``j`` (least significant first).
    """
    idx = torch.arange(start, stop, device=device, dtype=torch.int64)
    shifts = torch.arange(n_bits, device=device, dtype=torch.int64)
    return ((idx.unsqueeze(1) >> shifts) & 1).to(dtype)


def states_text(n_bits: int) -> str:
    """``2^n`` states in words: with the number written out only where it is readable."""
    return f"2^{n_bits} = {2**n_bits:,} states" if n_bits <= 40 else f"2^{n_bits} states"


def _check_tractable(n_bits: int, max_bits: int, what: str) -> None:
    if n_bits > max_bits:
        raise IntractableError(
            f"exact enumeration is intractable for this model: {what} needs {states_text(n_bits)}",
            expected=f"at most {states_text(max_bits)} (the configured limit)",
            hint="estimate log Z with AIS instead (boltzkit logz MODEL --method ais), or raise "
            "the limit (max_bits / --max-bits) if you have the time.",
        )


def _as_machine(model: EnergyModel) -> BoltzmannMachine:
    if not isinstance(model, BoltzmannMachine):
        raise BoltzkitError(
            "exact enumeration needs a Boltzmann machine",
            got=type(model).__name__,
            expected="an RBM, SRBM, BM or DBM",
        )
    return model


# ------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class EnumerationPlan:
    """Which layers are enumerated and which are summed out in closed form.

    Attributes
    ----------
    enumerated
        Layers whose joint states are listed (their units side by side, in layer order: bit
        ``j`` of a state index is unit ``j`` of that concatenation).
    summed
        Layers summed out given the enumerated (and any given) layers.
    given
        Layers held at given values (marginals).
    sizes
        Units per layer of the model.
    """

    enumerated: tuple[int, ...]
    summed: tuple[int, ...]
    given: tuple[int, ...]
    sizes: tuple[int, ...]

    @property
    def n_bits(self) -> int:
        return sum(self.sizes[l] for l in self.enumerated)

    @property
    def n_states(self) -> int:
        return 1 << self.n_bits

    def describe(self) -> str:
        """``"hidden"`` / ``"visible"`` for a two-layer model with one enumerated layer, else a list."""
        if len(self.sizes) == 2 and len(self.enumerated) == 1:
            return ("visible", "hidden")[self.enumerated[0]]
        if len(self.sizes) == 2 and self.enumerated == (0, 1):
            return "visible+hidden"
        if not self.enumerated:
            return "none"
        return "layers " + ",".join(str(l) for l in self.enumerated)


def enumeration_plan(model: BoltzmannMachine, given: Sequence[int] = ()) -> EnumerationPlan:
    """The smallest set of units to enumerate so that the remaining layers sum out in closed form.

    Among all sets of layers that can be summed out (no laterals, no coupling between two of
    them; couplings to given layers do not matter), the one leaving the fewest units to enumerate
    is chosen; ties go to the set with the lowest layer indices (an RBM with as many hidden as
    visible units enumerates its hidden layer).
    """
    given = tuple(sorted(set(given)))
    free = [l for l in range(model.n_layers) if l not in given]
    sizes = model.layer_sizes
    best: tuple[int, tuple[int, ...]] | None = None
    for r in range(len(free), -1, -1):
        for subset in itertools.combinations(free, r):
            if not model.can_sum_out(subset):
                continue
            n_enum = sum(sizes[l] for l in free if l not in subset)
            key = (n_enum, subset)
            if best is None or key < best:
                best = key
    assert best is not None  # the empty set can always be "summed out"
    summed = best[1]
    return EnumerationPlan(
        enumerated=tuple(l for l in free if l not in summed), summed=summed, given=given, sizes=sizes
    )


@dataclass(frozen=True)
class _Terms:
    """Float64 pieces of ``log p*`` over the enumerated units ``x`` (see the module docstring)."""

    lin: Tensor  # (k,) or (N, k) with given layers: bias of x (+ input from given layers)
    quad: Tensor | None  # (k, k) symmetric, zero diagonal; None when zero
    w_summed: Tensor  # (k, n_s)
    b_summed: Tensor  # (n_s,) or (N, n_s)


def _offsets(sizes: Sequence[int], layers: Sequence[int]) -> dict[int, slice]:
    out, start = {}, 0
    for l in layers:
        out[l] = slice(start, start + sizes[l])
        start += sizes[l]
    return out


def _terms(
    model: BoltzmannMachine, plan: EnumerationPlan, given: Mapping[int, Tensor] | None, device
) -> _Terms:
    """Collect the pieces of ``log p*`` for ``plan`` in float64 on ``device``."""
    f64 = {"dtype": torch.float64, "device": device}
    sizes = plan.sizes
    enum_at = _offsets(sizes, plan.enumerated)
    sum_at = _offsets(sizes, plan.summed)
    k = plan.n_bits
    n_s = sum(sizes[l] for l in plan.summed)

    def param(t: Tensor) -> Tensor:
        return t.detach().to(**f64)

    lin = torch.zeros(k, **f64)
    b_summed = torch.zeros(n_s, **f64)
    for l in plan.enumerated:
        lin[enum_at[l]] = param(model.bias(l))
    for l in plan.summed:
        b_summed[sum_at[l]] = param(model.bias(l))
    quad = torch.zeros(k, k, **f64)
    w_summed = torch.zeros(k, n_s, **f64)
    has_quad = False
    for l, m in model.coupling_keys:
        for a, b in ((l, m), (m, l)) if l != m else ((l, l),):
            w = param(model.coupling(a, b))
            if a in enum_at and b in enum_at:
                quad[enum_at[a], enum_at[b]] = w
                has_quad = True
            elif a in enum_at and b in sum_at:
                w_summed[enum_at[a], sum_at[b]] = w
    if given:
        n = next(iter(given.values())).shape[0]
        lin = lin.expand(n, -1).clone()
        b_summed = b_summed.expand(n, -1).clone()
        for g, x in given.items():
            x = x.to(**f64)
            for m in model.neighbors(g):
                w = param(model.coupling(g, m))
                if m in enum_at:
                    lin[:, enum_at[m]] += x @ w
                elif m in sum_at:
                    b_summed[:, sum_at[m]] += x @ w
    return _Terms(lin=lin, quad=quad if has_quad else None, w_summed=w_summed, b_summed=b_summed)


# ------------------------------------------------------------------------------- kernel
def _log_f_chunks(terms: _Terms, chunk_size: int, dtype: torch.dtype, device) -> Iterator[Tensor]:
    """``log p*(x)`` of every enumerated state ``x`` (summed layers summed out), chunk by chunk,
    float64, in index order (bit ``j`` of the index is unit ``j``).

    With the index split into its ``l`` low bits ``x_lo`` and its high bits ``x_hi`` and
    ``pre = b_S + W_hi x_hi + W_lo x_lo``::

        sum_j softplus(pre_j) = log prod_j (1 + exp(b_S + W_hi x_hi)_j * exp(W_lo x_lo)_j)

    The ``2^l`` vectors ``exp(W_lo x_lo)`` are tabulated once; a chunk is ``K`` high states times
    all ``2^l`` low ones and costs one multiply-add (in ``dtype``) and one product (accumulated in
    float64) per state and summed unit. The factors are at least 1, so a product cannot
    underflow; a state whose product overflows (``log p*`` above about 709, or a factor beyond
    ``dtype``'s range) is recomputed with the stable softplus in float64. The linear and
    quadratic terms are float64: ``1/2 x^T Q x`` splits into a low table, a high part and the
    cross term ``x_hi^T Q_hl x_lo``, one small product per chunk.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise BoltzkitError("chunk_size must be a positive integer", got=repr(chunk_size))
    f64 = torch.float64
    lin, quad, w_s, b_s = terms.lin, terms.quad, terms.w_summed, terms.b_summed
    n_bits = lin.numel()
    low = min(n_bits, chunk_size.bit_length() - 1, LOW_BITS)
    n_low, n_high = 1 << low, 1 << (n_bits - low)
    per_chunk = max(1, chunk_size >> low)  # high states per chunk
    x_lo = bit_states(0, n_low, low, device=device, dtype=f64)
    pre_lo = x_lo @ w_s[:low]  # (n_low, n_s), float64: also serves the fallback
    exp_lo = torch.exp(pre_lo).to(dtype)
    lin_lo = x_lo @ lin[:low]
    if quad is not None:
        lin_lo = lin_lo + 0.5 * ((x_lo @ quad[:low, :low]) * x_lo).sum(1)
        q_hl = quad[low:, :low]
    one = torch.ones((), device=device, dtype=dtype)
    n_s = b_s.numel()
    factors = torch.empty((per_chunk, n_low, n_s), device=device, dtype=dtype)
    prods = torch.empty((per_chunk, n_low), device=device, dtype=f64)
    # a float64 copy of narrower factors: torch's product of float32 accumulated in float64
    # (prod(dtype=float64)) is 2-4x slower on a CPU than the copy plus a float64 product
    wide = None if dtype == f64 else torch.empty((per_chunk, n_low, n_s), device=device, dtype=f64)
    block = max(per_chunk, 256)  # high states whose exponentials are formed together
    for b0 in range(0, n_high, block):
        x_hi = bit_states(b0, min(b0 + block, n_high), n_bits - low, device=device, dtype=f64)
        pre_hi = torch.addmm(b_s, x_hi, w_s[low:])
        exp_hi = torch.exp(pre_hi).to(dtype).unsqueeze(1)
        lin_hi = x_hi @ lin[low:]
        if quad is not None:
            lin_hi = lin_hi + 0.5 * ((x_hi @ quad[low:, low:]) * x_hi).sum(1)
            cross = (x_hi @ q_hl) @ x_lo.t()  # (K, n_low)
        lin_hi = lin_hi.unsqueeze(1)
        for k0 in range(0, x_hi.shape[0], per_chunk):
            k1 = min(k0 + per_chunk, x_hi.shape[0])
            if n_s:
                f = torch.addcmul(one, exp_lo, exp_hi[k0:k1], out=factors[: k1 - k0])
                if wide is not None:
                    f = wide[: k1 - k0].copy_(f)
                p = torch.prod(f, 2, dtype=f64, out=prods[: k1 - k0])
                log_f = torch.log(p).add_(lin_lo).add_(lin_hi[k0:k1])
            else:
                log_f = lin_lo + lin_hi[k0:k1]
            if quad is not None:
                log_f = log_f + cross[k0:k1]
            if n_s and not bool(torch.isfinite(log_f).all()):
                kk, ll = (~torch.isfinite(log_f)).nonzero(as_tuple=True)
                pre = pre_lo[ll] + pre_hi[k0 + kk]
                redo = lin_lo[ll] + lin_hi[k0 + kk, 0] + softplus(pre).sum(1)
                if quad is not None:
                    redo = redo + cross[k0 + kk, ll]
                log_f[kk, ll] = redo
            yield log_f.reshape(-1)


@dataclass(frozen=True)
class ExactMethod:
    """Exact ``log Z`` of a model class outside the Boltzmann machine family: ``bits(model)``, the
    ``log2`` of the states it enumerates, and ``log_z(model, max_bits=...)``."""

    bits: Callable[[Any], float]
    log_z: Callable[..., LogZResult]


#: Exact ``log Z`` of other model classes, by class: the seam through which the unit-type models
#: (:mod:`boltzkit.estimators.unit_rbm`, :mod:`boltzkit.estimators.unit_dbm`, which register
#: themselves when :mod:`boltzkit.estimators` is imported) join :func:`exact_log_z`.
EXACT_METHODS: dict[type, ExactMethod] = {}


def register_exact(model_type: type, method: ExactMethod) -> None:
    """Let :func:`exact_log_z` and :func:`enumeration_bits` handle ``model_type`` by ``method``."""
    EXACT_METHODS[model_type] = method


def _registered(model: Any) -> ExactMethod | None:
    return next((m for t, m in EXACT_METHODS.items() if isinstance(model, t)), None)


def enumeration_bits(model: EnergyModel) -> float:
    """``log2`` of the number of states exact computations on ``model`` enumerate (any model with
    exact ``log Z``: the Boltzmann machine family, or an RBM with real-valued or categorical
    visible units)."""
    method = _registered(model)
    return method.bits(model) if method is not None else float(enumeration_plan(model).n_bits)


def _checked_plan(model: BoltzmannMachine, max_bits: int, what: str) -> EnumerationPlan:
    plan = enumeration_plan(model)
    _check_tractable(plan.n_bits, max_bits, f"{what} ({plan.describe()}, {plan.n_bits} units)")
    return plan


@torch.no_grad()
def exact_log_z(
    model: BoltzmannMachine,
    *,
    max_bits: int = DEFAULT_MAX_BITS,
    chunk_size: int = DEFAULT_CHUNK,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LogZResult:
    """Exact ``log Z`` by enumerating the fewest units (:func:`enumeration_plan`).

    Parameters
    ----------
    model
        Any member of the Boltzmann machine family (parameters of any dtype and device).
    max_bits
        Refuse when more than this many units would be enumerated (2^max_bits states).
    chunk_size
        States per chunk (used as a multiple of a power of two no larger than it); memory is
        about ``2 * chunk_size * n_summed`` numbers.
    dtype
        Of the per-state arithmetic (the factors ``1 + e^a e^b``); exponent tables, linear and
        quadratic terms, products and sums are float64. On a CPU float64 is as fast.
    device
        Where to enumerate (default: the model's device).

    Returns
    -------
    LogZResult
        ``method="exact"``; ``settings`` name the enumerated layers and the number of states.
    """
    method = _registered(model)  # e.g. real-valued or categorical visible units
    if method is not None:
        return method.log_z(model, max_bits=max_bits).with_settings(model_fingerprint=model.fingerprint())
    t0 = time.perf_counter()
    model = _as_machine(model)
    plan = _checked_plan(model, max_bits, "summing over the enumerated units")
    device = model.device if device is None else torch.device(device)
    terms = _terms(model, plan, None, device)
    # Accumulated in place: long-lived small tensors created between the chunks' large temporaries
    # fragment the CPU heap until it runs out of memory (seen at 2^25 states).
    acc = torch.full((), -math.inf, dtype=torch.float64, device=device)
    forecast = Forecast(
        plan.n_states,
        what=f"exact log Z over 2^{plan.n_bits} states",
        hint="estimate it instead (--method ais), or enumerate on a GPU (--device cuda).",
    )
    n_done = 0
    for chunk in _log_f_chunks(terms, chunk_size, dtype, device):
        torch.logaddexp(acc, torch.logsumexp(chunk, 0), out=acc)
        n_done += chunk.numel()
        forecast.update(n_done)
    log_z = float(acc)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if not math.isfinite(log_z):  # finite parameters whose energies float64 cannot hold
        raise BoltzkitError(
            "log Z is not a finite number in float64",
            got=f"log Z = {log_z} over 2^{plan.n_bits} states",
            hint="the model's energies reach beyond float64's range (about 1e308): its parameters are "
            "too large to mean a distribution; scale them down.",
        )
    return LogZResult.exact(
        log_z,
        seconds=time.perf_counter() - t0,
        enumerated_layer=plan.describe(),
        summed_layers=list(plan.summed),
        n_states=plan.n_states,
        device=str(device),
        model_fingerprint=model.fingerprint(),
    )


# ---------------------------------------------------------------------------- marginals
@torch.no_grad()
def log_unnormalized_marginal(
    model: BoltzmannMachine,
    given: Mapping[int, Tensor],
    *,
    max_bits: int = 24,
    chunk_size: int = DEFAULT_CHUNK,
) -> Tensor:
    """``log sum_{other layers} p*(x)`` for given values of some layers, float64, shape ``(N,)``.

    The other layers are split by :func:`enumeration_plan` (with ``given`` held fixed) into
    enumerated and summed-out ones; with nothing to enumerate (an RBM's or SRBM's hidden layer
    given ``v``) this is the closed-form free energy.

    Parameters
    ----------
    model
        The model.
    given
        ``{layer: values}``, each of shape ``(N, n_layer)``.
    max_bits
        Refuse when more than this many units would be enumerated per example.
    chunk_size
        Enumerated states per chunk.
    """
    model = _as_machine(model)
    plan = enumeration_plan(model, given=tuple(given))
    _check_tractable(plan.n_bits, max_bits, f"summing out layers {plan.enumerated} ({plan.n_bits} units)")
    device = model.device
    given = {l: x.to(device=device, dtype=torch.float64) for l, x in given.items()}
    n = next(iter(given.values())).shape[0]
    kept_state = ChainState(
        tuple(
            given[l] if l in given else torch.zeros(n, s, dtype=torch.float64, device=device)
            for l, s in enumerate(model.layer_sizes)
        )
    )
    base = -model.as_float64().energy_of(kept_state, plan.given)
    terms = _terms(model, plan, given, device)
    k, n_s = plan.n_bits, terms.b_summed.shape[-1]
    if k == 0:
        return base + softplus(terms.b_summed).sum(1) if n_s else base
    states = None
    acc = torch.full((n,), -math.inf, dtype=torch.float64, device=device)
    per = max(1, min(plan.n_states, chunk_size))
    rows = max(1, MARGINAL_BLOCK // (per * max(n_s, 1)))
    for s0 in range(0, plan.n_states, per):
        states = bit_states(s0, min(s0 + per, plan.n_states), k, device=device)  # (K, k)
        quad = 0.0 if terms.quad is None else 0.5 * ((states @ terms.quad) * states).sum(1)
        pre_s = states @ terms.w_summed  # (K, n_s)
        for r0 in range(0, n, rows):
            r1 = min(r0 + rows, n)
            log_f = terms.lin[r0:r1] @ states.t() + quad  # (R, K)
            if n_s:
                log_f = log_f + softplus(terms.b_summed[r0:r1].unsqueeze(1) + pre_s.unsqueeze(0)).sum(2)
            acc[r0:r1] = torch.logaddexp(acc[r0:r1], torch.logsumexp(log_f, 1))
    return base + acc


@torch.no_grad()
def exact_log_unnormalized_visible(model: BoltzmannMachine, v: Tensor, *, max_bits: int = 24) -> Tensor:
    """``log p*(v) = log sum_h p*(v, h)`` for each row of ``v``, float64, shape ``(N,)``.

    Closed form (the free energy) for an RBM or SRBM; the hidden units that do not sum out are
    enumerated (a BM's hidden layer with laterals, half of a DBM's hidden layers). ``v`` must be
    binary, ``(N, n_visible)`` (:func:`~boltzkit.data.dataset.check_binary`: anything else is a
    clear error, never a number for a state the model does not have).
    """
    model = _as_machine(model)
    v = check_binary(v, source="v", n_visible=model.n_visible)
    return log_unnormalized_marginal(
        model, {0: v.to(device=model.device, dtype=model.dtype)}, max_bits=max_bits
    )


@torch.no_grad()
def exact_log_prob(
    model: BoltzmannMachine, v: Tensor, log_z: float | LogZResult | None = None, *, max_bits: int = 24
) -> Tensor:
    """``log p(v) = log p*(v) - log Z`` for each row of ``v``, float64, shape ``(n,)`` (``v`` checked
    as :func:`exact_log_unnormalized_visible` checks it, before ``log Z`` is enumerated)."""
    log_p_star = exact_log_unnormalized_visible(model, v, max_bits=max_bits)
    if log_z is None:
        log_z = exact_log_z(model)
    if isinstance(log_z, LogZResult):
        log_z = float(log_z.log_z)
    return log_p_star - log_z


@torch.no_grad()
def layer_log_probs(
    model: BoltzmannMachine, layer: str | int, *, max_bits: int = 24
) -> tuple[Tensor, Tensor]:
    """All states of one layer (``"visible"``, ``"hidden"`` or an index) and their exact marginal
    log-probabilities.

    Returns ``(states, log_p)`` with shapes ``(2^k, k)`` and ``(2^k,)``, float64.
    """
    model = _as_machine(model)
    index = {"visible": 0, "hidden": 1}.get(layer, layer) if isinstance(layer, str) else int(layer)
    if not isinstance(index, int) or not 0 <= index < model.n_layers:
        raise BoltzkitError("no such layer", got=layer, expected="'visible', 'hidden' or a layer index")
    n_bits = model.layer_sizes[index]
    _check_tractable(n_bits, max_bits, f"the marginal of the {n_bits} units of layer {layer}")
    states = bit_states(0, 1 << n_bits, n_bits, device=model.device, dtype=torch.float64)
    log_f = log_unnormalized_marginal(model, {index: states}, max_bits=max_bits)
    return states, log_f - torch.logsumexp(log_f, 0)


# ------------------------------------------------------------------------------ samples
@dataclass(frozen=True)
class EnumeratedStates:
    """The unnormalized marginal of a model's enumerated units over all their ``2^k`` states.

    One enumeration serves both ``log Z`` and any number of exact samples (model-to-model AIS
    needs both of its start model). Memory: one float64 number per state.

    Attributes
    ----------
    plan
        Which layers are enumerated and which summed out.
    log_f
        ``log p*(x)`` of enumerated state ``x``, float64, shape ``(2^k,)``.
    """

    plan: EnumerationPlan
    log_f: Tensor

    @property
    def layer(self) -> str:
        """Description of the enumerated layers (``"hidden"`` for an RBM's hidden layer)."""
        return self.plan.describe()

    @property
    def log_z(self) -> float:
        return float(torch.logsumexp(self.log_f, 0))

    def sample(self, model: BoltzmannMachine, n_samples: int, generator: torch.Generator) -> ChainState:
        """Exact ``x ~ p(x)``: the enumerated units by inverting their cumulative distribution at
        uniform draws, the summed-out layers from their conditionals given them."""
        cdf = torch.cumsum(torch.exp(self.log_f - self.log_f.max()), 0)
        u = torch.rand(n_samples, generator=generator, device=cdf.device, dtype=torch.float64) * cdf[-1]
        idx = torch.searchsorted(cdf, u, right=True).clamp_max(cdf.numel() - 1)
        shifts = torch.arange(self.plan.n_bits, device=idx.device, dtype=torch.int64)
        bits = ((idx.unsqueeze(1) >> shifts) & 1).to(model.dtype)
        parts = dict(
            zip(
                self.plan.enumerated,
                torch.split(bits, [self.plan.sizes[l] for l in self.plan.enumerated], 1),
                strict=True,
            )
        )
        state = ChainState(
            tuple(
                parts[l] if l in parts else bits.new_zeros(n_samples, s)
                for l, s in enumerate(self.plan.sizes)
            )
        )
        for l in self.plan.summed:
            state = state.with_layer(l, bernoulli(model.conditional_probs(state, l), generator))
        return state


@torch.no_grad()
def enumerate_states(
    model: BoltzmannMachine,
    *,
    max_bits: int = 26,
    chunk_size: int = DEFAULT_CHUNK,
    dtype: torch.dtype = torch.float64,
) -> EnumeratedStates:
    """Enumerate the fewest units of ``model`` (``dtype`` arithmetic, float64 results)."""
    model = _as_machine(model)
    plan = _checked_plan(model, max_bits, "enumerating the model's states")
    log_f = torch.empty(plan.n_states, dtype=torch.float64, device=model.device)
    terms = _terms(model, plan, None, model.device)
    start = 0
    for chunk in _log_f_chunks(terms, chunk_size, dtype, model.device):
        log_f[start : start + chunk.numel()] = chunk
        start += chunk.numel()
    return EnumeratedStates(plan, log_f)


@torch.no_grad()
def exact_sample(
    model: BoltzmannMachine,
    n_samples: int,
    *,
    generator: torch.Generator | int | None,
    max_bits: int = 26,
    chunk_size: int = DEFAULT_CHUNK,
) -> ChainState:
    """Independent exact samples of the full state ``x ~ p(x)``.

    The enumerated units (``k`` of them) are drawn from their enumerated marginal
    (:func:`enumerate_states`, ``8 * 2^k`` bytes) by inverting the cumulative distribution, the
    summed-out layers from their conditionals. Exact samples start reverse AIS and unbiased
    model-to-model AIS.
    """
    gen = make_generator(generator, model.device)
    table = enumerate_states(model, max_bits=max_bits, chunk_size=chunk_size)
    return table.sample(model, n_samples, gen)


@torch.no_grad()
def exact_joint_distribution(model: EnergyModel, *, max_bits: int = 22) -> tuple[Tensor, Tensor]:
    """Every joint state of a tiny model and its exact log-probability.

    Returns ``(states, log_p)``: ``states`` has shape ``(2^N, N)`` (layers side by side, visible
    first, bit ``j`` of the state index is unit ``j``), ``log_p`` shape ``(2^N,)``, float64.
    """
    n = model.n_units
    _check_tractable(n, max_bits, f"the joint distribution of {n} units")
    x = bit_states(0, 1 << n, n, device=model.device, dtype=torch.float64)
    state = model.split_units(x.to(model.dtype))
    log_f = -model.joint_energy(state)
    return x, log_f - torch.logsumexp(log_f, 0)


@torch.no_grad()
def log_z_brute_force(model: EnergyModel, *, max_bits: int = 22) -> float:
    """``log Z`` by summing ``exp(-E)`` over all joint states (for tests of tiny models)."""
    n = model.n_units
    _check_tractable(n, max_bits, f"the joint distribution of {n} units")
    x = bit_states(0, 1 << n, n, device=model.device, dtype=torch.float64)
    log_f = -model.joint_energy(model.split_units(x.to(model.dtype)))
    return float(torch.logsumexp(log_f, 0))


__all__ = [
    "DEFAULT_MAX_BITS",
    "EnumeratedStates",
    "EnumerationPlan",
    "bit_states",
    "enumerate_states",
    "enumeration_plan",
    "exact_joint_distribution",
    "exact_log_prob",
    "exact_log_unnormalized_visible",
    "exact_log_z",
    "exact_sample",
    "layer_log_probs",
    "log_unnormalized_marginal",
    "log_z_brute_force",
]
