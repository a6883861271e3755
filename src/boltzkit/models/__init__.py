"""Energy models as torch modules."""

from boltzkit.models.base import EnergyModel
from boltzkit.models.rbm import RBM

__all__ = ["EnergyModel", "RBM"]
