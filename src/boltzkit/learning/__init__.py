"""Learning RBMs: CD-k (with k schedules) and PCD learners, the Trainer, callbacks, checkpoints.

A learner turns a minibatch into the gradient of the negative log-likelihood estimate and writes it
into ``param.grad``; the :class:`Trainer` runs the minibatch loop with any ``torch.optim``
optimizer and scheduler, callbacks, and atomic checkpoints that resume a run exactly.
:func:`train_rbm` wires it all up in one call.
"""

from boltzkit.learning.api import init_rbm, train_rbm, visible_bias_from_data
from boltzkit.learning.callbacks import (
    Callback,
    Checkpointer,
    ExactLogLikelihood,
    HistoryWriter,
    LambdaCallback,
    ProgressBar,
)
from boltzkit.learning.checkpoint import (
    load_checkpoint,
    save_checkpoint,
)
from boltzkit.learning.gradients import CDLearner, Learner, PCDLearner, Phases, Statistics, make_learner
from boltzkit.learning.history import History, history_paths
from boltzkit.learning.schedules import ConstantK, GeometricK, KSchedule, LinearK, parse_k_schedule
from boltzkit.learning.trainer import Trainer, check_binary_data, data_fingerprint

__all__ = [
    "CDLearner",
    "Callback",
    "Checkpointer",
    "ConstantK",
    "ExactLogLikelihood",
    "GeometricK",
    "History",
    "HistoryWriter",
    "KSchedule",
    "LambdaCallback",
    "Learner",
    "LinearK",
    "PCDLearner",
    "Phases",
    "ProgressBar",
    "Statistics",
    "Trainer",
    "check_binary_data",
    "data_fingerprint",
    "history_paths",
    "init_rbm",
    "load_checkpoint",
    "make_learner",
    "parse_k_schedule",
    "save_checkpoint",
    "train_rbm",
    "visible_bias_from_data",
]
