"""Run S3 (:func:`run_bfi2013`): the training tasks on the grid, the sampling stages on the kept
models, and the report with its plots."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from boltzkit.atomic import atomic_write_text
from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError, BoltzkitWarning, warn
from boltzkit.experiments.bfi2013.paper import BAS, BAS_OPTIMUM, MNIST, NAMES, OPERATORS
from boltzkit.experiments.bfi2013.plan import (
    LL_TABLES,
    Plan,
    check_parts_have_data,
    make_plan,
    parse_only,
    restrict_plan,
)
from boltzkit.experiments.bfi2013.report import (
    cell_curves,
    classes_section,
    fig3_section,
    header,
    ladder_section,
    likelihood_section,
    pooled_section,
    table2_section,
)
from boltzkit.experiments.bfi2013.tasks import autocorrelation_tasks, class_change_tasks, likelihood_tasks
from boltzkit.experiments.engine import TaskRun, finite_or_none
from boltzkit.experiments.grid import GridTask, load_record, mean_curves, run_grid
from boltzkit.experiments.mixing_study import autocorrelation_stage, class_change_stage, mean_acf, slem_stage
from boltzkit.experiments.report import Table, tables_csv
from boltzkit.jsonio import save_json


def run_bfi2013(
    *,
    out_dir: Path,
    quick: bool = False,
    only: str | Iterable[str] | None = None,
    plan: Plan | None = None,
    datasets: str | Iterable[str] | None = None,
    algorithms: str | Iterable[str] | None = None,
    lrs: str | Iterable[float] | None = None,
    finished_only: bool = False,
    seed: int = 0,
    device: str | torch.device = "auto",
    data_dir: str | None = None,
    progress: bool = False,
    executor: str = "inline",
    workers: int = 1,
    address: str | None = None,
) -> dict[str, Any]:
    """Run the parts of S3 in ``only`` and write the report ``bfi2013.md`` into ``out_dir``, with
    each table's numbers as CSV: ``bfi2013.csv`` (Tables 1, 5, 6), ``bfi2013-tau.csv`` (Table 2),
    ``bfi2013-classes.csv`` (Tables 3-4) and ``bfi2013-slem.csv`` (Fig. 3, top).

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
    algorithms, lrs
        Only the likelihood cells of these algorithms (e.g. ``"pt:10:10"``) and learning rates
        (e.g. ``"0.01"``): :func:`restrict_plan`; default all. Such a run (or one of a plan so
        restricted) writes its report to ``bfi2013-cells.md`` (``.json``, ``.csv``), leaving the
        folder's ``bfi2013.md`` as it was.
    finished_only
        Train and sample nothing: report from the records already in ``out_dir``, into
        ``bfi2013-finished.md``, ``.json``, ``.csv`` and the learning-curve figures
        ``bfi2013-finished-TABLE-DATASET-curves.png`` (a grid spread over sessions, seen before it
        is complete). The likelihood tables (Tables 1, 5 and 6, the default parts then) show how
        many pairs each cell has, and their medians are over those pairs; Tables 2-4 count the kept
        models with both operators' records (a problem without any reads "not run"), and Fig. 3's
        top is left out until its SLEM record exists.
    seed
        Base seed of every task and chain.
    device
        Where the 784 x 500 MNIST RBMs train and sample (the small models run on the CPU).
    data_dir
        Folder of the MNIST files; without them the MNIST rows are skipped and the report says so.
    progress
        Progress bars.
    executor, workers, address
        How the training tasks run (:func:`boltzkit.experiments.grid.run_grid`). The likelihood
        tasks run first; then the kept models of Tables 2-4 train ``workers`` at a time, each
        sampled (its stage records written) before the next ones train, in the order of their
        repetitions, so every problem's row advances together and a stopped run keeps what it
        sampled. A kept model whose records are all there is not trained again.

    Returns
    -------
    dict
        A JSON-ready summary with ``report`` and ``files``.
    """
    t0 = time.perf_counter()
    out = Path(out_dir)
    plan = plan or make_plan("quick" if quick else "full")
    if datasets is not None or algorithms is not None or lrs is not None:
        plan = restrict_plan(plan, datasets, algorithms=algorithms, lrs=lrs)
    parts = parse_only(LL_TABLES if only is None and finished_only else only)
    check_parts_have_data(parts, plan)
    dev = str(device)
    from boltzkit.plots.mixing import (
        plot_autocorrelations,
        plot_cell_curves,
        plot_curves_with_difference,
        plot_slem_fraction,
    )

    # finished_only reads records, never the data: MNIST records count without the MNIST files
    mnist = plan.include_mnist and MNIST in plan.datasets and (finished_only or _mnist_available(data_dir))
    if plan.include_mnist and tuple(plan.datasets) == (MNIST,) and not mnist:  # nothing else to run
        try:
            load_dataset(MNIST, split="train", data_dir=data_dir)
        except BoltzkitError as exc:
            raise BoltzkitError(
                f"--datasets mnist asks for MNIST alone, and it cannot be loaded: {exc.what.rstrip('.')}",
                got=exc.got,
                hint=exc.hint or "set BOLTZKIT_DATA_DIR or --data-dir to the folder of the MNIST files.",
            ) from None
    out.mkdir(parents=True, exist_ok=True)  # once the settings are known good
    grid_kw = {
        "executor": executor,
        "workers": workers,
        "address": address,
        "data_dir": data_dir,
        "progress": progress,
    }

    ll_tasks = likelihood_tasks(plan, parts, seed, mnist)
    n_planned = len(ll_tasks)
    if finished_only:
        ll_tasks = [t for t in ll_tasks if load_record(out, t) is not None]
        others = len(list((out / "tasks").glob("*.json"))) if (out / "tasks").is_dir() else 0
        if n_planned and not ll_tasks and others:  # a look with another plan's options
            warn(
                f"none of the {n_planned} tasks of this plan ({plan.mode}) has a record in {out}, which "
                f"holds {others} task records of other settings: give the options the runs were made "
                "with (--quick, --datasets, --algorithms, --learning-rates)",
                BoltzkitWarning,
            )
    act = autocorrelation_tasks(plan, seed, mnist, dev) if {"table2", "fig4"} & set(parts) else {}
    # Table 2's problems sampled again by pooled chains (a part of Table 2 only, not of Fig. 4)
    pooled_names = [name for name in act if name in plan.pooled] if "table2" in parts else []
    cc = class_change_tasks(plan, seed) if {"table3", "table4"} & set(parts) else {}

    def act_record(
        name: str, task: GridTask, op: str, compute: bool = False, pooled: bool = False
    ) -> dict[str, Any] | None:
        """S3's one chain of the model, or (``pooled``) the plan's pooled chains."""
        big = name == "mnist500"  # the 784 x 500 RBMs: their own chain length and device
        n_chains, steps = plan.pooled[name] if pooled else (1, plan.mnist500_steps if big else plan.act_steps)
        return autocorrelation_stage(
            out, task, op, steps=steps, burn_in=plan.pooled_burn_in if pooled else plan.act_burn_in,
            max_lag=plan.act_max_lag, seed=seed, n_chains=n_chains, device=dev if big else None,
            compute_missing=compute,
        )  # fmt: skip

    pooled_record = partial(act_record, pooled=True)

    def cc_record(name: str, task: GridTask, op: str, compute: bool = False) -> dict[str, Any] | None:
        return class_change_stage(
            out, task, op, steps=plan.cc_steps, starts=plan.cc_starts, max_steps=plan.cc_max_steps,
            seed=seed, data_dir=data_dir, compute_missing=compute,
        )  # fmt: skip

    run = run_grid(ll_tasks, out, **grid_kw)
    records = {r["task_id"]: r for r in run.records}
    if not finished_only:  # a look reads the mixing records without their models
        kept = [
            (name, t, (act_record, pooled_record) if name in pooled_names else (act_record,))
            for name, ts in act.items()
            for t in ts
        ]
        kept += [(name, t, (cc_record,)) for name, ts in cc.items() for t in ts]
        run = _train_and_sample(sorted(kept, key=lambda k: k[1].repetition), run, out, grid_kw)

    results: dict[str, Any] = {"mode": plan.mode, "parts": list(parts), "mnist": mnist}
    sampled: dict[str, tuple[int, int]] = {}  # per mixing part: models with both records, planned
    sections: list[str] = []
    # a look at unfinished grids, or a run of a few cells, does not replace the report of a whole run
    stem = "bfi2013-finished" if finished_only else "bfi2013-cells" if plan.cells_only else "bfi2013"
    files = [f"{stem}.md", f"{stem}.json"]

    def figure(name: str) -> str:  # a look or a few cells' run leaves the whole run's figures as they are
        return name if stem == "bfi2013" else f"{stem}-{name}"

    ll_records = [records[t.task_id] for t in ll_tasks]
    ll_tables: list[Table] = []
    for table in LL_TABLES:
        if table in parts:
            text, tables, cells = likelihood_section(table, plan, ll_records)
            for dataset, curves in cell_curves(table, plan, ll_records).items():
                name = f"{stem}-{table}-{dataset.replace(':', '-')}-curves.png"
                title = (
                    f"S3 Table {table[-1]}, {NAMES[dataset]}: mean exact log-likelihood of each cell's runs"
                )
                optimum = BAS_OPTIMUM if dataset == BAS else None
                if _plot(partial(plot_cell_curves, curves, out / name, title=title, optimum=optimum)):
                    files.append(name)
                    text += f"\n\n![{NAMES[dataset]}: learning curves]({name})"
            sections.append(text)
            ll_tables += tables
            results[table] = [finite_or_none(asdict(c)) for c in cells]  # a cell without pairs: NaN

    def write_csv(name: str, tables: list[Table]) -> None:
        if tables:
            atomic_write_text(out / name, tables_csv(tables, mode=plan.mode))
            files.append(name)

    write_csv(f"{stem}.csv", ll_tables)
    ladders = ladder_section(ll_records)
    if ladders is not None:
        sections.append(ladders[0])
        write_csv(f"{stem}-ladders.csv", [ladders[1]])
        results["ladders"] = [values for _, values in ladders[1].rows]
    if act:
        taus = _complete(
            {
                name: [{op: act_record(name, t, op) for op in OPERATORS} for t in ts]
                for name, ts in act.items()
            }
        )
        sampled["Table 2"] = (sum(map(len, taus.values())), sum(map(len, act.values())))
        if "table2" in parts:
            text, tau_table = table2_section(taus, plan)
            sections.append(text)
            write_csv(f"{stem}-tau.csv", [tau_table])
        results["table2"] = {
            name: [{op: _without_acf(r[op]) for op in OPERATORS} for r in rows] for name, rows in taus.items()
        }
        if pooled_names:
            pooled = _complete(
                {
                    name: [{op: pooled_record(name, t, op) for op in OPERATORS} for t in act[name]]
                    for name in pooled_names
                }
            )
            sampled["Table 2 from pooled chains"] = (
                sum(map(len, pooled.values())),
                sum(len(act[n]) for n in pooled_names),
            )
            text, pooled_table = pooled_section(pooled, pooled_names, plan)
            sections.append(text)
            write_csv(f"{stem}-tau-pooled.csv", [pooled_table])
            results["table2_pooled"] = {
                name: [{op: _without_acf(r[op]) for op in OPERATORS} for r in rows]
                for name, rows in pooled.items()
            }
            # every record of a problem has the same lags (its chains' length): the mean function, log lags
            panels = {NAMES[name]: mean_acf(rows, OPERATORS, key="acf_log") for name, rows in pooled.items()}
            lags = {NAMES[name]: rows[0]["gibbs"]["acf_log_lags"] for name, rows in pooled.items()}
            pooled_fig = figure("fig4_pooled_acf.png")
            if panels and _plot(lambda: plot_autocorrelations(panels, out / pooled_fig, lags=lags)):
                files.append(pooled_fig)
                sections.append(
                    f"![Table 2 from pooled chains: autocorrelation functions]({pooled_fig})\n\n"
                    "Mean over the RBMs of the pooled chains' normalised autocorrelation function of the energy, "
                    "on a log axis of lags up to the chains' length."
                )
        if "fig4" in parts or "table2" in parts:
            panels = {NAMES[name]: mean_acf(rows, OPERATORS) for name, rows in taus.items()}
            fig4 = figure("fig4_acf.png")
            if _plot(lambda: plot_autocorrelations(panels, out / fig4)):
                files.append(fig4)
                sections.append(
                    f"### Fig. 4: autocorrelation functions of the energy\n\n![Fig. 4]({fig4})\n\n"
                    "Mean over the RBMs of each problem of the normalised autocorrelation function of single "
                    "chains (S3 Fig. 4 shows MNIST with 500 hidden units: the T curve below the G curve)."
                )
    if cc:
        classes = _complete(
            {d: [{op: cc_record(d, t, op) for op in OPERATORS} for t in ts] for d, ts in cc.items()}
        )
        sampled["Tables 3-4"] = (sum(map(len, classes.values())), sum(map(len, cc.values())))
        text, class_tables = classes_section(classes, plan, parts)
        sections.append(text)
        write_csv(f"{stem}-classes.csv", class_tables)
        results["classes"] = {
            d: {op: {"class_changes": [r[op]["class_changes"] for r in rows]} for op in OPERATORS}
            for d, rows in classes.items()
        }
    if "fig3" in parts:
        slem_rows = slem_stage(
            out, sizes=(2, 3, 4), bounds=range(1, 11), n_models=plan.slem_models, seed=seed,
            compute_missing=not finished_only,
        )  # fmt: skip
        results["slem"] = slem_rows
        curves = mean_curves(ll_records, dataset=BAS, algorithm="cd:5", lr=0.05)
        text, slem_table = fig3_section(slem_rows, curves, plan)
        if slem_table is not None:
            write_csv(f"{stem}-slem.csv", [slem_table])
        top, bottom = figure("fig3_slem.png"), figure("fig3_curves.png")
        if slem_rows is not None and _plot(lambda: plot_slem_fraction(slem_rows, out / top)):
            files.append(top)
            text += f"\n\n![Fig. 3 top]({top})"
        if curves and _plot(
            lambda: plot_curves_with_difference(
                curves["updates"],
                curves["gibbs"],
                curves["flip"],
                out / bottom,
                optimum=BAS_OPTIMUM,
                title=f"CD_5 on Bars and Stripes, η = 0.05 (mean of {curves['runs']} runs)",
            )
        ):
            files.append(bottom)
            text += f"\n\n![Fig. 3 bottom]({bottom})"
        sections.append(text)
    seconds = time.perf_counter() - t0
    head = header(plan, parts, mnist, run, seconds, executor, workers)
    if finished_only:
        head += "\n\n> Finished tasks only:"
        if n_planned:  # the likelihood tables' tasks
            head += (
                f" {len(ll_tasks)} of the {n_planned} tasks of these tables have records; a cell with "
                "fewer pairs than the plan's repetitions is incomplete."
            )
        for part, (done, planned) in sampled.items():
            head += f" {part}: {done} of the {planned} kept models have both operators' records."
    atomic_write_text(out / f"{stem}.md", head + "\n\n" + "\n\n".join(sections) + "\n")
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


def _train_and_sample(
    kept: list[tuple[str, GridTask, tuple[Any, ...]]], run: TaskRun, out: Path, grid_kw: dict
) -> TaskRun:
    """Train and sample the kept models (problem, task, stages) whose records are not all there,
    ``workers`` models at a time: each model's stage records are written before the next models
    train, so a run stopped after hours keeps every model it has sampled. A model whose records are
    all there is not needed again (nor trained, where a session did not keep its file); ``run``
    (the likelihood tasks' run) comes back with the models' counts added."""
    pending = [k for k in kept if any(record(k[0], k[1], op) is None for record in k[2] for op in OPERATORS)]
    ran, skipped, seconds = run.ran, run.skipped + len(kept) - len(pending), run.seconds
    step = max(1, int(grid_kw["workers"]))
    for i in range(0, len(pending), step):
        chunk = pending[i : i + step]
        trained = run_grid([task for _, task, _ in chunk], out, **grid_kw)
        ran, skipped, seconds = ran + trained.ran, skipped + trained.skipped, seconds + trained.seconds
        for name, task, stages in chunk:
            for record in stages:
                for op in OPERATORS:
                    record(name, task, op, compute=True)
    return replace(run, ran=ran, skipped=skipped, seconds=seconds)


def _complete(rows_by_problem: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The models with every operator's record, by problem; a problem without any is left out
    (only a ``finished_only`` look finds records missing)."""
    kept = {name: [r for r in rows if None not in r.values()] for name, rows in rows_by_problem.items()}
    return {name: rows for name, rows in kept.items() if rows}


def _without_acf(record: dict[str, Any]) -> dict[str, Any]:
    """A chain record without its autocorrelation functions (the summary JSON keeps the numbers)."""
    return {k: v for k, v in record.items() if not k.startswith("acf") or k == "acf_at_window"}


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
