"""Deep belief network: a stack of RBMs with a directed part and an undirected top.

Salakhutdinov & Murray (2008, "S1"), Sec. 4. With layers ``x_0 = v, x_1, ..., x_L`` (layer 0
visible) and RBM ``l`` between layers ``l`` and ``l + 1`` (parameters ``W_l``, ``vbias_l``,
``hbias_l``), a DBN with ``L`` hidden layers is (S1 Eq. 21 and Sec. 4.2)::

    p(x_0, ..., x_L) = p(x_0 | x_1) ... p(x_(L-2) | x_(L-1)) p(x_(L-1), x_L)

* the top RBM ``L - 1`` is undirected: ``p(x_(L-1), x_L)`` is its joint distribution, and
  ``x_L`` sums out in closed form, ``log p*(x_(L-1)) = vbias^T x + sum_j softplus(hbias_j + (W^T x)_j)``;
* the lower RBMs are directed, top down, through their *visible* biases (S1 Eq. 6)::

      p(x_l | x_(l+1)) = prod_i sigmoid(W_l x_(l+1) + vbias_l)_i        (normalised)

* the approximate posterior that greedy learning leaves behind (S1 Sec. 4.2) goes bottom up
  through the lower RBMs' *hidden* biases::

      q(x_(l+1) | x_l) = prod_j sigmoid(W_l^T x_l + hbias_l)_j

  The top RBM's visible biases ``vbias_(L-1)`` are *not* part of ``q``: using them instead of
  ``hbias_(L-2)`` is the classic bug (ALGORITHMS.md, section 5).

The bottom RBM may have Gaussian or categorical visible units (a
:class:`~boltzkit.models.unit_rbm.UnitRBM`): then ``p(v | x_1)`` is that unit type's conditional
given the field ``W_0 x_1`` (:meth:`~boltzkit.units.UnitType.log_prob`: a Gaussian density or a
softmax per unit) and ``q(x_1 | v) = sigmoid(hbias_0 + phi(v) W_0)``; everything above the bottom
is binary as before.

A DBN is not an energy model: it holds its RBMs (each a
:class:`~boltzkit.models.RBM`, so samplers and estimators use them as they are) and gives the
directed conditionals, their log-probabilities (float64) and the recognition pass. Sampling
(Gibbs in the top RBM, then a directed pass down) is in :mod:`boltzkit.samplers.dbn`, greedy
training in :mod:`boltzkit.learning.stacking`, the lower bound on ``log p(v)`` (S1 Eqs. 22-24) in
:mod:`boltzkit.estimators.dbn_bound`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from boltzkit._numerics import bernoulli, softplus
from boltzkit.errors import BoltzkitError
from boltzkit.models.rbm import RBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.units import Bernoulli, UnitType


class DBN(nn.Module):
    """A deep belief network of any depth: ``rbms[l]`` sits between layers ``l`` and ``l + 1``.

    Parameters
    ----------
    rbms
        The RBMs, bottom first; ``rbms[l].n_hidden == rbms[l + 1].n_visible``. They are held as
        they are (not copied), so training one trains the DBN.

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> dbn = DBN.random((11, 7, 5), generator=g)
    >>> dbn.layer_sizes, dbn.n_hidden_layers, dbn.top.layer_sizes
    ((11, 7, 5), 2, (7, 5))
    """

    kind = "dbn"

    def __init__(self, rbms: Sequence[RBM | UnitRBM]) -> None:
        super().__init__()
        rbms = list(rbms)
        if not rbms:
            raise BoltzkitError("a DBN needs at least one RBM", got="no RBMs")
        for l, rbm in enumerate(rbms):
            if isinstance(rbm, UnitRBM) and l == 0 and len(rbms) > 1:
                continue  # a Gaussian or categorical bottom
            if isinstance(rbm, UnitRBM):
                raise BoltzkitError(
                    "only the bottom RBM of a DBN may have Gaussian or categorical units, below a binary one",
                    got=f"layer {l}: {rbm.visible_units.name} units"
                    + (" in a one-layer DBN" if len(rbms) == 1 else ""),
                    hint="a one-layer DBN is its RBM: use the UnitRBM itself."
                    if len(rbms) == 1
                    else "the layers above the bottom hold binary units.",
                )
            if not isinstance(rbm, RBM):
                raise BoltzkitError("every layer of a DBN is an RBM", got=f"layer {l}: {type(rbm).__name__}")
        for l in range(len(rbms) - 1):
            if rbms[l].n_hidden != rbms[l + 1].n_visible:
                raise BoltzkitError(
                    "the RBMs of a DBN do not chain",
                    got=f"RBM {l} has {rbms[l].n_hidden} hidden units, RBM {l + 1} "
                    f"{rbms[l + 1].n_visible} visible units",
                    expected="RBM l's hidden layer is RBM l + 1's visible layer",
                )
        kinds = {(r.dtype, r.device) for r in rbms}
        if len(kinds) != 1:
            raise BoltzkitError(
                "the RBMs of a DBN must share dtype and device", got=sorted(str(k) for k in kinds)
            )
        self.rbms = nn.ModuleList(rbms)

    # ---------------------------------------------------------------------------- builders
    @classmethod
    def random(
        cls,
        layer_sizes: Sequence[int],
        *,
        generator: torch.Generator,
        scale: float = 1.0,
        bias_scale: float = 0.5,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> DBN:
        """Weights ``~ N(0, scale^2)`` and biases ``~ N(0, bias_scale^2)``, RBM by RBM (W, vbias,
        hbias), drawn in float64 from ``generator`` and stored as ``dtype``."""
        sizes = [int(n) for n in layer_sizes]
        if len(sizes) < 2:
            raise BoltzkitError("a DBN needs a visible and at least one hidden layer", got=sizes)
        rbms = []
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            kw = {"generator": generator, "dtype": torch.float64}
            w = scale * torch.randn(a, b, **kw)
            vb = bias_scale * torch.randn(a, **kw)
            hb = bias_scale * torch.randn(b, **kw)
            rbms.append(RBM(a, b, weights=w, vbias=vb, hbias=hb, dtype=dtype, device=device))
        return cls(rbms)

    def stacked(self, rbm: RBM) -> DBN:
        """A DBN with ``rbm`` on top of this one's RBMs (shared, not copied)."""
        return DBN([*self.rbms, rbm])

    def truncated(self, n_hidden_layers: int) -> DBN:
        """The DBN of the first ``n_hidden_layers`` RBMs (shared, not copied)."""
        n = int(n_hidden_layers)
        if not 1 <= n <= self.n_hidden_layers:
            raise BoltzkitError(
                "cannot truncate the DBN to this depth", got=n, expected=f"1 to {self.n_hidden_layers}"
            )
        return DBN(list(self.rbms)[:n])

    def transposed_top(self) -> RBM:
        """A new RBM for layers ``L`` and ``L + 1`` with the top RBM's parameters transposed
        (``W_(L) = W_(L-1)^T``, visible and hidden biases swapped; S1 Sec. 5.2): stacked on
        this DBN it leaves the distribution over the visible units exactly as it was."""
        return self.top.swapped()

    # ------------------------------------------------------------------------------- shape
    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """Units per layer, visible first: ``L + 1`` numbers for ``L`` hidden layers."""
        return (self.rbms[0].n_visible, *(r.n_hidden for r in self.rbms))

    @property
    def n_hidden_layers(self) -> int:
        """``L``, the number of hidden layers (and of RBMs)."""
        return len(self.rbms)

    @property
    def n_visible(self) -> int:
        return self.rbms[0].n_visible

    @property
    def visible_units(self) -> UnitType:
        """The unit type of the visible layer (binary unless the bottom is a UnitRBM)."""
        bottom = self.rbms[0]
        return bottom.visible_units if isinstance(bottom, UnitRBM) else _BINARY

    @property
    def unit_bottom(self) -> UnitRBM | None:
        """The bottom RBM when its visible units are Gaussian or categorical, else ``None``."""
        bottom = self.rbms[0]
        return bottom if isinstance(bottom, UnitRBM) else None

    def check_data(self, x: Tensor, what: str = "data") -> Tensor:
        """``x`` checked against the visible units (binary, real or category indices), as the
        DBN's dtype and device."""
        bottom = self.unit_bottom
        if bottom is not None:
            return bottom.check_data(x, what)
        return _BINARY.check_data(x, self.n_visible, what).to(dtype=self.dtype, device=self.device)

    @property
    def top(self) -> RBM:
        """The undirected top RBM, between layers ``L - 1`` and ``L``."""
        return self.rbms[-1]

    @property
    def dtype(self) -> torch.dtype:
        return self.rbms[0].dtype

    @property
    def device(self) -> torch.device:
        return self.rbms[0].device

    def extra_repr(self) -> str:
        return f"layer_sizes={self.layer_sizes}, dtype={self.dtype}"

    # ---------------------------------------------------------------------- directed part
    def _lower(self, l: int) -> RBM:
        if not 0 <= l < self.n_hidden_layers - 1:
            raise BoltzkitError(
                "no directed conditional for this layer",
                got=f"layer {l}",
                expected=f"0 to {self.n_hidden_layers - 2} (layers below the top RBM)",
            )
        return self.rbms[l]

    def down_logits(self, l: int, upper: Tensor) -> Tensor:
        """``W_l x_(l+1) + vbias_l``: the logits of ``p(x_l | x_(l+1))``, ``l < L - 1`` (binary
        layers; a Gaussian or categorical bottom has a field instead, :meth:`log_prob_down`)."""
        rbm = self._lower(l)
        if isinstance(rbm, UnitRBM):
            raise BoltzkitError(
                f"the {rbm.visible_units.name} visible units of this DBN have a field, not logits",
                hint="use log_prob_down or prob_down.",
            )
        return rbm.visible_logits(upper)

    def prob_down(self, l: int, upper: Tensor) -> Tensor:
        """``p(x_l = 1 | x_(l+1))`` for a layer below the top RBM (for a Gaussian or categorical
        bottom, the conditional mean ``E[v | x_1]``)."""
        rbm = self._lower(l)
        if isinstance(rbm, UnitRBM):
            return rbm.visible_units.mean(rbm.visible_field(upper), rbm.visible_params())
        return torch.sigmoid(self.down_logits(l, upper))

    def log_prob_down(self, l: int, lower: Tensor, upper: Tensor) -> Tensor:
        """``log p(x_l | x_(l+1))``, float64 sums, ``(n,)``: ``sum_i log sigmoid((2 x_i - 1)
        u_i)`` for binary units, the unit type's log-probability (a log-density for Gaussian
        units) for a Gaussian or categorical bottom."""
        rbm = self._lower(l)
        if isinstance(rbm, UnitRBM):
            field = rbm.visible_field(upper.to(rbm.dtype))
            return rbm.visible_units.log_prob(lower.to(rbm.dtype), field, rbm.visible_params())
        return log_bernoulli(lower, self.down_logits(l, upper))

    def log_prob_down_pairs(self, l: int, lower: Tensor, upper: Tensor) -> Tensor:
        """``log p(lower_i | upper_j)`` for every pair of rows, ``(n_lower, n_upper)``, float64 (the
        enumerations of tiny DBNs)."""
        rbm = self._lower(l)
        if not isinstance(rbm, UnitRBM):
            return log_bernoulli(lower.unsqueeze(1), self.down_logits(l, upper).unsqueeze(0))
        # the exponential-family form of UnitType.log_prob, each field computed once:
        # log p(x_i | f_j) = -self_energy(x_i) + phi(x_i) . f_j - A(f_j)
        units, params = rbm.visible_units, rbm.visible_params()
        x = lower.to(rbm.dtype)
        field = rbm.visible_field(upper.to(rbm.dtype))  # (n_upper, n, F)
        stats = units.stats(x, params).reshape(x.shape[0], -1).to(torch.float64)
        coupling = stats @ field.reshape(field.shape[0], -1).to(torch.float64).t()
        return (
            coupling
            - units.self_energy(x, params).unsqueeze(1)
            - units.log_partition(field, params).unsqueeze(0)
        )

    # ------------------------------------------------------------------- recognition model
    def up_logits(self, l: int, lower: Tensor) -> Tensor:
        """``W_l^T x_l + hbias_l``: the logits of ``q(x_(l+1) | x_l)`` (RBM ``l``'s hidden biases;
        ``hbias_0 + phi(v) W_0`` for a Gaussian or categorical bottom)."""
        return _up_logits(self.rbms[l], lower)

    def prob_up(self, l: int, lower: Tensor) -> Tensor:
        """``q(x_(l+1) = 1 | x_l)``, the approximate posterior of layer ``l + 1``."""
        return torch.sigmoid(self.up_logits(l, lower))

    def sample_up(self, l: int, lower: Tensor, generator: torch.Generator) -> Tensor:
        """Draw ``x_(l+1) ~ q(. | x_l)``."""
        return bernoulli(self.prob_up(l, lower), generator)

    def propagate_up(
        self, v: Tensor, n_layers: int, *, mode: str = "samples", generator: torch.Generator | None = None
    ) -> Tensor:
        """Layer ``n_layers`` of the recognition pass from the visible data ``v``.

        ``mode="samples"`` draws every layer from ``q`` in turn (ancestral samples; needs a
        generator); ``mode="probs"`` passes the probabilities up (the mean-field pass:
        ``q(x_(l+1) = 1 | x_l)`` evaluated at the layer below's probabilities).
        """
        if not 0 <= int(n_layers) <= self.n_hidden_layers:
            raise BoltzkitError("no such layer", got=n_layers, expected=f"0 to {self.n_hidden_layers}")
        x = v.to(dtype=self.dtype, device=self.device)
        return recognition_pass(list(self.rbms)[: int(n_layers)], x, mode=mode, generator=generator)

    # ----------------------------------------------------------------------------- top RBM
    def log_unnormalized_top(self, x: Tensor) -> Tensor:
        """``log p*(x_(L-1))`` of the top RBM with ``x_L`` summed out, float64, ``(n,)``."""
        return self.top.log_unnormalized_visible(x)

    # ------------------------------------------------------------------------- generation
    def generate_down(
        self,
        top_visible: Tensor,
        *,
        generator: torch.Generator,
        visible: str = "sample",
        top_hidden: Tensor | None = None,
    ) -> tuple[Tensor, ...]:
        """The directed pass from layer ``L - 1`` (a state of the top RBM's visible layer) down
        to the data: ``x_l ~ p(x_l | x_(l+1))`` for ``l = L - 2, ..., 0``.

        Parameters
        ----------
        top_visible
            States of layer ``L - 1``, ``(n, n_(L-1))``.
        visible
            ``"sample"``: the visible layer is drawn like the others; ``"probs"``: it is
            ``p(v = 1 | x_1)`` instead (smoother images). For a one-layer DBN (an RBM) that needs
            ``top_hidden``, the top RBM's hidden states.

        Returns
        -------
        tuple of Tensor
            Layers ``x_0, ..., x_(L-1)``, visible first.
        """
        if visible not in ("sample", "probs"):
            raise BoltzkitError("unknown visible mode", got=repr(visible), expected="'sample' or 'probs'")
        bottom = self.unit_bottom
        if visible == "probs" and bottom is not None and bottom.visible_units.n_stats > 1:
            raise BoltzkitError(
                f"{bottom.visible_units.name} units have a distribution over states, not one probability",
                hint="use visible='sample' (category indices).",
            )
        x_top = top_visible.to(dtype=self.dtype, device=self.device)
        if self.n_hidden_layers == 1:
            if visible == "sample":
                return (x_top,)
            if top_hidden is None:
                raise BoltzkitError(
                    "the visible probabilities of a one-layer DBN need the top RBM's hidden states",
                    hint="pass top_hidden, or use visible='sample'.",
                )
            return (self.top.prob_v_given_h(top_hidden.to(dtype=self.dtype, device=self.device)),)
        layers = [x_top]
        for l in range(self.n_hidden_layers - 2, -1, -1):
            bottom = self.unit_bottom if l == 0 else None
            if bottom is not None and visible == "sample":
                x = bottom.sample_visible(layers[0], generator)
            else:
                p = self.prob_down(l, layers[0])
                x = p if (l == 0 and visible == "probs") else bernoulli(p, generator)
            layers.insert(0, x)
        return tuple(layers)

    def detached_copy(
        self, *, dtype: torch.dtype | None = None, device: torch.device | str | None = None
    ) -> DBN:
        """A copy with the same values, optionally converted."""
        rbms = [
            _unit_copy(r, dtype or r.dtype, device or r.device)
            if isinstance(r, UnitRBM)
            else RBM(
                r.n_visible,
                r.n_hidden,
                weights=r.W.detach(),
                vbias=r.vbias.detach(),
                hbias=r.hbias.detach(),
                dtype=dtype or r.dtype,
                device=device or r.device,
            )
            for r in self.rbms
        ]
        return DBN(rbms)


_BINARY = Bernoulli()


def _up_logits(rbm: RBM | UnitRBM, lower: Tensor) -> Tensor:
    """The logits of ``q(upper | lower)`` through ``rbm``: ``W^T x + hbias``, or ``hbias + phi(v) W``
    for Gaussian or categorical units."""
    return rbm.hidden_input(lower) if isinstance(rbm, UnitRBM) else rbm.hidden_logits(lower.to(rbm.dtype))


def recognition_pass(
    rbms: Sequence[RBM | UnitRBM],
    x: Tensor,
    *,
    mode: str = "samples",
    generator: torch.Generator | None = None,
) -> Tensor:
    """``x`` passed up through the recognition models ``q(x_(l+1) | x_l)`` of ``rbms``, bottom first
    (S1 Sec. 4.2): ``mode="samples"`` draws each layer in turn (needs a generator), ``"probs"``
    passes the probabilities up. With no RBMs, ``x`` itself."""
    if mode not in ("samples", "probs"):
        raise BoltzkitError("unknown recognition mode", got=repr(mode), expected="'samples' or 'probs'")
    if mode == "samples" and rbms and generator is None:
        raise BoltzkitError("sampling the recognition model needs a generator")
    for rbm in rbms:
        q = torch.sigmoid(_up_logits(rbm, x))
        x = bernoulli(q, generator) if mode == "samples" else q
    return x


def _unit_copy(rbm: UnitRBM, dtype: torch.dtype, device: torch.device | str) -> UnitRBM:
    """A detached copy of a UnitRBM in ``dtype`` on ``device``."""
    out = copy.deepcopy(rbm)
    out.zero_grad(set_to_none=True)
    return out.to(dtype=dtype, device=device)


def log_bernoulli(x: Tensor, logits: Tensor) -> Tensor:
    """``sum_i log p(x_i)`` for independent Bernoulli units with ``logits``, float64 sums, ``(n,)``.

    ``log p(x_i) = log sigmoid(s_i u_i) = -softplus(-s_i u_i)`` with ``s_i = 2 x_i - 1``: one
    elementwise pass, stable for any logit.
    """
    s = 1.0 - 2.0 * x.to(logits.dtype)
    return -torch.sum(softplus(logits * s), dim=-1, dtype=torch.float64)


__all__ = ["DBN", "log_bernoulli", "recognition_pass"]
