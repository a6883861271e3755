"""The sections of S3's report (``bfi2013.md``): ours beside S3's for every table, each table
built once (:class:`~boltzkit.experiments.report.Table`) and written as markdown and CSV."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from boltzkit.diagnostics.autocorrelation import (
    RELIABLE_LENGTHS,
    SLOW_TAIL_Z,
    acf_sum,
    misses_slow_tail,
    tail_undecayed,
)
from boltzkit.experiments.bfi2013.paper import (
    AM01,
    AM1,
    BAS,
    BAS_OPTIMUM,
    DATASETS,
    MNIST,
    NAMES,
    OPERATORS,
    PAPER_CLASS_CHANGES,
    PAPER_FIRST_CHANGE,
    PAPER_LL,
    PAPER_TAU,
)
from boltzkit.experiments.bfi2013.plan import Plan
from boltzkit.experiments.bfi2013.tasks import reps_for, table_of
from boltzkit.experiments.engine import finite_or_none
from boltzkit.experiments.grid import (
    Comparison,
    aggregate,
    algorithm_label,
    mean_curves,
    min_significant_pairs,
    parse_algorithm,
    signed_rank_test,
)
from boltzkit.experiments.mixing_study import finite_mean, quartiles
from boltzkit.experiments.report import Table
from boltzkit.learning.callbacks import SwapRates


def _fmt(x: float | None, digits: int = 6) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def header(plan: Plan, parts, mnist: bool, run, seconds: float, executor: str, workers: int) -> str:
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
            f"> Data sets run: {', '.join(map(_data_name, plan.datasets))} (the others' cells: not run).",
        ]
    if plan.include_mnist and MNIST in plan.datasets and not mnist:
        lines += ["", "> MNIST was not found (set BOLTZKIT_DATA_DIR or --data-dir): its rows are not run."]
    lines += [
        "",
        "Conventions: Bars and Stripes is the list of all 32 4 x 4 patterns (two duplicates; best mean "
        f"log-likelihood {BAS_OPTIMUM:.4f}); MNIST is the 50,000-image binarized training set; Artificial Modes "
        f"has 10,000 examples. Weights and biases start ~ N(0, 0.01^2) (S3){_log_odds_start(plan)}; plain SGD. "
        "G and T of one repetition "
        "share their initial weights and minibatches, so the signed-rank test pairs them. The star marks the "
        f"operator the two-sided Wilcoxon signed-rank test favours at p < 0.05 (with fewer than "
        f"{min_significant_pairs()} pairs no difference can be significant).",
    ]
    return "\n".join(lines)


def _data_name(dataset: str) -> str:
    """A data set's name (:data:`NAMES` names the problems: MNIST is two, n = 10 and n = 500)."""
    return "MNIST" if dataset == MNIST else NAMES[dataset]


def _log_odds_start(plan: Plan) -> str:
    """The data sets whose visible biases start at the data's log-odds instead (``Plan.init_vbias``)."""
    named = [_data_name(d) for d in sorted(plan.init_vbias) if plan.init_vbias[d] == "data"]
    if not named:
        return ""
    return (
        f", except on {', '.join(named)}, whose visible biases start at the data's log-odds (from S3's start "
        "every PCD run on MNIST ends at the base-rate model)"
    )


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


def likelihood_section(
    table: str, plan: Plan, records: list[dict[str, Any]]
) -> tuple[str, list[Table], list[Comparison]]:
    """One likelihood table (S3 Table 1, 5 or 6): per data set, S3's rows with ours beside them."""
    cells = aggregate(r for r in records if table_of(plan, r["task"]) == table)
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
        reps = reps_for(plan, dataset)
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


#: CSV columns of ``bfi2013-ladders.csv``: the tempering cells' swap statistics, one row per
#: cell and operator (``swap_rates``: the mean rate of each adjacent pair, space-separated, from
#: the hottest pair to the coldest).
LADDER_CSV_COLUMNS = (
    "dataset", "algorithm", "lr", "operator", "runs", "swap_rates", "min_swap_rate", "round_trips",
)  # fmt: skip


def ladder_section(records: list[dict[str, Any]]) -> tuple[str, Table] | None:
    """The ladders of the tempering cells (t-PT_k of S3 Sec. 2.3): per cell and operator, the mean
    over runs of each adjacent pair's swap acceptance rate and of the round trips (a replica's walk
    from the hottest temperature to ``beta = 1`` and back, summed over a run's replicas;
    :class:`~boltzkit.samplers.tempering.SwapMonitor`). ``None`` when no record has them.

    S3 spaces the inverse temperatures uniformly on [0, 1]. A pair whose rate is below
    :attr:`~boltzkit.learning.callbacks.SwapRates.BLOCKED` (the threshold at which training warns of
    a cut ladder) lets few or no states from the replicas above it reach ``beta = 1``; with no round
    trips, the negative phase is that of the replicas below the cut alone."""
    groups: dict[tuple[str, str, float, str], list[dict[str, Any]]] = {}
    for r in records:
        if r.get("swap_rates"):
            t = r["task"]
            groups.setdefault((t["dataset"], t["algorithm"], float(t["lr"]), t["operator"]), []).append(r)
    if not groups:
        return None
    rank = {d: i for i, d in enumerate(DATASETS)}
    table = Table(
        (
            "data set",
            "algorithm",
            "η",
            "op",
            "runs",
            "swap rate per pair (β from 0 to 1)",
            "lowest",
            "round trips",
        ),
        LADDER_CSV_COLUMNS,
    )
    cut = 0

    def order(key: tuple[str, str, float, str]) -> tuple:
        dataset, algorithm, lr, op = key
        a = parse_algorithm(algorithm)
        return (rank.get(dataset, len(rank)), a["temperatures"], a["k"], lr, OPERATORS.index(op))

    for (dataset, algorithm, lr, op), rows in sorted(groups.items(), key=lambda kv: order(kv[0])):
        rates = np.mean([r["swap_rates"] for r in rows], axis=0)
        trips = float(np.mean([r.get("round_trips", 0) for r in rows]))
        low = float(rates.min())
        cut += low < SwapRates.BLOCKED
        table.add(
            [NAMES.get(dataset, dataset), algorithm_label(algorithm), f"{lr:g}", _SYMBOL[op], str(len(rows)),
             " ".join(f"{x:.3g}" for x in rates), f"{low:.3g}", f"{trips:,.0f}"],
            dataset=dataset, algorithm=algorithm, lr=lr, operator=op, runs=len(rows),
            swap_rates=" ".join(repr(float(x)) for x in rates), min_swap_rate=low, round_trips=trips,
        )  # fmt: skip
    lines = [
        "## The tempering ladders",
        "",
        "Mean over each cell's runs of every adjacent pair's swap acceptance rate, from the hottest pair "
        "(β = 0 and the next) to the coldest, and of the round trips (a replica's walk from β = 0 to β = 1 "
        "and back, summed over the run's replicas). S3 spaces the β uniformly on [0, 1].",
        "",
        *table.markdown(),
    ]
    if cut:
        lines += [
            "",
            f"In {cut} of {len(groups)} rows a pair swaps less than once in a hundred rounds (training's "
            "threshold for a cut ladder): few or no states of the replicas above it reach β = 1 (none where "
            "the round trips are 0).",
        ]
    return "\n".join(lines), table


def cell_curves(table: str, plan: Plan, records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per data set of ``table`` with runs, the mean learning curves of each of its cells
    (:func:`~boltzkit.experiments.grid.mean_curves`), in the plan's order of algorithms and
    learning rates, each with its ``algorithm`` label and ``lr``: what
    :func:`~boltzkit.plots.mixing.plot_cell_curves` draws. A cell without runs with both operators
    is only its label and learning rate (an empty panel), so every row of the table has its panels."""
    mine = [r for r in records if table_of(plan, r["task"]) == table]
    out: dict[str, list[dict[str, Any]]] = {}
    for (tab, dataset), algorithms in plan.algorithms.items():
        if tab != table:
            continue
        cells = []
        for algorithm in algorithms:
            for lr in plan.lrs[tab, dataset]:
                curves = mean_curves(mine, dataset=dataset, algorithm=algorithm, lr=float(lr))
                cells.append({"algorithm": algorithm_label(algorithm), "lr": float(lr), **(curves or {})})
        if any("updates" in c for c in cells):
            out[dataset] = cells
    return out


#: CSV columns of ``bfi2013-tau.csv`` (Table 2): ours, then S3's.
TAU_CSV_COLUMNS = (
    "problem", "rbms", "tau_gibbs", "tau_flip", "gain_percent", "tau_gibbs_sokal", "tau_flip_sokal",
    "chains_of_50_tau", "chains", "tau_gibbs_acf_sum", "tau_flip_acf_sum", "chains_ar_misses_tail",
    "chains_acf_undecayed", "paper_tau_gibbs", "paper_tau_flip", "paper_gain_percent",
)  # fmt: skip
#: CSV columns of ``bfi2013-tau-pooled.csv`` (Table 2's pooled chains, not in S3).
POOLED_CSV_COLUMNS = (
    "problem", "rbms", "rbms_tau_invalid", "n_chains", "steps", "tau_gibbs", "tau_flip", "gain_percent",
    "rbms_flip_faster", "rbms_gibbs_faster", "rbms_undecided", "p_value", "faster_by_test", "records_of_50_tau",
    "records", "records_sokal_undecayed", "tau_gibbs_sokal", "tau_flip_sokal", "tau_gibbs_ar", "tau_flip_ar",
)  # fmt: skip
#: Standard deviations by which one RBM's two pooled Sokal times must differ for a call.
POOLED_Z = 2.0
#: CSV columns of ``bfi2013-classes.csv`` (Tables 3 and 4): quartiles over RBMs (Table 3) or over
#: the pooled starts (Table 4, with the censored starts), ours then S3's.
CLASSES_CSV_COLUMNS = (
    "table", "problem", "operator", "q25", "median", "q75", "censored", "paper_q25", "paper_median", "paper_q75",
)  # fmt: skip
#: CSV columns of ``bfi2013-slem.csv`` (Fig. 3, top): per layer size n, the fraction at each weight bound c.
SLEM_CSV_COLUMNS = ("n", *(f"c_{c}" for c in range(1, 11)))
#: S3's symbols for the operators.
_SYMBOL = {"gibbs": "G", "flip": "T"}


def table2_section(taus: dict[str, list[dict[str, dict[str, Any]]]], plan: Plan) -> tuple[str, Table]:
    """S3 Table 2: mean integrated autocorrelation times of the energy, G and T, per problem.

    Beside S3's AR-fit times (and Sokal's window) each row gives the times of the recorded
    autocorrelation functions summed to their last lag (:func:`~boltzkit.diagnostics.autocorrelation.acf_sum`)
    and counts the chains whose summed correlations lie more than
    :data:`~boltzkit.diagnostics.autocorrelation.SLOW_TAIL_Z` standard errors above their AR fit's at
    some window (:func:`~boltzkit.diagnostics.autocorrelation.misses_slow_tail`): there the AR fit misses a slow
    component, such as switching between modes, and its time is not the chain's. That check sees only
    the recorded lags, so the chains whose autocorrelation is still significantly above zero at the
    last one (:func:`~boltzkit.diagnostics.autocorrelation.tail_undecayed`) are counted apart, and a
    chain counts as long enough only when it spans 50 times the larger of its AR and Sokal times
    (Sokal's window runs over the whole chain, not only the recorded lags).
    """
    lag = min(plan.act_max_lag, plan.act_steps - 1)
    table = Table(
        ("problem", "RBMs", "τ_G", "τ_T", "gain %", "τ_G (Sokal)", "τ_T (Sokal)", "chains ≥ 50 τ",
         f"τ_G (ACF to lag {lag:,})", f"τ_T (ACF to lag {lag:,})", "AR misses a slow tail",
         f"ACF undecayed at lag {lag:,}", "τ_G (S3)", "τ_T (S3)", "gain % (S3)"),
        TAU_CSV_COLUMNS,
    )  # fmt: skip
    for name in (BAS, AM1, AM01, MNIST, "mnist500"):
        pg, pt, pgain = PAPER_TAU[name]
        paper = {"paper_tau_gibbs": pg, "paper_tau_flip": pt, "paper_gain_percent": pgain}
        rows = taus.get(name)
        if not rows:
            table.add(
                [NAMES[name], "0", "not run", *[""] * 9, f"{pg:.2f}", f"{pt:.2f}", f"{pgain:.2f}"],
                problem=name, rbms=0, **paper,
            )  # fmt: skip
            continue
        steps = plan.mnist500_steps if name == "mnist500" else plan.act_steps
        g = finite_mean([r["gibbs"]["tau_ar"] for r in rows])
        t = finite_mean([r["flip"]["tau_ar"] for r in rows])
        gs = finite_mean([r["gibbs"]["tau_sokal"] for r in rows])
        ts = finite_mean([r["flip"]["tau_sokal"] for r in rows])
        gw = finite_mean([acf_sum(r["gibbs"]["acf"]) for r in rows])
        tw = finite_mean([acf_sum(r["flip"]["acf"]) for r in rows])
        gain = 100.0 * (1.0 - t / g) if g > 0 else math.nan
        ok = sum(_long_enough(r[op], steps) for r in rows for op in OPERATORS)
        missed = sum(misses_slow_tail(r[op]["tau_ar"], r[op]["acf"], steps) for r in rows for op in OPERATORS)
        undecayed = sum(tail_undecayed(r[op]["acf"], steps) for r in rows for op in OPERATORS)
        table.add(
            [NAMES[name], str(len(rows)), f"{g:.2f}", f"{t:.2f}", f"{gain:.2f}", f"{gs:.2f}", f"{ts:.2f}",
             f"{ok} of {2 * len(rows)}", f"{gw:.2f}", f"{tw:.2f}", f"{missed} of {2 * len(rows)}",
             f"{undecayed} of {2 * len(rows)}", f"{pg:.2f}", f"{pt:.2f}", f"{pgain:.2f}"],
            problem=name, rbms=len(rows), **finite_or_none({"tau_gibbs": g, "tau_flip": t, "gain_percent": gain,
            "tau_gibbs_sokal": gs, "tau_flip_sokal": ts, "tau_gibbs_acf_sum": gw, "tau_flip_acf_sum": tw}),
            chains_of_50_tau=ok, chains=2 * len(rows), chains_ar_misses_tail=missed,
            chains_acf_undecayed=undecayed, **paper,
        )  # fmt: skip
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
        *table.markdown(),
        "",
        "A chain shorter than 50 τ does not pin τ down (emcee's rule), judged here by the larger of the AR and "
        "Sokal times (Sokal's window runs over the whole chain); S3's chains of 10^6 steps are for τ of hundreds.",
        f'"ACF to lag {lag:,}" is 1 + 2 Σ R(Δt) over the recorded lags: what each chain\'s correlations up to '
        f'lag {lag:,} add up to. "AR misses a slow tail" counts the chains whose correlations, summed to some '
        f"window up to lag {lag:,}, lie more than {SLOW_TAIL_Z:g} standard errors (Madras & Sokal 1988) above "
        "what their AR fit sums to there: their energy is still correlated beyond what the "
        "AR fit holds (slow switching between modes under a fast local decay), so their AR time, and a gain "
        "computed from it, understates how slowly they mix. That check sees only the recorded lags: "
        f'"ACF undecayed at lag {lag:,}" counts the chains whose autocorrelation there is still more than three '
        "standard errors above zero (Bartlett's test): for them the sum to that lag is only a lower bound on τ, "
        "a slow tail beyond it goes unseen, and their AR time is unverified.",
    ]
    return "\n".join(lines), table


def pooled_section(
    pooled: dict[str, list[dict[str, dict[str, Any]]]], names: list[str], plan: Plan
) -> tuple[str, Table]:
    """Table 2 again from many chains per RBM (not in S3): each RBM's ``tau`` under G and T from
    the pooled chains of ``plan.pooled``, so that RBMs whose ``tau`` one chain of S3's length cannot
    pin down still get a verdict.

    ``tau`` is the windowed sum with Sokal's window extended until the pooled autocorrelation has
    decayed (``tau_decayed`` of :func:`~boltzkit.experiments.mixing_study.autocorrelation_stage`;
    Sokal's own where its window has decayed). Per RBM, T (or G) is called faster when the two
    times differ by more than :data:`POOLED_Z` standard deviations of their difference
    (:func:`~boltzkit.diagnostics.autocorrelation.windowed_sd` of each); across RBMs, the Wilcoxon
    signed-rank test of the paired times (:func:`~boltzkit.experiments.grid.signed_rank_test`).
    Each record (an RBM under one operator) counts as long enough when its chains span 50 times the
    larger of its AR time and ``tau``, and is counted where Sokal's own window had not decayed.
    """
    table = Table(
        ("problem", "RBMs", "chains × steps", "τ_G", "τ_T", "gain %", "T faster", "G faster", "no call",
         "p (Wilcoxon)", "≥ 50 τ", "Sokal's window undecayed", "τ_G, τ_T (Sokal)", "τ_G, τ_T (AR)"),
        POOLED_CSV_COLUMNS,
    )  # fmt: skip
    for name in names:
        chains, steps = plan.pooled[name]
        rows = pooled.get(name)
        if not rows:
            table.add(
                [NAMES[name], "0", "not run", *[""] * 11], problem=name, rbms=0, n_chains=chains, steps=steps
            )
            continue
        # a time that is not positive (or finite) went wrong: its RBM makes no call, no mean, no pair
        valid = [r for r in rows if all(0 < _pooled_tau(r[op])[0] < math.inf for op in OPERATORS)]
        tau = {op: [_pooled_tau(r[op])[0] for r in valid] for op in OPERATORS}
        g, t = finite_mean(tau["gibbs"]), finite_mean(tau["flip"])
        gain = 100.0 * (1.0 - t / g) if g > 0 else math.nan
        calls = [_faster(r["gibbs"], r["flip"]) for r in rows]
        p, larger = signed_rank_test(tau["gibbs"], tau["flip"])
        by_test = {"a": "flip", "b": "gibbs"}.get(larger or "")  # the larger times are G's: T is faster
        long = sum(_long_enough(r[op], steps, _pooled_tau(r[op])[0]) for r in rows for op in OPERATORS)
        undecayed = sum(bool(r[op].get("undecayed_at_window")) for r in rows for op in OPERATORS)
        gs, ts = (finite_mean([r[op]["tau_sokal"] for r in rows]) for op in OPERATORS)
        ga, ta = (finite_mean([r[op]["tau_ar"] for r in rows]) for op in OPERATORS)
        n = 2 * len(rows)
        left_out = f" ({len(rows) - len(valid)} with τ ≤ 0 left out)" if len(valid) < len(rows) else ""
        table.add(
            [NAMES[name], f"{len(rows)}{left_out}", f"{chains} × {steps:,}", f"{g:.1f}", f"{t:.1f}", f"{gain:.1f}",
             str(calls.count("flip")), str(calls.count("gibbs")), str(calls.count(None)),
             "n/a" if p is None else f"{p:.3g}" + {"flip": ", T", "gibbs": ", G"}.get(by_test or "", ""),
             f"{long} of {n}", f"{undecayed} of {n}", f"{gs:.1f}, {ts:.1f}", f"{ga:.1f}, {ta:.1f}"],
            problem=name, rbms=len(rows), rbms_tau_invalid=len(rows) - len(valid), n_chains=chains, steps=steps,
            **finite_or_none({"tau_gibbs": g, "tau_flip": t, "gain_percent": gain, "tau_gibbs_sokal": gs,
            "tau_flip_sokal": ts, "tau_gibbs_ar": ga, "tau_flip_ar": ta}), rbms_flip_faster=calls.count("flip"),
            rbms_gibbs_faster=calls.count("gibbs"), rbms_undecided=calls.count(None), p_value=p,
            faster_by_test=by_test, records_of_50_tau=long, records=n, records_sokal_undecayed=undecayed,
        )  # fmt: skip
    lines = [
        "### Table 2 from pooled chains (not in S3)",
        "",
        "Where one chain of S3's length cannot pin a model's τ down, each RBM is sampled again under each "
        f'operator by independent chains ("chains × steps") after {plan.pooled_burn_in:,} steps of burn-in. '
        "Their autocorrelation functions are pooled, the chains centred on their common mean (so that a chain's own "
        "mean does not shorten τ), and τ is the windowed sum 1 + 2 Σ R(Δt) with Sokal's window (the smallest M "
        "≥ 5 τ(M)) extended, where needed, until the pooled function has decayed (R(M) within three Bartlett "
        "standard errors of zero): a chain that switches slowly between modes under a fast local decay meets "
        "Sokal's condition while its slow part is still well above zero, and Sokal's window cuts that part off. "
        "\"Sokal's window undecayed\" counts the records (an RBM under one operator) where it did; Sokal's own "
        "times are shown beside, and the AR times (S3's estimator, mean over the chains). Means are over RBMs. "
        f"Per RBM, T or G is called faster when the two times differ by more than {POOLED_Z:g} standard deviations "
        "of the difference (each time's sd is τ √(2 (2M + 1) / N), M its window and N the chains' total length, "
        "Madras & Sokal 1988; G's and T's chains share their seeds, which makes the call conservative), and "
        "neither where a time is not positive (the sum went wrong: such an RBM is left out of the means and the "
        "test). With no difference between the operators, about one RBM in twenty would still be called by "
        "chance. p is the Wilcoxon signed-rank test of the paired times across RBMs, with the operator the ranks "
        'favour where p < 0.05. "≥ 50 τ" counts the records whose chains span 50 times the larger of their AR '
        "time and τ.",
        "",
        *table.markdown(),
    ]
    return "\n".join(lines), table


def _pooled_tau(record: dict[str, Any]) -> tuple[float, float]:
    """A pooled record's ``tau`` and its sd: the window extended to decay (Sokal's where a record
    has no such estimate)."""
    if "tau_decayed" in record:
        return record["tau_decayed"], record.get("tau_decayed_sd", math.inf)
    return record["tau_sokal"], record.get("tau_sokal_sd", math.inf)


def _faster(gibbs: dict[str, Any], flip: dict[str, Any]) -> str | None:
    """``"flip"`` or ``"gibbs"``, whichever operator's pooled time (:func:`_pooled_tau`) is the
    smaller by more than :data:`POOLED_Z` standard deviations of the difference; ``None`` when
    neither is, or when either time is not positive (a true ``tau`` never is: the sum went wrong)."""
    (tg, sdg), (tt, sdt) = _pooled_tau(gibbs), _pooled_tau(flip)
    if not (tg > 0 and tt > 0):
        return None
    diff, sd = tg - tt, math.hypot(sdg, sdt)
    if not (math.isfinite(diff) and math.isfinite(sd)):
        return None
    if diff > POOLED_Z * sd:
        return "flip"
    if -diff > POOLED_Z * sd:
        return "gibbs"
    return None


def _long_enough(record: dict[str, Any], steps: int, windowed: float | None = None) -> bool:
    """Whether one chain's record spans :data:`RELIABLE_LENGTHS` times the larger of its AR time
    and its windowed time (``windowed``, default its Sokal time; one that went wrong, not finite or
    below the AR time, leaves the AR one; an AR time that is not finite never counts)."""
    tau, sokal = record["tau_ar"], record.get("tau_sokal") if windowed is None else windowed
    if tau is None or not math.isfinite(tau):
        return False
    return steps >= RELIABLE_LENGTHS * max(tau, sokal if sokal is not None and math.isfinite(sokal) else tau)


def classes_section(
    classes: dict[str, list[dict[str, dict[str, Any]]]], plan: Plan, parts
) -> tuple[str, list[Table]]:
    """S3 Tables 3 and 4: class changes on Artificial Modes, and the samples before the first one."""
    lines = [
        "## Tables 3 and 4: class changes on Artificial Modes",
        "",
        f"{plan.cc_models} RBMs per p_mut trained with CD_5 and G (η = {plan.cc_lr:g}, {plan.cc_updates:,} updates); "
        "samples assigned to the nearest of the four modes by Hamming distance, ties discarded.",
    ]
    tables = []
    if "table3" in parts:
        table = Table(
            ("problem", "op", "25 %", "median", "75 %", "25 % (S3)", "median (S3)", "75 % (S3)"),
            CLASSES_CSV_COLUMNS,
        )
        for d, rows in classes.items():
            for op in OPERATORS:
                q, p = quartiles([r[op]["class_changes"] for r in rows]), PAPER_CLASS_CHANGES[d, op]
                table.add(
                    [NAMES[d], _SYMBOL[op], *(f"{v:g}" for v in q), *(str(v) for v in p)],
                    table="table3", problem=d, operator=op, **_quartile_values(q, p),
                )  # fmt: skip
        tables.append(table)
        lines += [
            "",
            f"### Table 3: class changes in {plan.cc_steps:,} samples from the all-ones start (quantiles over RBMs)",
            "",
            *table.markdown(),
        ]
    if "table4" in parts:
        table = Table(
            ("problem", "op", "25 %", "median", "75 %", "censored", "25 % (S3)", "median (S3)", "75 % (S3)"),
            CLASSES_CSV_COLUMNS,
        )
        for d, rows in classes.items():
            for op in OPERATORS:
                q = quartiles([v for r in rows for v in r[op]["first_change"]])
                censored, p = sum(r[op]["censored"] for r in rows), PAPER_FIRST_CHANGE[d, op]
                table.add(
                    [NAMES[d], _SYMBOL[op], *(f"{v:g}" for v in q), str(censored), *(str(v) for v in p)],
                    table="table4", problem=d, operator=op, censored=censored, **_quartile_values(q, p),
                )  # fmt: skip
        tables.append(table)
        lines += [
            "",
            f"### Table 4: samples before the first class change from training examples ({plan.cc_starts:,} starts per RBM, pooled)",
            "",
            *table.markdown(),
        ]
    return "\n".join(lines), tables


def _quartile_values(ours: tuple[float, ...], paper: tuple[int, ...]) -> dict[str, Any]:
    keys = ("q25", "median", "q75")
    return {**finite_or_none(dict(zip(keys, map(float, ours), strict=True))),
            **{f"paper_{k}": v for k, v in zip(keys, paper, strict=True)}}  # fmt: skip


def fig3_section(
    rows: list[dict[str, Any]] | None, curves: dict[str, Any] | None, plan: Plan
) -> tuple[str, Table | None]:
    """S3 Fig. 3: the SLEM comparison of random RBMs (top; ``rows`` ``None`` while its record is
    missing, then no table) and CD_5's curves with G and T (bottom)."""
    lines = ["## Fig. 3", ""]
    table = None
    if rows is None:
        lines.append("Top: the SLEM study has no record here yet.")
    else:
        table = Table(("n", *(f"c={c}" for c in range(1, 11))), SLEM_CSV_COLUMNS)
        for n in (2, 3, 4):
            sel = sorted((r for r in rows if int(r["n"]) == n), key=lambda r: r["c"])
            table.add(
                [f"{n}x{n}", *(f"{r['fraction_b_better']:.2f}" for r in sel)],
                n=n, **{f"c_{int(r['c'])}": r["fraction_b_better"] for r in sel},
            )  # fmt: skip
        lines += [
            f"Top: fraction of {plan.slem_models} random n x n RBMs (weights uniform on [-c, c], zero biases) for "
            "which T has the smaller SLEM than G (S3: 100 per point; with zero weights G is always better, and T "
            "wins more often as the weights and the layers grow).",
            "",
            *table.markdown(),
        ]
    if curves is not None:
        u, g, t = curves["updates"], curves["gibbs"], curves["flip"]
        diff = np.asarray(t) - np.asarray(g)
        lines += [
            "",
            f"Bottom: mean exact log-likelihood of {curves['runs']} CD_5 runs on Bars and Stripes (η = 0.05) with G and T; "
            f"after {u[-1]:,} updates G {g[-1]:.4f}, T {t[-1]:.4f} (T - G = {diff[-1]:+.4f}; largest T - G "
            f"{diff.max():+.4f}, smallest {diff.min():+.4f}). S3: G is slightly better early, T better later.",
        ]
    return "\n".join(lines), table
