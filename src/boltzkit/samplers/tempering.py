"""Parallel tempering (replica exchange): t-PT_k of Brügge, Fischer & Igel (2013, "S3", Sec. 4.2).

``t`` replicas of every chain sample the tempered distributions ``p_beta(x) ∝ exp(-beta E(x))`` at
inverse temperatures ``0 <= beta_1 < ... < beta_t = 1`` (S3: uniform on [0, 1]). One step is ``k``
sweeps of an inner operator (Gibbs, flip-the-state, a blend) in every replica, then a round of
swaps of adjacent replicas, first the pairs ``(1, 2), (3, 4), ...``, then ``(2, 3), (4, 5), ...``
(Desjardins et al. 2010; Shark's ``TemperedMarkovChain``). States ``x_r`` at ``beta_r`` and
``x_s`` at ``beta_s`` are exchanged with probability (ALGORITHMS.md section 9)::

    min(1, exp((beta_r - beta_s) (E(x_r) - E(x_s))))

on the *joint* energies ``E(v, h)`` (the chains carry their hidden units), which leaves the
product ``prod_r p_{beta_r}`` invariant; the replica at ``beta = 1`` samples the model.

Ladders: ``"uniform"`` (S3), ``"geometric"``, or ``"adaptive"``: start uniform and move the
inverse temperatures so that the swap acceptance rates of all adjacent pairs become equal
(:func:`equalize_ladder` from measured rates, :func:`tune_ladder` by pilot runs; Katzgraber et
al. 2006 and Kone & Kofke 2005 argue for equal acceptance; ALGORITHMS.md section 9).

The operator works on an *extended* state: the ``n_chains`` chains of each replica stacked,
replica ``r`` in rows ``r n .. (r + 1) n - 1``, coldest (``beta = 1``) last. :meth:`extend` makes
it from ``n_chains`` chains (every replica starts there), :meth:`project` returns the chains at
``beta = 1``. Each step reports which pairs were exchanged (:attr:`StepInfo.swap_accepted`);
:class:`SwapMonitor` turns that into acceptance rates and round trips of the replicas.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError
from boltzkit.models.base import EnergyModel
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.samplers.operators import (
    StepInfo,
    TransitionOperator,
    UnitOperator,
    make_operator,
    register_spec,
)
from boltzkit.state import ChainState

#: Ladders of inverse temperatures by name (``"adaptive"`` starts uniform, then is tuned).
LADDERS = ("uniform", "geometric", "adaptive")


def ladder(n_temperatures: int, kind: str = "uniform", *, beta_min: float = 0.0) -> Tensor:
    """Inverse temperatures from ``beta_min`` to 1, increasing, float64, shape ``(t,)``.

    ``"uniform"``: evenly spaced (S3 Sec. 4.2, with ``beta_min = 0``); ``"geometric"``: a
    geometric sequence from ``max(beta_min, 1e-3)`` to 1 (denser near 1); ``"adaptive"``: the
    uniform ladder, the start of :func:`equalize_ladder` / :func:`tune_ladder`.
    """
    if isinstance(n_temperatures, bool) or not isinstance(n_temperatures, int) or n_temperatures < 2:
        raise BoltzkitError("parallel tempering needs at least two temperatures", got=repr(n_temperatures))
    if not 0.0 <= float(beta_min) < 1.0:
        raise BoltzkitError("the smallest inverse temperature must lie in [0, 1)", got=beta_min)
    if kind in ("uniform", "adaptive"):
        return torch.linspace(float(beta_min), 1.0, n_temperatures, dtype=torch.float64)
    if kind == "geometric":
        low = max(float(beta_min), 1e-3)
        return torch.logspace(torch.log10(torch.tensor(low)).item(), 0.0, n_temperatures, dtype=torch.float64)
    raise BoltzkitError("unknown temperature ladder", got=repr(kind), expected=", ".join(LADDERS))


def check_betas(betas: Sequence[float] | Tensor) -> Tensor:
    """A valid ladder: at least two inverse temperatures, increasing, in [0, 1], the last 1."""
    b = torch.as_tensor(betas, dtype=torch.float64).flatten()
    if b.numel() < 2 or not bool(torch.isfinite(b).all()):
        raise BoltzkitError(
            "a temperature ladder needs at least two finite inverse temperatures", got=b.tolist()
        )
    if bool((b[1:] <= b[:-1]).any()) or float(b[0]) < 0 or float(b[-1]) != 1.0:
        raise BoltzkitError(
            "invalid temperature ladder",
            got=[round(float(x), 6) for x in b],
            expected="strictly increasing inverse temperatures in [0, 1], the last equal to 1",
        )
    return b


def equalize_ladder(
    betas: Sequence[float] | Tensor,
    swap_rates: Sequence[float] | Tensor,
    *,
    damping: float = 0.0,
    min_rejection: float = 1e-3,
) -> Tensor:
    """Move the inner inverse temperatures so that every adjacent pair has the same swap rate.

    The rejection rate of a pair grows about linearly with the gap ``beta_{i+1} - beta_i`` for
    small gaps (the energy's spread at that temperature sets the slope). So the measured
    rejection ``1 - a_i`` per unit of ``beta`` is a piecewise-constant density on ``[beta_0, 1]``;
    the new ladder puts its ``t`` points at equal quantiles of its integral (the "equal
    acceptance" ladder; Kone & Kofke 2005, Katzgraber et al. 2006). The ends ``beta_0`` and 1 stay
    where they are. Iterating with fresh rates converges to equal rates.

    Parameters
    ----------
    betas
        Current ladder, increasing, last 1, shape ``(t,)``.
    swap_rates
        Measured acceptance rate of each adjacent pair, shape ``(t - 1,)``, in [0, 1].
    damping
        Keep this fraction of the old ladder (0: jump to the new one).
    min_rejection
        Floor of each pair's rejection rate, so that pairs that always swap keep some width.

    Returns
    -------
    Tensor
        The new ladder, float64, shape ``(t,)``, strictly increasing, same ends.
    """
    b = check_betas(betas)
    a = torch.as_tensor(swap_rates, dtype=torch.float64).flatten()
    if a.numel() != b.numel() - 1 or not bool(torch.isfinite(a).all()) or bool(((a < 0) | (a > 1)).any()):
        raise BoltzkitError(
            "swap rates must be one probability per adjacent pair of temperatures",
            got=a.tolist(),
            expected=f"{b.numel() - 1} values in [0, 1]",
        )
    if not 0.0 <= float(damping) < 1.0:
        raise BoltzkitError("the ladder's damping must lie in [0, 1)", got=damping)
    rejection = (1.0 - a).clamp_min(float(min_rejection))
    cumulative = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(rejection, 0)])
    targets = torch.linspace(0.0, float(cumulative[-1]), b.numel(), dtype=torch.float64)
    # invert the piecewise-linear map beta -> cumulative rejection at the targets
    idx = torch.searchsorted(cumulative, targets, right=True).clamp(1, b.numel() - 1) - 1
    frac = (targets - cumulative[idx]) / rejection[idx]
    new = b[idx] + frac.clamp(0.0, 1.0) * (b[idx + 1] - b[idx])
    new[0], new[-1] = b[0], 1.0
    new = float(damping) * b + (1.0 - float(damping)) * new
    # keep the ladder strictly increasing even where the rates were degenerate
    gap = 1e-9 * (1.0 - float(b[0]) + 1e-9)
    for i in range(1, new.numel()):
        if new[i] <= new[i - 1]:
            new[i] = new[i - 1] + gap
    new[-1] = 1.0
    return check_betas(new)


class ParallelTempering(TransitionOperator):
    """t-PT_k: ``k`` sweeps of ``operator`` in each of ``t`` tempered replicas, then a swap round.

    Parameters
    ----------
    n_temperatures
        Number of replicas ``t`` (ignored when ``betas`` is given).
    operator
        The inner operator (``"gibbs"``, ``"flip"``, ``"blend:A"``, ...).
    k
        Sweeps of the inner operator between swap rounds.
    betas
        The ladder (increasing, last 1); default :func:`ladder` ``(t, kind, beta_min=beta_min)``.
    kind
        ``"uniform"``, ``"geometric"`` or ``"adaptive"`` (uniform at first; :meth:`adapt` and
        :func:`tune_ladder` move it towards equal swap rates).
    beta_min
        The hottest inverse temperature (S3: 0).
    """

    def __init__(
        self,
        n_temperatures: int = 10,
        operator: TransitionOperator | str = "gibbs",
        *,
        k: int = 1,
        betas: Sequence[float] | Tensor | None = None,
        kind: str = "uniform",
        beta_min: float = 0.0,
    ) -> None:
        self.k = k
        self.betas = (
            check_betas(betas) if betas is not None else ladder(n_temperatures, kind, beta_min=beta_min)
        )
        if kind not in LADDERS:
            raise BoltzkitError("unknown temperature ladder", got=repr(kind), expected=", ".join(LADDERS))
        self.kind = kind
        self.operator = make_operator(operator)
        if self.operator.keeps_replicas:  # a tempering operator, or a repeat or cycle of one
            raise BoltzkitError(
                "parallel tempering cannot be nested",
                got=self.operator.name,
                hint="give the replicas' sampler a plain operator (gibbs, flip, a cycle or repeat of them); "
                "pt:T:gibbs*K sweeps K times between swaps",
            )

    @property
    def k(self) -> int:
        """Sweeps of the inner operator between swap rounds."""
        return self._k

    @k.setter
    def k(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BoltzkitError("PT needs k >= 1 sweeps between swaps", got=repr(value))
        self._k = value

    @property
    def name(self) -> str:  # type: ignore[override]
        inner = "" if self.operator.name == "gibbs" else f":{self.operator.name}"
        return f"pt:{self.n_temperatures}{inner}" + (f"@{self.k}" if self.k > 1 else "")

    @property
    def n_temperatures(self) -> int:
        return int(self.betas.numel())

    @property
    def adaptive(self) -> bool:
        """Whether the ladder is meant to be tuned (``kind="adaptive"``)."""
        return self.kind == "adaptive"

    def adapt(self, swap_rates: Sequence[float] | Tensor, *, damping: float = 0.5) -> Tensor:
        """Move the ladder towards equal swap rates (:func:`equalize_ladder`); returns it.

        Any ladder leaves its own product distribution invariant, so chains carry over."""
        self.betas = equalize_ladder(self.betas, swap_rates, damping=damping)
        return self.betas

    # ---------------------------------------------------------------------------- layout
    def extend(self, state: ChainState) -> ChainState:
        """Every replica starts at ``state``: shape ``(t n_chains, n_units)`` per layer."""
        return ChainState(tuple(x.repeat(self.n_temperatures, 1) for x in state.layers))

    def project(self, state: ChainState) -> ChainState:
        """The chains of the ``beta = 1`` replica (the last block of rows)."""
        n = self._chains(state)
        return ChainState(tuple(x[-n:] for x in state.layers))

    def _chains(self, state: ChainState) -> int:
        rows = state.n_chains
        if rows % self.n_temperatures:
            raise BoltzkitError(
                "a parallel-tempering state holds the chains of every replica",
                got=f"{rows} chains for {self.n_temperatures} temperatures",
                expected="a multiple of the number of temperatures (use operator.extend(state))",
            )
        return rows // self.n_temperatures

    def row_betas(self, state: ChainState, beta: float | Tensor = 1.0) -> Tensor:
        """The inverse temperature of every row of an extended state, shape ``(t n,)``."""
        n = self._chains(state)
        b = self.betas.to(device=state.layers[0].device).repeat_interleave(n)
        return b * beta if isinstance(beta, (int, float)) else b * beta.to(b)

    # ------------------------------------------------------------------------------ step
    def step(self, model, state, *, beta=1.0, generator, clamped=(), fresh_layers=(), track=False):
        """``k`` inner sweeps at each replica's temperature (times ``beta``), then swaps."""
        before = state if track else None
        row_beta = self.row_betas(state, beta)
        energy = None
        for i in range(self.k):
            fresh = fresh_layers if i == 0 else ()
            if i == self.k - 1:
                state, energy = self._last_sweep(model, state, row_beta, generator, clamped, fresh)
            else:
                state, _ = self.operator.step(
                    model, state, beta=row_beta, generator=generator, clamped=clamped, fresh_layers=fresh
                )
        state, accepted = self.swap(model, state, row_beta, generator, energy=energy)
        flips = None
        if before is not None:
            flips = tuple(
                float((a != b).to(torch.float32).mean())
                for a, b in zip(before.layers, state.layers, strict=True)
            )
        return state, StepInfo(flip_rate=flips, swap_accepted=accepted)

    def _last_sweep(self, model, state, row_beta, generator, clamped, fresh_layers):
        """The last inner sweep, returning the joint energies of the new state when they come for
        free: the final block of a sweep is a layer ``l`` without laterals, and its untempered input
        ``a_l`` (computed for its update) gives ``E(x) = E_rest(x_{-l}) - x_l . a_l`` without a
        further product (for an RBM, ``E = -c.h - v.(W h + b)``). The update itself is the
        operator's own sweep of layer ``l`` given the tempered logits ``beta a_l``
        (:meth:`UnitOperator.step`'s ``logits`` hook). Otherwise ``(state, None)``."""
        blocks = model.blocks() if isinstance(model, BoltzmannMachine) else ()
        last = blocks[-1] if blocks else None
        if (
            last is None
            or not isinstance(self.operator, UnitOperator)
            or last.sequential
            or last.units is not None
            or last.layer in clamped
            or last.layer in fresh_layers
            or sum(b.layer == last.layer for b in blocks) != 1
        ):
            state, _ = self.operator.step(
                model, state, beta=row_beta, generator=generator, clamped=clamped, fresh_layers=fresh_layers
            )
            return state, None
        l = last.layer
        state, _ = self.operator.step(
            model, state, beta=row_beta, generator=generator, clamped=(*clamped, l), fresh_layers=fresh_layers
        )
        inp = model.layer_input(state, l)
        logits = inp * row_beta.to(dtype=inp.dtype).unsqueeze(1)
        others = tuple(m for m in range(model.n_layers) if m != l)
        state, _ = self.operator.step(model, state, generator=generator, clamped=others, logits={l: logits})
        new = state.layers[l]
        rest = [m for m in range(model.n_layers) if m != l]
        # new is binary, so new * inp is exact in the input's dtype; the sum accumulates in float64
        # (the same numbers as converting both first, without two float64 copies of the layer)
        energy = model.energy_of(state, rest) - torch.sum(new * inp, dim=1, dtype=torch.float64)
        return state, energy

    @torch.no_grad()
    def swap(
        self,
        model: EnergyModel,
        state: ChainState,
        row_beta: Tensor,
        generator: torch.Generator,
        *,
        energy: Tensor | None = None,
    ) -> tuple[ChainState, Tensor]:
        """One swap round: even pairs, then odd pairs; returns the new state and, per pair and
        chain, whether the exchange was accepted (bool, ``(t - 1, n)``). Swaps compare the part of
        the energy that ``beta`` multiplies (:meth:`EnergyModel.tempered_energy`, the joint energy
        of a binary model). ``energy``: those energies of ``state`` when already known (float64,
        ``(t n,)``)."""
        t, n = self.n_temperatures, self._chains(state)
        energy = (model.tempered_energy(state) if energy is None else energy).reshape(t, n)
        betas = row_beta.reshape(t, n)
        order = torch.arange(t, device=energy.device).unsqueeze(1).expand(t, n).clone()  # row block per slot
        accepted = torch.zeros(t - 1, n, dtype=torch.bool, device=energy.device)
        for first in (0, 1):
            lo = torch.arange(first, t - 1, 2, device=energy.device)
            if lo.numel() == 0:
                continue
            hi = lo + 1
            log_ratio = (betas[lo] - betas[hi]) * (energy[lo] - energy[hi])
            u = torch.rand(log_ratio.shape, generator=generator, device=log_ratio.device, dtype=torch.float64)
            ok = torch.log(u) < log_ratio
            accepted[lo] = ok
            e_lo, e_hi = energy[lo].clone(), energy[hi].clone()
            energy[lo] = torch.where(ok, e_hi, e_lo)
            energy[hi] = torch.where(ok, e_lo, e_hi)
            o_lo, o_hi = order[lo].clone(), order[hi].clone()
            order[lo] = torch.where(ok, o_hi, o_lo)
            order[hi] = torch.where(ok, o_lo, o_hi)
        # row r*n + c of the new state is row order[r, c]*n + c of the old one
        rows = (order * n + torch.arange(n, device=order.device)).reshape(-1)
        return ChainState(tuple(x.index_select(0, rows) for x in state.layers)), accepted


class SwapMonitor:
    """Acceptance rates of each pair of adjacent temperatures and round trips of the replicas.

    An observer for :func:`boltzkit.samplers.run_chains` (``observer(step, state, info)``). A
    *round trip* is a replica's walk from the hottest temperature to ``beta = 1`` and back.

    Attributes
    ----------
    swap_rates
        Mean acceptance per pair in the current window (since the start or the last
        :meth:`reset_rates`), ``(t - 1,)``.
    total_accepted, total_rounds
        Acceptances per pair summed over every swap round, and the rounds: never reset, so that
        the rates of any stretch (an epoch of training) are differences of two readings.
    round_trips
        Completed round trips, summed over all replicas of all chains (each of the ``t`` replicas
        of a chain is a walker on the ladder).
    """

    def __init__(self, n_temperatures: int, n_chains: int, device: torch.device | str = "cpu") -> None:
        self.t, self.n = int(n_temperatures), int(n_chains)
        self.walker = torch.arange(self.t, device=device).unsqueeze(1).expand(self.t, self.n).clone()
        # direction of each walker: +1 heading to beta = 1 (left the hot end), -1 heading back, 0 not yet
        self.direction = torch.zeros(self.t, self.n, dtype=torch.int8, device=device)
        self._accepted = torch.zeros(self.t - 1, dtype=torch.float64)
        self._steps = 0
        self.total_accepted = torch.zeros(self.t - 1, dtype=torch.float64)
        self.total_rounds = 0
        self.round_trips = 0

    def __call__(self, step: int, state: ChainState, info: StepInfo) -> None:
        acc = info.swap_accepted
        if acc is None:
            return
        self._steps += 1
        rates = acc.to(torch.float64).mean(1).cpu()
        self._accepted += rates
        self.total_rounds += 1
        self.total_accepted += rates
        walker = self.walker
        for first in (0, 1):  # replay the swaps on the walkers' labels, in the operator's order
            lo = torch.arange(first, self.t - 1, 2, device=walker.device)
            if lo.numel() == 0:
                continue
            ok = acc[lo].to(walker.device)
            a, b = walker[lo].clone(), walker[lo + 1].clone()
            walker[lo] = torch.where(ok, b, a)
            walker[lo + 1] = torch.where(ok, a, b)
        # directions by walker id: at the hot end a walker starts heading up; at beta = 1 it turns
        hot, cold = walker[0], walker[-1]
        cols = torch.arange(self.n, device=walker.device)
        d = self.direction
        returned = d[hot, cols] == -1
        self.round_trips += int(returned.sum())
        d[hot, cols] = 1
        going_up = d[cold, cols] == 1
        d[cold, cols] = torch.where(going_up, torch.full_like(d[cold, cols], -1), d[cold, cols])

    @property
    def swap_rates(self) -> Tensor:
        """Mean acceptance per pair since the start or the last :meth:`reset_rates`, float64."""
        return self._accepted / max(self._steps, 1)

    @property
    def n_rounds(self) -> int:
        """Swap rounds counted in :attr:`swap_rates`."""
        return self._steps

    def reset_rates(self) -> None:
        """Start a new window of acceptance counts (after the ladder moved); round trips stay."""
        self._accepted.zero_()
        self._steps = 0

    def state_dict(self) -> dict[str, object]:
        """JSON-able state (lists and numbers), so that a resumed run counts on."""
        return {
            "walker": self.walker.cpu().tolist(),
            "direction": self.direction.cpu().tolist(),
            "accepted": self._accepted.tolist(),
            "steps": self._steps,
            "total_accepted": self.total_accepted.tolist(),
            "total_rounds": self.total_rounds,
            "round_trips": self.round_trips,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        device = self.walker.device
        self.walker = torch.tensor(state["walker"], dtype=torch.int64, device=device)
        self.direction = torch.tensor(state["direction"], dtype=torch.int8, device=device)
        self._accepted = torch.tensor(state["accepted"], dtype=torch.float64)
        self._steps = int(state["steps"])  # type: ignore[arg-type]
        # checkpoints written before the totals existed: the window is the best record left
        self.total_accepted = torch.tensor(
            state.get("total_accepted", state["accepted"]), dtype=torch.float64
        )
        self.total_rounds = int(state.get("total_rounds", state["steps"]))  # type: ignore[arg-type]
        self.round_trips = int(state["round_trips"])  # type: ignore[arg-type]


@torch.no_grad()
def tune_ladder(
    model: EnergyModel,
    pt: ParallelTempering,
    *,
    n_chains: int = 100,
    n_rounds: int = 100,
    n_iterations: int = 10,
    generator: torch.Generator,
    state: ChainState | None = None,
    damping: float = 0.5,
) -> tuple[Tensor, ChainState]:
    """Tune ``pt``'s ladder in place by pilot runs towards equal swap rates.

    Each iteration runs ``n_rounds`` PT steps of ``n_chains`` chains (continuing from the last
    iteration's state), measures the swap rates and moves the ladder with :func:`equalize_ladder`.

    Parameters
    ----------
    model
        The target.
    pt
        The operator whose :attr:`~ParallelTempering.betas` are tuned.
    n_chains, n_rounds, n_iterations
        Pilot chains, PT steps per iteration, iterations.
    generator
        Source of randomness.
    state
        An extended starting state (default: uniform random chains in every replica).
    damping
        Fraction of the old ladder kept at each move.

    Returns
    -------
    (Tensor, ChainState)
        The tuned ladder and the pilot chains' final (extended) state.
    """
    from boltzkit.samplers.driver import run_chains

    if state is None:
        state = pt.extend(model.random_state(n_chains, generator))
    n = pt._chains(state)
    for _ in range(n_iterations):
        monitor = SwapMonitor(pt.n_temperatures, n, device=state.layers[0].device)
        state = run_chains(model, pt, state, n_rounds, generator=generator, observers=[monitor])
        pt.adapt(monitor.swap_rates, damping=damping)
    return pt.betas, state


def parse_tempering(spec: str, *, kind: str = "uniform") -> ParallelTempering | None:
    """``"pt:T[:INNER][@K]"`` (e.g. ``"pt:20"``, ``"pt:10:flip@5"``), or ``None`` if not a PT spec;
    ``kind`` is the ladder (:data:`LADDERS`)."""
    text = spec.strip().lower()
    if not text.startswith("pt:"):
        return None
    body, _, k = text[3:].rpartition("@") if "@" in text else (text[3:], "", "")
    count, _, inner = body.partition(":")
    try:
        n_temperatures, sweeps = int(count), int(k) if k else 1
    except ValueError:
        raise BoltzkitError(
            "cannot read the parallel-tempering sampler",
            got=spec,
            expected="'pt:T', 'pt:T:INNER' or 'pt:T:INNER@K' (T temperatures, K sweeps between swaps)",
            hint="for example --sampler pt:20 or pt:10:flip@5",
        ) from None
    # the numbers read; what the operator says of their values (or of INNER) is its own error
    return ParallelTempering(n_temperatures, inner or "gibbs", k=sweeps, kind=kind)


register_spec("pt:", parse_tempering)

__all__ = [
    "LADDERS",
    "ParallelTempering",
    "SwapMonitor",
    "check_betas",
    "equalize_ladder",
    "ladder",
    "parse_tempering",
    "tune_ladder",
]
