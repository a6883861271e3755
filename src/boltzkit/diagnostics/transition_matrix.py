"""Exact transition matrices of transition operators on tiny models, and their SLEM.

One sweep of an operator updates the blocks of ``model.blocks()`` in order; inside a block the
units move independently, unit ``u`` leaving its state ``x_u`` with probability ``q_u(x)`` given
by :meth:`~boltzkit.samplers.TransitionOperator.move_prob`. So the kernel of block ``B`` is::

    K_B(x, y) = prod_{u in B} [ q_u(x) if y_u != x_u else 1 - q_u(x) ]   if y agrees with x outside B
              = 0                                                          otherwise

and the sweep is the product ``P = K_{B_1} K_{B_2} ... K_{B_L}`` (Brügge, Fischer & Igel 2013,
Definition 1: ``T = T_h T_v`` for an RBM, hidden layer first). Rows are indexed by the current
state and columns by the next, so a distribution (a row vector) evolves as ``mu <- mu P``.

States are enumerated as in :func:`boltzkit.estimators.exact_joint_distribution`: all layers side
by side, visible first, and bit ``j`` of the state index is unit ``j``. Layers of categorical units
(:mod:`boltzkit.units`) take part too: the index is then written in mixed radix (unit ``j`` is digit
``j``, of radix 2 or ``Q``), and a categorical block's kernel is its unit type's per-unit kernel
(:meth:`~boltzkit.units.UnitType.kernel`: Gibbs, or Liu's Metropolized Gibbs as flip-the-state).
Real-valued units have no finite matrix and are refused.

The second largest eigenvalue modulus (SLEM) of ``P`` bounds the speed of convergence to the
stationary distribution (Brügge et al. 2013, Sec. 4.1). ``P`` is not reversible (a sweep of
reversible block kernels in a fixed order is not), so its eigenvalues are complex in general.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from boltzkit.errors import IntractableError
from boltzkit.models.base import EnergyModel
from boltzkit.models.rbm import RBM
from boltzkit.samplers.operators import (
    Cycle,
    Repeat,
    TransitionOperator,
    UnitOperator,
    make_operator,
    move_probability,
)
from boltzkit.state import Block
from boltzkit.units import Bernoulli

#: Largest number of units whose transition matrix is built by default (4096 x 4096 states).
DEFAULT_MAX_BITS = 12


def _check_size(n_bits: float, max_bits: int) -> None:
    """``n_bits``: log2 of the number of states (the number of units of a binary model)."""
    if n_bits > max_bits + 1e-9:
        bits = f"{n_bits:.4g}"
        what = f"{bits} units" if float(n_bits).is_integer() else f"2^{bits} states"
        raise IntractableError(
            f"the exact transition matrix of a model with {what} has 2^{bits} x 2^{bits} entries",
            expected=f"at most {max_bits} units (2^{max_bits} = {2**max_bits:,} states)",
            hint="transition matrices are a diagnostic for tiny models; for larger ones measure "
            "autocorrelation times of sampled chains instead, or raise max_bits.",
        )


def _as_float64(model: EnergyModel) -> EnergyModel:
    """The model itself when its parameters are float64, else a float64 copy."""
    if model.dtype == torch.float64:
        return model
    return copy.deepcopy(model).to(torch.float64)


def all_states_of_bits(n_bits: int, *, device: torch.device | str | None = None) -> Tensor:
    """Binary expansions of ``0 .. 2^n_bits - 1``, shape ``(2^n_bits, n_bits)``, float64.

    Column ``j`` of row ``k`` is bit ``j`` of ``k`` (least significant first).
    """
    idx = torch.arange(1 << n_bits, dtype=torch.int64, device=device)
    shifts = torch.arange(n_bits, dtype=torch.int64, device=device)
    return ((idx.unsqueeze(1) >> shifts) & 1).to(torch.float64)


def unit_radices(model: EnergyModel) -> list[int]:
    """The number of states of each unit, layers side by side (2 for binary units, ``Q`` for
    categorical ones); real-valued units are refused."""
    radices: list[int] = []
    for layer, size in enumerate(model.layer_sizes):
        units = model.layer_units(layer)
        if not units.discrete:
            raise IntractableError(
                f"{units.name} units have a continuum of states: no finite transition matrix",
                hint="measure mixing by autocorrelation times of sampled chains instead.",
            )
        radices += [units.n_states] * size
    return radices


def _places(radices: Sequence[int]) -> list[int]:
    out, place = [], 1
    for r in radices:
        out.append(place)
        place *= r
    return out


def _digits(index: Tensor, radices: Sequence[int]) -> Tensor:
    places = torch.tensor(_places(radices), dtype=torch.int64, device=index.device)
    bases = torch.tensor(list(radices), dtype=torch.int64, device=index.device)
    return ((index.unsqueeze(1) // places) % bases).to(torch.float64)


def _state_bits(model: EnergyModel) -> float:
    """log2 of the number of joint states."""
    return sum(math.log2(r) for r in unit_radices(model))


def _log_f(model: EnergyModel, x: Tensor, beta: float) -> Tensor:
    """``log p*_beta`` of every state: ``-(E - E_tempered) - beta E_tempered``, float64 (all of the
    energy is tempered for binary models)."""
    state = model.split_units(x)
    energy = model.joint_energy(state).to(torch.float64)
    tempered = model.tempered_energy(state).to(torch.float64)
    return -(energy - tempered) - float(beta) * tempered


def all_states(model: EnergyModel, *, max_bits: int = DEFAULT_MAX_BITS) -> Tensor:
    """Every joint state of ``model``, shape ``(S, N)``, float64, ``N = model.n_units``.

    Row ``k`` holds the expansion of ``k``: column ``j`` (unit ``j``, layers side by side, visible
    first) is digit ``j`` of ``k``, least significant first; for binary models ``S = 2^N`` and the
    digits are bits.
    """
    radices = unit_radices(model)
    _check_size(sum(math.log2(r) for r in radices), max_bits)
    if all(r == 2 for r in radices):
        return all_states_of_bits(model.n_units, device=model.device)
    return _digits(torch.arange(math.prod(radices), device=model.device), radices)


def _block_columns(model: EnergyModel, block: Block) -> list[int]:
    """Columns (global unit indices) of ``block``'s units in the concatenated state."""
    offset = sum(model.layer_sizes[: block.layer])
    units = range(model.layer_sizes[block.layer])
    if block.units is not None:
        units = units[block.units]
    return [offset + u for u in units]


@torch.no_grad()
def block_kernel(
    model: EnergyModel,
    operator: TransitionOperator | str,
    block: Block,
    *,
    beta: float = 1.0,
    gibbs: bool = False,
    max_bits: int = DEFAULT_MAX_BITS,
) -> Tensor:
    """Exact transition matrix of one block update.

    Parameters
    ----------
    model
        A tiny model (``N <= max_bits`` units); computed in float64 (a float64 copy is used when
        the parameters are of another dtype).
    operator
        The operator (or a spec such as ``"flip"``); its ``move_prob`` is the per-unit kernel.
    block
        The block of conditionally independent units to update.
    beta
        Inverse temperature of the target.
    gibbs
        Use the exact Gibbs draw instead of ``operator`` (how ``step`` treats ``fresh_layers``).
    max_bits
        Refuse models with more units than this.

    Returns
    -------
    Tensor
        ``K`` of shape ``(2^N, 2^N)``, float64, ``K[x, y] = prod_u (q_u(x) if y_u != x_u else
        1 - q_u(x))`` over the block's units when ``x`` and ``y`` agree outside the block, else 0.
    """
    operator = make_operator(operator)
    model = _as_float64(model)
    x = all_states(model, max_bits=max_bits)
    n_states = x.shape[0]
    cols = _block_columns(model, block)
    state = model.split_units(x)
    current = state.block_values(block)
    units = model.layer_units(block.layer)
    if units != Bernoulli():  # the unit type's kernel: a distribution over next states
        field, params = model.block_field(state, block, beta)
        alpha = 0.0 if gibbs else operator.flip_weight(block.layer)
        next_probs = units.kernel(field, params, current, alpha).to(torch.float64)  # (S, k, Q)
    else:  # binary units: leave the current state with the operator's move probability
        logits = model.block_logits(state, block, beta)
        q = (
            move_probability(logits, current, 0.0)
            if gibbs
            else operator.move_prob(logits, current, block.layer)
        )
        q = q.to(torch.float64)
        moved = torch.stack([current, 1.0 - current], -1) > 0.5  # [..., v]: next value v != x
        next_probs = torch.where(moved, q.unsqueeze(-1), 1.0 - q.unsqueeze(-1))  # (S, k, 2)
    radices = unit_radices(model)
    block_radices = [radices[c] for c in cols]
    # every combination of next values of the block's units, and where it leads from each state
    combos = _digits(torch.arange(math.prod(block_radices), device=x.device), block_radices).to(torch.int64)
    prob = next_probs.gather(2, combos.t().unsqueeze(0).expand(n_states, -1, -1)).prod(1)  # (S, C)
    places = torch.tensor([_places(radices)[c] for c in cols], dtype=torch.int64, device=x.device)
    rows = torch.arange(n_states, dtype=torch.int64, device=x.device)
    base = rows - (current.to(torch.int64) * places).sum(1)  # the state with the block's digits zeroed
    targets = base.unsqueeze(1) + (combos * places).sum(1).unsqueeze(0)  # (S, C), distinct in a row
    kernel = torch.zeros(n_states, n_states, dtype=torch.float64, device=x.device)
    kernel.scatter_(1, targets, prob)
    return kernel


@torch.no_grad()
def block_kernels(
    model: EnergyModel,
    operator: TransitionOperator | str,
    *,
    beta: float = 1.0,
    clamped: Sequence[int] = (),
    fresh_layers: Sequence[int] = (),
    max_bits: int = DEFAULT_MAX_BITS,
) -> tuple[tuple[Block, Tensor], ...]:
    """The kernels of the unclamped blocks in ``model.blocks()`` order, as ``(block, K)`` pairs.

    A sequential block (a layer with laterals) contributes one single-unit kernel per unit, in
    index order, as the sampler updates it. Each block kernel satisfies detailed balance with
    respect to the model's distribution at ``beta`` (it is a Metropolis-type or Gibbs update of
    conditionally independent units); the product generally does not. Parameters as in
    :func:`transition_matrix`; ``operator`` must be a per-unit rule (not a composition).
    """
    operator = make_operator(operator)
    if not isinstance(operator, UnitOperator):
        raise TypeError(f"block kernels need a per-unit operator, got {operator!r}")
    out = []
    for block in model.blocks():
        if block.layer in clamped:
            continue
        if block.sequential:
            n_units = model.layer_sizes[block.layer]
            units = [Block(block.layer, slice(i, i + 1)) for i in block.units_of(n_units)]
        else:
            units = [block]
        for b in units:
            gibbs = block.layer in fresh_layers
            out.append((b, block_kernel(model, operator, b, beta=beta, gibbs=gibbs, max_bits=max_bits)))
    return tuple(out)


@torch.no_grad()
def transition_matrix(
    model: EnergyModel,
    operator: TransitionOperator | str,
    *,
    beta: float = 1.0,
    clamped: Sequence[int] = (),
    fresh_layers: Sequence[int] = (),
    max_bits: int = DEFAULT_MAX_BITS,
) -> Tensor:
    """Exact transition matrix of one sweep ``operator.step(model, ..., beta=beta, clamped=...)``.

    ``P = K_{B_1} K_{B_2} ... K_{B_L}`` over the unclamped blocks in ``model.blocks()`` order
    (Brügge, Fischer & Igel 2013, Definition 1; for an RBM ``T = T_h T_v``).

    Parameters
    ----------
    model
        A tiny model with ``N <= max_bits`` units (float64 arithmetic throughout).
    operator
        A :class:`~boltzkit.samplers.TransitionOperator` or a spec (``"gibbs"``, ``"flip"``,
        ``"blend:0.5"``, ...).
    beta
        Inverse temperature (a float; one matrix per temperature).
    clamped
        Layers held fixed during the sweep (their blocks are skipped).
    fresh_layers
        Layers updated by an exact Gibbs draw whatever the operator (as ``step`` does).
    max_bits
        Refuse models with more units (the matrix has ``4^N`` entries).

    Returns
    -------
    Tensor
        ``P`` of shape ``(2^N, 2^N)``, float64; ``P[x, y]`` is the probability that one sweep
        moves state index ``x`` to ``y`` (bit ``j`` of an index is unit ``j``, visible first).
    """
    _check_size(_state_bits(model), max_bits)
    operator = make_operator(operator)
    if isinstance(operator, Cycle):
        P = None
        for i, op in enumerate(operator.operators):
            K = transition_matrix(
                model,
                op,
                beta=beta,
                clamped=clamped,
                fresh_layers=fresh_layers if i == 0 else (),
                max_bits=max_bits,
            )
            P = K if P is None else P @ K
        return P
    if isinstance(operator, Repeat):
        first = transition_matrix(
            model, operator.operator, beta=beta, clamped=clamped, fresh_layers=fresh_layers, max_bits=max_bits
        )
        rest = transition_matrix(model, operator.operator, beta=beta, clamped=clamped, max_bits=max_bits)
        return first @ torch.linalg.matrix_power(rest, operator.n - 1)
    n_states = math.prod(unit_radices(model))
    P = torch.eye(n_states, dtype=torch.float64, device=model.device)
    first = True
    for _, kernel in block_kernels(
        model, operator, beta=beta, clamped=clamped, fresh_layers=fresh_layers, max_bits=max_bits
    ):
        P = kernel if first else P @ kernel
        first = False
    return P


@torch.no_grad()
def stationary_distribution(
    model: EnergyModel, *, beta: float = 1.0, max_bits: int = DEFAULT_MAX_BITS
) -> Tensor:
    """Exact ``pi_beta(x) = exp(-beta E(x)) / Z_beta`` over all joint states, float64, ``(S,)``
    (for a model whose tempered energy is not all of it, :meth:`EnergyModel.tempered_energy`,
    ``exp(-(E - E_t) - beta E_t)``, the family its samplers temper).

    States are ordered as in :func:`all_states`.
    """
    model = _as_float64(model)
    x = all_states(model, max_bits=max_bits)
    return torch.softmax(_log_f(model, x, beta), 0)


@dataclass(frozen=True)
class StationaryCheck:
    """How far a transition matrix is from a Markov kernel that leaves ``pi`` invariant.

    Attributes
    ----------
    row_sum_error
        ``max_x |sum_y P[x, y] - 1|``.
    invariance_error
        ``max_y |(pi P)[y] - pi[y]|``.
    min_entry
        Smallest entry of ``P`` (negative means the matrix is not a kernel).
    atol
        Tolerance used by :attr:`ok`.
    """

    row_sum_error: float
    invariance_error: float
    min_entry: float
    atol: float

    @property
    def ok(self) -> bool:
        """Rows sum to 1, entries are non-negative and ``pi P = pi``, all within ``atol``."""
        return (
            self.row_sum_error <= self.atol and self.invariance_error <= self.atol and self.min_entry >= 0.0
        )


@torch.no_grad()
def stationary_check(
    model: EnergyModel,
    operator: TransitionOperator | str,
    *,
    beta: float = 1.0,
    clamped: Sequence[int] = (),
    pi: Tensor | None = None,
    atol: float = 1e-12,
    max_bits: int = DEFAULT_MAX_BITS,
) -> StationaryCheck:
    """Check that one sweep of ``operator`` is a Markov kernel leaving ``pi`` invariant.

    Parameters
    ----------
    model, operator, beta, clamped, max_bits
        As in :func:`transition_matrix`.
    pi
        The distribution to test, shape ``(2^N,)``; defaults to the model's joint distribution
        at ``beta`` (:func:`stationary_distribution`). With clamped layers pass e.g. the
        conditional of the free layers given one clamped value, padded with zeros.
    atol
        Absolute tolerance of :attr:`StationaryCheck.ok`.

    Returns
    -------
    StationaryCheck
        The largest row-sum and invariance errors ``|pi P - pi|``.
    """
    P = transition_matrix(model, operator, beta=beta, clamped=clamped, max_bits=max_bits)
    if pi is None:
        pi = stationary_distribution(model, beta=beta, max_bits=max_bits)
    pi = pi.to(dtype=torch.float64, device=P.device)
    return StationaryCheck(
        row_sum_error=float((P.sum(1) - 1.0).abs().max()),
        invariance_error=float((pi @ P - pi).abs().max()),
        min_entry=float(P.min()),
        atol=float(atol),
    )


@torch.no_grad()
def tempering_transition_matrix(model: EnergyModel, pt, *, max_bits: int = DEFAULT_MAX_BITS) -> Tensor:
    """Exact transition matrix of one step of parallel tempering on a tiny model, over the joint
    states of all replicas (:class:`~boltzkit.samplers.tempering.ParallelTempering`, one chain).

    Replica ``r`` (inverse temperature ``beta_r``) is digit ``r`` of the joint index in base
    ``S = 2^N`` (replica 0, the hottest, least significant). One step is ``k`` sweeps of the inner
    operator in every replica (a Kronecker product of their matrices), then the swaps of the pairs
    ``(0, 1), (2, 3), ...`` and then of ``(1, 2), (3, 4), ...``, each accepted with
    ``min(1, exp((beta_r - beta_s)(E(x_r) - E(x_s))))``. Shape ``(S^t, S^t)``, float64.
    """
    t = pt.n_temperatures
    _check_size(_state_bits(model) * t, max_bits)
    model64 = _as_float64(model)
    n_states = math.prod(unit_radices(model))
    betas = [float(b) for b in pt.betas]
    inner = None
    for b in reversed(betas):  # kron(P_{t-1}, ..., P_0): replica 0 least significant
        P = transition_matrix(model64, pt.operator, beta=b, max_bits=max_bits)
        P = torch.linalg.matrix_power(P, pt.k)
        inner = P if inner is None else torch.kron(inner, P)
    # swaps compare the tempered part of the energy (all of it for binary models)
    energy = model64.tempered_energy(model64.split_units(all_states(model64, max_bits=max_bits)))
    joint = torch.arange(n_states**t, dtype=torch.int64, device=energy.device)
    digits = [(joint // n_states**r) % n_states for r in range(t)]

    def swap_round(first: int) -> Tensor:
        # the round's pairs are disjoint: enumerate every subset of accepted pairs
        pairs = list(range(first, t - 1, 2))
        K = torch.zeros(joint.numel(), joint.numel(), dtype=torch.float64, device=energy.device)
        for mask in range(1 << len(pairs)):
            p = torch.ones(joint.numel(), dtype=torch.float64, device=energy.device)
            new = [d.clone() for d in digits]
            for i, r in enumerate(pairs):
                a, b = digits[r], digits[r + 1]
                accept = torch.exp((betas[r] - betas[r + 1]) * (energy[a] - energy[b])).clamp(max=1.0)
                if mask >> i & 1:
                    p = p * accept
                    new[r], new[r + 1] = digits[r + 1], digits[r]
                else:
                    p = p * (1.0 - accept)
            dest = sum(new[r] * n_states**r for r in range(t))
            K.index_put_((joint, dest), p, accumulate=True)
        return K

    return inner @ swap_round(0) @ swap_round(1)


@torch.no_grad()
def tempered_product_distribution(model: EnergyModel, betas, *, max_bits: int = DEFAULT_MAX_BITS) -> Tensor:
    """``prod_r p_{beta_r}`` over the joint states of all replicas, ordered as in
    :func:`tempering_transition_matrix`, float64."""
    out = None
    for b in reversed([float(x) for x in betas]):
        pi = stationary_distribution(model, beta=b, max_bits=max_bits)
        out = pi if out is None else torch.kron(out, pi)
    return out


@torch.no_grad()
def exact_swap_rates(model: EnergyModel, betas, *, max_bits: int = DEFAULT_MAX_BITS) -> Tensor:
    """Expected acceptance of a swap between each pair of adjacent replicas at equilibrium.

    With ``x ~ p_{beta_r}`` and ``y ~ p_{beta_{r+1}}`` independent (the product distribution that
    parallel tempering leaves invariant), the rate of pair ``r`` is
    ``E[min(1, exp((beta_r - beta_{r+1}) (E(x) - E(y))))]``, summed exactly over all joint states.
    Float64, shape ``(t - 1,)``; the target of :func:`~boltzkit.samplers.tempering.equalize_ladder`
    and of the sampled :class:`~boltzkit.samplers.tempering.SwapMonitor` rates.
    """
    model64 = _as_float64(model)
    x = all_states(model64, max_bits=max_bits)
    energy = model64.tempered_energy(model64.split_units(x)).to(torch.float64)
    b = [float(v) for v in torch.as_tensor(betas, dtype=torch.float64).flatten()]
    rates = []
    for lo, hi in zip(b[:-1], b[1:], strict=True):
        p_lo = torch.softmax(_log_f(model64, x, lo), 0)
        p_hi = torch.softmax(_log_f(model64, x, hi), 0)
        accept = torch.exp(((lo - hi) * (energy[:, None] - energy[None, :])).clamp(max=0.0))
        rates.append(p_lo @ accept @ p_hi)
    return torch.stack(rates)


def eigenvalue_moduli(P: Tensor | np.ndarray) -> np.ndarray:
    """Moduli of the (complex) eigenvalues of ``P``, sorted in decreasing order, shape ``(S,)``."""
    matrix = P.detach().cpu().numpy() if isinstance(P, Tensor) else np.asarray(P)
    values = np.linalg.eigvals(matrix.astype(np.float64))
    return np.sort(np.abs(values))[::-1]


def slem(P: Tensor | np.ndarray) -> float:
    """Second largest eigenvalue modulus of a transition matrix ``P`` of shape ``(S, S)``.

    The largest modulus of a stochastic matrix is 1 (Perron-Frobenius); the second largest
    governs the geometric rate ``|mu P^t - pi| = O(SLEM^t)`` at which an ergodic chain forgets
    its start (Brügge, Fischer & Igel 2013, Sec. 4.1). A reducible or periodic chain has
    SLEM 1. ``P`` need not be reversible, so eigenvalues are computed as complex numbers.
    """
    moduli = eigenvalue_moduli(P)
    if moduli.size < 2:
        return 0.0
    return float(moduli[1])


@dataclass(frozen=True)
class SlemRow:
    """One row of :func:`slem_study`: RBMs of ``n`` visible and ``n`` hidden units, weights in
    ``[-c, c]``.

    Attributes
    ----------
    n, c
        Layer size and weight bound.
    n_models
        Number of random RBMs.
    fraction_b_better
        Fraction of RBMs where operator ``b`` (flip-the-state by default) has the strictly
        smaller SLEM than operator ``a`` (Gibbs by default).
    mean_slem_a, mean_slem_b
        Mean SLEM of the two operators over the RBMs.
    """

    n: int
    c: float
    n_models: int
    fraction_b_better: float
    mean_slem_a: float
    mean_slem_b: float


@torch.no_grad()
def slem_study(
    sizes: Iterable[int] = (2, 3, 4),
    bounds: Iterable[float] = tuple(range(1, 11)),
    n_models: int = 100,
    *,
    generator: torch.Generator,
    operator_a: TransitionOperator | str = "gibbs",
    operator_b: TransitionOperator | str = "flip",
) -> tuple[SlemRow, ...]:
    """The SLEM comparison of Brügge, Fischer & Igel (2013), Sec. 4.1 / Fig. 3 (upper).

    For each ``n`` in ``sizes`` and ``c`` in ``bounds``, draw ``n_models`` RBMs with ``n`` visible
    and ``n`` hidden units, weights uniform on ``[-c, c]`` and zero biases, and compare the SLEM
    of one sweep of ``operator_a`` and of ``operator_b``.

    Parameters
    ----------
    sizes
        Layer sizes ``n`` (the paper uses 2, 3, 4).
    bounds
        Weight bounds ``c`` (the paper uses 1, ..., 10).
    n_models
        RBMs per ``(n, c)`` (the paper uses 100).
    generator
        Source of the random weights (same seed, same table).
    operator_a, operator_b
        The operators compared (Gibbs and flip-the-state in the paper).

    Returns
    -------
    tuple[SlemRow, ...]
        One row per ``(n, c)``, sizes outermost.
    """
    op_a = make_operator(operator_a)
    op_b = make_operator(operator_b)
    rows = []
    for n in sizes:
        for c in bounds:
            s_a = np.empty(n_models)
            s_b = np.empty(n_models)
            for i in range(n_models):
                u = torch.rand(n, n, generator=generator, dtype=torch.float64, device=generator.device)
                rbm = RBM(n, n, weights=(2.0 * u - 1.0) * float(c), dtype=torch.float64, device=u.device)
                s_a[i] = slem(transition_matrix(rbm, op_a))
                s_b[i] = slem(transition_matrix(rbm, op_b))
            rows.append(
                SlemRow(
                    n=int(n),
                    c=float(c),
                    n_models=int(n_models),
                    fraction_b_better=float(np.mean(s_b < s_a)) if n_models else math.nan,
                    mean_slem_a=float(np.mean(s_a)) if n_models else math.nan,
                    mean_slem_b=float(np.mean(s_b)) if n_models else math.nan,
                )
            )
    return tuple(rows)


def format_slem_table(rows: Sequence[SlemRow], *, names: tuple[str, str] = ("gibbs", "flip")) -> str:
    """A plain-text table of :func:`slem_study` rows."""
    a, b = names
    header = f"{'n':>3} {'c':>6} {'models':>7} {f'{b} better':>12} {f'SLEM {a}':>12} {f'SLEM {b}':>12}"
    lines = [header]
    for r in rows:
        lines.append(
            f"{r.n:>3} {r.c:>6g} {r.n_models:>7} {r.fraction_b_better:>12.2f} "
            f"{r.mean_slem_a:>12.6f} {r.mean_slem_b:>12.6f}"
        )
    return "\n".join(lines)


__all__ = [
    "DEFAULT_MAX_BITS",
    "SlemRow",
    "StationaryCheck",
    "all_states",
    "all_states_of_bits",
    "unit_radices",
    "block_kernel",
    "block_kernels",
    "eigenvalue_moduli",
    "exact_swap_rates",
    "format_slem_table",
    "slem",
    "slem_study",
    "stationary_check",
    "stationary_distribution",
    "tempered_product_distribution",
    "tempering_transition_matrix",
    "transition_matrix",
]
