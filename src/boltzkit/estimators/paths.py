"""Annealing paths for AIS, reverse AIS, simple importance sampling and bridge sampling.

A path is a family of unnormalized distributions ``p*_beta``, ``beta in [0, 1]``, with samples at
``beta = 0`` (exact where possible) and, where available, at ``beta = 1``, and transitions that leave
each ``p_beta`` invariant. The estimators (:mod:`boltzkit.estimators.ais` and its relatives) take a
path and never ask which models it joins.

:class:`GeometricPath` joins any two members A and B of the Boltzmann machine family by the
geometric average of their energies over the *union* of their layers (Salakhutdinov & Murray
2008, Eqs. 13-17; Salakhutdinov 2008, "S2", Eqs. 22, 38-39 and Sec. 4.3.1)::

    E_beta(x) = (1 - beta) E_A(x_A) + beta E_B(x_B)

Layers may be *shared* (the visible layer always is; a base model of B's own shape shares all of
them) or belong to one model only (the hidden layers of two RBMs with different hidden sizes, S2
Eq. 39). The intermediate model is itself a Boltzmann machine whose couplings are those of A
scaled by ``1 - beta`` and those of B scaled by ``beta``, so every transition operator of
:mod:`boltzkit.samplers` applies to it. Layers of the union that sum out in closed form (no
laterals, not coupled to each other) are summed out of ``log p*_beta``::

    log p*_beta(x_kept) = -(1 - beta) E_A,kept - beta E_B,kept
                          + sum_{u summed} sum_j softplus((1 - beta) a^A_uj + beta a^B_uj)

(``a^M_u``: model M's input to layer ``u`` given the kept layers; 0 when M lacks the layer). This
is S&M 2008, Eq. 15 for RBMs (the hidden layers summed out), S2 Sec. 4.2 for SRBMs ("almost
identical to the RBM path"), S2 Sec. 4.3.1 for a BM with hidden laterals (nothing sums out: the
path runs in the joint space ``x = {v, h}``) and the odd layers of a DBM. Summed-out units are
drawn afresh, exactly, at the start of each transition (their carried values are not a valid
chain state at the new beta), and only then may another operator than Gibbs act.

End points: a layer of one model only is uniform at the other end, so
``Z_0 = Z_A 2^{n_B-only}``, ``Z_1 = Z_B 2^{n_A-only}`` and
``log Z_B - log Z_A = log E[w] + (n_B-only - n_A-only) log 2``.

:func:`base_rate_path` anneals from the base-rate model (S&M 2008, Eq. 18; S2 Eq. 43: independent
visible units with the data's smoothed pixel means, the other layers uniform) to a model;
:func:`ratio_path` from one model to another over the same visible units.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzkit._numerics import LOG2, bernoulli, resolve_device, softplus
from boltzkit.errors import BoltzkitError, warn
from boltzkit.estimators.base_rate import fit_base_rate
from boltzkit.estimators.exact import EnumeratedStates, enumerate_states, enumeration_plan
from boltzkit.models.boltzmann import BoltzmannMachine, log_z_independent
from boltzkit.samplers.operators import Gibbs, TransitionOperator, UnitOperator
from boltzkit.state import Block, ChainState
from boltzkit.units import Bernoulli, UnitType

_BINARY = Bernoulli()

#: Largest number of enumerated units for exact start or end samples (``2^26`` states, 0.5 GB).
EXACT_SAMPLE_MAX_BITS = 26


def refuse_replicas(operator: TransitionOperator) -> None:
    """Refuse an operator that keeps replicas (parallel tempering, alone or repeated) as a path's
    kernel: AIS moves each chain at its own inverse temperature, so no chain has replicas to swap
    with. Every path's :meth:`AnnealingPath.transition` asks this first."""
    if operator.keeps_replicas:
        raise BoltzkitError(
            "AIS moves each chain at its own inverse temperature", got=f"sampler {operator.name!r}",
            hint="use a sampler without replicas (gibbs, flip, blend:A, or a cycle or repeat of them).",
        )  # fmt: skip


class AnnealingPath(ABC):
    """A sequence of distributions ``p_beta`` from a start model A to a target B.

    Attributes
    ----------
    log_z_a
        ``log Z_A`` when known (a base model, or a start model small enough to enumerate).
    offset
        ``log Z_B - log Z_A = log E[w] + offset``.
    is_ratio
        The start is a model of interest: estimates are of ``log Z_B - log Z_A`` (with ``log Z_B``
        where ``log Z_A`` is known); otherwise the start is a base model and estimates are of
        ``log Z_B``.
    exact_start
        Whether :meth:`sample_start` draws exact samples of ``p_0`` (unbiased AIS).
    trivial
        The two ends are the same distribution (every weight is then equal, rightly).
    default_betas
        The schedule used when none is given.
    """

    log_z_a: float | None
    offset: float
    is_ratio: bool
    exact_start: bool
    trivial: bool = False
    default_betas: str | int = "paper"
    device: torch.device
    dtype: torch.dtype
    n_visible: int

    @property
    def log_z_start(self) -> float | None:
        """The constant added to ``log mean w`` to give the estimate: ``log Z_A + offset`` for a
        base path (``None`` when ``log Z_A`` is unknown), ``offset`` for a ratio path."""
        if self.is_ratio:
            return self.offset
        return None if self.log_z_a is None else self.log_z_a + self.offset

    @abstractmethod
    def log_f(self, state: ChainState, beta: float) -> Tensor:
        """``log p*_beta`` of each chain's state, float64, shape ``(n_chains,)``."""

    @abstractmethod
    def transition(
        self,
        state: ChainState,
        beta: float,
        operator: TransitionOperator,
        generator: torch.Generator,
        *,
        sweeps: int = 1,
    ) -> ChainState:
        """``sweeps`` sweeps of a kernel that leaves ``p_beta`` invariant."""

    @abstractmethod
    def sample_start(self, n_chains: int, generator: torch.Generator) -> ChainState:
        """Samples of ``p_0`` (exact when :attr:`exact_start`)."""

    def sample_end(self, n_chains: int, generator: torch.Generator) -> ChainState | None:
        """Exact samples of ``p_1`` when available (reverse AIS), else ``None``."""
        return None

    @property
    def end_is_exact(self) -> bool:
        """Whether :meth:`sample_end` gives exact samples of the target."""
        return False

    @abstractmethod
    def from_visible(self, v: Tensor, generator: torch.Generator) -> ChainState:
        """A path state with visible units ``v`` (other kept layers uniform at random)."""

    def d_log_f(self, state: ChainState, beta: float) -> Tensor:
        """``d log p*_beta / d beta`` per chain (central finite difference by default)."""
        eps = 1e-4
        lo, hi = max(beta - eps, 0.0), min(beta + eps, 1.0)
        return (self.log_f(state, hi) - self.log_f(state, lo)) / (hi - lo)

    def step(
        self,
        state: ChainState,
        beta_from: float,
        beta_to: float,
        operator: TransitionOperator,
        generator: torch.Generator,
        *,
        sweeps: int = 1,
        move: bool = True,
    ) -> tuple[Tensor, ChainState]:
        """One AIS step: the log-weight increment ``log p*_to(x) - log p*_from(x)`` at the current
        state, then (if ``move``) a transition that leaves ``p_to`` invariant."""
        delta = self.log_f(state, beta_to) - self.log_f(state, beta_from)
        if move:
            state = self.transition(state, beta_to, operator, generator, sweeps=sweeps)
        return delta, state


@dataclass(frozen=True)
class _UnionLayer:
    """One layer of the union: its size and its index in A and in B (``None``: not there)."""

    size: int
    a: int | None
    b: int | None


class _Intermediate:
    """The intermediate Boltzmann machine of a :class:`GeometricPath` at one ``beta``: the model
    interface the transition operators need (blocks, inputs, laterals), computed from A's and B's
    own (fused) products, scaled by ``1 - beta`` and ``beta``."""

    def __init__(self, path: GeometricPath, beta: float) -> None:
        self.path = path
        self.weights = (1.0 - beta, beta)

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return self.path.layer_sizes

    def blocks(self) -> tuple[Block, ...]:
        return self.path.sweep_blocks

    def layer_units(self, layer: int) -> UnitType:
        return _BINARY  # a path between Boltzmann machines: binary units throughout

    def layer_input(self, state: ChainState, layer: int, beta: float | Tensor = 1.0) -> Tensor:
        out = self.path.combined_input(state, layer, self.weights)
        return out if isinstance(beta, float) and beta == 1.0 else out * _column(beta, out)

    def block_logits(self, state: ChainState, block: Block, beta: float | Tensor = 1.0) -> Tensor:
        logits = self.layer_input(state, block.layer, beta)
        return logits if block.units is None else logits[:, block.units]

    def laterals(self, layer: int) -> tuple[tuple[float, Tensor], ...]:
        terms = []
        for w, model, index in zip(self.weights, self.path.models, self.path.index_in(layer), strict=True):
            if index is not None and w != 0.0:
                terms.extend((w * s, lat) for s, lat in model.laterals(index))
        return tuple(terms)


def _column(beta: Tensor | float, like: Tensor) -> Tensor | float:
    if isinstance(beta, Tensor) and beta.dim() > 0:
        return beta.to(dtype=like.dtype, device=like.device).reshape(-1, 1)
    return float(beta)


class GeometricPath(AnnealingPath):
    """The geometric path from model A to model B over the union of their layers.

    Parameters
    ----------
    model_a, model_b
        Start and target (members of the Boltzmann machine family, same visible size). A model
        without couplings is a *base*: the estimate is then of ``log Z_B`` (see
        :attr:`AnnealingPath.is_ratio`).
    shared
        Pairs ``(layer of A, layer of B)`` that are the same units (default: the visible layers;
        all layers when A is a base of B's shape).
    sum_out
        Union layers to sum out (default: B's :meth:`~BoltzmannMachine.default_sum_out` and A's,
        for the layers they own).
    start_chain_steps
        When A is neither a base nor small enough to enumerate, start samples come from Gibbs
        chains of this many sweeps (the estimate is then not exactly unbiased, and a warning says
        so).
    max_bits
        Enumeration limit for exact samples of A or B and exact ``log Z_A``.
    enumeration_dtype
        Arithmetic of that enumeration (float32 is about twice as fast on a GPU; sums stay
        float64). One enumeration of A serves both ``log Z_A`` and its exact start samples.
    base_name
        Where a base model's biases came from (recorded in the estimates' settings).
    """

    def __init__(
        self,
        model_a: BoltzmannMachine,
        model_b: BoltzmannMachine,
        *,
        shared: Sequence[tuple[int, int]] | None = None,
        sum_out: Sequence[int] | None = None,
        start_chain_steps: int = 10_000,
        max_bits: int = EXACT_SAMPLE_MAX_BITS,
        enumeration_dtype: torch.dtype = torch.float64,
        base_name: str | None = None,
    ) -> None:
        for m in (model_a, model_b):
            if not isinstance(m, BoltzmannMachine):
                raise BoltzkitError(
                    "a path between two models (a log Z ratio by AIS, --relative-to) joins two "
                    "Boltzmann machines of binary units",
                    got=type(m).__name__,
                    hint="estimate each model's log Z on its own (AIS from its base-rate model), "
                    "or compare them exactly where both can be enumerated.",
                )
        if model_a.n_visible != model_b.n_visible:
            raise BoltzkitError(
                "the two models of an AIS path must share their visible units",
                got=f"{model_a.n_visible} and {model_b.n_visible} visible units",
            )
        self.model_a, self.model_b = model_a, model_b
        self.models = (model_a, model_b)
        self.base_name = base_name
        self.device, self.dtype = model_b.device, model_b.dtype
        self.n_visible = model_b.n_visible
        self.max_bits = int(max_bits)
        self.start_chain_steps = int(start_chain_steps)
        self.is_base = not model_a.coupling_keys
        self.is_ratio = not self.is_base
        self.default_betas = 10_001 if self.is_ratio else "paper"
        if shared is None:
            same_shape = model_a.layer_sizes == model_b.layer_sizes
            shared = [(l, l) for l in range(model_b.n_layers)] if self.is_base and same_shape else [(0, 0)]
        self.union = self._build_union(dict(shared))
        self.layer_sizes = tuple(u.size for u in self.union)
        self.summed = self._choose_sum_out(sum_out)
        self.kept = tuple(u for u in range(len(self.union)) if u not in self.summed)
        self.sweep_blocks = self._sweep_blocks()
        n_a_only = sum(u.size for u in self.union if u.b is None)
        n_b_only = sum(u.size for u in self.union if u.a is None)
        self.offset = (n_b_only - n_a_only) * LOG2
        self._delta_bounds = self._input_bounds()
        self._kept_linear, self._kept_couplings = self._kept_terms()
        self.trivial = self._is_trivial()
        self._zero_in_a = {
            u
            for u in self.summed
            if self.union[u].a is not None
            and not model_a.neighbors(self.union[u].a)
            and not bool(model_a.bias(self.union[u].a).detach().any())
        }
        self._one64 = torch.ones((), dtype=torch.float64, device=self.device)
        # start model: base (closed form), enumerable (exact samples and log Z), or chains
        self._table_a: EnumeratedStates | None = None
        if self.is_base:
            self.log_z_a: float | None = log_z_independent(model_a)
            self.exact_start = True
        elif enumeration_plan(model_a).n_bits <= self.max_bits:
            self._table_a = enumerate_states(model_a, max_bits=self.max_bits, dtype=enumeration_dtype)
            self.log_z_a = self._table_a.log_z
            self.exact_start = True
        else:
            self.log_z_a = None
            self.exact_start = False

    # ----------------------------------------------------------------------- construction
    def _build_union(self, shared: dict[int, int]) -> tuple[_UnionLayer, ...]:
        a, b = self.model_a, self.model_b
        if 0 not in shared or shared[0] != 0:
            raise BoltzkitError("the visible layers of the two models must be shared", got=shared)
        for la, lb in shared.items():
            if not (0 <= la < a.n_layers and 0 <= lb < b.n_layers) or a.layer_sizes[la] != b.layer_sizes[lb]:
                raise BoltzkitError(
                    "shared layers must exist in both models and have the same size",
                    got=f"A layer {la}, B layer {lb}",
                )
        b_to_a = {lb: la for la, lb in shared.items()}
        layers = [_UnionLayer(b.layer_sizes[lb], b_to_a.get(lb), lb) for lb in range(b.n_layers)]
        layers += [_UnionLayer(a.layer_sizes[la], la, None) for la in range(a.n_layers) if la not in shared]
        return tuple(layers)

    def index_in(self, u: int) -> tuple[int | None, int | None]:
        """Index of union layer ``u`` in A and in B (``None`` where absent)."""
        layer = self.union[u]
        return layer.a, layer.b

    def _union_of(self, model_index: int, layer: int) -> int:
        for u, ul in enumerate(self.union):
            if (ul.a if model_index == 0 else ul.b) == layer:
                return u
        raise KeyError(layer)

    def _neighbors(self, u: int) -> set[int]:
        out = set()
        for mi, (model, index) in enumerate(zip(self.models, self.index_in(u), strict=True)):
            if index is not None:
                out.update(self._union_of(mi, m) for m in model.neighbors(index))
        return out

    def _has_laterals(self, u: int) -> bool:
        return any(
            index is not None and model.has_laterals(index)
            for model, index in zip(self.models, self.index_in(u), strict=True)
        )

    def _choose_sum_out(self, sum_out: Sequence[int] | None) -> tuple[int, ...]:
        if sum_out is None:
            wanted = [
                u
                for u, ul in enumerate(self.union)
                if ul.b is not None and ul.b in self.model_b.default_sum_out()
            ]
            wanted += [
                u
                for u, ul in enumerate(self.union)
                if ul.b is None and ul.a is not None and ul.a in self.model_a.default_sum_out()
            ]
        else:
            wanted = [int(u) for u in sum_out]
        chosen: list[int] = []
        for u in wanted:
            if (
                0 <= u < len(self.union)
                and not self._has_laterals(u)
                and not (self._neighbors(u) & set(chosen))
            ):
                chosen.append(u)
            elif sum_out is not None:
                raise BoltzkitError(
                    "this layer of the path cannot be summed out",
                    got=f"layer {u}",
                    expected="a layer without laterals, not coupled to another summed-out layer",
                )
        return tuple(sorted(chosen))

    def _sweep_blocks(self) -> tuple[Block, ...]:
        """Summed-out layers first (drawn fresh), then B's layers in B's sweep order, then A's own."""
        order = list(self.summed)
        order += [self._union_of(1, blk.layer) for blk in self.model_b.blocks()]
        order += [
            self._union_of(0, blk.layer)
            for blk in self.model_a.blocks()
            if self.union[self._union_of(0, blk.layer)].b is None
        ]
        order += [u for u in range(len(self.union)) if u not in order]
        seen: list[int] = []
        for u in order:
            if u not in seen and self.union[u].size:
                seen.append(u)
        return tuple(Block(u, sequential=self._has_laterals(u)) for u in seen)

    def _input_bounds(self) -> dict[int, tuple[float, float]]:
        """For each summed layer, bounds on ``|a^B_u - a^A_u|`` over all states in [0, 1]: the
        largest entry and the sum (they gate the fast log-weight increment)."""
        out = {}
        for u in self.summed:
            total = torch.zeros(self.union[u].size, dtype=torch.float64, device=self.device)
            for model, index in zip(self.models, self.index_in(u), strict=True):
                if index is None:
                    continue
                total = total + model.bias(index).detach().to(torch.float64).abs()
                for m in model.neighbors(index):
                    total = total + model.coupling(m, index).detach().to(torch.float64).abs().sum(0)
            out[u] = (float(total.max()) if total.numel() else 0.0, float(total.sum()))
        return out

    # ------------------------------------------------------------------------- pieces
    def project(self, state: ChainState, model_index: int) -> ChainState:
        """The layers of A (0) or B (1) out of a union state."""
        model = self.models[model_index]
        layers = [None] * model.n_layers
        for u, ul in enumerate(self.union):
            index = ul.a if model_index == 0 else ul.b
            if index is not None:
                layers[index] = state.layers[u]
        return ChainState(tuple(layers))

    def _model_input(self, state: ChainState, model_index: int, u: int) -> Tensor:
        """Model A's or B's input to union layer ``u`` (a bias vector when nothing couples to it)."""
        model = self.models[model_index]
        index = self.union[u].a if model_index == 0 else self.union[u].b
        if not model.neighbors(index) and not model.has_coupling(index, index):
            return model.bias(index)
        return model.layer_input(self.project(state, model_index), index)

    def combined_input(self, state: ChainState, u: int, weights: tuple[float, float]) -> Tensor:
        """``(1 - beta) a^A_u + beta a^B_u``, shape ``(n_chains, n_u)``."""
        out: Tensor | None = None
        for mi, w in enumerate(weights):
            if (self.union[u].a if mi == 0 else self.union[u].b) is None or w == 0.0:
                continue
            part = self._model_input(state, mi, u)
            out = part * w if out is None else out.add(part, alpha=w)
        if out is None:
            out = torch.zeros(self.union[u].size, dtype=self.dtype, device=self.device)
        n = state.layers[0].shape[0]
        return out if out.dim() == 2 else out.expand(n, -1).clone()

    def _kept_energies(self, state: ChainState) -> tuple[Tensor, Tensor]:
        """``E_A`` and ``E_B`` of the kept layers, float64, shape ``(n_chains,)`` each."""
        out = []
        for mi, model in enumerate(self.models):
            kept = [self.union[u].a if mi == 0 else self.union[u].b for u in self.kept]
            kept = [k for k in kept if k is not None]
            out.append(model.energy_of(self.project(state, mi), kept))
        return out[0], out[1]

    @torch.no_grad()
    def _is_trivial(self) -> bool:
        """Whether A and B are the same distribution over the union: the same model (each layer
        shared with its counterpart, the same parameters), or no couplings anywhere, equal biases
        on shared layers and zero biases on layers of one model only."""
        if self._same_model():
            return True
        for model in self.models:
            if any(bool(model.coupling(l, m).detach().any()) for l, m in model.coupling_keys):
                return False
        for ul in self.union:
            ba = self.model_a.bias(ul.a).detach() if ul.a is not None else None
            bb = self.model_b.bias(ul.b).detach() if ul.b is not None else None
            if ba is not None and bb is not None:
                if not torch.equal(ba.to(bb), bb):
                    return False
            elif bool((ba if ba is not None else bb).any()):
                return False
        return True

    @torch.no_grad()
    def _same_model(self) -> bool:
        a, b = self.model_a, self.model_b
        if tuple(a.layer_sizes) != tuple(b.layer_sizes) or set(a.coupling_keys) != set(b.coupling_keys):
            return False
        if any(ul.a != ul.b for ul in self.union):
            return False
        same = [(a.bias(l), b.bias(l)) for l in range(a.n_layers)]
        same += [(a.coupling(l, m), b.coupling(l, m)) for l, m in a.coupling_keys]
        return all(torch.equal(x.detach(), y.detach().to(x)) for x, y in same)

    def _kept_terms(self) -> tuple[dict[int, Tensor], list[tuple[float, int, int, Tensor]]]:
        """``E_A - E_B`` over the kept layers as float64 linear coefficients ``(b_B - b_A)_u`` per
        union layer and coupling terms ``(sign, u, w, W)`` (``sign`` +1 for B's, -1 for A's;
        laterals with their factor 1/2 folded in)."""
        linear: dict[int, Tensor] = {}
        couplings: list[tuple[float, int, int, Tensor]] = []
        for mi, (model, sign) in enumerate(zip(self.models, (-1.0, 1.0), strict=True)):
            where = {(ul.a if mi == 0 else ul.b): u for u, ul in enumerate(self.union)}
            where.pop(None, None)
            for index, u in where.items():
                if u in self.summed or not self.union[u].size:
                    continue
                b = model.bias(index).detach().to(torch.float64)
                linear[u] = linear.get(u, 0.0) + sign * b
            for l, m in model.coupling_keys:
                ul, um = where[l], where[m]
                if ul in self.summed or um in self.summed:
                    continue
                w = model.coupling(l, m).detach()
                couplings.append((sign * (0.5 if l == m else 1.0), ul, um, w))
        return {u: v for u, v in linear.items() if isinstance(v, Tensor)}, couplings

    def _kept_difference(self, state: ChainState) -> Tensor:
        """``E_A(x) - E_B(x)`` over the kept layers, float64, shape ``(n_chains,)``: the slope of
        ``log p*_beta`` in ``beta`` apart from the summed-out layers."""
        x = state.layers
        x64 = {u: x[u].to(torch.float64) for u in self._kept_linear}
        out = None
        for u, coef in self._kept_linear.items():
            out = x64[u] @ coef if out is None else torch.addmv(out, x64[u], coef)
        for scale, u, w, weight in self._kept_couplings:
            xw = x64.get(w)
            if xw is None:
                xw = x64[w] = x[w].to(torch.float64)
            term = ((x[u].to(weight.dtype) @ weight).to(torch.float64) * xw).sum(1)
            out = term * scale if out is None else out.add(term, alpha=scale)
        if out is None:
            out = torch.zeros(x[0].shape[0], dtype=torch.float64, device=self.device)
        return out

    def _summed_pieces(self, state: ChainState) -> list[tuple[int, Tensor | float, Tensor]]:
        """For each summed layer ``u``: ``(u, a^A_u, a^B_u - a^A_u)`` in float64 (``a^A_u`` is the
        number 0 where A adds nothing: a layer A lacks, or a base layer with zero bias)."""
        pieces = []
        n = state.layers[0].shape[0]
        for u in self.summed:
            ia, ib = self.index_in(u)
            pa = (
                None
                if ia is None or u in self._zero_in_a
                else self._model_input(state, 0, u).to(torch.float64)
            )
            pb = self._model_input(state, 1, u).to(torch.float64) if ib is not None else None
            if pa is None:
                base, slope = (
                    0.0,
                    pb
                    if pb is not None
                    else torch.zeros(n, self.union[u].size, dtype=torch.float64, device=self.device),
                )
            elif pb is None:
                base, slope = pa, -pa
            else:
                base, slope = pa, pb - pa
            if isinstance(base, Tensor):
                base = base.expand(n, -1)
            pieces.append((u, base, slope.expand(n, -1)))
        return pieces

    # ------------------------------------------------------------------ AnnealingPath API
    @torch.no_grad()
    def log_f(self, state: ChainState, beta: float) -> Tensor:
        beta = float(beta)
        e_a, e_b = self._kept_energies(state)
        out = -(1.0 - beta) * e_a - beta * e_b
        for _, base, slope in self._summed_pieces(state):
            out = out + softplus(base + beta * slope).sum(1)
        return out

    @torch.no_grad()
    def d_log_f(self, state: ChainState, beta: float) -> Tensor:
        """``E_A - E_B`` (kept layers) ``+ sum_u sigma(a_u(beta)) . (a^B_u - a^A_u)``."""
        out = self._kept_difference(state)
        for _, base, slope in self._summed_pieces(state):
            out = out + (torch.sigmoid(base + float(beta) * slope) * slope).sum(1)
        return out

    def _softplus_delta(self, u: int, a_to: Tensor, slope: Tensor, step: float, sig_to: Tensor) -> Tensor:
        """``sum_j softplus(a_j) - softplus(b_j)`` with ``a = a(beta_to)``, ``b = a - step slope``.

        Written as ``-log prod_j r_j`` with ``r_j = (1 + e^b_j) / (1 + e^a_j) = 1 + sigma(a_j)
        (e^(b_j - a_j) - 1)``: one exponential and a product per unit instead of two softplus, and
        no cancellation between two large sums. Used when ``|b_j - a_j| <= 1`` for every unit and
        state (then ``r_j >= e^-1`` carries an absolute error of about one ulp of 1) and the
        product cannot leave float64's range; the bounds come from the weights, so no
        data-dependent check is needed. Otherwise the two softplus sums are subtracted.
        """
        bound_max, bound_sum = self._delta_bounds[u]
        if abs(step) * bound_max <= 1.0 and abs(step) * bound_sum <= 600.0:
            r = torch.mul(slope, -step).exp_().sub_(1.0)
            r = torch.addcmul(self._one64, sig_to, r, out=r)
            return r.prod(1).log_().neg_()
        return softplus(a_to).sum(1) - softplus(a_to - step * slope).sum(1)

    @torch.no_grad()
    def step(self, state, beta_from, beta_to, operator, generator, *, sweeps=1, move=True):
        """Fused AIS step: the inputs to the summed-out layers serve both the log-weight increment
        and their fresh draw at ``beta_to``; the kept energies give the rest of the increment
        ``(beta_to - beta_from)(E_A - E_B)``."""
        beta_from, beta_to = float(beta_from), float(beta_to)
        step = beta_to - beta_from
        delta = self._kept_difference(state) * step
        fresh: dict[int, Tensor] = {}
        for u, base, slope in self._summed_pieces(state):
            a_to = slope * beta_to + base if isinstance(base, Tensor) else slope * beta_to
            sig = torch.sigmoid(a_to)
            delta = delta + self._softplus_delta(u, a_to, slope, step, sig)
            fresh[u] = a_to.to(self.dtype)
        if not move:
            return delta, state
        if not isinstance(operator, UnitOperator):  # a composition: fresh draws inside its first sweep
            return delta, self.transition(state, beta_to, operator, generator, sweeps=sweeps)
        model = _Intermediate(self, beta_to)
        # the operator's sweep: the summed layers drawn fresh from the inputs already computed, then
        # the kept layers
        kept = tuple(u for u in range(len(self.union)) if u not in self.summed)
        state, _ = operator.step(
            model, state, generator=generator, clamped=kept, fresh_layers=self.summed, logits=fresh
        )
        state, _ = operator.step(model, state, generator=generator, clamped=self.summed)
        for _ in range(int(sweeps) - 1):
            state, _ = operator.step(model, state, generator=generator)
        return delta, state

    @torch.no_grad()
    def transition(self, state, beta, operator, generator, *, sweeps=1):
        refuse_replicas(operator)
        model = _Intermediate(self, float(beta))
        for sweep in range(int(sweeps)):
            state, _ = operator.step(
                model, state, generator=generator, fresh_layers=self.summed if sweep == 0 else ()
            )
        return state

    # ---------------------------------------------------------------------- samples
    def _fill(self, parts: dict[int, Tensor], n: int, generator: torch.Generator) -> ChainState:
        """A union state from some layers' values: summed layers zero (drawn fresh later), kept
        layers of the other model only uniform at random."""
        layers = []
        for u, ul in enumerate(self.union):
            if u in parts:
                layers.append(parts[u].to(dtype=self.dtype, device=self.device))
            elif u in self.summed:
                layers.append(torch.zeros(n, ul.size, dtype=self.dtype, device=self.device))
            else:
                half = torch.full((n, ul.size), 0.5, dtype=self.dtype, device=self.device)
                layers.append(bernoulli(half, generator))
        return ChainState(tuple(layers))

    def _from_model_state(self, model_index: int, x: ChainState, generator: torch.Generator) -> ChainState:
        parts = {}
        for u, ul in enumerate(self.union):
            index = ul.a if model_index == 0 else ul.b
            if index is not None and u not in self.summed:
                parts[u] = x.layers[index]
        return self._fill(parts, x.n_chains, generator)

    @torch.no_grad()
    def sample_start(self, n_chains, generator):
        a = self.model_a
        if self.is_base:
            parts = {}
            for u in self.kept:
                index = self.union[u].a
                if index is not None:
                    p = torch.sigmoid(a.bias(index).detach()).to(self.dtype).expand(n_chains, -1)
                    parts[u] = bernoulli(p, generator)
            return self._fill(parts, n_chains, generator)
        if self._table_a is not None:
            return self._from_model_state(0, self._table_a.sample(a, n_chains, generator), generator)
        warn(
            f"start samples of the first model come from {self.start_chain_steps} Gibbs sweeps, not "
            "exact sampling: the AIS estimate is then not exactly unbiased",
        )
        from boltzkit.samplers.driver import run_chains

        init = a.random_state(n_chains, generator)
        end = run_chains(a, Gibbs(), init, self.start_chain_steps, generator=generator)
        return self._from_model_state(0, end, generator)

    @property
    def end_is_exact(self) -> bool:
        return enumeration_plan(self.model_b).n_bits <= self.max_bits

    @torch.no_grad()
    def sample_end(self, n_chains, generator):
        if not self.end_is_exact:
            return None
        table = enumerate_states(self.model_b, max_bits=self.max_bits)
        return self._from_model_state(1, table.sample(self.model_b, n_chains, generator), generator)

    @torch.no_grad()
    def from_visible(self, v, generator):
        return self._fill({0: v}, v.shape[0], generator)


# --------------------------------------------------------------------------- constructors
def _on_device(model: BoltzmannMachine, device: torch.device | str | None) -> BoltzmannMachine:
    if device is None:
        return model
    dev = resolve_device(device)
    return model if dev == model.device else model.detached_copy(device=dev)


def field_biases(model: BoltzmannMachine) -> Tensor:
    """Visible biases of the *thermodynamic* base: independent units with the model's Ising fields
    (``b_i = 2 h_i`` of :meth:`BoltzmannMachine.pairwise`), so that the path from it keeps the
    fields and turns the couplings on (the annealing in temperature of statistical physics). For a
    model symmetric under flipping every unit (a zero-field Ising model or spin glass) the fields
    vanish and the base is uniform: it respects the symmetry, where the model's own {0, 1} biases
    would favour one of its mirror-image modes and AIS would miss the other half of ``Z``."""
    fields = model.pairwise().ising_fields[: model.n_visible]
    return (2.0 * fields).to(dtype=model.dtype, device=model.device)


def check_path(path: object, caller: str) -> AnnealingPath:
    """``path`` if it is an :class:`AnnealingPath`, else a :class:`BoltzkitError` that says how to
    make one (a model passed where its path belongs is the usual slip)."""
    if isinstance(path, AnnealingPath):
        return path
    hint = (
        f"{caller}(base_rate_path(model)) for log Z, {caller}(ratio_path(model_a, model_b)) for "
        "log Z_B - log Z_A, or estimate_log_z(model, method=...) to pick the path for you."
    )
    raise BoltzkitError(
        f"{caller}() works on a path between two distributions, not on a model",
        got=type(path).__name__,
        expected="an AnnealingPath (boltzkit.estimators.base_rate_path or ratio_path)",
        hint=hint,
    )


def base_rate_path(
    model: BoltzmannMachine,
    *,
    data: Tensor | None = None,
    base_vbias: Tensor | None = None,
    sum_out: Sequence[int] | None = None,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
    device: torch.device | str | None = None,
    base_name: str | None = None,
) -> GeometricPath:
    """The path from a base-rate model to ``model`` (S&M 2008, Sec. 3.3; S2 Secs. 4.1.3, 4.3.1).

    The base has independent visible units with biases ``b_A`` and uniform hidden units (S2
    Eq. 43: an RBM with zero weights; for a BM the factorial model over ``{v, h}`` of Sec. 4.3.1).
    ``b_A`` are the smoothed data log-odds (S&M 2008, Eq. 18) when ``data`` is given, else
    ``base_vbias`` when given, else the model's own visible biases (S&M 2008's base without data;
    :func:`~boltzkit.estimators.api.estimate_log_z` chooses between these and
    :func:`field_biases` by a pilot run). ``max_bits`` limits the enumeration behind exact samples
    of ``model`` (reverse AIS, bridge sampling). ``base_name`` names a given ``base_vbias`` in the
    record (default ``"given visible biases"``).

    Returns
    -------
    GeometricPath
        Its estimates are of ``log Z`` of ``model``; ``path.base_name`` says where ``b_A`` came from.
    """
    if not isinstance(model, BoltzmannMachine):
        raise BoltzkitError(
            "a base-rate path anneals to a Boltzmann machine of binary units",
            got=type(model).__name__,
            hint="a DBN's log Z is its top RBM's (S1 Sec. 4.2): base_rate_path(dbn.top); "
            "estimate_log_z(model, 'ais') takes Gaussian and categorical units too.",
        )
    model = _on_device(model, device)
    if base_vbias is not None:
        b_a, name = torch.as_tensor(base_vbias), base_name or "given visible biases"
    elif data is not None:
        b_a, name = fit_base_rate(data, n_visible=model.n_visible), "base rates of the data"
    else:
        b_a, name = model.bias(0).detach(), "model visible biases (zero weights)"
    if b_a.shape != (model.n_visible,):
        raise BoltzkitError(
            "base visible biases have the wrong shape", got=tuple(b_a.shape), expected=(model.n_visible,)
        )
    kw = {"dtype": model.dtype, "device": model.device}
    biases = [b_a.to(**kw)] + [torch.zeros(n, **kw) for n in model.layer_sizes[1:]]
    base = BoltzmannMachine.independent(biases, **kw)
    return GeometricPath(base, model, sum_out=sum_out, max_bits=max_bits, base_name=name)


def ratio_path(
    model_a: BoltzmannMachine,
    model_b: BoltzmannMachine,
    *,
    start_chain_steps: int = 10_000,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
    enumeration_dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> GeometricPath:
    """The path from ``model_a`` to ``model_b`` over the same visible units, each keeping its own
    hidden layers (S&M 2008, Sec. 3.2, Eqs. 13-17; S2 Sec. 4.1.2): estimates ``log Z_B - log Z_A``.

    Start samples are exact when A can be enumerated (``max_bits``), else ``start_chain_steps``
    Gibbs sweeps of A (then the estimate carries a warning).
    """
    model_b = _on_device(model_b, device)
    model_a = _on_device(model_a, model_b.device)
    return GeometricPath(
        model_a,
        model_b,
        start_chain_steps=start_chain_steps,
        max_bits=max_bits,
        enumeration_dtype=enumeration_dtype,
    )


__all__ = [
    "field_biases",
    "EXACT_SAMPLE_MAX_BITS",
    "AnnealingPath",
    "GeometricPath",
    "base_rate_path",
    "check_path",
    "ratio_path",
]
