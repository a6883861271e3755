"""Brügge, Fischer & Igel (2013), "S3": the flip-the-state operator T against Gibbs sampling G.

S3 backs its claim that T mixes faster than G, and so learns better, with four kinds of evidence,
all rerun here (``boltzkit reproduce bruegge-fischer-igel-2013``):

* **Tables 1, 5, 6** (Sec. 4.2, 5.2): median over 25 repetitions of the maximum exact
  log-likelihood reached in 20,000 updates by CD_k, PCD_k and t-PT_k with G and with T, on 4 x 4
  Bars and Stripes (16 hidden units, batch learning), MNIST (10 hidden units, minibatches of
  100) and Artificial Modes (p_mut 0.1 and 0.01, 16 hidden, minibatches of 100); learning rates
  0.01, 0.05, 0.1, no momentum or weight decay; weights and biases ~ N(0, 0.01^2); a Wilcoxon
  signed-rank test per cell, significant differences starred
  (:mod:`boltzkit.experiments.grid`);
* **Table 2, Fig. 4** (Sec. 4.3, 5.3): integrated autocorrelation times of the energy by AR fits
  (Thompson 2010) for single chains of 10^6 steps, on RBMs trained with 20-PT_10, including 784 x
  500 MNIST RBMs trained for 2,000 updates (:mod:`boltzkit.diagnostics.autocorrelation`);
* **Tables 3, 4** (Sec. 4.4, 5.4): class changes on Artificial Modes of RBMs trained with CD_5
  (:mod:`boltzkit.diagnostics.class_changes`);
* **Fig. 3** (Sec. 4.1, 5.1): the SLEM comparison of random 2x2, 3x3 and 4x4 RBMs
  (:func:`boltzkit.diagnostics.slem_study`) and CD_5 learning curves on Bars and Stripes.

Training runs are grid tasks (in-process, local processes or Ray; resumable); sampling results
are written per model and operator into ``OUT/act`` and ``OUT/classes`` and the SLEM study into
``OUT/slem.json``, so an interrupted run resumes and a finished one only rewrites the report
``OUT/bfi2013.md`` (with ``fig3_slem.png``, ``fig3_curves.png``, ``fig4_acf.png``).

One setting departs from S3, stated in the report: the MNIST RBMs' visible biases start at the
log-odds of the data's means (Hinton 2010, Sec. 8; ``Plan.init_vbias``), not ~ N(0, 0.01^2). From
S3's start, the first negative phases see dense fantasy images (every pixel on with probability
1/2 against the data's 0.13), which push every weight down alike and the hidden biases up until
each hidden unit is on for every image; the ten units then act as one more visible bias, their
columns move alike and nothing separates them again: every PCD_1 run at η = 0.01 and 0.05 ended
at the base-rate model (-206.1 nats), where S3 reports -185 to -180.

Settings S3 leaves open, chosen here and stated in the report: the learning rate of the models
of Table 2 and Tables 3-4 (0.05), the burn-in of the autocorrelation chains, and the MNIST
training set (the 50,000 binarized training images of Larochelle's split; Shark's MNIST has
60,000 thresholded ones).
The reproduction is a package of one concept per module: :mod:`.paper` (S3's values),
:mod:`.plan` (the sizes of a run and its parts and data sets), :mod:`.tasks` (the grid tasks of
each part), :mod:`.report` (the sections of ``bfi2013.md`` and the tables' CSV files) and
:mod:`.run` (:func:`run_bfi2013`, which runs the tasks and the sampling stages and writes the
report).
"""

from boltzkit.experiments.bfi2013.paper import (
    AM01,
    AM1,
    BAS,
    DATASETS,
    MNIST,
    PAPER_CLASS_CHANGES,
    PAPER_FIRST_CHANGE,
    PAPER_LL,
    PAPER_TAU,
    PaperRow,
)
from boltzkit.experiments.bfi2013.plan import (
    LL_TABLES,
    PARTS,
    Plan,
    make_plan,
    parse_datasets,
    parse_only,
    restrict_plan,
)
from boltzkit.experiments.bfi2013.run import run_bfi2013
from boltzkit.experiments.bfi2013.tasks import likelihood_tasks

__all__ = [
    "AM01",
    "AM1",
    "BAS",
    "DATASETS",
    "LL_TABLES",
    "MNIST",
    "PAPER_CLASS_CHANGES",
    "PAPER_FIRST_CHANGE",
    "PAPER_LL",
    "PAPER_TAU",
    "PARTS",
    "PaperRow",
    "Plan",
    "likelihood_tasks",
    "make_plan",
    "parse_datasets",
    "parse_only",
    "restrict_plan",
    "run_bfi2013",
]
