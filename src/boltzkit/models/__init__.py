"""Models as torch modules: the Boltzmann machine family (RBM, SRBM, BM, DBM), the deep belief
network (a stack of RBMs) and the mixture of Bernoullis baseline."""

from boltzkit.models.base import EnergyModel
from boltzkit.models.boltzmann import (
    KINDS,
    BoltzmannMachine,
    PairwiseForm,
    binary_entropy,
    log_z_independent,
)
from boltzkit.models.dbn import DBN
from boltzkit.models.mixture import MixtureOfBernoullis
from boltzkit.models.rbm import RBM

__all__ = [
    "KINDS",
    "BoltzmannMachine",
    "DBN",
    "EnergyModel",
    "MixtureOfBernoullis",
    "PairwiseForm",
    "RBM",
    "binary_entropy",
    "log_z_independent",
]
