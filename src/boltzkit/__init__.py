"""boltzkit: learning and quantitatively evaluating Boltzmann machines.

Layers (arrows point down): cli -> learning / estimators / diagnostics -> samplers -> models ->
state (io/ and data/ beside models). One model family: RBM, SRBM, BM and DBM are structures of
BoltzmannMachine. See docs/architecture.md.
"""

from boltzkit.errors import BoltzkitError
from boltzkit.models import RBM, BoltzmannMachine, EnergyModel
from boltzkit.state import Block, ChainState

__version__ = "0.2.0"

__all__ = ["RBM", "Block", "BoltzkitError", "BoltzmannMachine", "ChainState", "EnergyModel", "__version__"]
