"""Names of the reproducible experiments and their runners."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from boltzkit.errors import BoltzkitError


def _table1(**kwargs: Any) -> dict[str, Any]:
    from boltzkit.experiments.sm2008_table1 import run_table1

    return run_table1(**kwargs)


def _table2(**kwargs: Any) -> dict[str, Any]:
    from boltzkit.experiments.sm2008_table2 import run_table2

    return run_table2(**kwargs)


def _s2_table1(**kwargs: Any) -> dict[str, Any]:
    from boltzkit.experiments.s2008_table1 import run_table1

    return run_table1(**kwargs)


def _s2_table2(**kwargs: Any) -> dict[str, Any]:
    from boltzkit.experiments.s2008_table2 import run_table2

    return run_table2(**kwargs)


def _bfi2013(**kwargs: Any) -> dict[str, Any]:
    from boltzkit.experiments.bfi2013 import run_bfi2013

    return run_bfi2013(**kwargs)


def _learning(**kwargs: Any) -> dict[str, Any]:
    from boltzkit.experiments.learning_study import run_learning_study

    return run_learning_study(**kwargs)


def _ais_operators(**kwargs: Any) -> dict[str, Any]:
    from boltzkit.experiments.ais_operators import run_ais_operators

    return run_ais_operators(**kwargs)


EXPERIMENTS: dict[str, tuple[str, Callable[..., dict[str, Any]]]] = {
    "salakhutdinov-murray-2008-table1": (
        "AIS estimates of log Z and log-probabilities of MNIST RBMs (S&M 2008, Table 1, Fig. 3)",
        _table1,
    ),
    "salakhutdinov-murray-2008-table2": (
        "Lower bounds on DBN log-probabilities with their error split, transposed start, mixture of "
        "Bernoullis (S&M 2008, Table 2, Fig. 2)",
        _table2,
    ),
    "salakhutdinov-2008-table1": (
        "Exact log Z vs AIS for toy RBM, SRBM and BM models (Salakhutdinov 2008, Table 1, Fig. 3 top)",
        _s2_table1,
    ),
    "salakhutdinov-2008-table2": (
        "AIS log Z and log-probabilities of MNIST RBM, SRBM and BM, 500 hidden (Salakhutdinov 2008, "
        "Table 2, Fig. 4)",
        _s2_table2,
    ),
    "bruegge-fischer-igel-2013": (
        "Flip-the-state vs Gibbs: log-likelihood of CD, PCD and PT learning with Wilcoxon tests, autocorrelation "
        "times, class changes, SLEMs (Brügge, Fischer & Igel 2013, Tables 1-6, Figs. 3-4)",
        _bfi2013,
    ),
    "learning-recipes": (
        "What moves the likelihood: recipes, centering, persistent chains, tempering and flip-the-state "
        "compared by exact test log-likelihood at equal epochs (784 x 25 RBMs)",
        _learning,
    ),
    "ais-operators": (
        "Gibbs vs flip-the-state vs blend inside AIS: spread of log Z estimates at equal cost",
        _ais_operators,
    ),
}


def run_experiment(name: str, *, out_dir: str | Path, quick: bool = False, **kwargs: Any) -> dict[str, Any]:
    """Run the named experiment, writing its report into ``out_dir``; returns a JSON-ready summary."""
    if name not in EXPERIMENTS:
        raise BoltzkitError(
            "unknown experiment",
            got=name,
            expected=" or ".join(sorted(EXPERIMENTS)),
        )
    return EXPERIMENTS[name][1](out_dir=Path(out_dir), quick=quick, **kwargs)
