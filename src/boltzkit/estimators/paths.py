"""Annealing paths for AIS and reverse AIS.

A path is a family of unnormalized distributions ``p*_beta``, ``beta in [0, 1]``, with exact samples
at ``beta = 0`` (and, where available, at ``beta = 1``), together with transitions that leave each
``p_beta`` invariant. The AIS engine (:mod:`boltzkit.estimators.ais`) anneals any path without
knowing which model it belongs to; new model families (SRBM, BM) add a path class.

The path implemented here joins two RBMs with possibly different numbers of hidden units
(Salakhutdinov & Murray 2008, Sec. 3.2, Eqs. 13-17)::

    E_beta(v, h_A, h_B) = (1 - beta) E(v, h_A; theta_A) + beta E(v, h_B; theta_B)

    log p*_beta(v) = (1 - beta) b_A^T v + beta b_B^T v
                     + sum_j softplus((1 - beta)(c_A + W_A^T v)_j) + sum_j softplus(beta (c_B + W_B^T v)_j)

Base-rate -> RBM (S&M 2008, Sec. 3.3) is the special case where A has no hidden units. The hidden
layers of A and B are stored side by side as one hidden layer with a per-unit scale
``s(beta) = [(1 - beta) 1_{M_A}, beta 1_{M_B}]``, so the intermediate is itself an RBM with
weights ``[W_A | W_B] diag(s)`` and each step costs one product with each of ``W_cat`` and
``W_cat^T``.

End points: ``p*_0 = p*_A 2^{M_B}`` and ``p*_1 = p*_B 2^{M_A}``, hence
``log Z_B - log Z_A = log E[w] + (M_B - M_A) log 2``.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod

import torch
from torch import Tensor

from boltzkit._numerics import LOG2, bernoulli, softplus
from boltzkit.estimators.base_rate import base_rate_log_z
from boltzkit.estimators.exact import EnumeratedStates as EnumeratedLayer, enumerate_states as enumerate_smaller_layer, exact_sample
from boltzkit.models.rbm import RBM
from boltzkit.samplers.operators import Gibbs, TransitionOperator
from boltzkit.state import Block, ChainState

_HIDDEN = Block(layer=1)
_VISIBLE = Block(layer=0)


class AnnealingPath(ABC):
    """A sequence of distributions ``p_beta`` for AIS; see the module docstring.

    Attributes
    ----------
    log_z_zero
        ``log`` of the normalizer of ``exp(log_f(., 0))`` when known, else ``None``.
    log_f_one_offset
        Constant ``c`` with ``log_f(x, 1) = log p*_target(x) + c``.
    exact_start
        Whether :meth:`sample_start` draws exact samples of ``p_0`` (unbiased AIS).
    """

    log_z_zero: float | None
    log_f_one_offset: float
    exact_start: bool

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


class RBMPath(AnnealingPath):
    """Path from RBM ``a`` to RBM ``b`` over the same visible units (S&M 2008, Eqs. 13-17).

    Parameters
    ----------
    rbm_a
        Start of the path; an RBM with zero hidden units is a base-rate model (exact samples).
    rbm_b
        The target.
    start_chain_steps
        When ``rbm_a`` has hidden units and its smaller layer cannot be enumerated, start samples
        come from Gibbs chains of this many sweeps (the estimate is then not exactly unbiased, and a
        warning says so).
    max_bits
        Enumeration limit for exact samples and exact ``log Z_A``.
    enumeration_dtype
        Arithmetic of that enumeration (float32 is about twice as fast; sums stay float64). One
        enumeration of A serves both ``log Z_A`` and its exact start samples.
    """

    def __init__(
        self,
        rbm_a: RBM,
        rbm_b: RBM,
        *,
        start_chain_steps: int = 10_000,
        max_bits: int = 26,
        enumeration_dtype: torch.dtype = torch.float64,
    ) -> None:
        if rbm_a.n_visible != rbm_b.n_visible:
            from boltzkit.errors import BoltzkitError

            raise BoltzkitError(
                "the two RBMs of an AIS path must share their visible units",
                got=f"{rbm_a.n_visible} and {rbm_b.n_visible} visible units",
            )
        self.rbm_a, self.rbm_b = rbm_a, rbm_b
        self.max_bits = max_bits
        self.start_chain_steps = start_chain_steps
        dtype, device = rbm_b.dtype, rbm_b.device
        self.dtype, self.device = dtype, device
        self.n_visible = rbm_b.n_visible
        self.m_a, self.m_b = rbm_a.n_hidden, rbm_b.n_hidden
        kw = {"dtype": dtype, "device": device}
        self.W = torch.cat([rbm_a.W.detach().to(**kw), rbm_b.W.detach().to(**kw)], dim=1)
        self.c = torch.cat([rbm_a.hbias.detach().to(**kw), rbm_b.hbias.detach().to(**kw)])
        self.b_a = rbm_a.vbias.detach().to(**kw)
        self.b_b = rbm_b.vbias.detach().to(**kw)
        self.b_a64 = self.b_a.to(torch.float64)
        self.b_b64 = self.b_b.to(torch.float64)
        self.db64 = self.b_b64 - self.b_a64
        # |c_j + (W^T v)_j| <= bound_j for every v in [0, 1]^n: bounds the log-weight factors
        W64 = self.W.to(torch.float64)
        bound = self.c.to(torch.float64).abs() + W64.abs().sum(0)
        self._pre_bound_max = float(bound.max()) if bound.numel() else 0.0
        self._pre_bound_sum = float(bound.sum())
        self._coeff_cache: dict[float, tuple[Tensor, Tensor, Tensor]] = {}
        self._scratch: dict[tuple[tuple[int, ...], torch.dtype], Tensor] = {}
        self._one64 = torch.ones((), dtype=torch.float64, device=device)
        self.exact_start = self.m_a == 0 or min(self.m_a, self.n_visible) <= max_bits
        self._table_a: EnumeratedLayer | None = None
        if self.m_a == 0:
            log_z_a: float | None = base_rate_log_z(self.b_a)
        elif self.exact_start:
            self._table_a = enumerate_smaller_layer(rbm_a, max_bits=max_bits, dtype=enumeration_dtype)
            log_z_a = self._table_a.log_z
        else:
            log_z_a = None
        self.log_z_a = log_z_a
        self.log_z_zero = None if log_z_a is None else log_z_a + self.m_b * LOG2
        self.log_f_one_offset = self.m_a * LOG2

    # -------------------------------------------------------------------------- helpers
    @property
    def log_ratio_offset(self) -> float:
        """``log Z_B - log Z_A = log mean w + (M_B - M_A) log 2``."""
        return (self.m_b - self.m_a) * LOG2

    def scale(self, beta: float) -> Tensor:
        """Per-hidden-unit inverse temperatures ``[(1 - beta) 1_{M_A}, beta 1_{M_B}]`` (a new tensor)."""
        return self._coeffs(float(beta))[0].clone()

    def _coeffs(self, beta: float) -> tuple[Tensor, Tensor, Tensor]:
        """Per-beta constants, cached (AIS asks for each beta twice, as ``beta_to`` and then as
        ``beta_from``): the scale ``s`` in the model's dtype, the same values in float64, and the
        visible bias ``(1 - beta) b_A + beta b_B``. Callers must not modify them."""
        hit = self._coeff_cache.get(beta)
        if hit is None:
            kw = {"dtype": self.dtype, "device": self.device}
            if self.m_a == 0:
                s = torch.full((self.m_b,), beta, **kw)
            else:
                s = torch.empty(self.m_a + self.m_b, **kw)
                s[: self.m_a] = 1.0 - beta
                s[self.m_a :] = beta
            vb = (1.0 - beta) * self.b_a + beta * self.b_b
            hit = (s, s.to(torch.float64), vb)
            if len(self._coeff_cache) >= 8:
                self._coeff_cache.pop(next(iter(self._coeff_cache)))
            self._coeff_cache[beta] = hit
        return hit

    def _draw(self, p: Tensor, generator: torch.Generator) -> Tensor:
        """``bernoulli(p, generator)`` (same numbers) with the uniforms in a reused buffer."""
        key = (tuple(p.shape), p.dtype)
        u = self._scratch.get(key)
        if u is None or u.device != p.device:
            if len(self._scratch) >= 8:
                self._scratch.clear()
            u = self._scratch[key] = torch.empty_like(p)
        torch.rand(key[0], generator=generator, out=u)
        return torch.lt(u, p, out=torch.empty_like(p))

    def _pre(self, v: Tensor) -> Tensor:
        return torch.addmm(self.c, v, self.W)

    def _log_f_from_pre(self, v64_b_a: Tensor, v64_b_b: Tensor, pre64: Tensor, beta: float) -> Tensor:
        s = self._coeffs(float(beta))[1]
        lin = (1.0 - beta) * v64_b_a + beta * v64_b_b
        return lin + softplus(pre64 * s).sum(1)

    def _hidden_delta(
        self,
        pre64: Tensor,
        beta_from: float,
        beta_to: float,
        a64: Tensor | None = None,
        sigmoid_a64: Tensor | None = None,
    ) -> Tensor:
        """``sum_j softplus(a_j) - softplus(b_j)`` with ``a = s(beta_to) pre``, ``b = s(beta_from) pre``.

        Written as ``-log prod_j r_j`` with ``r_j = (1 + e^b_j) / (1 + e^a_j) = 1 + sigma(a_j)
        (e^(b_j - a_j) - 1)``: one sigmoid, one exponential and a product per unit instead of two
        softplus, and no cancellation between two large sums. Used when ``|b_j - a_j| <= 1`` for
        every unit and state (then ``r_j >= e^-1`` carries an absolute error of about one ulp of 1,
        as good as ``expm1`` would give) and the product cannot leave float64's range; the bounds
        come from the weights, so no data-dependent check (no device synchronisation) is needed.
        Otherwise the two softplus sums are subtracted.
        Returns float64, shape ``(n_chains,)``; ``a64`` and ``sigmoid_a64`` may pass ``a`` and
        ``sigma(a)`` in float64 when the caller has them.
        """
        _, s64_to, _ = self._coeffs(beta_to)
        _, s64_from, _ = self._coeffs(beta_from)
        if a64 is None:
            a64 = pre64 * s64_to
        step = abs(beta_to - beta_from)
        if step * self._pre_bound_max <= 1.0 and step * self._pre_bound_sum <= 600.0:
            r = torch.mul(pre64, s64_from - s64_to).exp_().sub_(1.0)
            sig = torch.sigmoid(a64) if sigmoid_a64 is None else sigmoid_a64
            r = torch.addcmul(self._one64, sig, r, out=r)
            return r.prod(1).log_().neg_()
        return softplus(a64).sum(1) - softplus(pre64 * s64_from).sum(1)

    # ------------------------------------------------- model-like interface for operators
    def blocks(self) -> tuple[Block, ...]:
        return (_HIDDEN, _VISIBLE)

    def block_logits(self, state: ChainState, block: Block, beta: float | Tensor = 1.0) -> Tensor:
        s, _, vb = self._coeffs(float(beta))
        if block.layer == 1:
            return self._pre(state.visible) * s
        return torch.addmm(vb, state.hidden * s, self.W.t())

    # ------------------------------------------------------------------ AnnealingPath API
    def log_f(self, state: ChainState, beta: float) -> Tensor:
        v = state.visible
        v64 = v.to(torch.float64)
        pre64 = self._pre(v).to(torch.float64)
        return self._log_f_from_pre(v64 @ self.b_a64, v64 @ self.b_b64, pre64, beta)

    def d_log_f(self, state: ChainState, beta: float) -> Tensor:
        """``(b_B - b_A)^T v + sum_j sigma(s_j pre_j) pre_j ds_j/dbeta``, ``ds/dbeta = [-1, +1]``."""
        v = state.visible
        v64 = v.to(torch.float64)
        pre64 = self._pre(v).to(torch.float64)
        s = self._coeffs(float(beta))[1]
        ds = torch.ones_like(s)
        ds[: self.m_a] = -1.0
        return v64 @ (self.b_b64 - self.b_a64) + (torch.sigmoid(pre64 * s) * pre64 * ds).sum(1)

    def transition(self, state, beta, operator, generator, *, sweeps=1):
        # The hidden units are summed out of log_f, so their carried values are not a valid chain
        # state at this beta: the first hidden update of a transition is an exact Gibbs draw.
        for sweep in range(sweeps):
            state, _ = operator.step(
                self, state, beta=beta, generator=generator, fresh_layers=(1,) if sweep == 0 else ()
            )
        return state

    def step(self, state, beta_from, beta_to, operator, generator, *, sweeps=1, move=True):
        """Fused step: one product ``v W`` serves both log-weights and the hidden update.

        The log-weight increment is ``(beta_to - beta_from) (b_B - b_A)^T v`` plus
        :meth:`_hidden_delta`, in float64; the per-beta scale and visible bias are cached.
        """
        beta_from, beta_to = float(beta_from), float(beta_to)
        s_to, s64_to, vb_to = self._coeffs(beta_to)
        v = state.visible
        pre = self._pre(v)
        f64 = pre.dtype == torch.float64
        pre64 = pre if f64 else pre.to(torch.float64)
        a64 = pre64 * s64_to
        sig64 = torch.sigmoid(a64) if f64 and move else None  # the hidden probabilities
        hidden = self._hidden_delta(pre64, beta_from, beta_to, a64, sig64)
        delta = torch.addmv(hidden, v.to(torch.float64), self.db64, alpha=beta_to - beta_from)
        if not move:
            return delta, state
        h = self._draw(sig64 if f64 else torch.sigmoid(pre * s_to), generator)
        v_logits = torch.addmm(vb_to, h * s_to, self.W.t())
        if isinstance(operator, Gibbs):
            v_new = self._draw(v_logits.sigmoid_(), generator)
        else:
            v_new = operator.update_units(v_logits, v, 0, generator)
        state = ChainState((v_new, h))
        for _ in range(sweeps - 1):
            state, _ = operator.step(self, state, beta=beta_to, generator=generator)
        return delta, state

    def _empty_hidden(self, v: Tensor) -> ChainState:
        return ChainState((v, v.new_zeros(v.shape[0], self.m_a + self.m_b)))

    def sample_start(self, n_chains, generator):
        if self.m_a == 0:
            p = torch.sigmoid(self.b_a).expand(n_chains, -1)
            return self._empty_hidden(bernoulli(p, generator))
        if self._table_a is not None:
            v = self._table_a.sample(self.rbm_a, n_chains, generator).visible
            return self._empty_hidden(v.to(self.dtype))
        warnings.warn(
            f"start samples of the first RBM come from {self.start_chain_steps} Gibbs sweeps, not "
            "exact sampling: the AIS estimate is then not exactly unbiased",
            stacklevel=2,
        )
        from boltzkit.samplers.driver import run_chains

        init = self.rbm_a.random_state(n_chains, generator)
        end = run_chains(self.rbm_a, Gibbs(), init, self.start_chain_steps, generator=generator)
        return self._empty_hidden(end.visible.to(self.dtype))

    def sample_end(self, n_chains, generator):
        if min(self.m_b, self.n_visible) > self.max_bits:
            return None
        v = exact_sample(self.rbm_b, n_chains, generator=generator, max_bits=self.max_bits).visible
        return self._empty_hidden(v.to(self.dtype))
