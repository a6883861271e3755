"""Learners: positive and negative statistics of an RBM and the gradients they give.

The gradient of the mean log-likelihood of data ``{v^(n)}`` under an RBM (Salakhutdinov & Murray
2008, Sec. 2, the equation before Eq. 7) is a difference of a data and a model expectation::

    d <log p(v)>_data / dW_ij = E_data[v_i h_j] - E_model[v_i h_j]
    d <log p(v)>_data / db_i  = E_data[v_i]     - E_model[v_i]
    d <log p(v)>_data / dc_j  = E_data[h_j]     - E_model[h_j]

The data term is exact once the hidden units are summed out ("Rao-Blackwellised"): ``h_j`` is
replaced by ``p(h_j = 1 | v) = sigma(c_j + (W^T v)_j)``. The model term is estimated from samples
``v^-`` of a Markov chain, again with ``p(h | v^-)`` in place of ``h``:

* **CD-k** (Hinton 2002; S&M 2008, Eq. 7) starts one chain at every example of the minibatch:
  ``h^0 ~ p(h | v^0)``, then ``k`` sweeps ``v^0 -> h^0 -> v^1 -> h^1 -> ... -> v^k`` of a transition
  operator, and uses ``(v^k, p(h | v^k))``.
* **PCD-k** (Tieleman 2008) keeps ``n_chains`` persistent chains and advances them ``k`` sweeps per
  update, with the parameters of that update.

Either sampler may be Gibbs, flip-the-state or their blend (Brügge, Fischer & Igel 2013, Sec. 4.2
replaces Gibbs by flip-the-state in CD and PCD). A learner writes the gradient of the *negative*
log-likelihood estimate into ``param.grad``::

    W.grad = -( v_data^T p(h|v_data) / n_data - v_model^T p(h|v_model) / n_model )

(and likewise for the biases), so that any ``torch.optim`` optimizer descends it; weight decay,
momentum and learning-rate schedules belong to the optimizer. Gradients are computed with direct
matrix products, never autograd.

Block Gibbs (the default) runs a hand-written loop with reusable buffers: one CD-1 update costs
three ``(batch, n_visible) x (n_visible, n_hidden)``-sized products for the chain, two for the
gradient, one uniform draw per sampled unit, and a few elementwise passes. It consumes the
generator exactly like the generic path through :meth:`TransitionOperator.step`, so both give the
same numbers from the same seed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import bernoulli
from boltzkit.errors import BoltzkitError
from boltzkit.models.rbm import RBM
from boltzkit.samplers.operators import Gibbs, TransitionOperator, make_operator
from boltzkit.state import ChainState

_VISIBLE_ONLY = (1,)  # clamp the hidden layer: a sweep then updates the visible layer alone


@dataclass(frozen=True)
class Phases:
    """Samples behind one gradient estimate.

    Attributes
    ----------
    v_data
        Data minibatch ``v^0``, shape ``(n_data, n_visible)``.
    h_data
        ``p(h = 1 | v^0)``, shape ``(n_data, n_hidden)``.
    v_model
        Negative-phase visible states ``v^k``, shape ``(n_model, n_visible)``.
    h_model
        ``p(h = 1 | v^k)``, shape ``(n_model, n_hidden)``.
    reconstruction
        Sum over the minibatch of ``||v^0 - p(v | h^0)||^2`` with ``h^0 ~ p(h | v^0)`` (0-d tensor),
        or ``None`` when not tracked.

    Notes
    -----
    The tensors may be a learner's internal buffers, overwritten by its next call: clone them to
    keep them.
    """

    v_data: Tensor
    h_data: Tensor
    v_model: Tensor
    h_model: Tensor
    reconstruction: Tensor | None = None


@dataclass(frozen=True)
class Statistics:
    """Sufficient statistics of both phases, as means (float64).

    ``vh_*`` has shape ``(n_visible, n_hidden)``, ``v_*`` ``(n_visible,)``, ``h_*`` ``(n_hidden,)``.
    """

    vh_data: Tensor
    v_data: Tensor
    h_data: Tensor
    vh_model: Tensor
    v_model: Tensor
    h_model: Tensor

    @classmethod
    def from_phases(cls, phases: Phases) -> Statistics:
        def means(v: Tensor, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            v64, h64 = v.to(torch.float64), h.to(torch.float64)
            return v64.t() @ h64 / v.shape[0], v64.mean(0), h64.mean(0)

        return cls(*means(phases.v_data, phases.h_data), *means(phases.v_model, phases.h_model))

    def gradients(self) -> dict[str, Tensor]:
        """Gradient of the negative log-likelihood estimate: ``{"W", "vbias", "hbias"}``."""
        return {
            "W": self.vh_model - self.vh_data,
            "vbias": self.v_model - self.v_data,
            "hbias": self.h_model - self.h_data,
        }


def _check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BoltzkitError(f"{name} must be a positive integer", got=repr(value), expected="an integer >= 1")
    return value


class _Buffers:
    """Scratch tensors keyed by name and shape, allocated once and reused."""

    MAX_ENTRIES = 64

    def __init__(self) -> None:
        self._store: dict[tuple[str, tuple[int, ...]], Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], like: Tensor) -> Tensor:
        key = (name, shape)
        buf = self._store.get(key)
        if buf is None or buf.dtype != like.dtype or buf.device != like.device:
            if len(self._store) >= self.MAX_ENTRIES:  # many batch shapes: start over
                self._store.clear()
            buf = torch.empty(shape, dtype=like.dtype, device=like.device)
            self._store[key] = buf
        return buf

    def clear(self) -> None:
        self._store.clear()


def _grad_buffer(param: torch.nn.Parameter) -> Tensor:
    """``param.grad``, allocated (uninitialised) when absent; the learner overwrites it."""
    if param.grad is None or param.grad.shape != param.shape or param.grad.dtype != param.dtype:
        param.grad = torch.empty_like(param)
    return param.grad


class Learner(ABC):
    """Turns a data minibatch into the RBM's log-likelihood gradient estimate.

    Parameters
    ----------
    k
        Sweeps of the sampler per update (``k >= 1``); may be changed between updates (the
        trainer sets it from a :class:`~boltzkit.learning.schedules.KSchedule`).
    sampler
        Transition operator or spec: ``"gibbs"``, ``"flip"``, ``"blend:ALPHA"``.
    reconstruction
        Track the reconstruction error ``||v^0 - p(v | h^0)||^2`` (see :class:`Phases`).
    fast
        Use the buffered block-Gibbs loop when the sampler is plain Gibbs (same numbers as the
        generic path; ``False`` forces the generic path, for tests).
    """

    method: str = "learner"

    def __init__(
        self,
        k: int = 1,
        sampler: str | TransitionOperator = "gibbs",
        *,
        reconstruction: bool = True,
        fast: bool = True,
    ) -> None:
        self.k = _check_positive_int(k, "k")
        self.operator = make_operator(sampler)
        self.reconstruction = bool(reconstruction)
        self.fast = bool(fast) and type(self.operator) is Gibbs
        self._buf = _Buffers()

    # -------------------------------------------------------------------------------- public
    @abstractmethod
    def phases(self, model: RBM, v_data: Tensor, generator: torch.Generator) -> Phases:
        """Run the negative phase for minibatch ``v_data`` (shape ``(n, n_visible)``, the model's
        dtype and device, values in {0, 1}) and return both phases' samples."""

    @torch.no_grad()
    def statistics(self, model: RBM, v_data: Tensor, generator: torch.Generator) -> Statistics:
        """Mean sufficient statistics of both phases (float64), from :meth:`phases`."""
        return Statistics.from_phases(self.phases(model, v_data, generator))

    @torch.no_grad()
    def set_gradients(self, model: RBM, v_data: Tensor, generator: torch.Generator) -> Tensor | None:
        """Write the negative log-likelihood gradient estimate into ``model``'s ``.grad``.

        ``W.grad = v_m^T p(h|v_m) / n_m - v_d^T p(h|v_d) / n_d``, ``vbias.grad = mean(v_m) -
        mean(v_d)``, ``hbias.grad = mean(p(h|v_m)) - mean(p(h|v_d))`` (S&M 2008, Eq. 7 with the
        sign flipped for minimisation). Existing gradients are overwritten, not accumulated.
        No input checks are made here (this is the inner loop).

        Returns
        -------
        Tensor or None
            The minibatch's summed reconstruction error (0-d tensor, not synchronised).
        """
        ph = self.phases(model, v_data, generator)
        n_d = ph.v_data.shape[0]
        n_m = ph.v_model.shape[0]
        gW = _grad_buffer(model.W)
        torch.mm(ph.v_data.t(), ph.h_data, out=gW)
        gW.addmm_(ph.v_model.t(), ph.h_model, beta=-1.0 / n_d, alpha=1.0 / n_m)
        gb = _grad_buffer(model.vbias)
        torch.sum(ph.v_model, 0, out=gb)
        gb.mul_(1.0 / n_m).sub_(ph.v_data.sum(0), alpha=1.0 / n_d)
        gc = _grad_buffer(model.hbias)
        torch.sum(ph.h_model, 0, out=gc)
        gc.mul_(1.0 / n_m).sub_(ph.h_data.sum(0), alpha=1.0 / n_d)
        return ph.reconstruction

    def setup(self, model: RBM, train_x: Tensor, generator: torch.Generator) -> None:  # noqa: B027
        """Called once by the trainer before the first update (PCD initialises its chains)."""

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must hold to resume (tensors and JSON-able values)."""
        return {"k": self.k}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.k = int(state["k"])

    def describe(self) -> str:
        """Short name, e.g. ``"CD-3 (gibbs)"``."""
        return f"{self.method.upper()}-{self.k} ({self.operator.name})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k}, sampler={self.operator.name!r})"

    # ------------------------------------------------------------------------------ helpers
    def _sample_into(
        self, p: Tensor, name: str, generator: torch.Generator, out: Tensor | None = None
    ) -> Tensor:
        """``u < p`` as floats, ``u ~ U[0, 1)`` drawn like :func:`boltzkit._numerics.bernoulli`
        (so both consume the generator identically), written to ``out`` or buffer ``name``."""
        shape = tuple(p.shape)
        u = self._buf.get(name + "_u", shape, p)
        if out is None:
            out = self._buf.get(name, shape, p)
        torch.rand(shape, generator=generator, out=u)
        return torch.gt(p, u, out=out)

    def _hidden_prob_into(self, model: RBM, v: Tensor, name: str) -> Tensor:
        """``sigma(c + v W)`` into buffer ``name``, shape ``(n, n_hidden)``."""
        out = self._buf.get(name, (v.shape[0], model.n_hidden), v)
        torch.addmm(model.hbias, v, model.W, out=out)
        return torch.sigmoid(out, out=out)

    def _visible_prob_into(self, model: RBM, h: Tensor, name: str) -> Tensor:
        """``sigma(b + h W^T)`` into buffer ``name``, shape ``(n, n_visible)``."""
        out = self._buf.get(name, (h.shape[0], model.n_visible), h)
        torch.addmm(model.vbias, h, model.W.t(), out=out)
        return torch.sigmoid(out, out=out)

    def _recon(self, v0: Tensor, vp: Tensor) -> Tensor | None:
        if not self.reconstruction:
            return None
        d = vp - v0
        return torch.linalg.vecdot(d.flatten(), d.flatten())


class CDLearner(Learner):
    """Contrastive divergence CD-k (Hinton 2002; Salakhutdinov & Murray 2008, Eq. 7).

    For a minibatch ``v^0``: ``h^0 ~ p(h | v^0)`` (an exact draw), the sampler's visible update
    given ``h^0`` gives ``v^1`` (for Gibbs ``v^1 ~ p(v | h^0)``; flip-the-state starts from
    ``v^0``), then ``k - 1`` full sweeps (hidden, then visible) give ``v^k``. The statistics are
    ``(v^0, p(h|v^0))`` and ``(v^k, p(h|v^k))``. CD-1 with Gibbs is exactly
    ``v^0 -> h^0 -> v^1 -> p(h | v^1)``.

    Parameters
    ----------
    k, sampler, reconstruction, fast
        See :class:`Learner`.
    """

    method = "cd"

    @torch.no_grad()
    def phases(self, model: RBM, v_data: Tensor, generator: torch.Generator) -> Phases:
        if self.fast:
            return self._phases_gibbs(model, v_data, generator)
        return self._phases_generic(model, v_data, generator)

    def _phases_gibbs(self, model: RBM, v0: Tensor, g: torch.Generator) -> Phases:
        h0p = self._hidden_prob_into(model, v0, "h0p")
        h = self._sample_into(h0p, "h", g)
        recon = None
        v = v0
        for sweep in range(self.k):
            if sweep > 0:
                h = self._sample_into(self._hidden_prob_into(model, v, "hp"), "h", g)
            vp = self._visible_prob_into(model, h, "vp")
            if sweep == 0:
                recon = self._recon(v0, vp)
            v = self._sample_into(vp, "v", g)
        hkp = self._hidden_prob_into(model, v, "hkp")
        return Phases(v0, h0p, v, hkp, recon)

    def _phases_generic(self, model: RBM, v0: Tensor, g: torch.Generator) -> Phases:
        h0p = model.prob_h_given_v(v0)
        state = ChainState((v0, bernoulli(h0p, g)))
        recon = None
        if self.reconstruction:
            recon = self._recon(v0, model.prob_v_given_h(state.hidden))
        # first sweep: the hidden half was the exact draw above; the sampler updates v given h^0
        state, _ = self.operator.step(model, state, beta=1.0, generator=g, clamped=_VISIBLE_ONLY)
        for _ in range(self.k - 1):
            state, _ = self.operator.step(model, state, beta=1.0, generator=g)
        return Phases(v0, h0p, state.visible, model.prob_h_given_v(state.visible), recon)


class PCDLearner(Learner):
    """Persistent contrastive divergence PCD-k (Tieleman 2008), also called SAP.

    ``n_chains`` chains persist across updates; each update advances them ``k`` full sweeps
    (hidden, then visible) of the sampler at the current parameters and uses ``(v^k, p(h|v^k))``.
    The chains start at ``n_chains`` training examples drawn with replacement and
    ``h ~ p(h | v)`` (:meth:`setup`), or at uniform random states when no data was given.

    Parameters
    ----------
    n_chains
        Number of persistent chains.
    k, sampler, reconstruction, fast
        See :class:`Learner`. The reconstruction error costs PCD one extra product and draw
        per update; switch it off for speed.
    """

    method = "pcd"

    def __init__(
        self,
        n_chains: int = 100,
        k: int = 1,
        sampler: str | TransitionOperator = "gibbs",
        *,
        reconstruction: bool = True,
        fast: bool = True,
    ) -> None:
        super().__init__(k, sampler, reconstruction=reconstruction, fast=fast)
        self.n_chains = _check_positive_int(n_chains, "n_chains")
        self.chains: ChainState | None = None

    @torch.no_grad()
    def init_chains(self, model: RBM, generator: torch.Generator, data: Tensor | None = None) -> None:
        """Start the chains at random rows of ``data`` (with ``h ~ p(h|v)``) or uniformly at random."""
        if data is None or data.shape[0] == 0:
            self.chains = model.random_state(self.n_chains, generator)
            return
        idx = torch.randint(data.shape[0], (self.n_chains,), generator=generator, device=data.device)
        v = data.index_select(0, idx).to(device=model.device, dtype=model.dtype)
        self.chains = ChainState((v, model.sample_h_given_v(v, generator)))

    def setup(self, model: RBM, train_x: Tensor, generator: torch.Generator) -> None:
        if self.chains is None:
            self.init_chains(model, generator, train_x)

    @torch.no_grad()
    def phases(self, model: RBM, v_data: Tensor, generator: torch.Generator) -> Phases:
        if self.chains is None:
            self.init_chains(model, generator)
        h0p = self._hidden_prob_into(model, v_data, "h0p") if self.fast else model.prob_h_given_v(v_data)
        recon = None
        if self.reconstruction:
            h0 = self._sample_into(h0p, "h0", generator) if self.fast else bernoulli(h0p, generator)
            vp = self._visible_prob_into(model, h0, "vp0") if self.fast else model.prob_v_given_h(h0)
            recon = self._recon(v_data, vp)
        if self.fast:
            v, hkp = self._advance_gibbs(model, generator)
        else:
            state = self.chains
            for _ in range(self.k):
                state, _ = self.operator.step(model, state, beta=1.0, generator=generator)
            self.chains = state
            v = state.visible
            hkp = model.prob_h_given_v(v)
        return Phases(v_data, h0p, v, hkp, recon)

    def _advance_gibbs(self, model: RBM, g: torch.Generator) -> tuple[Tensor, Tensor]:
        v, h = self.chains.layers
        # the chain state lives in two persistent tensors updated in place
        if not (v.is_contiguous() and h.is_contiguous()) or v.dtype != model.dtype:
            v = v.to(dtype=model.dtype).contiguous().clone()
            h = h.to(dtype=model.dtype).contiguous().clone()
        for _ in range(self.k):
            self._sample_into(self._hidden_prob_into(model, v, "hp"), "h", g, out=h)
            self._sample_into(self._visible_prob_into(model, h, "vp"), "v", g, out=v)
        self.chains = ChainState((v, h))
        return v, self._hidden_prob_into(model, v, "hkp")

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        out["n_chains"] = self.n_chains
        if self.chains is not None:
            out["chains_visible"] = self.chains.visible.clone()
            out["chains_hidden"] = self.chains.hidden.clone()
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if int(state["n_chains"]) != self.n_chains:
            raise BoltzkitError(
                "the checkpoint's PCD chains do not match this learner",
                got=f"{state['n_chains']} chains",
                expected=f"{self.n_chains} chains",
                hint="resume with the same --n-chains as the interrupted run.",
            )
        if "chains_visible" in state:
            self.chains = ChainState((state["chains_visible"].clone(), state["chains_hidden"].clone()))
        else:
            self.chains = None

    def describe(self) -> str:
        return f"PCD-{self.k} ({self.operator.name}, {self.n_chains} chains)"

    def __repr__(self) -> str:
        return f"PCDLearner(n_chains={self.n_chains}, k={self.k}, sampler={self.operator.name!r})"


def make_learner(
    method: str,
    *,
    k: int = 1,
    sampler: str | TransitionOperator = "gibbs",
    n_chains: int = 100,
    reconstruction: bool = True,
) -> Learner:
    """``"cd"`` -> :class:`CDLearner`, ``"pcd"`` (or ``"sap"``, ``"persistent"``) -> :class:`PCDLearner`."""
    name = str(method).strip().lower()
    if name in ("cd", "contrastive-divergence"):
        return CDLearner(k, sampler, reconstruction=reconstruction)
    if name in ("pcd", "sap", "persistent"):
        return PCDLearner(n_chains, k, sampler, reconstruction=reconstruction)
    raise BoltzkitError(
        "unknown learning method",
        got=repr(method),
        expected="'cd' (contrastive divergence) or 'pcd' (persistent contrastive divergence)",
    )


__all__ = ["CDLearner", "Learner", "PCDLearner", "Phases", "Statistics", "make_learner"]
