"""Centered gradients (Melchior, Fischer & Wiskott 2016, "How to center deep Boltzmann machines",
JMLR 17) for any member of the Boltzmann machine family.

A centered Boltzmann machine writes its energy with every unit shifted by an offset ``mu_l`` per
layer (layer ``l``'s units ``x_l``, couplings ``W_lm`` between layers, laterals ``L_l``)::

    E_c(x) = - sum_(l<m) (x_l - mu_l)^T W_lm (x_m - mu_m) - 1/2 sum_l (x_l - mu_l)^T L_l (x_l - mu_l)
             - sum_l b_l^T (x_l - mu_l)

(Melchior et al. Eq. 9 for DBMs, with laterals as in S2 Eq. 48). Expanding the products shows
that it is the ordinary energy of the same couplings with the biases

    b_l' = b_l - sum_(m adjacent to l) W_lm mu_m  (laterals: - L_l mu_l)            (*)

plus a constant, so a centered model *is* an ordinary model: boltzkit keeps the ordinary
parameters throughout (every estimator, sampler and file format sees a plain model) and centering
changes only the direction of the update. The centered gradient of the log-likelihood is
(Melchior et al. Eqs. 12-14)

    dW_lm = <(x_l - mu_l)(x_m - mu_m)^T>_data - <(x_l - mu_l)(x_m - mu_m)^T>_model
    db_l  = <x_l>_data - <x_l>_model,

and a step ``eta`` along it in centered coordinates, carried through (*), is the ordinary step

    W_lm += eta dW_lm,    b_l' += eta (db_l - sum_m dW_lm mu_m),

which :meth:`Centering.transform` writes into the ``.grad`` of the ordinary parameters (with the
descent sign that :meth:`BoltzmannMachine.set_gradients` uses). For plain SGD with fixed offsets
this is exactly training the centered model and converting it with (*). Weight decay is not part
of that equivalence: the optimizer decays the ordinary couplings after the transform, where a
decay of the centered couplings would also move the biases by ``eta * lambda * W mu``; the two
differ by that bias term (a regulariser either way, and the saved model keeps its energy).
Moving an offset with (*) held is a reparameterisation that leaves the energy unchanged, which is
why the offsets may follow the data (Melchior et al. Alg. 1: exponential moving averages).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.state import ChainState

#: Which means the offsets follow.
OFFSET_MEANS = ("data", "model", "average")


class Centering:
    """Offsets per layer, moved as exponential averages, and the centered-gradient transform.

    Parameters
    ----------
    rate
        Sliding factor ``nu`` of the moving averages, ``mu <- (1 - nu) mu + nu * mean`` once per
        update (Melchior et al. Sec. 4: 0.01 works across their experiments).
    mean
        ``"data"`` (the positive phase's means), ``"model"`` (the negative phase's) or
        ``"average"`` (half of each; Melchior et al. Sec. 5 find centering on the data mean or on
        the average of data and model means best, and the average the more stable for DBMs).

    Attributes
    ----------
    offsets
        One float64 tensor per layer (``None`` until :meth:`setup`): the visible offset starts at
        the training data's mean, the hidden offsets at 0.5 (Melchior et al. Alg. 1).
    """

    def __init__(self, rate: float = 0.01, mean: str = "average") -> None:
        rate = float(rate)
        if not 0.0 < rate <= 1.0:
            raise BoltzkitError(
                "the centering rate must lie in (0, 1]",
                got=rate,
                hint="the offsets move this fraction of the way to each new mean: e.g. average:0.01.",
            )
        if mean not in OFFSET_MEANS:
            raise BoltzkitError("unknown centering mean", got=repr(mean), expected=", ".join(OFFSET_MEANS))
        self.rate = rate
        self.mean = mean
        self.offsets: list[Tensor] | None = None

    @property
    def spec(self) -> str:
        """``"MEAN:RATE"``, as :func:`parse_centering` reads it."""
        return f"{self.mean}:{self.rate:g}"

    def setup(self, model: BoltzmannMachine, data: Tensor) -> None:
        """Start the offsets (kept when already set, e.g. restored from a checkpoint)."""
        if self.offsets is not None:
            return
        kw = {"dtype": model.dtype, "device": model.device}
        visible = data.to(torch.float64).mean(0).to(**kw)
        self.offsets = [visible] + [torch.full((n,), 0.5, **kw) for n in model.layer_sizes[1:]]

    @torch.no_grad()
    def update(self, positive: ChainState, negative: ChainState) -> None:
        """Move every offset towards this update's means (positive and negative phase states)."""
        assert self.offsets is not None, "call setup() first"
        for l, mu in enumerate(self.offsets):
            if self.mean == "data":
                target = positive.layers[l].mean(0)
            elif self.mean == "model":
                target = negative.layers[l].mean(0)
            else:
                target = 0.5 * (positive.layers[l].mean(0) + negative.layers[l].mean(0))
            mu.mul_(1.0 - self.rate).add_(target.to(mu.dtype), alpha=self.rate)

    @torch.no_grad()
    def transform(self, model: BoltzmannMachine) -> None:
        """Turn the ordinary gradients in ``model``'s ``.grad`` into the centered update written in
        ordinary coordinates (module docstring). Call after ``model.set_gradients``."""
        assert self.offsets is not None, "call setup() first"
        mu = self.offsets
        bias_grad = [model.bias(l).grad.clone() for l in range(model.n_layers)]
        shift = [torch.zeros_like(g) for g in bias_grad]
        for l, m in model.coupling_keys:
            g = model.coupling(l, m).grad
            if l == m:  # one symmetric term: a_ij + a_ji is a_ji + a_ij, so L stays exactly symmetric
                term = torch.outer(mu[l], bias_grad[l])
                g.sub_(term + term.t())
                g.fill_diagonal_(0.0)
                shift[l].add_(g @ mu[l])
            else:
                g.sub_(torch.outer(mu[l], bias_grad[m])).sub_(torch.outer(bias_grad[l], mu[m]))
                shift[l].add_(g @ mu[m])
                shift[m].add_(g.t() @ mu[l])
        for l in range(model.n_layers):
            model.bias(l).grad.sub_(shift[l])

    def state_dict(self) -> dict[str, Any]:
        return {"offsets": None if self.offsets is None else [o.clone() for o in self.offsets]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        offsets = state.get("offsets")
        self.offsets = None if offsets is None else [o.clone() for o in offsets]


def parse_centering(spec: str | Centering | None) -> Centering | None:
    """``None`` / ``"none"`` (no centering), ``"data"``, ``"model"``, ``"average"``, optionally with
    a rate: ``"average:0.01"``."""
    if spec is None or isinstance(spec, Centering):
        return spec
    text = str(spec).strip().lower()
    if text in ("", "none", "off", "false"):
        return None
    mean, _, rate = text.partition(":")
    try:
        value = float(rate) if rate else 0.01
    except ValueError:
        raise BoltzkitError(
            "cannot read the centering",
            got=repr(spec),
            expected="'none', 'data', 'model' or 'average', each with an optional :RATE in (0, 1]",
        ) from None
    return Centering(value, mean)  # says what is wrong with the mean or the rate


def centered_biases(model: BoltzmannMachine, offsets: list[Tensor]) -> list[Tensor]:
    """The centered biases ``b_l`` of an ordinary model for given offsets: the inverse of (*) in
    the module docstring, ``b_l = b_l' + sum_m W_lm mu_m``. Float64, one tensor per layer."""
    mu = [o.to(torch.float64) for o in offsets]
    out = [model.bias(l).detach().to(torch.float64).clone() for l in range(model.n_layers)]
    for l, m in model.coupling_keys:
        w = model.coupling(l, m).detach().to(torch.float64)
        if l == m:
            out[l] += w @ mu[l]
        else:
            out[l] += w @ mu[m]
            out[m] += w.t() @ mu[l]
    return out


def centered_energy(
    model: BoltzmannMachine, biases: list[Tensor], offsets: list[Tensor], state: ChainState
) -> Tensor:
    """``E_c(x)`` of the module docstring for the couplings of ``model`` and centered ``biases``
    (float64, shape ``(n,)``); equals ``model.energy_of(state)`` plus a constant when ``biases``
    are :func:`centered_biases` of ``model``."""
    x = [t.to(torch.float64) - o.to(torch.float64) for t, o in zip(state.layers, offsets, strict=True)]
    energy = torch.zeros(x[0].shape[0], dtype=torch.float64, device=x[0].device)
    for l, m in model.coupling_keys:
        w = model.coupling(l, m).detach().to(torch.float64)
        term = ((x[l] @ w) * x[m]).sum(1)
        energy -= 0.5 * term if l == m else term
    for l, b in enumerate(biases):
        energy -= x[l] @ b.to(torch.float64)
    return energy


__all__ = ["OFFSET_MEANS", "Centering", "centered_biases", "centered_energy", "parse_centering"]
