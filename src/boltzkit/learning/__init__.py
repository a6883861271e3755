"""Learning Boltzmann machines: positive x negative phases (exact, mean-field or clamped; CD-k,
PCD/SAP), the Trainer, callbacks, checkpoints; greedy DBN stacking and EM for mixtures.

A learner turns a minibatch into the gradient of the negative log-likelihood estimate and writes it
into ``param.grad``; the :class:`Trainer` runs the minibatch loop with any ``torch.optim``
optimizer and scheduler, callbacks, and atomic checkpoints that resume a run exactly.
:func:`train` wires it all up for any model, :func:`train_model` initialises one first, and
:func:`train_rbm` is the RBM recipe.
"""

from boltzkit.learning.api import (
    init_model,
    init_rbm,
    make_positive,
    train,
    train_model,
    train_rbm,
    train_unit_dbm,
    train_unit_rbm,
    visible_bias_from_data,
)
from boltzkit.learning.callbacks import (
    Callback,
    Checkpointer,
    HistoryWriter,
    LambdaCallback,
    LogLikelihood,
    ProgressBar,
    SwapRates,
)
from boltzkit.learning.checkpoint import (
    load_checkpoint,
    save_checkpoint,
)
from boltzkit.learning.gradients import (
    CDLearner,
    Learner,
    PCDLearner,
    Phases,
    PTLearner,
    Statistics,
    make_learner,
)
from boltzkit.learning.history import History, history_paths
from boltzkit.learning.mixture import train_mixture
from boltzkit.learning.phases import (
    ClampedChains,
    ContrastiveDivergence,
    ExactConditional,
    MeanFieldPhase,
    NegativePhase,
    Persistent,
    PositivePhase,
)
from boltzkit.learning.schedules import ConstantK, GeometricK, KSchedule, LinearK, StepK, parse_k_schedule
from boltzkit.learning.stacking import layer_data, train_dbn
from boltzkit.learning.trainer import Trainer, data_fingerprint

__all__ = [
    "CDLearner",
    "ClampedChains",
    "ContrastiveDivergence",
    "ExactConditional",
    "LogLikelihood",
    "MeanFieldPhase",
    "NegativePhase",
    "Persistent",
    "PositivePhase",
    "init_model",
    "make_positive",
    "train",
    "train_model",
    "Callback",
    "Checkpointer",
    "ConstantK",
    "GeometricK",
    "History",
    "HistoryWriter",
    "KSchedule",
    "LambdaCallback",
    "Learner",
    "LinearK",
    "PCDLearner",
    "PTLearner",
    "Phases",
    "ProgressBar",
    "Statistics",
    "StepK",
    "SwapRates",
    "Trainer",
    "data_fingerprint",
    "history_paths",
    "init_rbm",
    "layer_data",
    "load_checkpoint",
    "make_learner",
    "parse_k_schedule",
    "save_checkpoint",
    "train_dbn",
    "train_mixture",
    "train_rbm",
    "train_unit_dbm",
    "train_unit_rbm",
    "visible_bias_from_data",
]
