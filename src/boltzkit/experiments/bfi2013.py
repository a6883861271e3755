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

Settings S3 leaves open, chosen here and stated in the report: the learning rate of the models
of Table 2 and Tables 3-4 (0.05), the burn-in of the autocorrelation chains, and the MNIST
training set (the 50,000 binarized training images of Larochelle's split; Shark's MNIST has
60,000 thresholded ones).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from boltzkit.atomic import atomic_write_text
from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.experiments.engine import finite_or_none
from boltzkit.experiments.grid import (
    Comparison,
    GridTask,
    aggregate,
    algorithm_label,
    load_record,
    make_grid,
    mean_curves,
    min_significant_pairs,
    run_grid,
)
from boltzkit.experiments.mixing_study import (
    autocorrelation_stage,
    class_change_stage,
    finite_mean,
    mean_acf,
    quartiles,
    slem_stage,
)
from boltzkit.experiments.report import Table, csv_text
from boltzkit.jsonio import save_json

#: Parts of the reproduction (``--only``).
PARTS = ("table1", "table2", "table3", "table4", "table5", "table6", "fig3", "fig4")
#: The parts that are median maximum log-likelihoods of repeated learning runs.
LL_TABLES = ("table1", "table5", "table6")

BAS = "bars-and-stripes"
MNIST = "mnist"
AM1 = "artificial-modes:0.1"
AM01 = "artificial-modes:0.01"
#: S3's data sets, as ``--datasets`` names them.
DATASETS = (BAS, MNIST, AM1, AM01)
#: Best mean log-likelihood on the 32 Bars and Stripes patterns (two duplicates; Shark's list).
BAS_OPTIMUM = (28 * math.log(1 / 32) + 4 * math.log(2 / 32)) / 32
#: Names in the report.
NAMES = {
    BAS: "Bars and Stripes",
    MNIST: "MNIST, n = 10",
    AM1: "Artificial Modes, p_mut = 0.1",
    AM01: "Artificial Modes, p_mut = 0.01",
    "mnist500": "MNIST, n = 500",
}
#: Per data set: hidden units and minibatch (``None``: batch learning), S3 Sec. 4.2.
SHAPES = {BAS: (16, None), MNIST: (10, 100), AM1: (16, 100), AM01: (16, 100)}


# ------------------------------------------------------------------------------ the paper
@dataclass(frozen=True)
class PaperRow:
    """One row of S3 Tables 1, 5, 6: median maximum log-likelihood with G and with T; ``star``
    is ``"a"`` (G) or ``"b"`` (T) where S3 marks a significant difference."""

    algorithm: str
    lr: float
    gibbs: float
    flip: float
    star: str | None = None


def _rows(text: str) -> tuple[PaperRow, ...]:
    """Rows ``ALG LR G T`` with a trailing ``*`` on the starred value (transcribed from S3)."""
    out = []
    for line in text.strip().splitlines():
        alg, lr, g, t = line.split()
        star = "a" if g.endswith("*") else "b" if t.endswith("*") else None
        out.append(PaperRow(alg, float(lr), float(g.rstrip("*")), float(t.rstrip("*")), star))
    return tuple(out)


#: S3 Tables 1, 5 and 6, by (table, data set).
PAPER_LL: dict[tuple[str, str], tuple[PaperRow, ...]] = {
    ("table1", BAS): _rows("""
cd:5 0.01 -4.070406 -3.986813*
cd:5 0.05 -3.832875 -3.727781*
cd:5 0.1 -3.838406 -3.732438*
cd:10 0.01 -3.963563 -3.930687*
cd:10 0.05 -3.640219 -3.57625*
cd:10 0.1 -3.635781 -3.589219*
pt:5:1 0.01 -4.011406 -4.0095
pt:5:1 0.05 -3.675312 -3.636125*
pt:5:1 0.1 -3.8255 -3.77825
pt:5:5 0.01 -3.928125 -3.918781
pt:5:5 0.05 -3.515719 -3.500844*
pt:5:5 0.1 -3.565281 -3.540625*
pt:20:1 0.01 -3.974219 -3.977562
pt:20:1 0.05 -3.548969 -3.524406*
pt:20:1 0.1 -3.577812 -3.549812*
pt:20:5 0.01 -3.917969 -3.923781
pt:20:5 0.05 -3.470094 -3.466188*
pt:20:5 0.1 -3.478844 -3.472594*
"""),
    ("table1", MNIST): _rows("""
cd:5 0.01 -178.716 -177.958*
cd:5 0.05 -179.345 -178.873
cd:5 0.1 -179.007 -178.446*
cd:10 0.01 -176.495 -175.638*
cd:10 0.05 -176.844 -176.476
cd:10 0.1 -177.925 -176.586
pt:10:2 0.01 -182.283 -180.272*
pt:10:2 0.05 -182.303 -181.379*
pt:10:2 0.1 -181.727 -180.164
pt:10:5 0.01 -178.71 -178.215*
pt:10:5 0.05 -179.625 -178.708*
pt:10:5 0.1 -179.051 -178.504*
"""),
    ("table5", BAS): _rows("""
pcd:1 0.01 -4.944813* -5.131875
pcd:1 0.05 -4.917219 -4.754625*
pcd:1 0.1 -5.285469 -5.176563*
pcd:5 0.01 -4.067437 -4.000844*
pcd:5 0.05 -4.050906 -3.915938*
pcd:5 0.1 -4.209375 -4.124625*
pcd:10 0.01 -3.972812 -3.945219*
pcd:10 0.05 -3.8425 -3.769938*
pcd:10 0.1 -4.02 -3.917937*
"""),
    ("table5", MNIST): _rows("""
pcd:1 0.01 -185.536 -185.378*
pcd:1 0.05 -181.382 -180.905
pcd:1 0.1 -179.572 -180.502
pcd:5 0.01 -179.061 -177.939*
pcd:5 0.05 -178.195 -177.675
pcd:5 0.1 -176.897 -175.946
pcd:10 0.01 -175.799 -174.919*
pcd:10 0.05 -176.301 -175.446*
pcd:10 0.1 -176.208 -174.94
"""),
    ("table6", AM1): _rows("""
cd:5 0.01 -6.79103 -6.78603*
cd:5 0.05 -6.80241 -6.79473*
cd:10 0.01 -6.78564 -6.7833*
cd:10 0.05 -6.79646 -6.79682*
pcd:5 0.01 -6.79176 -6.78537*
pcd:5 0.05 -6.80292 -6.79679*
pcd:10 0.01 -6.78512 -6.78329*
pcd:10 0.05 -6.79575 -6.79372*
pt:10:2 0.01 -6.78282 -6.78325
pt:10:2 0.05 -6.79839 -6.79575
pt:10:5 0.01 -6.78206 -6.78213
pt:10:5 0.05 -6.7929 -6.79351
pt:10:10 0.01 -6.7827 -6.78203
pt:10:10 0.05 -6.79101 -6.79196
"""),
    ("table6", AM01): _rows("""
cd:5 0.01 -4.01644 -3.64562*
cd:5 0.05 -4.00452 -3.68796*
cd:10 0.01 -3.48928 -3.23056*
cd:10 0.05 -3.51262 -3.27728*
pcd:5 0.01 -3.9956 -3.6295*
pcd:5 0.05 -3.94864 -3.61392*
pcd:10 0.01 -3.46321 -3.21007*
pcd:10 0.05 -3.37534 -3.11163*
pt:10:2 0.01 -2.40041 -2.40195
pt:10:2 0.05 -2.40682 -2.40798
pt:10:5 0.01 -2.39929 -2.3992
pt:10:5 0.05 -2.40648 -2.40072*
pt:10:10 0.01 -2.39973 -2.40012
pt:10:10 0.05 -2.40188 -2.40078
"""),
}

#: S3 Table 2: mean autocorrelation times (G, T) and the gain 1 - tau_T / tau_G in %.
PAPER_TAU = {
    BAS: (22.46, 20.06, 10.67),
    AM1: (3.16, 2.19, 30.73),
    AM01: (6.00, 5.94, 1.06),
    MNIST: (488.26, 445.84, 8.69),
    "mnist500": (522.39, 432.12, 17.28),
}
#: S3 Table 3 (class changes in 10,000 samples) and Table 4 (samples before the first change):
#: 25 %, 50 %, 75 % quantiles by (data set, operator).
PAPER_CLASS_CHANGES = {
    (AM1, "gibbs"): (615, 637, 655),
    (AM1, "flip"): (919, 944, 958),
    (AM01, "gibbs"): (134, 148, 162),
    (AM01, "flip"): (175, 186, 199),
}
PAPER_FIRST_CHANGE = {
    (AM1, "gibbs"): (6, 13, 25),
    (AM1, "flip"): (3, 7, 14),
    (AM01, "gibbs"): (16, 41, 96),
    (AM01, "flip"): (10, 27, 63),
}
OPERATORS = ("gibbs", "flip")


# -------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class Plan:
    """How much of S3 to run. :func:`make_plan` gives ``"full"`` (S3's sizes), ``"quick"``
    (minutes on two CPU cores) and ``"smoke"`` (seconds; tests)."""

    mode: str
    reps: int
    updates: dict[str, int]
    eval_every: int
    algorithms: dict[tuple[str, str], tuple[str, ...]]
    lrs: dict[tuple[str, str], tuple[float, ...]]
    act_models: int
    act_algorithm: dict[str, str]
    act_lr: float
    act_updates: dict[str, int]
    act_steps: int
    act_burn_in: int
    act_max_lag: int
    mnist500_models: int
    mnist500_algorithm: str
    mnist500_updates: int
    mnist500_steps: int
    cc_models: int
    cc_lr: float
    cc_updates: int
    cc_steps: int
    cc_starts: int
    cc_max_steps: int
    slem_models: int
    include_mnist: bool = True
    #: The data sets whose cells, models and sampling runs the plan includes (:func:`restrict_plan`).
    datasets: tuple[str, ...] = DATASETS
    notes: tuple[str, ...] = field(default_factory=tuple)


def _paper_grid() -> tuple[dict, dict]:
    algs = {key: tuple(dict.fromkeys(r.algorithm for r in rows)) for key, rows in PAPER_LL.items()}
    lrs = {key: tuple(dict.fromkeys(r.lr for r in rows)) for key, rows in PAPER_LL.items()}
    return algs, lrs


def make_plan(mode: str = "full") -> Plan:
    """The settings of a run: ``"full"`` (S3), ``"quick"`` or ``"smoke"``."""
    algs, lrs = _paper_grid()
    full = Plan(
        mode="full",
        reps=25,
        updates={BAS: 20_000, MNIST: 20_000, AM1: 20_000, AM01: 20_000},
        eval_every=100,
        algorithms=algs,
        lrs=lrs,
        act_models=25,
        act_algorithm={BAS: "pt:20:10", MNIST: "pt:20:10", AM1: "pt:20:10", AM01: "pt:20:10"},
        act_lr=0.05,
        act_updates={BAS: 20_000, MNIST: 20_000, AM1: 20_000, AM01: 20_000},
        act_steps=1_000_000,
        act_burn_in=10_000,
        act_max_lag=2_000,
        mnist500_models=24,
        mnist500_algorithm="pt:20:10",
        mnist500_updates=2_000,
        mnist500_steps=1_000_000,
        cc_models=25,
        cc_lr=0.05,
        cc_updates=20_000,
        cc_steps=10_000,
        cc_starts=1_000,
        cc_max_steps=10_000,
        slem_models=100,
    )
    if mode == "full":
        return full
    if mode == "quick":
        return replace(
            full,
            mode="quick",
            reps=6,
            updates={BAS: 1_500, MNIST: 300, AM1: 1_000, AM01: 1_000},
            algorithms={
                ("table1", BAS): ("cd:5", "pt:20:1"),
                ("table1", MNIST): ("cd:5",),
                ("table5", BAS): ("pcd:5",),
                ("table5", MNIST): ("pcd:5",),
                ("table6", AM1): ("cd:5", "pcd:5", "pt:10:2"),
                ("table6", AM01): ("cd:5", "pcd:5", "pt:10:2"),
            },
            lrs={
                ("table1", BAS): (0.05, 0.1),
                ("table1", MNIST): (0.05,),
                ("table5", BAS): (0.05, 0.1),
                ("table5", MNIST): (0.05,),
                ("table6", AM1): (0.05,),
                ("table6", AM01): (0.05,),
            },
            act_models=2,
            act_algorithm={BAS: "pt:20:10", MNIST: "pt:10:1", AM1: "pt:20:10", AM01: "pt:20:10"},
            act_updates={BAS: 1_500, MNIST: 300, AM1: 1_000, AM01: 1_000},
            act_steps=20_000,
            act_burn_in=1_000,
            act_max_lag=300,
            mnist500_models=1,
            mnist500_algorithm="cd:1",
            mnist500_updates=200,
            mnist500_steps=5_000,
            cc_models=3,
            cc_updates=1_000,
            cc_starts=300,
            cc_max_steps=2_000,
            slem_models=20,
            notes=(
                "QUICK MODE: 6 repetitions (MNIST: 2 of 300 updates) instead of 25, 1,500 updates on Bars and "
                "Stripes and 1,000 on Artificial Modes instead of 20,000, a subset of the algorithms and "
                "learning rates; Table 2 with 2 RBMs per problem trained briefly (MNIST, n = 10: 300 updates "
                "of 10-PT_1) and chains of 20,000 steps instead of 25 RBMs and 10^6 steps; the 784 x 500 "
                "MNIST RBM of Table 2 and Fig. 4 is ONE RBM trained for only 200 updates of CD_1 (S3: 24 "
                "RBMs, 2,000 updates of 20-PT_10) and sampled for 5,000 steps, so its times say little about "
                "trained MNIST RBMs; Tables 3-4 "
                "with 3 RBMs per p_mut trained for 1,000 updates; 20 random RBMs per point in Fig. 3 (S3: "
                "100). Numbers are not comparable to S3's in size, only in direction.",
            ),
        )
    if mode == "smoke":
        return replace(
            make_plan("quick"),
            mode="smoke",
            reps=2,
            updates={BAS: 20, MNIST: 20, AM1: 20, AM01: 20},
            eval_every=10,
            algorithms={
                ("table1", BAS): ("cd:5", "pt:5:1"),
                ("table5", BAS): ("pcd:1",),
                ("table6", AM1): ("cd:5",),
                ("table6", AM01): ("cd:5",),
            },
            lrs={
                ("table1", BAS): (0.05,),
                ("table5", BAS): (0.1,),
                ("table6", AM1): (0.05,),
                ("table6", AM01): (0.05,),
            },
            act_models=1,
            act_algorithm={BAS: "pt:5:1", MNIST: "pt:5:1", AM1: "pt:5:1", AM01: "pt:5:1"},
            act_updates={BAS: 20, MNIST: 20, AM1: 20, AM01: 20},
            act_steps=400,
            act_burn_in=10,
            act_max_lag=50,
            cc_models=2,
            cc_updates=20,
            cc_steps=200,
            cc_starts=20,
            cc_max_steps=50,
            slem_models=3,
            include_mnist=False,
            notes=("SMOKE MODE: a few updates and steps, for the test suite only.",),
        )
    raise BoltzkitError("unknown plan", got=repr(mode), expected="'full', 'quick' or 'smoke'")


def parse_datasets(datasets: str | Iterable[str]) -> tuple[str, ...]:
    """``"bars-and-stripes,artificial-modes:0.01"`` (or a list) as names of :data:`DATASETS`."""
    items = datasets.split(",") if isinstance(datasets, str) else list(datasets)
    names = tuple(dict.fromkeys(d.strip().lower() for d in items if d.strip()))
    bad = [d for d in names if d not in DATASETS]
    if bad or not names:
        raise BoltzkitError(
            "unknown data set of Bruegge, Fischer & Igel (2013)",
            got=", ".join(bad) or repr(datasets),
            expected=", ".join(DATASETS),
            hint="Artificial Modes take their mutation probability: artificial-modes:0.1 or artificial-modes:0.01",
        )
    return names


def restrict_plan(plan: Plan, datasets: str | Iterable[str]) -> Plan:
    """``plan`` with only the data sets in ``datasets``: its likelihood cells (Tables 1, 5, 6 and
    Fig. 3), Table 2's sampled models and Tables 3-4's models of the other data sets are left out,
    so that a table's rows of one data set can be finished, and reported, on their own (the report
    marks the others "not run"). Task identities do not change: records written under the full plan
    are found again."""
    keep = set(parse_datasets(datasets))
    return replace(
        plan,
        algorithms={k: v for k, v in plan.algorithms.items() if k[1] in keep},
        lrs={k: v for k, v in plan.lrs.items() if k[1] in keep},
        datasets=tuple(d for d in plan.datasets if d in keep),
    )


def _check_parts_have_data(parts: tuple[str, ...], plan: Plan) -> None:
    """Refuse parts whose data set a restricted plan left out (they would report nothing)."""
    needs = {
        "table3": (AM1, AM01),
        "table4": (AM1, AM01),
        "fig3": (BAS,),  # the bottom panel: CD_5 on Bars and Stripes
    }
    for part in parts:
        if part in needs and not set(needs[part]) & set(plan.datasets):
            raise BoltzkitError(
                f"{part} needs a data set the run leaves out",
                got=", ".join(plan.datasets),
                expected=" or ".join(needs[part]),
                hint=f"add {needs[part][0]} to --datasets, or leave {part} out of --only",
            )


def parse_only(only: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"table1,fig3"`` (or a list) as the parts to run; ``None`` is all of :data:`PARTS`."""
    if only is None:
        return PARTS
    items = only.split(",") if isinstance(only, str) else list(only)
    parts = tuple(dict.fromkeys(p.strip().lower() for p in items if p.strip()))
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        raise BoltzkitError(
            "unknown part of the reproduction", got=", ".join(bad) or repr(only), expected=", ".join(PARTS)
        )
    return parts


# ---------------------------------------------------------------------------------- tasks
def _reps(plan: Plan, dataset: str) -> int:
    """Paired repetitions per likelihood cell (quick mode: 2 on MNIST)."""
    return 2 if dataset == MNIST and plan.mode == "quick" else plan.reps


def _ll_tasks(plan: Plan, parts: tuple[str, ...], seed: int, mnist: bool) -> list[GridTask]:
    keys = [k for k in plan.algorithms if k[0] in parts]
    if "fig3" in parts and ("table1", BAS) not in keys and BAS in plan.datasets:
        keys.append(("fig3", BAS))
    tasks: dict[str, GridTask] = {}
    for table, dataset in keys:
        if dataset == MNIST and not mnist:
            continue
        if table == "fig3":  # S3 Fig. 3 bottom: CD_5 on Bars and Stripes, learning rate 0.05
            algorithms, lrs = ("cd:5",), (0.05,)
        else:
            algorithms, lrs = plan.algorithms[table, dataset], plan.lrs[table, dataset]
        hidden, batch = SHAPES[dataset]
        reps = _reps(plan, dataset)
        grid = make_grid(
            [dataset],
            algorithms,
            lrs,
            OPERATORS,
            reps,
            n_hidden=hidden,
            n_updates=plan.updates[dataset],
            eval_every=min(plan.eval_every, plan.updates[dataset]),
            batch_size=batch,
            seed=seed,
            data_seed=seed,
        )
        tasks.update((t.task_id, t) for t in grid)
    return list(tasks.values())


def _act_tasks(plan: Plan, seed: int, mnist: bool, device: str) -> dict[str, list[GridTask]]:
    """Table 2's models: trained with ``act_algorithm`` and G (S3: 20-PT_10), kept."""
    out: dict[str, list[GridTask]] = {}
    for dataset in (BAS, AM1, AM01, MNIST):
        if dataset not in plan.datasets or (dataset == MNIST and not mnist):
            continue
        hidden, batch = SHAPES[dataset]
        n = plan.act_updates[dataset]
        out[dataset] = [
            GridTask(
                dataset,
                plan.act_algorithm[dataset],
                plan.act_lr,
                "gibbs",
                r,
                n_hidden=hidden,
                n_updates=n,
                eval_every=n,
                batch_size=batch,
                seed=seed,
                data_seed=seed,
                keep_model=True,
            )  # fmt: skip
            for r in range(plan.act_models)
        ]
    if mnist:
        n = plan.mnist500_updates
        out["mnist500"] = [
            GridTask(
                MNIST,
                plan.mnist500_algorithm,
                plan.act_lr,
                "gibbs",
                r,
                n_hidden=500,
                n_updates=n,
                eval_every=n,
                batch_size=100,
                seed=seed,
                data_seed=seed,
                device=device,
                dtype="float32",
                keep_model=True,
            )  # fmt: skip
            for r in range(plan.mnist500_models)
        ]
    return out


def _cc_tasks(plan: Plan, seed: int) -> dict[str, list[GridTask]]:
    """Tables 3-4's models: CD_5 with G on Artificial Modes (S3 Sec. 4.4), kept."""
    n = plan.cc_updates
    return {
        d: [
            GridTask(
                d,
                "cd:5",
                plan.cc_lr,
                "gibbs",
                r,
                n_hidden=16,
                n_updates=n,
                eval_every=n,
                batch_size=100,
                seed=seed,
                data_seed=seed,
                keep_model=True,
            )  # fmt: skip
            for r in range(plan.cc_models)
        ]
        for d in (AM1, AM01)
        if d in plan.datasets
    }


# --------------------------------------------------------------------------------- the run
def run_bfi2013(
    *,
    out_dir: Path,
    quick: bool = False,
    only: str | Iterable[str] | None = None,
    plan: Plan | None = None,
    datasets: str | Iterable[str] | None = None,
    finished_only: bool = False,
    seed: int = 0,
    device: str | torch.device = "auto",
    data_dir: str | None = None,
    progress: bool = False,
    executor: str = "inline",
    workers: int = 1,
    address: str | None = None,
    **_ignored: Any,
) -> dict[str, Any]:
    """Run the parts of S3 in ``only`` and write the report ``bfi2013.md`` into ``out_dir``.

    Parameters
    ----------
    out_dir
        Folder of task records, models, sampling results, the report and the plots.
    quick
        The quick plan (minutes on two CPU cores) instead of S3's sizes.
    only
        Parts (:data:`PARTS`), e.g. ``"table1,fig3"``; default all.
    plan
        An explicit :class:`Plan` (overrides ``quick``).
    datasets
        Only these data sets (:data:`DATASETS`, e.g. ``"bars-and-stripes"``): :func:`restrict_plan`;
        default all.
    finished_only
        Train nothing: report the cells of Tables 1, 5 and 6 (the default parts then) from the task
        records already in ``out_dir``, into ``bfi2013-finished.md`` and ``.json`` (a grid spread
        over sessions, seen before it is complete; each cell shows how many pairs it has, and its
        medians are over those pairs). Other parts are refused.
    seed
        Base seed of every task and chain.
    device
        Where the 784 x 500 MNIST RBMs train and sample (the small models run on the CPU).
    data_dir
        Folder of the MNIST files; without them the MNIST rows are skipped and the report says so.
    progress
        Progress bars.
    executor, workers, address
        How the training tasks run (:func:`boltzkit.experiments.grid.run_grid`).

    Returns
    -------
    dict
        A JSON-ready summary with ``report`` and ``files``.
    """
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = plan or make_plan("quick" if quick else "full")
    if datasets is not None:
        plan = restrict_plan(plan, datasets)
    parts = parse_only(LL_TABLES if only is None and finished_only else only)
    _check_parts_have_data(parts, plan)
    if finished_only and set(parts) - set(LL_TABLES):
        raise BoltzkitError(
            "finished_only reports the likelihood tables only",
            got=", ".join(parts),
            expected=", ".join(LL_TABLES),
            hint="add --only table5 (or table1, table6)",
        )
    dev = str(device)
    from boltzkit.plots.mixing import plot_autocorrelations, plot_curves_with_difference, plot_slem_fraction

    # finished_only reads records, never the data: MNIST records count without the MNIST files
    mnist = plan.include_mnist and MNIST in plan.datasets and (finished_only or _mnist_available(data_dir))
    grid_kw = {
        "executor": executor,
        "workers": workers,
        "address": address,
        "data_dir": data_dir,
        "progress": progress,
    }

    ll_tasks = _ll_tasks(plan, parts, seed, mnist)
    n_planned = len(ll_tasks)
    if finished_only:
        ll_tasks = [t for t in ll_tasks if load_record(out, t) is not None]
    act = _act_tasks(plan, seed, mnist, dev) if {"table2", "fig4"} & set(parts) else {}
    cc = _cc_tasks(plan, seed) if {"table3", "table4"} & set(parts) else {}
    model_tasks = [t for ts in (*act.values(), *cc.values()) for t in ts]
    run = run_grid(ll_tasks + model_tasks, out, **grid_kw)
    records = {r["task_id"]: r for r in run.records}

    results: dict[str, Any] = {"mode": plan.mode, "parts": list(parts), "mnist": mnist}
    sections: list[str] = []
    # a look at unfinished grids does not replace the report of a finished run
    stem = "bfi2013-finished" if finished_only else "bfi2013"
    files = [f"{stem}.md", f"{stem}.json"]
    ll_records = [records[t.task_id] for t in ll_tasks]
    ll_tables: list[Table] = []
    for table in LL_TABLES:
        if table in parts:
            text, tables, cells = _ll_section(table, plan, ll_records)
            sections.append(text)
            ll_tables += tables
            results[table] = [finite_or_none(asdict(c)) for c in cells]  # a cell without pairs: NaN
    if ll_tables:
        atomic_write_text(
            out / f"{stem}.csv", csv_text(LL_CSV_COLUMNS, [r for t in ll_tables for r in t.csv_rows()])
        )
        files.append(f"{stem}.csv")
    if act:

        def act_record(name: str, task: GridTask, op: str) -> dict[str, Any]:
            big = name == "mnist500"  # the 784 x 500 RBMs: their own chain length and device
            return autocorrelation_stage(
                out, task, op, steps=plan.mnist500_steps if big else plan.act_steps, burn_in=plan.act_burn_in,
                max_lag=plan.act_max_lag, seed=seed, device=dev if big else None,
            )  # fmt: skip

        taus = {
            name: [{op: act_record(name, t, op) for op in OPERATORS} for t in ts] for name, ts in act.items()
        }
        if "table2" in parts:
            sections.append(_table2_section(taus, plan))
        results["table2"] = {
            name: [{op: {k: v for k, v in r[op].items() if k != "acf"} for op in OPERATORS} for r in rows]
            for name, rows in taus.items()
        }
        if "fig4" in parts or "table2" in parts:
            panels = {NAMES[name]: mean_acf(rows, OPERATORS) for name, rows in taus.items()}
            if _plot(lambda: plot_autocorrelations(panels, out / "fig4_acf.png")):
                files.append("fig4_acf.png")
                sections.append(
                    "### Fig. 4: autocorrelation functions of the energy\n\n![Fig. 4](fig4_acf.png)\n\n"
                    "Mean over the RBMs of each problem of the normalised autocorrelation function of single "
                    "chains (S3 Fig. 4 shows MNIST with 500 hidden units: the T curve below the G curve)."
                )
    if cc:

        def cc_record(task: GridTask, op: str) -> dict[str, Any]:
            return class_change_stage(
                out, task, op, steps=plan.cc_steps, starts=plan.cc_starts, max_steps=plan.cc_max_steps,
                seed=seed, data_dir=data_dir,
            )  # fmt: skip

        classes = {d: [{op: cc_record(t, op) for op in OPERATORS} for t in ts] for d, ts in cc.items()}
        sections.append(_classes_section(classes, plan, parts))
        results["classes"] = {
            d: {op: {"class_changes": [r[op]["class_changes"] for r in rows]} for op in OPERATORS}
            for d, rows in classes.items()
        }
    if "fig3" in parts:
        slem_rows = slem_stage(
            out, sizes=(2, 3, 4), bounds=range(1, 11), n_models=plan.slem_models, seed=seed
        )
        results["slem"] = slem_rows
        curves = mean_curves(ll_records, dataset=BAS, algorithm="cd:5", lr=0.05)
        text = _fig3_section(slem_rows, curves, plan)
        if _plot(lambda: plot_slem_fraction(slem_rows, out / "fig3_slem.png")):
            files.append("fig3_slem.png")
            text += "\n\n![Fig. 3 top](fig3_slem.png)"
        if curves and _plot(
            lambda: plot_curves_with_difference(
                curves["updates"],
                curves["gibbs"],
                curves["flip"],
                out / "fig3_curves.png",
                optimum=BAS_OPTIMUM,
                title=f"CD_5 on Bars and Stripes, η = 0.05 (mean of {curves['runs']} runs)",
            )
        ):
            files.append("fig3_curves.png")
            text += "\n\n![Fig. 3 bottom](fig3_curves.png)"
        sections.append(text)
    seconds = time.perf_counter() - t0
    header = _header(plan, parts, mnist, run, seconds, executor, workers)
    if finished_only:
        header += (
            f"\n\n> Finished tasks only: {len(ll_tasks)} of the {n_planned} tasks of these tables have "
            "records; a cell with fewer pairs than the plan's repetitions is incomplete."
        )
    atomic_write_text(out / f"{stem}.md", header + "\n\n" + "\n\n".join(sections) + "\n")
    summary = {
        "experiment": "bruegge-fischer-igel-2013",
        "quick": plan.mode != "full",
        "plan": plan.mode,
        "tasks_run": run.ran,
        "tasks_skipped": run.skipped,
        "seconds": seconds,
        "results": results,
        "report": f"{stem}.md",
        "files": files,
    }
    save_json(summary, out / f"{stem}.json")
    return summary


def _mnist_available(data_dir: str | None) -> bool:
    try:
        load_dataset(MNIST, split="train", data_dir=data_dir)
    except BoltzkitError:
        return False
    return True


def _plot(draw) -> bool:
    try:
        draw()
    except BoltzkitError:  # matplotlib missing: the report goes without its figures
        return False
    return True


# --------------------------------------------------------------------------------- report
def _fmt(x: float | None, digits: int = 6) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def _header(plan: Plan, parts, mnist: bool, run, seconds: float, executor: str, workers: int) -> str:
    lines = [
        "# Brügge, Fischer & Igel (2013): flip-the-state (T) vs Gibbs (G)",
        "",
        f"Plan: **{plan.mode}**; parts: {', '.join(parts)}; {run.ran} training tasks run now, {run.skipped} "
        f"found finished; {seconds:.0f} s ({executor}"
        + (f", {workers} workers" if executor == "processes" else "")
        + ").",
    ]
    for note in plan.notes:
        lines += ["", f"> {note}"]
    if plan.datasets != DATASETS:
        lines += [
            "",
            f"> Data sets run: {', '.join(NAMES[d] for d in plan.datasets)} (the others' cells: not run).",
        ]
    if plan.include_mnist and MNIST in plan.datasets and not mnist:
        lines += ["", "> MNIST was not found (set BOLTZKIT_DATA_DIR or --data-dir): its rows are not run."]
    lines += [
        "",
        "Conventions: Bars and Stripes is the list of all 32 4 x 4 patterns (two duplicates; best mean "
        f"log-likelihood {BAS_OPTIMUM:.4f}); MNIST is the 50,000-image binarized training set; Artificial Modes "
        "has 10,000 examples. Weights and biases start ~ N(0, 0.01^2); plain SGD. G and T of one repetition "
        "share their initial weights and minibatches, so the signed-rank test pairs them. The star marks the "
        f"operator the two-sided Wilcoxon signed-rank test favours at p < 0.05 (with fewer than "
        f"{min_significant_pairs()} pairs no difference can be significant).",
    ]
    return "\n".join(lines)


_TITLES = {
    "table1": "Table 1: median maximum log-likelihood, CD and PT",
    "table5": "Table 5: median maximum log-likelihood, PCD",
    "table6": "Table 6: median maximum log-likelihood on Artificial Modes",
}


#: CSV columns of ``bfi2013.csv`` (the cells of Tables 1, 5 and 6): ours, then S3's.
LL_CSV_COLUMNS = (
    "table", "dataset", "algorithm", "lr", "median_gibbs", "median_flip", "p_value", "pairs", "better",
    "paper_gibbs", "paper_flip", "paper_better",
)  # fmt: skip


def _ll_section(
    table: str, plan: Plan, records: list[dict[str, Any]]
) -> tuple[str, list[Table], list[Comparison]]:
    """One likelihood table (S3 Table 1, 5 or 6): per data set, S3's rows with ours beside them."""
    cells = aggregate(r for r in records if _table_of(plan, r["task"]) == table)
    lines, tables = [f"## {_TITLES[table]}"], []
    for (tab, dataset), paper_rows in PAPER_LL.items():
        if tab != table:
            continue
        ours = {(c.algorithm, c.lr): c for c in cells if c.dataset == dataset}
        rows = Table(
            ("algorithm", "η", "G (ours)", "T (ours)", "p", "pairs", "G (S3)", "T (S3)"), LL_CSV_COLUMNS
        )
        for row in paper_rows:
            c = ours.get((row.algorithm, row.lr))
            paper_g = _fmt(row.gibbs, 7) + ("*" if row.star == "a" else "")
            paper_t = _fmt(row.flip, 7) + ("*" if row.star == "b" else "")
            paper = {"paper_gibbs": row.gibbs, "paper_flip": row.flip, "paper_better": row.star}
            key = {"table": table, "dataset": dataset, "algorithm": row.algorithm, "lr": row.lr}
            if c is None:
                label = algorithm_label(row.algorithm)
                rows.add(
                    [label, f"{row.lr:g}", "not run", "not run", "", "", paper_g, paper_t], **key, **paper
                )
                continue
            p = "–" if c.p_value is None else f"{c.p_value:.3g}"
            rows.add(
                [c.label, f"{c.lr:g}", c.marked("a"), c.marked("b"), p, str(c.n_pairs), paper_g, paper_t],
                **key, median_gibbs=finite_or_none(c.median_a), median_flip=finite_or_none(c.median_b),
                p_value=c.p_value, pairs=c.n_pairs, better=c.better, **paper,
            )  # fmt: skip
        tables.append(rows)
        lines += ["", f"### {NAMES[dataset]}" + ("" if ours else " (not run)"), "", *rows.markdown()]
        reps = _reps(plan, dataset)
        complete = [c for c in ours.values() if c.n_pairs >= reps]
        partial = len(ours) - len(complete)  # cells with records but fewer pairs than planned
        if complete or partial:
            t_wins = sum(1 for c in complete if c.median_b > c.median_a)
            lines += [
                "",
                f"T has the higher median in {t_wins} of {len(complete)} complete cells run here"
                + (
                    f" ({partial} incomplete, with fewer than {reps} pairs, not counted)." if partial else "."
                ),
            ]
    return "\n".join(lines), tables, cells


def _table_of(plan: Plan, task: dict[str, Any]) -> str:
    for (table, dataset), algs in plan.algorithms.items():
        if (
            dataset == task["dataset"]
            and task["algorithm"] in algs
            and float(task["lr"]) in plan.lrs[table, dataset]
        ):
            return table
    return "fig3"


def _table2_section(taus: dict[str, list[dict[str, dict[str, Any]]]], plan: Plan) -> str:
    lines = [
        "## Table 2: integrated autocorrelation times of the energy",
        "",
        f"Mean over RBMs of τ by AR fits (Thompson 2010, as S3) of single chains; RBMs trained with "
        f"{', '.join(sorted({algorithm_label(a) for a in plan.act_algorithm.values()}))} and G at η = {plan.act_lr:g} "
        f"(S3: 20-PT_10; η not stated; MNIST n = 500: {algorithm_label(plan.mnist500_algorithm)}, "
        f"{plan.mnist500_updates:,} updates); chains of "
        f"{plan.act_steps:,} steps after {plan.act_burn_in:,} of burn-in (MNIST, n = 500: {plan.mnist500_steps:,}). "
        "The Sokal-window estimate (emcee's) is shown beside it; it is meant for positively correlated chains "
        "and goes wrong (even negative) for the alternating energies of T on weakly coupled RBMs.",
        "",
        "| problem | RBMs | τ_G | τ_T | gain % | τ_G (Sokal) | τ_T (Sokal) | chains ≥ 50 τ | τ_G (S3) | τ_T (S3) | gain % (S3) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in (BAS, AM1, AM01, MNIST, "mnist500"):
        pg, pt, pgain = PAPER_TAU[name]
        rows = taus.get(name)
        if not rows:
            lines.append(f"| {NAMES[name]} | 0 | not run | | | | | | {pg:.2f} | {pt:.2f} | {pgain:.2f} |")
            continue
        g = finite_mean([r["gibbs"]["tau_ar"] for r in rows])
        t = finite_mean([r["flip"]["tau_ar"] for r in rows])
        gs = finite_mean([r["gibbs"]["tau_sokal"] for r in rows])
        ts = finite_mean([r["flip"]["tau_sokal"] for r in rows])
        gain = 100.0 * (1.0 - t / g) if g > 0 else math.nan
        ok = sum(bool(r[op]["reliable"]) for r in rows for op in OPERATORS)
        lines.append(
            f"| {NAMES[name]} | {len(rows)} | {g:.2f} | {t:.2f} | {gain:.2f} | {gs:.2f} | {ts:.2f} | {ok} of {2 * len(rows)} "
            f"| {pg:.2f} | {pt:.2f} | {pgain:.2f} |"
        )
    lines += [
        "",
        "A chain shorter than 50 τ does not pin τ down (emcee's rule); S3's chains of 10^6 steps are for τ of hundreds.",
    ]
    return "\n".join(lines)


def _classes_section(classes: dict[str, list[dict[str, dict[str, Any]]]], plan: Plan, parts) -> str:
    lines = [
        "## Tables 3 and 4: class changes on Artificial Modes",
        "",
        f"{plan.cc_models} RBMs per p_mut trained with CD_5 and G (η = {plan.cc_lr:g}, {plan.cc_updates:,} updates); "
        "samples assigned to the nearest of the four modes by Hamming distance, ties discarded.",
    ]
    name = {"gibbs": "G", "flip": "T"}
    if "table3" in parts:
        lines += [
            "",
            f"### Table 3: class changes in {plan.cc_steps:,} samples from the all-ones start (quantiles over RBMs)",
            "",
            "| problem | op | 25 % | median | 75 % | 25 % (S3) | median (S3) | 75 % (S3) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for d, rows in classes.items():
            for op in OPERATORS:
                q = quartiles([r[op]["class_changes"] for r in rows])
                p = PAPER_CLASS_CHANGES[d, op]
                lines.append(
                    f"| {NAMES[d]} | {name[op]} | {q[0]:g} | {q[1]:g} | {q[2]:g} | {p[0]} | {p[1]} | {p[2]} |"
                )
    if "table4" in parts:
        lines += [
            "",
            f"### Table 4: samples before the first class change from training examples ({plan.cc_starts:,} starts per RBM, pooled)",
            "",
            "| problem | op | 25 % | median | 75 % | censored | 25 % (S3) | median (S3) | 75 % (S3) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for d, rows in classes.items():
            for op in OPERATORS:
                pooled = [v for r in rows for v in r[op]["first_change"]]
                censored = sum(r[op]["censored"] for r in rows)
                q = quartiles(pooled)
                p = PAPER_FIRST_CHANGE[d, op]
                lines.append(
                    f"| {NAMES[d]} | {name[op]} | {q[0]:g} | {q[1]:g} | {q[2]:g} | {censored} | {p[0]} | {p[1]} | {p[2]} |"
                )
    return "\n".join(lines)


def _fig3_section(rows: list[dict[str, Any]], curves: dict[str, Any] | None, plan: Plan) -> str:
    lines = [
        "## Fig. 3",
        "",
        f"Top: fraction of {plan.slem_models} random n x n RBMs (weights uniform on [-c, c], zero biases) for which "
        "T has the smaller SLEM than G (S3: 100 per point; with zero weights G is always better, and T wins more often "
        "as the weights and the layers grow).",
        "",
        "| n | " + " | ".join(f"c={int(c)}" for c in range(1, 11)) + " |",
        "|---|" + "---|" * 10,
    ]
    for n in (2, 3, 4):
        sel = sorted((r for r in rows if int(r["n"]) == n), key=lambda r: r["c"])
        lines.append(f"| {n}x{n} | " + " | ".join(f"{r['fraction_b_better']:.2f}" for r in sel) + " |")
    if curves is not None:
        u, g, t = curves["updates"], curves["gibbs"], curves["flip"]
        diff = np.asarray(t) - np.asarray(g)
        lines += [
            "",
            f"Bottom: mean exact log-likelihood of {curves['runs']} CD_5 runs on Bars and Stripes (η = 0.05) with G and T; "
            f"after {u[-1]:,} updates G {g[-1]:.4f}, T {t[-1]:.4f} (T - G = {diff[-1]:+.4f}; largest T - G "
            f"{diff.max():+.4f}, smallest {diff.min():+.4f}). S3: G is slightly better early, T better later.",
        ]
    return "\n".join(lines)


__all__ = [
    "DATASETS",
    "LL_TABLES",
    "PAPER_LL",
    "PAPER_TAU",
    "PARTS",
    "Plan",
    "make_plan",
    "parse_datasets",
    "parse_only",
    "restrict_plan",
    "run_bfi2013",
]
