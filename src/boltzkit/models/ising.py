"""Ising models and spin glasses: fully visible models in the +-1 convention of physics.

An Ising model over spins ``s in {-1, +1}^N`` has the weight ``exp(sum_{i<j} J_ij s_i s_j + h's)``
(``J`` symmetric with a zero diagonal). With ``s = 2x - 1`` it is the fully visible Boltzmann
machine over ``x in {0, 1}^N`` with laterals ``L = 4 J`` and biases ``b = 2 h - 2 J 1``
(ALGORITHMS.md, section 8, read backwards), and

    log Z_ising = log Z_binary + sum_{i<j} J_ij - sum_i h_i.

:class:`IsingModel` *is* that Boltzmann machine (every sampler, estimator and learning rule of
boltzkit works on it in {0, 1} units), remembers that its parameters are read and written as
``J`` and ``h`` (the model file kind ``ising``), and gives the constant
(:attr:`IsingModel.log_z_constant`) that turns a ``log Z`` in {0, 1} units into the Ising
convention (:meth:`IsingModel.ising_log_z`); the command line reports ``log Z`` in the Ising
convention for such models, so their users track no constant.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError
from boltzkit.models.base import checked_parameter
from boltzkit.models.boltzmann import BoltzmannMachine


class IsingModel(BoltzmannMachine):
    """A fully visible Boltzmann machine read and written in the +-1 (Ising) convention.

    Parameters
    ----------
    couplings
        ``J``, shape ``(N, N)``, symmetric with a zero diagonal.
    fields
        ``h``, shape ``(N,)``.
    dtype, device
        Of the parameters (stored in {0, 1} units: ``L = 4 J``, ``vbias = 2 h - 2 J 1``).
    """

    def __init__(
        self,
        couplings: Tensor,
        fields: Tensor,
        *,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        J = torch.as_tensor(couplings, dtype=torch.float64)
        h = torch.as_tensor(fields, dtype=torch.float64)
        if J.dim() != 2 or J.shape[0] != J.shape[1] or h.shape != (J.shape[0],):
            raise BoltzkitError(
                "an Ising model needs J (N x N) and h (N,)", got=f"J {tuple(J.shape)}, h {tuple(h.shape)}"
            )
        n = int(h.shape[0])
        lateral, bias = 4.0 * J, 2.0 * h - 2.0 * J.sum(1)  # the {0, 1} form
        for name, value in (("J", J), ("h", h)):
            checked_parameter(value, tuple(value.shape), name)  # named as the caller gave them
        if not (bool(torch.isfinite(lateral).all()) and bool(torch.isfinite(bias).all())):
            raise BoltzkitError(
                "an Ising model's J and h overflow float64 in their {0, 1} form (L = 4 J, b = 2 h - 2 J 1)",
                got=f"largest |J| {float(J.abs().max()):.3g}, largest |h| {float(h.abs().max()):.3g}",
                hint="such couplings are too large to mean a distribution; scale them down.",
            )
        super().__init__([n], {(0, 0): lateral}, [bias], dtype=dtype, device=device)

    @property
    def kind(self) -> str:
        return "ising"

    @property
    def ising_couplings(self) -> Tensor:
        """``J = L / 4``."""
        return self.coupling(0, 0) / 4.0

    @property
    def ising_fields(self) -> Tensor:
        """``h = b / 2 + L 1 / 4``."""
        return self.bias(0) / 2.0 + self.coupling(0, 0).sum(1) / 4.0

    @property
    def log_z_constant(self) -> float:
        """``log Z_ising - log Z_binary = sum_{i<j} J_ij - sum_i h_i``."""
        J = self.ising_couplings.detach().to(torch.float64)
        return float(J.sum() / 2.0 - self.ising_fields.detach().to(torch.float64).sum())

    def ising_log_z(self, log_z_binary: float) -> float:
        """A ``log Z`` computed in {0, 1} units, in the Ising convention."""
        return float(log_z_binary) + self.log_z_constant

    @classmethod
    def from_machine(cls, model: BoltzmannMachine) -> IsingModel:
        """The Ising model of a fully visible machine (its {0, 1} parameters read as spins)."""
        if model.n_layers != 1:
            raise BoltzkitError(
                "only a fully visible model is an Ising model", got=f"layers {model.layer_sizes}"
            )
        L = model.coupling(0, 0).detach().to(torch.float64) if model.has_coupling(0, 0) else None
        n = model.n_visible
        L = torch.zeros(n, n, dtype=torch.float64) if L is None else L
        b = model.bias(0).detach().to(torch.float64)
        return cls(L / 4.0, b / 2.0 + L.sum(1) / 4.0, dtype=model.dtype, device=model.device)


__all__ = ["IsingModel"]
