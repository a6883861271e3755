"""``boltzkit mixing MODEL``: how fast do samplers mix on a model? Energy autocorrelation times.

Each operator of ``--samplers`` (default ``gibbs,flip``: G and T of Brügge, Fischer & Igel 2013,
"S3") runs ``--chains`` chains for ``--burn-in`` unrecorded and then ``--steps`` recorded sweeps from
the same uniform start; the joint energy after every sweep is the series (S3 Eq. 16). The integrated
autocorrelation time ``tau = 1 + 2 sum_dt R(dt)`` is estimated by the AR fit S3 uses (Thompson
2010), Sokal's window and Geyer's initial monotone sequence (:mod:`boltzkit.diagnostics.autocorrelation`);
a windowed estimate from chains shorter than 50 tau is flagged, and so is an AR time whose model sums
to far less than the chains' autocorrelations at some window up to lag :data:`SLOW_TAIL_LAGS` (a slow
tail the fit misses, such as switching between modes: ``misses_slow_tail`` in the AR estimate's record,
with ``slow_tail_z`` standard errors at window ``slow_tail_window``), and chains still correlated
at that lag, where the check cannot see the tail (``tail_undecayed``, Bartlett's test). The windowed
estimates and the checks pool the chains' autocorrelation functions, centred on the chains' common mean
(``--center pooled``; ``chain``: each on its own, as emcee, which biases them low). ``--out FILE.npz``
keeps the traces (one array per operator, ``(n_chains, n_steps)``), which ``boltzkit plot acf
FILE.npz`` draws.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from boltzkit._numerics import make_generator
from boltzkit.atomic import atomic_open
from boltzkit.cli.common import (
    DeviceOpt,
    ForceOpt,
    JsonFlag,
    ModelArg,
    ProgressFlag,
    SeedOpt,
    check_output,
    device_from,
    emit,
    fmt,
    show_progress,
    warn,
)
from boltzkit.cli.stack import is_stack_model
from boltzkit.diagnostics.autocorrelation import (
    ESTIMATORS,
    RELIABLE_LENGTHS,
    SLOW_TAIL_Z,
    acf_sum,
    autocorrelation,
    check_center,
    energy_trace,
    integrated_time,
    slow_tail_excess,
    tail_undecayed,
)
from boltzkit.errors import BoltzkitError
from boltzkit.io import load_model
from boltzkit.models.mixture import MixtureOfBernoullis
from boltzkit.samplers import make_operator

#: Lags over which the chains' autocorrelations are summed to check the AR fit (fewer when the
#: chains are shorter): S3's lags in its Fig. 4.
SLOW_TAIL_LAGS = 2_000


def _length_reason(tau: float, steps: int) -> str:
    """Why an estimate the length rule failed is unreliable (its own reason is about more than the
    length: ``IntegratedTime.reason``), as its record and the warning say it."""
    if not math.isfinite(tau):
        return (
            "the AR fit is not stationary (tau infinite): the chains are too short for it, or still "
            "drifting; run longer chains, or use the Sokal or Geyer estimate"
        )
    if tau <= 0:
        return (
            f"tau is not positive ({fmt(tau, 2)}): the autocorrelation alternates in sign and the window "
            "stopped inside it, so that estimate says nothing; use the Geyer estimate (it pairs the lags)"
        )
    need = fmt(RELIABLE_LENGTHS * tau, 0)
    return (
        f"the chains' {steps} steps are fewer than {RELIABLE_LENGTHS:.0f} tau ({need}): the estimate is "
        "biased low; run more --steps"
    )


def _operators(samplers: str) -> list[str]:
    names = [s.strip() for s in samplers.split(",") if s.strip()]
    if not names or len(set(names)) != len(names):
        raise BoltzkitError(
            "--samplers needs distinct operator names separated by commas",
            got=repr(samplers),
            expected="e.g. gibbs,flip or gibbs,blend:0.5,pt:10",
        )
    for name in names:
        make_operator(name)  # a clear error for an unknown operator, before any work
    return names


def command(
    model: ModelArg,
    samplers: Annotated[
        str,
        typer.Option(
            "--samplers",
            help="Operators to compare, comma-separated: gibbs, flip, blend:A, A+B, A*N, pt:T[:INNER][@K].",
        ),
    ] = "gibbs,flip",
    chains: Annotated[int, typer.Option("--chains", min=1, help="Independent chains per operator.")] = 10,
    steps: Annotated[int, typer.Option("--steps", min=10, help="Recorded sweeps per chain.")] = 10_000,
    burn_in: Annotated[
        int, typer.Option("--burn-in", min=0, help="Sweeps run first and not recorded.")
    ] = 1000,
    method: Annotated[
        str, typer.Option("--method", help="The tau estimate printed first: ar (S3's), sokal or geyer.")
    ] = "ar",
    center: Annotated[
        str,
        typer.Option(
            "--center",
            help="How the chains are centred for the Sokal and Geyer times and the ACF checks: pooled (on "
            "their common mean: no bias from each chain's own mean, and chains stuck apart count as "
            "correlated) or chain (each on its own mean, as emcee; low by a fraction of about "
            "10 tau / steps).",
        ),
    ] = "pooled",
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Keep the energy traces in FILE.npz (for boltzkit plot acf)."),
    ] = None,
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    force: ForceOpt = False,
    as_json: JsonFlag = False,
    progress: ProgressFlag = None,
) -> None:
    """Estimate the energy autocorrelation time of each sampler on MODEL (S3, Table 2)."""
    check_output(out, "--out", force=force)
    if method not in ESTIMATORS:
        raise BoltzkitError(
            "unknown autocorrelation-time estimator", got=repr(method), expected=", ".join(ESTIMATORS)
        )
    check_center(center)
    if out is not None and out.suffix.lower() != ".npz":
        raise BoltzkitError(
            "the energy traces are written as .npz", got=str(out), expected="a file ending in .npz"
        )
    names = _operators(samplers)
    dev = device_from(device)
    rbm, _ = load_model(model, device=dev)
    if is_stack_model(rbm):
        raise BoltzkitError(
            "mixing measures Markov chains on a Boltzmann machine",
            got=f"a {type(rbm).__name__}",
            hint="a mixture of Bernoullis draws independent samples: there is no chain to measure."
            if isinstance(rbm, MixtureOfBernoullis)
            else "a DBN's chains run in its top RBM: save it (save_model(dbn.top, FILE) in Python) and "
            "measure that file.",
        )
    t0 = time.perf_counter()
    traces: dict[str, np.ndarray] = {}
    taus: dict[str, dict[str, Any]] = {}
    tail_lags = min(SLOW_TAIL_LAGS, steps - 1)
    for name in names:
        # the same seed for every operator: the same uniform start
        trace = energy_trace(
            rbm,
            name,
            n_chains=chains,
            n_steps=steps,
            burn_in=burn_in,
            generator=make_generator(seed, dev),
            progress=show_progress(progress),
        ).numpy()
        traces[name] = trace
        taus[name] = {}
        for est in ESTIMATORS:
            res = integrated_time(trace, est, center=center)
            taus[name][est] = {
                "tau": res.tau,
                "reliable": res.reliable,
                "reason": res.reason if res.reliable or res.reason else _length_reason(res.tau, steps),
                "window": res.window,
                "order": res.order,
            }
        acf = autocorrelation(trace, tail_lags, center=center)
        taus[name]["ar"]["acf_last"] = float(acf[-1])
        taus[name]["ar"]["acf_sum"] = acf_sum(acf)
        ar = taus[name]["ar"]
        excess, window = slow_tail_excess(ar["tau"], acf, chains * steps)
        ar["slow_tail_z"], ar["slow_tail_window"] = excess, window
        ar["misses_slow_tail"] = excess > SLOW_TAIL_Z
        ar["tail_undecayed"] = tail_undecayed(acf, chains * steps)
        if ar["misses_slow_tail"]:  # the fit is shown wrong by the chains' own correlations: unreliable
            slow = (
                f"the chains' autocorrelations summed to lag {window} lie {fmt(excess, 1)} standard errors "
                f"above what the AR fit holds (to lag {tail_lags} they sum to {fmt(ar['acf_sum'], 2)}, "
                f"against its tau {fmt(ar['tau'], 2)}): the chains stay correlated beyond what the fit "
                "holds (slow switching between modes?), so it understates how slowly they mix, and "
                "Sokal's and Geyer's sums, whose windows may stop before that tail has decayed, can "
                "understate it too; run longer chains, and look at the autocorrelation function "
                "(--out, then boltzkit plot acf)"
            )
            ar.update(reliable=False, reason=slow if ar["reason"] is None else f"{ar['reason']}; and {slow}")
    seconds = time.perf_counter() - t0
    if out is not None:
        with atomic_open(out, "wb") as f:
            np.savez(f, **{f"energy_{i}": t for i, t in enumerate(traces.values())}, samplers=np.array(names))
    for n in names:  # each reason once per sampler, with the estimators it holds for
        by_reason: dict[str, list[str]] = {}
        for est, r in taus[n].items():
            if r["reason"]:
                by_reason.setdefault(r["reason"], []).append(est)
        for reason, ests in by_reason.items():
            warn(f"{n} ({', '.join(ests)}): tau is unreliable: {reason}")
    negative = [  # (where the record's own reason is not already this one)
        f"{n} ({est}: {fmt(r['tau'], 2)})"
        for n in names
        for est, r in taus[n].items()
        if r["tau"] <= 0 and not str(r["reason"]).startswith("tau is not positive")
    ]
    if negative:
        warn(
            f"tau is not positive for {', '.join(negative)}: the autocorrelation alternates in sign and "
            "the window stopped inside it, so that estimate says nothing; use --method geyer (it pairs "
            "the lags)"
        )
    if chains == 1:
        warn(
            "one chain: the checks between chains (their means' spread, their own sums) cannot run, so a "
            "chain that stays in one mode passes as reliable; run several (--chains, default 10)"
        )
    slow = [n for n in names if taus[n]["ar"]["tail_undecayed"]]
    undecayed = [f"{n} (R = {fmt(taus[n]['ar']['acf_last'], 2)})" for n in slow]
    if undecayed:
        warn(
            f"the autocorrelation at lag {tail_lags} is still well above zero for {', '.join(undecayed)}: "
            "the chains have not decorrelated within those lags, so the slow-tail check cannot see past "
            "them and the AR tau is unverified; trust the larger of the AR and Sokal estimates, and run "
            "more --steps"
        )
    record: dict[str, Any] = {
        "model": str(model),
        "samplers": names,
        "n_chains": chains,
        "n_steps": steps,
        "burn_in": burn_in,
        "center": center,
        "seed": seed,
        "device": str(dev),
        "tau": {n: taus[n][method]["tau"] for n in names},
        "tau_method": method,
        "tau_reliable": {n: taus[n][method]["reliable"] for n in names},  # reasons under estimates
        "estimates": taus,
        "between_chains_checked": chains > 1,
        "out": None if out is None else str(out),
        "seconds": seconds,
    }

    def human() -> str:
        rows = [f"integrated autocorrelation time of the energy ({chains} chains x {steps} sweeps):"]
        for n in names:
            others = ", ".join(
                f"{e} {fmt(taus[n][e]['tau'], 2)}" + ("" if taus[n][e]["reliable"] else " unreliable")
                for e in ESTIMATORS
                if e != method
            )
            mark = " (unreliable: see the warning)" if not taus[n][method]["reliable"] else ""
            rows.append(f"  {n}: tau = {fmt(taus[n][method]['tau'], 2)} ({method}; {others}){mark}")
        if len(names) > 1:
            ref = taus[names[0]][method]["tau"]
            for n in names[1:]:
                if ref <= 0 or taus[n][method]["tau"] <= 0:
                    rows.append(f"  {n} vs {names[0]}: not compared (a tau that is not positive)")
                    continue
                if not (taus[names[0]][method]["reliable"] and taus[n][method]["reliable"]):
                    rows.append(f"  {n} vs {names[0]}: not compared (an unreliable tau: see the warning)")
                    continue
                gain = 100.0 * (ref - taus[n][method]["tau"]) / ref
                rows.append(
                    f"  {n} vs {names[0]}: {fmt(abs(gain), 2)} % {'shorter' if gain >= 0 else 'longer'}"
                )
        rows.append(f"in {fmt(seconds, 2)} s" + ("" if out is None else f" -> {out}"))
        return "\n".join(rows)

    emit(record, as_json=as_json, human=human)
