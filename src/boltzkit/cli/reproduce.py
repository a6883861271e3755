"""``boltzkit reproduce NAME``: rerun a paper's experiment and write its table beside the paper's.

Names: see :data:`boltzkit.experiments.EXPERIMENTS`. The run writes into ``--out`` as it goes
(models, per-model results, the report), so running the same command again resumes it. An option
given on the command line that the experiment does not take is refused with the list of those it
does take (:func:`~boltzkit.experiments.registry.experiment_options`), never silently ignored.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from boltzkit.cli.common import (
    DataDirOpt,
    DeviceOpt,
    JsonFlag,
    ProgressFlag,
    SeedOpt,
    device_from,
    emit,
    option_given,
    show_progress,
)
from boltzkit.errors import BoltzkitError
from boltzkit.experiments import EXPERIMENTS, run_experiment
from boltzkit.experiments.registry import experiment_options

#: The experiment options of ``boltzkit reproduce``: the command-line name of each, and its keyword
#: in the experiments' runners.
_OPTIONS = {
    "seed": ("--seed", "seed"),
    "device": ("--device", "device"),
    "data_dir": ("--data-dir", "data_dir"),
    "progress": ("--progress/--no-progress", "progress"),
    "chains": ("--chains", "n_chains"),
    "betas": ("--betas", "betas"),
    "epochs": ("--epochs", "epochs"),
    "only": ("--only", "only"),
    "datasets": ("--datasets", "datasets"),
    "algorithms": ("--algorithms", "algorithms"),
    "learning_rates": ("--learning-rates", "lrs"),
    "finished_only": ("--finished-only", "finished_only"),
    "executor": ("--executor", "executor"),
    "workers": ("--workers", "workers"),
    "address": ("--address", "address"),
    "zoo": ("--zoo/--no-zoo", "use_zoo"),
}
#: Options every runner that takes them gets, given or not: the CLI's defaults (the device ``auto``,
#: progress bars on a terminal) are not all the Python API's.
_ALWAYS = ("seed", "device", "data_dir", "progress")


def _check_executor(executor: str, workers: int, given: list[str]) -> None:
    """Refuse executor options that contradict each other (each would otherwise be ignored)."""
    if "address" in given and executor != "ray":
        raise BoltzkitError(
            "--address names a Ray cluster", got=f"--executor {executor}", hint="add --executor ray"
        )
    if workers > 1 and executor in ("inline", "ray"):
        raise BoltzkitError(
            f"--workers {workers} counts local processes, which --executor {executor} does not start",
            hint="--executor inline runs one task at a time; Ray gives each task one CPU of its cluster: "
            "leave out --workers, or use --executor processes",
        )


def command(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Experiment: " + ", ".join(sorted(EXPERIMENTS)) + ".")
    ],
    quick: Annotated[
        bool, typer.Option("--quick", help="The small models and few epochs: minutes on 2 CPU cores.")
    ] = False,
    out: Annotated[Path, typer.Option("--out", help="Folder for models, results and the report.")] = Path(
        "reproduce-out"
    ),
    chains: Annotated[
        int,
        typer.Option(
            "--chains",
            min=10,
            help="AIS runs per model (the salakhutdinov tables and ais-operators; "
            "salakhutdinov-murray-2008-table2's top RBMs: S1's 500 in full mode unless given).",
        ),
    ] = 100,
    betas: Annotated[
        str, typer.Option("--betas", help="AIS schedule (the salakhutdinov tables; default: the paper's).")
    ] = "paper",
    epochs: Annotated[
        int | None,
        typer.Option(
            "--epochs",
            min=1,
            help="Training epochs (the salakhutdinov tables and learning-recipes) [default: by mode].",
        ),
    ] = None,
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    data_dir: DataDirOpt = None,
    progress: ProgressFlag = None,
    json_output: JsonFlag = False,
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help="bruegge-fischer-igel-2013: parts to run, e.g. table1,table2,fig3 "
            "(table1-table6, fig3, fig4) [default: all].",
        ),
    ] = None,
    datasets: Annotated[
        str | None,
        typer.Option(
            "--datasets",
            help="bruegge-fischer-igel-2013: only these data sets, e.g. bars-and-stripes "
            "(bars-and-stripes, mnist, artificial-modes:0.1, artificial-modes:0.01) [default: all].",
        ),
    ] = None,
    algorithms: Annotated[
        str | None,
        typer.Option(
            "--algorithms",
            help="bruegge-fischer-igel-2013: only the likelihood cells of these algorithms, e.g. pt:10:10 "
            "or cd:5,pcd:5, reported in bfi2013-cells.md [default: all].",
        ),
    ] = None,
    learning_rates: Annotated[
        str | None,
        typer.Option(
            "--learning-rates",
            help="bruegge-fischer-igel-2013: only the likelihood cells at these learning rates, e.g. 0.01 "
            "[default: all].",
        ),
    ] = None,
    finished_only: Annotated[
        bool,
        typer.Option(
            "--finished-only",
            help="bruegge-fischer-igel-2013: train and sample nothing; report from the records already in "
            "--out into bfi2013-finished.md (Tables 1, 5 and 6 by default, each cell with its number of "
            "pairs, or the parts --only names; Tables 2-4 count the models sampled so far).",
        ),
    ] = False,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="bruegge-fischer-igel-2013 and learning-recipes: where training tasks run: inline, "
            "processes or ray.",
        ),
    ] = "inline",
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            help="bruegge-fischer-igel-2013 and learning-recipes: local worker processes (implies --executor "
            "processes when > 1).",
        ),
    ] = 1,
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            help="bruegge-fischer-igel-2013 and learning-recipes, --executor ray: the cluster "
            "(default: local).",
        ),
    ] = None,
    zoo: Annotated[
        bool,
        typer.Option(
            "--zoo/--no-zoo",
            help="salakhutdinov-murray-2008-table1/-table2 and salakhutdinov-2008-table2, full mode: take "
            "the trained models from the zoo where it holds them (--no-zoo: train every model in --out).",
        ),
    ] = True,
) -> None:
    """Reproduce an experiment: a paper's tables or one table (as salakhutdinov-murray-2008-table1),
    written to --out."""
    t0 = time.perf_counter()
    values = {
        "seed": seed, "device": device_from(device), "data_dir": None if data_dir is None else str(data_dir),
        "progress": show_progress(progress), "chains": chains, "betas": betas, "epochs": epochs,
        "only": only, "datasets": datasets, "algorithms": algorithms, "learning_rates": learning_rates,
        "finished_only": finished_only, "executor": executor, "workers": workers, "address": address,
        "zoo": zoo,
    }  # fmt: skip
    given = [key for key in _OPTIONS if option_given(ctx, key)]
    if workers > 1 and executor == "inline" and "executor" not in given:  # several workers: processes
        values["executor"] = "processes"
        given.append("executor")
    extra: dict[str, Any] = {}
    takes = experiment_options(name)  # an unknown name is refused here
    for key in (*given, *(k for k in _ALWAYS if k not in given and _OPTIONS[k][1] in takes)):
        option, keyword = _OPTIONS[key]
        if keyword not in takes:
            uses = [o for o, k in _OPTIONS.values() if k in takes]
            raise BoltzkitError(
                f"{option} does not apply to {name}",
                expected=f"the options {name} takes: {', '.join(uses) or 'none of these'}",
                hint="leave the option out",
            )
        extra[keyword] = values[key]
    _check_executor(values["executor"], workers, given)
    if out.exists() and not out.is_dir():
        raise BoltzkitError(
            "--out names a file; a reproduction writes a folder of records, models and reports",
            got=str(out),
            hint="choose a folder name (a new one, or the --out of an earlier run to resume it).",
        )
    missing = next((p for p in (out, *out.parents) if p.exists()), None)
    if missing is not None and missing != out and not os.access(missing, os.W_OK | os.X_OK):
        raise BoltzkitError(
            "the --out folder cannot be created here",
            got=str(out),
            hint=f"{missing} is not writable; choose another --out.",
        )
    if finished_only and not out.is_dir():  # a report of what finished needs the runs' folder
        raise BoltzkitError(
            "--finished-only reports the tasks finished in --out, and that folder does not exist",
            got=str(out),
            hint="give the --out of the runs to report on.",
        )
    summary: dict[str, Any] = run_experiment(
        name,
        out_dir=out,
        quick=quick,
        **extra,
    )
    summary["out"] = str(out)
    summary["seconds"] = time.perf_counter() - t0
    report = out / summary.get("report", "")

    def human() -> str:
        text = report.read_text() if report.is_file() else ""
        return f"{text}\nwrote {', '.join(str(out / f) for f in summary.get('files', []))}"

    emit(summary, as_json=json_output, human=human)
