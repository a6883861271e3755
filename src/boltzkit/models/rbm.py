"""Restricted Boltzmann machine with binary visible and hidden units.

Energy (Salakhutdinov & Murray 2008, Eq. 1; ``a`` there is ``hbias`` here)::

    E(v, h) = -v^T W h - b^T v - c^T h,     W: (n_visible, n_hidden), b = vbias, c = hbias

At inverse temperature ``beta`` the distribution is ``p_beta(v, h) ∝ exp(-beta E(v, h))``, so every
conditional is a logistic function of ``beta`` times the unit's input (S&M 2008, Eqs. 5-6)::

    p(h_j = 1 | v) = sigma(beta (c_j + sum_i W_ij v_i))
    p(v_i = 1 | h) = sigma(beta (b_i + sum_j W_ij h_j))

and the hidden units sum out in closed form (S&M 2008, Eq. 3), giving the free energy::

    F_beta(v) = -beta b^T v - sum_j softplus(beta (c_j + (W^T v)_j)),   p_beta(v) = exp(-F_beta(v)) / Z_beta

The RBM is the member of :class:`~boltzkit.models.boltzmann.BoltzmannMachine` with the coupling
``W`` only; this subclass adds its named conditionals and direct (fused) products for speed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzkit._numerics import add_product, as_beta, bernoulli, softplus
from boltzkit.errors import BoltzkitError
from boltzkit.models.base import layer_size
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.state import Block, ChainState

_HIDDEN = Block(layer=1)
_VISIBLE = Block(layer=0)


class RBM(BoltzmannMachine):
    """Binary RBM as a ``torch.nn.Module``.

    Parameters
    ----------
    n_visible, n_hidden
        Layer sizes.
    weights, vbias, hbias
        Optional initial values, shapes ``(n_visible, n_hidden)``, ``(n_visible,)``,
        ``(n_hidden,)``; zeros when omitted.
    dtype, device
        Of the parameters; all computations follow them (partition-function sums use float64).

    Examples
    --------
    >>> rbm = RBM(7, 3)
    >>> rbm.W.shape
    torch.Size([7, 3])
    """

    def __init__(
        self,
        n_visible: int,
        n_hidden: int,
        *,
        weights: Tensor | None = None,
        vbias: Tensor | None = None,
        hbias: Tensor | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        n_visible, n_hidden = layer_size(n_visible), layer_size(n_hidden)
        if n_visible < 1 or n_hidden < 0:
            raise BoltzkitError(
                "an RBM needs at least one visible unit and a non-negative number of hidden units",
                got=f"n_visible={n_visible}, n_hidden={n_hidden}",
            )
        super().__init__(
            (int(n_visible), int(n_hidden)),
            {(0, 1): weights},
            [vbias, hbias],
            dtype=dtype,
            device=device,
        )

    @classmethod
    def random(
        cls,
        n_visible: int,
        n_hidden: int,
        *,
        scale: float = 0.01,
        generator: torch.Generator,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> RBM:
        """Weights ~ N(0, scale^2), biases zero (Hinton's practical guide)."""
        w = torch.randn(n_visible, n_hidden, generator=generator, dtype=dtype, device=device)
        return cls(n_visible, n_hidden, weights=w * scale, dtype=dtype, device=device)

    # ----------------------------------------------------------------------------------- shape
    @property
    def n_hidden(self) -> int:
        return int(self.W.shape[1])

    def extra_repr(self) -> str:
        return f"n_visible={self.n_visible}, n_hidden={self.n_hidden}, dtype={self.dtype}"

    # ----------------------------------------------------------------------------- conditionals
    def hidden_logits(self, v: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``beta (c + W^T v)``, shape ``(n, n_hidden)``."""
        pre = add_product(self.hbias, v.to(self.W.dtype), self.W)
        b = as_beta(beta, pre)
        return pre if isinstance(b, float) and b == 1.0 else pre * b

    def visible_logits(self, h: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``beta (b + W h)``, shape ``(n, n_visible)``."""
        pre = torch.addmm(self.vbias, h.to(self.W.dtype), self.W.t())
        b = as_beta(beta, pre)
        return pre if isinstance(b, float) and b == 1.0 else pre * b

    def prob_h_given_v(self, v: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``p(h_j = 1 | v)`` at ``beta`` (S&M 2008, Eq. 5)."""
        return torch.sigmoid(self.hidden_logits(v, beta))

    def prob_v_given_h(self, h: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``p(v_i = 1 | h)`` at ``beta`` (S&M 2008, Eq. 6)."""
        return torch.sigmoid(self.visible_logits(h, beta))

    def sample_h_given_v(self, v: Tensor, generator: torch.Generator, beta: float | Tensor = 1.0) -> Tensor:
        """Draw ``h ~ p(h | v)``; returns {0, 1} in the parameters' dtype."""
        return bernoulli(self.prob_h_given_v(v, beta), generator)

    def sample_v_given_h(self, h: Tensor, generator: torch.Generator, beta: float | Tensor = 1.0) -> Tensor:
        """Draw ``v ~ p(v | h)``; returns {0, 1} in the parameters' dtype."""
        return bernoulli(self.prob_v_given_h(h, beta), generator)

    # ------------------------------------------------------------------------------- energies
    def energy(self, v: Tensor, h: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``beta E(v, h)`` in float64, shape ``(n,)`` (S&M 2008, Eq. 1)."""
        v64 = v.to(torch.float64)
        h64 = h.to(torch.float64)
        W = self.W.to(torch.float64)
        e = -((v64 @ W) * h64).sum(1) - v64 @ self.vbias.to(torch.float64)
        e = e - h64 @ self.hbias.to(torch.float64)
        b = as_beta(beta, e.unsqueeze(1))
        return e * (b if isinstance(b, float) else b.squeeze(1))

    def free_energy(self, v: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``F_beta(v) = -beta b^T v - sum_j softplus(beta (c_j + (W^T v)_j))``, float64, ``(n,)``."""
        return -self.log_unnormalized_visible(v, beta)

    def log_unnormalized_visible(self, v: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``log p*_beta(v) = -F_beta(v)``, float64, shape ``(n,)``."""
        v = v.to(self.W.dtype)
        logits = self.hidden_logits(v, beta)
        lin = (v.to(torch.float64) @ self.vbias.to(torch.float64)).unsqueeze(1)
        b = as_beta(beta, lin)
        lin = lin * b
        return lin.squeeze(1) + softplus(logits).to(torch.float64).sum(1)

    def log_unnormalized_hidden(self, h: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``log p*_beta(h) = beta c^T h + sum_i softplus(beta (b_i + (W h)_i))``, float64."""
        h = h.to(self.W.dtype)
        logits = self.visible_logits(h, beta)
        lin = (h.to(torch.float64) @ self.hbias.to(torch.float64)).unsqueeze(1)
        b = as_beta(beta, lin)
        lin = lin * b
        return lin.squeeze(1) + softplus(logits).to(torch.float64).sum(1)

    # ------------------------------------------------- BoltzmannMachine contract, fused
    def blocks(self) -> tuple[Block, ...]:
        """One sweep updates the hidden layer given v, then the visible layer given h."""
        return (_HIDDEN, _VISIBLE) if self.n_hidden else (_VISIBLE,)

    def layer_input(self, state: ChainState, layer: int, beta: float | Tensor = 1.0) -> Tensor:
        if layer == 1:
            return self.hidden_logits(state.visible, beta)
        return self.visible_logits(state.hidden, beta)

    def joint_energy(self, state: ChainState) -> Tensor:
        return self.energy(state.visible, state.hidden)

    # ---------------------------------------------------------------------------- utilities
    def swapped(self) -> RBM:
        """The same distribution with visible and hidden roles exchanged (``W`` transposed)."""
        return RBM(
            self.n_hidden,
            self.n_visible,
            weights=self.W.detach().t(),
            vbias=self.hbias.detach(),
            hbias=self.vbias.detach(),
            dtype=self.dtype,
            device=self.device,
        )

    @classmethod
    def from_model(cls, model: BoltzmannMachine) -> RBM:
        """The RBM with ``model``'s values when ``model`` has the RBM structure (itself if it is one)."""
        if isinstance(model, RBM):
            return model
        if model.kind != "rbm" and not (model.n_layers == 2 and not model.coupling_keys):
            raise BoltzkitError("only a model with the RBM structure can be viewed as an RBM", got=model.kind)
        n_v, n_h = model.layer_sizes
        w = model.coupling(0, 1).detach() if model.has_coupling(0, 1) else None
        return cls(
            n_v,
            n_h,
            weights=w,
            vbias=model.bias(0).detach(),
            hbias=model.bias(1).detach(),
            dtype=model.dtype,
            device=model.device,
        )
