"""boltzkit: learning and quantitatively evaluating Boltzmann machines.

Layers (arrows point down): cli -> learning / estimators / diagnostics -> samplers -> models ->
state. See docs/architecture.md.
"""

from boltzkit.errors import BoltzkitError
from boltzkit.models import RBM, EnergyModel
from boltzkit.state import Block, ChainState

__version__ = "0.1.0"

__all__ = ["RBM", "Block", "BoltzkitError", "ChainState", "EnergyModel", "__version__"]
