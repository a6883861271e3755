"""Names of the reproducible experiments and their runners.

Each runner is a keyword-only function ``run_*(out_dir=..., quick=..., **options)`` in its own spec
module, imported only when its experiment runs. The options an experiment takes are its runner's
parameters (:func:`experiment_options`); :func:`run_experiment` refuses any other, so no option is
ever silently ignored.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boltzkit.errors import BoltzkitError

#: Each experiment's description and runner (``"module:function"`` under ``boltzkit.experiments``).
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "salakhutdinov-murray-2008-table1": (
        "AIS estimates of log Z and log-probabilities of MNIST RBMs (S&M 2008, Table 1, Fig. 3)",
        "sm2008_table1:run_table1",
    ),
    "salakhutdinov-murray-2008-table2": (
        "Lower bounds on DBN log-probabilities with their error split, transposed start, mixture of "
        "Bernoullis (S&M 2008, Table 2, Fig. 2)",
        "sm2008_table2:run_table2",
    ),
    "salakhutdinov-2008-table1": (
        "Exact log Z vs AIS for toy RBM, SRBM and BM models (Salakhutdinov 2008, Table 1, Fig. 3 top)",
        "s2008_table1:run_table1",
    ),
    "salakhutdinov-2008-table2": (
        "AIS log Z and log-probabilities of MNIST RBM, SRBM and BM, 500 hidden (Salakhutdinov 2008, "
        "Table 2, Fig. 4)",
        "s2008_table2:run_table2",
    ),
    "bruegge-fischer-igel-2013": (
        "Flip-the-state vs Gibbs: log-likelihood of CD, PCD and PT learning with Wilcoxon tests, autocorrelation "
        "times, class changes, SLEMs (Brügge, Fischer & Igel 2013, Tables 1-6, Figs. 3-4)",
        "bfi2013:run_bfi2013",
    ),
    "learning-recipes": (
        "What moves the likelihood: recipes, centering, persistent chains, tempering and flip-the-state "
        "compared by exact test log-likelihood at equal epochs (784 x 25 RBMs)",
        "learning_study:run_learning_study",
    ),
    "ais-operators": (
        "Gibbs vs flip-the-state vs blend inside AIS: spread of log Z estimates at equal cost",
        "ais_operators:run_ais_operators",
    ),
}


def _known(name: str) -> None:
    if name not in EXPERIMENTS:
        raise BoltzkitError("unknown experiment", got=name, expected=" or ".join(sorted(EXPERIMENTS)))


def experiment_runner(name: str) -> Callable[..., dict[str, Any]]:
    """The runner of experiment ``name`` (its spec module is imported here, not before)."""
    _known(name)
    module, function = EXPERIMENTS[name][1].split(":")
    return getattr(importlib.import_module(f"boltzkit.experiments.{module}"), function)


def _options_of(runner: Callable[..., dict[str, Any]]) -> tuple[str, ...]:
    parameters = inspect.signature(runner).parameters.values()
    return tuple(
        p.name for p in parameters if p.kind is p.KEYWORD_ONLY and p.name not in ("out_dir", "quick")
    )


def experiment_options(name: str) -> tuple[str, ...]:
    """The keyword options experiment ``name`` takes besides ``out_dir`` and ``quick``: its
    runner's parameters, in their order."""
    return _options_of(experiment_runner(name))


def run_experiment(name: str, *, out_dir: str | Path, quick: bool = False, **kwargs: Any) -> dict[str, Any]:
    """Run the named experiment, writing its report into ``out_dir``; returns a JSON-ready summary.

    Raises :class:`~boltzkit.errors.BoltzkitError` for an unknown name, or for an option the
    experiment does not take (:func:`experiment_options`), before anything runs.
    """
    runner = experiment_runner(name)
    takes = _options_of(runner)
    unknown = [key for key in kwargs if key not in takes]
    if unknown:
        raise BoltzkitError(
            f"{name} does not take {', '.join(unknown)}",
            expected="its options: " + ", ".join(takes),
            hint="leave the option out, or run an experiment that uses it",
        )
    return runner(out_dir=Path(out_dir), quick=quick, **kwargs)
