"""How much of S3 a run does: the full, quick and smoke plans, and the parts, data sets, algorithms
and learning rates of ``--only``, ``--datasets``, ``--algorithms`` and ``--learning-rates``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from boltzkit.errors import BoltzkitError
from boltzkit.experiments.bfi2013.paper import AM01, AM1, BAS, DATASETS, MNIST, PAPER_LL

#: Parts of the reproduction (``--only``).
PARTS = ("table1", "table2", "table3", "table4", "table5", "table6", "fig3", "fig4")
#: The parts that are median maximum log-likelihoods of repeated learning runs.
LL_TABLES = ("table1", "table5", "table6")


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
    #: Table 2's problems (keys of its rows: a data set, or ``"mnist500"``) whose kept models are
    #: also sampled by several chains, pooled per model (not in S3), as ``(chains, steps)`` each:
    #: where one chain of S3's length is too short for a model's ``tau`` (MNIST, n = 10) or its
    #: autocorrelation has a slow tail beyond the recorded lags (Bars and Stripes, Artificial Modes
    #: with p_mut = 0.01: docs/results.md), many long chains pin it down. MNIST's 8 of 4 x 10^6
    #: steps are about ten times the sampling of S3's chain and a fifth of the model's training.
    pooled: dict[str, tuple[int, int]] = field(default_factory=dict)
    pooled_burn_in: int = 100_000
    #: The start of the visible biases by data set (:class:`~boltzkit.experiments.grid.GridTask`'s
    #: ``init_vbias``; ``"normal"``, S3's, where not named). MNIST's start at the data's log-odds: from
    #: S3's start every PCD run of the 784 x 10 RBM ends at the base-rate model (docs/results.md).
    init_vbias: dict[str, str] = field(default_factory=lambda: {MNIST: "data"})
    #: The data sets whose cells, models and sampling runs the plan includes (:func:`restrict_plan`).
    datasets: tuple[str, ...] = DATASETS
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: The likelihood tables hold only some algorithms or rates (:func:`restrict_plan`); a run of
    #: such a plan reports into ``bfi2013-cells.md``, not over the whole run's ``bfi2013.md``.
    cells_only: bool = False


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
        pooled={MNIST: (8, 4_000_000), BAS: (8, 500_000), AM01: (8, 500_000)},
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
            pooled={MNIST: (4, 20_000), BAS: (4, 20_000), AM01: (4, 20_000)},
            pooled_burn_in=1_000,
            notes=(
                "QUICK MODE: 6 repetitions (MNIST: 2 of 300 updates) instead of 25, 1,500 updates on Bars and "
                "Stripes and 1,000 on Artificial Modes instead of 20,000, a subset of the algorithms and "
                "learning rates; Table 2 with 2 RBMs per problem trained briefly (MNIST, n = 10: 300 updates "
                "of 10-PT_1) and chains of 20,000 steps instead of 25 RBMs and 10^6 steps; the 784 x 500 "
                "MNIST RBM of Table 2 and Fig. 4 is ONE RBM trained for only 200 updates of CD_1 (S3: 24 "
                "RBMs, 2,000 updates of 20-PT_10) and sampled for 5,000 steps, so its times say little about "
                "trained MNIST RBMs; Table 2 from pooled chains with 4 chains of 20,000 steps per RBM (full: 8 of "
                "4,000,000 on MNIST, n = 10, and of 500,000 on Bars and Stripes and Artificial Modes with p_mut = "
                "0.01); Tables 3-4 "
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
            pooled={BAS: (2, 400)},
            pooled_burn_in=10,
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


def restrict_plan(
    plan: Plan,
    datasets: str | Iterable[str] | None = None,
    *,
    algorithms: str | Iterable[str] | None = None,
    lrs: str | Iterable[float] | None = None,
) -> Plan:
    """``plan`` with only the data sets in ``datasets`` and the likelihood cells of the algorithms
    in ``algorithms`` at the learning rates in ``lrs`` (``None``: all of them).

    A data set left out loses its likelihood cells (Tables 1, 5, 6 and Fig. 3), Table 2's sampled
    models and Tables 3-4's models; an algorithm or rate left out loses its likelihood cells only.
    So one table's rows, or one cell, can be finished and reported on their own (the report marks
    the others "not run"), e.g. S3 Table 6's 10-PT_10 at 0.01 across sessions. Task identities do
    not change: records written under the full plan are found again.
    """
    keep = set(parse_datasets(datasets)) if datasets is not None else set(plan.datasets)
    planned = {a for algs in plan.algorithms.values() for a in algs}
    keep_algs = planned
    if algorithms is not None:
        keep_algs = set(_parse_choices(algorithms, planned, "algorithm", str.lower, "pt:10:10 or cd:5,pcd:5"))
    planned_lrs = {lr for rates in plan.lrs.values() for lr in rates}
    keep_lrs = planned_lrs
    if lrs is not None:
        keep_lrs = set(_parse_choices(lrs, planned_lrs, "learning rate", float, "0.01 or 0.01,0.05"))
    cells = {
        k: (tuple(a for a in algs if a in keep_algs), tuple(lr for lr in plan.lrs[k] if lr in keep_lrs))
        for k, algs in plan.algorithms.items()
        if k[1] in keep
    }
    cells = {k: v for k, v in cells.items() if v[0] and v[1]}
    notes = plan.notes
    cells_only = algorithms is not None or lrs is not None
    if cells_only:
        if not cells:
            raise BoltzkitError(
                "no likelihood cell of these data sets has these algorithms at these learning rates",
                got=f"data sets {', '.join(sorted(keep))}; algorithms {', '.join(sorted(keep_algs))}; "
                f"learning rates {', '.join(f'{r:g}' for r in sorted(keep_lrs))}",
                hint="`--finished-only` without them lists every cell of the tables",
            )
        algs = ", ".join(sorted(keep_algs)) if algorithms is not None else "all"
        rates = ", ".join(f"{r:g}" for r in sorted(keep_lrs)) if lrs is not None else "all"
        notes += (f"Likelihood cells run: algorithms {algs}; learning rates {rates} (the others: not run).",)
    return replace(
        plan,
        algorithms={k: v[0] for k, v in cells.items()},
        lrs={k: v[1] for k, v in cells.items()},
        datasets=tuple(d for d in plan.datasets if d in keep),
        notes=notes,
        cells_only=plan.cells_only or cells_only,
    )


def _parse_choices(items: str | Iterable, planned: set, what: str, convert, example: str) -> tuple:
    """``"a,b"`` (or a list) as values of ``planned`` (each through ``convert``), else a clear error."""
    raw = items.split(",") if isinstance(items, str) else list(items)
    try:
        values = tuple(dict.fromkeys(convert(str(x).strip()) for x in raw if str(x).strip()))
    except ValueError:
        values = ()
    bad = [v for v in values if v not in planned]
    if bad or not values:
        raise BoltzkitError(
            f"unknown {what} of this plan's likelihood tables",
            got=", ".join(f"{v:g}" if isinstance(v, float) else v for v in bad) or repr(items),
            expected=", ".join(f"{v:g}" if isinstance(v, float) else v for v in sorted(planned)),
            hint=f"e.g. {example}",
        )
    return values


def check_parts_have_data(parts: tuple[str, ...], plan: Plan) -> None:
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
