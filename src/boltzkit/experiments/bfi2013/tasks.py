"""The grid tasks of each part of S3: the likelihood cells of Tables 1, 5 and 6 (and Fig. 3's
curves), and the kept models of Table 2 (autocorrelation) and Tables 3-4 (class changes)."""

from __future__ import annotations

from typing import Any

from boltzkit.experiments.bfi2013.paper import AM01, AM1, BAS, MNIST, OPERATORS, SHAPES
from boltzkit.experiments.bfi2013.plan import Plan
from boltzkit.experiments.grid import GridTask, make_grid


def reps_for(plan: Plan, dataset: str) -> int:
    """Paired repetitions per likelihood cell (quick mode: 2 on MNIST)."""
    return 2 if dataset == MNIST and plan.mode == "quick" else plan.reps


def likelihood_tasks(plan: Plan, parts: tuple[str, ...], seed: int, mnist: bool) -> list[GridTask]:
    """The likelihood tasks of ``parts``, repetition by repetition: every cell's first pair (G and T
    side by side), then every cell's second, and so on. A sweep stopped partway (a session's time
    limit) so leaves every cell with the same number of finished pairs, give or take one, and
    ``--finished-only`` compares all cells on equal footing; the records do not depend on the
    order."""
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
        reps = reps_for(plan, dataset)
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
            init_vbias=plan.init_vbias.get(dataset, "normal"),
        )
        tasks.update((t.task_id, t) for t in grid)
    return sorted(tasks.values(), key=lambda t: t.repetition)  # stable: cells and operators in order


def autocorrelation_tasks(plan: Plan, seed: int, mnist: bool, device: str) -> dict[str, list[GridTask]]:
    """Table 2's models: trained with ``act_algorithm`` and G (S3: 20-PT_10), kept."""
    out: dict[str, list[GridTask]] = {}
    for dataset in (BAS, AM1, AM01, MNIST):
        if dataset not in plan.datasets or (dataset == MNIST and not mnist):
            continue
        hidden, batch = SHAPES[dataset]
        out[dataset] = _kept_models(
            dataset, plan.act_algorithm[dataset], plan.act_lr, models=plan.act_models,
            n_updates=plan.act_updates[dataset], n_hidden=hidden, batch_size=batch, seed=seed,
            init_vbias=plan.init_vbias.get(dataset, "normal"),
        )  # fmt: skip
    if mnist:
        out["mnist500"] = _kept_models(
            MNIST, plan.mnist500_algorithm, plan.act_lr, models=plan.mnist500_models,
            n_updates=plan.mnist500_updates, n_hidden=500, batch_size=100, seed=seed, device=device, dtype="float32",
            init_vbias=plan.init_vbias.get(MNIST, "normal"),
        )  # fmt: skip
    return out


def class_change_tasks(plan: Plan, seed: int) -> dict[str, list[GridTask]]:
    """Tables 3-4's models: CD_5 with G on Artificial Modes (S3 Sec. 4.4), kept."""
    return {
        d: _kept_models(
            d,
            "cd:5",
            plan.cc_lr,
            models=plan.cc_models,
            n_updates=plan.cc_updates,
            n_hidden=16,
            batch_size=100,
            seed=seed,
        )  # fmt: skip
        for d in (AM1, AM01)
        if d in plan.datasets
    }


def _kept_models(
    dataset: str,
    algorithm: str,
    lr: float,
    *,
    models: int,
    n_updates: int,
    n_hidden: int,
    batch_size: int | None,
    seed: int,
    **extra: Any,
) -> list[GridTask]:
    """``models`` repetitions of one training run with G whose models are kept for the sampling
    stages (evaluated once, at the end)."""
    return [
        GridTask(
            dataset,
            algorithm,
            lr,
            "gibbs",
            r,
            n_hidden=n_hidden,
            n_updates=n_updates,
            eval_every=n_updates,
            batch_size=batch_size,
            seed=seed,
            data_seed=seed,
            keep_model=True,
            **extra,
        )  # fmt: skip
        for r in range(models)
    ]


def table_of(plan: Plan, task: dict[str, Any]) -> str:
    for (table, dataset), algs in plan.algorithms.items():
        if (
            dataset == task["dataset"]
            and task["algorithm"] in algs
            and float(task["lr"]) in plan.lrs[table, dataset]
        ):
            return table
    return "fig3"
