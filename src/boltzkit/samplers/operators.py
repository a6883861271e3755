"""Transition operators that leave a model's distribution at inverse temperature beta invariant.

An operator holds only its configuration. :meth:`TransitionOperator.step` takes the model, the
state, ``beta``, the clamped layers and a ``torch.Generator`` and returns the new state and a
:class:`StepInfo`. The model is passed to every step because AIS, PT and PCD change the target
between steps. Any operator works with any :class:`~boltzkit.models.EnergyModel`: it needs only
the model's blocks and the logits of a block given the rest.

All operators here are *per-unit* rules applied to a block of conditionally independent units.
For a unit in state ``x`` with logit ``a`` (so ``p(x=1|rest) = sigma(a)``) and ``s = 2x - 1``:

* Gibbs moves to the other state with probability ``sigma(-s a)``.
* Flip-the-state (Brügge, Fischer & Igel 2013, Definition 1) always proposes the other state and
  accepts with ``min(1, p(other)/p(current)) = exp(-max(s a, 0))``: from the less probable state it
  moves with probability 1, from the more probable with ``p(other)/p(current)``, and at a tie
  (``a = 0``) with probability 1/2. Written with ``exp(-relu(s a))`` it cannot overflow.
* The blend ``alpha T + (1 - alpha) G`` (Brügge et al. 2013, Sec. 3) moves with
  ``alpha P_flip + (1 - alpha) P_gibbs``, with a separate ``alpha`` per layer.

Each per-unit kernel leaves the unit's conditional invariant, so any sweep over the blocks leaves
the joint distribution invariant. A block of conditionally independent units (a layer without
laterals) is updated at once; a layer with laterals is updated unit by unit
(:mod:`boltzkit.samplers.sequential`), as S2 (Sec. 4.2) does for the visible units of an SRBM.

Operators compose: :class:`Cycle` applies several operators in turn, :class:`Repeat` one operator
several times (``make_operator("flip+gibbs")``, ``make_operator("gibbs*5")``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzkit._numerics import bernoulli
from boltzkit.errors import BoltzkitError
from boltzkit.models.base import EnergyModel
from boltzkit.samplers.sequential import sequential_update
from boltzkit.state import Block, ChainState
from boltzkit.units import Bernoulli

_BINARY = Bernoulli()


@dataclass(frozen=True)
class StepInfo:
    """What one step did.

    Attributes
    ----------
    flip_rate
        Per layer, the fraction of units that changed state in this step (``None`` unless the
        step was asked to track it).
    swap_accepted
        Parallel tempering: for each pair of adjacent temperatures ``(r, r + 1)`` and chain,
        whether the states were exchanged in this step; bool, shape ``(n_temperatures - 1,
        n_chains)`` (``None`` for other operators).
    """

    flip_rate: tuple[float, ...] | None = None
    swap_accepted: Tensor | None = None

    @property
    def swap_rates(self) -> tuple[float, ...] | None:
        """Fraction of chains whose states were exchanged, per pair of adjacent temperatures."""
        if self.swap_accepted is None:
            return None
        return tuple(float(r) for r in self.swap_accepted.to(torch.float32).mean(1))


def move_probability(logits: Tensor, current: Tensor, alpha: float) -> Tensor:
    """Probability that each unit leaves its current state under ``alpha T + (1 - alpha) G``.

    Parameters
    ----------
    logits
        ``a``, shape ``(n_chains, n_units)``.
    current
        Current {0, 1} states, same shape.
    alpha
        Weight of flip-the-state; 0 is Gibbs, 1 is pure flip-the-state.

    Returns
    -------
    Tensor
        ``alpha * P_flip + (1 - alpha) * sigma(-s a)`` with ``s = 2 x - 1`` and
        ``P_flip = exp(-relu(s a))`` except at ties ``a = 0``, where it is 1/2.

    The result is a new tensor that the caller may overwrite, outside autograd (a kernel's
    numbers, never differentiated). Computed in place on one buffer (a Gibbs or flip-the-state
    sweep of S3's samplers spends most of its time here), with the same roundings as the
    out-of-place formula: ``s`` is exactly ``+-a``, and each further operation rounds once.
    """
    sign = current.detach() * 2.0
    signed = sign.sub_(1.0) * logits.detach()  # out of place: the product takes the promoted dtype
    if alpha == 0.0:
        return signed.neg_().sigmoid_()
    ties = signed == 0
    p_gibbs = None if alpha == 1.0 else torch.neg(signed).sigmoid_()
    p_flip = signed.relu_().neg_().exp_().masked_fill_(ties, 0.5)
    if p_gibbs is None:
        return p_flip
    return p_flip.mul_(alpha).add_(p_gibbs.mul_(1.0 - alpha))


class TransitionOperator(ABC):
    """A Markov kernel that leaves a model's distribution at inverse temperature beta invariant.

    An operator holds only its configuration; :meth:`step` is one sweep.
    """

    name: str = "operator"

    @abstractmethod
    def step(
        self,
        model: EnergyModel,
        state: ChainState,
        *,
        beta: float | Tensor = 1.0,
        generator: torch.Generator,
        clamped: tuple[int, ...] = (),
        fresh_layers: tuple[int, ...] = (),
        track: bool = False,
    ) -> tuple[ChainState, StepInfo]:
        """One sweep.

        Parameters
        ----------
        model
            The target; ``model.blocks()`` gives the update order and ``model.block_logits``
            (``model.layer_input`` and ``model.laterals`` for sequential blocks) the conditionals.
        state
            Current state of all chains.
        beta
            Inverse temperature, a float or a ``(n_chains,)`` tensor.
        generator
            Source of all random numbers.
        clamped
            Layers that are held fixed (e.g. ``(0,)`` to clamp the data).
        fresh_layers
            Layers whose current values are not a valid chain state (summed-out units carried
            over from another target, as in AIS): their first update in this sweep is an exact
            Gibbs draw, which needs no current value. Other operators than Gibbs depend on the
            current value, so this keeps them exact. Only layers without laterals can be fresh.
        track
            Record per-layer flip rates in the returned :class:`StepInfo`.
        """

    @property
    def keeps_replicas(self) -> bool:
        """Whether the operator works on replicas of the chains (:meth:`extend` makes them), as
        parallel tempering does: such an operator cannot be part of a cycle, nor move AIS chains,
        each at its own inverse temperature."""
        return type(self).extend is not TransitionOperator.extend

    def extend(self, state: ChainState) -> ChainState:
        """The chains this operator works on, made from ``n_chains`` chains at the target (a
        tempering operator keeps replicas; others work on the chains themselves)."""
        return state

    def project(self, state: ChainState) -> ChainState:
        """The chains at the target out of the operator's own (the inverse of :meth:`extend`)."""
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _flip_info(before: ChainState, after: ChainState) -> StepInfo:
    return StepInfo(
        flip_rate=tuple(
            float((a != b).to(torch.float32).mean()) if a.numel() else 0.0
            for a, b in zip(before.layers, after.layers, strict=True)
        )
    )


class UnitOperator(TransitionOperator):
    """An operator given by a per-unit rule: each unit leaves its state with a probability that
    depends on its logit and its current value (:meth:`move_prob`)."""

    @abstractmethod
    def move_prob(self, logits: Tensor, current: Tensor, layer: int) -> Tensor:
        """Probability that each unit of a block leaves its current state (the exact kernel).

        Units of a block move independently, so these numbers define the block's full transition
        matrix (used by :mod:`boltzkit.diagnostics`). Returns a new tensor: :meth:`decide` writes
        into it.
        """

    def flip_weight(self, layer: int) -> float:
        """Weight ``alpha`` of flip-the-state in this operator's kernel on ``layer`` (0: Gibbs); a
        layer of non-binary units takes its unit type's rule with this weight
        (:meth:`boltzkit.units.UnitType.update`)."""
        return 0.0

    def update_units(self, logits: Tensor, current: Tensor, layer: int, generator: torch.Generator) -> Tensor:
        """New {0, 1} values for one block given its logits and current values."""
        u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
        return self.decide(logits, current, u, layer)

    def decide(self, logits: Tensor, current: Tensor, u: Tensor, layer: int) -> Tensor:
        """New {0, 1} values given uniforms ``u``: a unit moves where ``u < P(move)``.

        ``|current - [u < P(move)]|``, the exclusive or, in the buffer of :meth:`move_prob`'s
        result (which is the caller's to overwrite); ``u`` and ``current`` are left as they are
        (the sequential sweep reuses them)."""
        p_move = self.move_prob(logits, current, layer)
        moved = torch.lt(u, p_move, out=p_move)  # 1.0 where the unit leaves its state
        return moved.sub_(current.detach()).abs_().to(current.dtype)

    def step(
        self,
        model: EnergyModel,
        state: ChainState,
        *,
        beta: float | Tensor = 1.0,
        generator: torch.Generator,
        clamped: tuple[int, ...] = (),
        fresh_layers: tuple[int, ...] = (),
        track: bool = False,
        logits: Mapping[int, Tensor] | None = None,
        means: tuple[int, ...] = (),
        observe: Callable[[Block, Tensor, Tensor], None] | None = None,
    ) -> tuple[ChainState, StepInfo]:
        """One sweep: update every unclamped block in ``model.blocks()`` order (see
        :meth:`TransitionOperator.step`). This is the one block sweep: CD's first half-sweep,
        parallel tempering's fused last sweep and the fused AIS step call it with hooks for what
        they need instead of drawing units themselves.

        Parameters
        ----------
        logits
            Whole binary layers whose logits at ``beta`` the caller has already computed (AIS's
            summed-out layers, PT's last layer): used instead of asking the model again.
        means
            Binary layers set to their conditional mean ``sigmoid(logits)`` instead of a draw
            (CD's mean reconstruction, Hinton & Salakhutdinov 2006).
        observe
            Called as ``observe(block, logits, new)`` after each binary block is updated (CD's
            reconstruction probabilities).
        """
        before = state if track else None
        for block in model.blocks():
            if block.layer in clamped:
                continue
            if block.sequential:
                if block.layer in fresh_layers:
                    raise BoltzkitError(
                        "a layer with laterals cannot be drawn fresh", got=f"layer {block.layer}"
                    )
                new = sequential_update(model, state, block.layer, self, beta=beta, generator=generator)
                state = state.with_layer(block.layer, new)
                continue
            units = model.layer_units(block.layer)
            if units != _BINARY:  # the unit type's own draw (flip-the-state where it has a rule)
                field, params = model.block_field(state, block, beta)
                if block.layer in fresh_layers:
                    new = units.sample(field, params, generator)
                else:
                    new = units.update(
                        field, params, state.block_values(block), self.flip_weight(block.layer), generator
                    )
                state = state.with_block(block, new)
                continue
            if logits is not None and block.layer in logits and block.units is None:
                block_logits = logits[block.layer]
            else:
                block_logits = model.block_logits(state, block, beta)
            if block.layer in means:
                new = torch.sigmoid(block_logits)
            elif block.layer in fresh_layers:
                new = bernoulli(torch.sigmoid(block_logits), generator)
            else:
                new = self.update_units(block_logits, state.block_values(block), block.layer, generator)
            if observe is not None:
                observe(block, block_logits, new)
            state = state.with_block(block, new)
        return state, (_flip_info(before, state) if before is not None else StepInfo())


class Gibbs(UnitOperator):
    """Block Gibbs sampling: each block drawn from its exact conditional."""

    name = "gibbs"

    def move_prob(self, logits, current, layer):
        return move_probability(logits, current, 0.0)

    def update_units(self, logits, current, layer, generator):
        # The new value does not depend on the current one: draw it directly.
        return bernoulli(torch.sigmoid(logits), generator)

    def decide(self, logits, current, u, layer):
        # x = 1 where u < p(x = 1 | rest): the same kernel as moving where u < P(move)
        p_on = torch.sigmoid(logits.detach())
        return torch.lt(u, p_on, out=p_on).to(current.dtype)


class Blend(UnitOperator):
    """``alpha T + (1 - alpha) G`` per unit, with ``alpha`` chosen per layer.

    Parameters
    ----------
    alpha_visible, alpha_hidden
        Weight of flip-the-state in the visible layer and in every hidden layer.
    """

    def __init__(self, alpha_visible: float, alpha_hidden: float | None = None) -> None:
        alpha_hidden = alpha_visible if alpha_hidden is None else alpha_hidden
        for a in (alpha_visible, alpha_hidden):
            if not 0.0 <= float(a) <= 1.0:
                raise BoltzkitError(
                    "blend weight alpha must lie in [0, 1]",
                    got=a,
                    hint="use e.g. 'blend:0.5' or 'blend:0.3,0.7' (visible, hidden).",
                )
        self.alpha_visible = float(alpha_visible)
        self.alpha_hidden = float(alpha_hidden)
        if self.alpha_visible == self.alpha_hidden:
            self.name = f"blend:{self.alpha_visible:g}"
        else:
            self.name = f"blend:{self.alpha_visible:g},{self.alpha_hidden:g}"

    def alpha(self, layer: int) -> float:
        return self.alpha_visible if layer == 0 else self.alpha_hidden

    def flip_weight(self, layer: int) -> float:
        return self.alpha(layer)

    def move_prob(self, logits, current, layer):
        return move_probability(logits, current, self.alpha(layer))


class FlipTheState(Blend):
    """Flip-the-state operator of Brügge, Fischer & Igel (2013), Definition 1."""

    def __init__(self) -> None:
        super().__init__(1.0, 1.0)
        self.name = "flip"


class Cycle(TransitionOperator):
    """Several operators applied in turn: one step is a sweep of each (their product kernel).

    Each component leaves the distribution invariant, so the cycle does too.
    """

    def __init__(self, *operators: TransitionOperator | str) -> None:
        if not operators:
            raise BoltzkitError("a cycle needs at least one operator")
        self.operators = tuple(make_operator(op) for op in operators)
        if any(op.keeps_replicas for op in self.operators):
            raise BoltzkitError(
                "parallel tempering cannot be part of a cycle", hint="put the cycle inside it: pt:T:A+B"
            )
        self.name = "+".join(op.name for op in self.operators)

    def step(self, model, state, *, beta=1.0, generator, clamped=(), fresh_layers=(), track=False):
        before = state if track else None
        for i, op in enumerate(self.operators):
            state, _ = op.step(
                model,
                state,
                beta=beta,
                generator=generator,
                clamped=clamped,
                fresh_layers=fresh_layers if i == 0 else (),
            )
        return state, (_flip_info(before, state) if before is not None else StepInfo())


class Repeat(TransitionOperator):
    """One operator applied ``n`` times per step (e.g. the 5 Gibbs sweeps of S2's SAP)."""

    def __init__(self, operator: TransitionOperator | str, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise BoltzkitError("a repeat count must be a positive integer", got=repr(n))
        self.operator = make_operator(operator)
        self.n = n
        # A unit rule's name takes the count directly; any other (a cycle, tempering) in
        # parentheses, so that the name parses back to this operator: "(gibbs+flip)*3", not
        # "gibbs+flip*3" (which is gibbs, then flip three times).
        inner = self.operator.name
        self.name = f"{inner}*{n}" if isinstance(self.operator, UnitOperator) else f"({inner})*{n}"

    @property
    def keeps_replicas(self) -> bool:
        return self.operator.keeps_replicas

    def extend(self, state: ChainState) -> ChainState:
        return self.operator.extend(state)

    def project(self, state: ChainState) -> ChainState:
        return self.operator.project(state)

    def step(self, model, state, *, beta=1.0, generator, clamped=(), fresh_layers=(), track=False):
        before = state if track else None
        for i in range(self.n):
            state, _ = self.operator.step(
                model,
                state,
                beta=beta,
                generator=generator,
                clamped=clamped,
                fresh_layers=fresh_layers if i == 0 else (),
            )
        return state, (_flip_info(before, state) if before is not None else StepInfo())


def _unit_operator(text: str) -> TransitionOperator | None:
    if text == "gibbs":
        return Gibbs()
    if text in ("flip", "fts", "flip-the-state"):
        return FlipTheState()
    if text.startswith("blend:"):
        try:
            alphas = [float(a) for a in text[len("blend:") :].split(",")]
        except ValueError:
            alphas = []
        if len(alphas) in (1, 2):
            return Blend(*alphas)
    return None


#: Parsers of sampler specs defined by other modules, by prefix: parallel tempering's ``pt:``
#: (:mod:`boltzkit.samplers.tempering`, which registers itself when :mod:`boltzkit.samplers` is
#: imported) — the seam through which an operator built on these ones joins :func:`make_operator`.
SPEC_PARSERS: dict[str, Callable[[str], TransitionOperator]] = {}


def register_spec(prefix: str, parse: Callable[[str], TransitionOperator]) -> None:
    """Let :func:`make_operator` read specs that start with ``prefix`` by ``parse(spec)``."""
    SPEC_PARSERS[prefix.lower()] = parse


def _top_level_parts(text: str) -> list[str]:
    """``text`` split at the ``+`` signs outside parentheses (``"(a+b)*2+c"`` -> two parts)."""
    parts, depth, begin = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "+" and depth == 0:
            parts.append(text[begin:i].strip())
            begin = i + 1
    parts.append(text[begin:].strip())
    return parts


def _unknown_sampler(spec: object) -> BoltzkitError:
    return BoltzkitError(
        "unknown sampler",
        got=spec,
        expected="'gibbs', 'flip', 'blend:ALPHA' or 'blend:ALPHA_VISIBLE,ALPHA_HIDDEN'; "
        "'A+B' cycles operators, 'A*N' repeats one N times ('(A+B)*N' a cycle); "
        "'pt:T[:INNER][@K]' is parallel tempering",
        hint="for example --sampler blend:0.5 or --sampler gibbs*5",
    )


def _parses(spec: str) -> bool:
    try:
        make_operator(spec)
    except BoltzkitError:
        return False
    return True


def _repeat_count(count: str) -> int | None:
    count = count.strip()
    # ASCII digits only: str.isdigit() also takes superscripts, which int() refuses
    return int(count) if count.isascii() and count.isdigit() and int(count) >= 1 else None


def make_operator(spec: str | TransitionOperator) -> TransitionOperator:
    """Parse ``"gibbs"``, ``"flip"``, ``"blend:ALPHA"``, ``"blend:ALPHA_V,ALPHA_H"``, a cycle
    ``"A+B"``, a repeat ``"A*N"`` (e.g. ``"flip+gibbs"``, ``"gibbs*5"``; ``"(A+B)*N"`` repeats a
    cycle, ``"(pt:3)*2"`` parallel tempering) and parallel tempering ``"pt:T[:INNER][@K]"``
    (:mod:`boltzkit.samplers.tempering`); parentheses without a count only group. The ``name`` of
    an operator made from a spec parses back to it (a tempering ladder other than the uniform one,
    or given betas, and blend weights beyond their sixth digit are not part of the name)."""
    if isinstance(spec, TransitionOperator):
        return spec
    text = str(spec).strip().lower()
    parts = _top_level_parts(text)
    for prefix, parse in SPEC_PARSERS.items():
        if text.startswith(prefix):
            try:
                return parse(text)
            except BoltzkitError as error:
                # "pt:3+gibbs": a spec first in a cycle (Cycle then says what it says of one); where
                # the parts do not all read either ("pt:3:flip+gibbs@0"), the spec's own error stands
                if len(parts) > 1 and _parses(parts[0]):
                    try:
                        ops = [make_operator(part) for part in parts]
                    except BoltzkitError:
                        raise error from None
                    return Cycle(*ops)
                raise
    ops: list[TransitionOperator] = []
    for part in parts:
        if part.startswith("("):
            inner, closed, count = part[1:].rpartition(")")
            count = count.strip()
            if closed and not count and inner.strip():  # parentheses that only group: "(A+B)"
                ops.append(make_operator(inner))
                continue
            n = _repeat_count(count.removeprefix("*")) if closed and count.startswith("*") else None
            if n is None or not inner.strip():
                raise _unknown_sampler(spec)
            ops.append(Repeat(make_operator(inner), n))
            continue
        if len(parts) > 1 and any(part.startswith(prefix) for prefix in SPEC_PARSERS):
            ops.append(make_operator(part))  # tempering in a cycle: refused by Cycle with its hint
            continue
        base, star, count = part.partition("*")
        op = _unit_operator(base.strip())
        if op is not None and star:
            n = _repeat_count(count)
            op = Repeat(op, n) if n is not None else None
        if op is None:
            raise _unknown_sampler(spec)
        ops.append(op)
    return ops[0] if len(ops) == 1 else Cycle(*ops)
