"""Energy models as torch modules: the Boltzmann machine family (RBM, SRBM, BM, DBM)."""

from boltzkit.models.base import EnergyModel
from boltzkit.models.boltzmann import (
    KINDS,
    BoltzmannMachine,
    PairwiseForm,
    binary_entropy,
    log_z_independent,
)
from boltzkit.models.rbm import RBM

__all__ = [
    "KINDS",
    "BoltzmannMachine",
    "EnergyModel",
    "PairwiseForm",
    "RBM",
    "binary_entropy",
    "log_z_independent",
]
