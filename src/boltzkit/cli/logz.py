"""``boltzkit logz MODEL``: the log partition function of a model file.

Exact enumeration for small models, AIS and its relatives (reverse AIS, the forward/reverse
sandwich, simple importance sampling, bridge sampling) for any size. With ``--relative-to A`` it
estimates ``log Z_MODEL - log Z_A`` by annealing from one RBM to the other.
``--out FILE --keep-weights`` keeps the raw log-weights in the record (``boltzkit plot logz-runs``);
``--trace FILE.npz`` records the course of an AIS run (``boltzkit plot ais-course``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from boltzkit.cli.common import (
    BaseRateOpt,
    BetasOpt,
    ChainsOpt,
    DataDirOpt,
    DeviceOpt,
    ForceOpt,
    JsonFlag,
    LogZMethod,
    LogZOptions,
    MaxBitsOpt,
    ModelArg,
    ProgressFlag,
    RhoChoice,
    SamplerOpt,
    SeedOpt,
    StartChainStepsOpt,
    SweepsOpt,
    band_text,
    check_output,
    device_from,
    emit,
    estimate,
    fmt,
    in_ising_convention,
    jsonable,
    non_negative_float_option,
    option_given,
    positive_float_option,
    show_progress,
    unit_visible,
    warn,
    warn_if_unreliable,
    warn_ignored,
    withhold_bands,
)
from boltzkit.cli.stack import is_stack_model, stack_log_z
from boltzkit.cli.trace import traced_log_z
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.exact import enumeration_bits, exact_log_z
from boltzkit.io import load_model, save_result_json
from boltzkit.models.ising import IsingModel
from boltzkit.variational.trw import FW_STEPS

#: ``logz`` puts the exact log Z beside an estimate when at most this many units must be enumerated.
EXACT_BESIDE_BITS = 20


def _finite_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _judge_by_the_truth(record: dict[str, Any]) -> None:
    """An estimate whose ±3σ band misses the exact log Z enumerated beside it is unreliable (a
    missed mode, or an error larger than the runs' spread shows), whatever its weights say."""
    exact = record["exact_log_z"]
    lo, hi = (_finite_or_none(record.get(f"log_z_{end}_3sigma")) for end in ("minus", "plus"))
    if record.get("reliable") is not True or (lo is None and hi is None):
        return
    if (lo is None or exact >= lo) and (hi is None or exact <= hi):
        return
    reason = (
        f"the exact log Z enumerated beside it, {exact:.4f}, lies outside its ±3σ band "
        f"[{fmt(lo)}, {fmt(hi)}]: the runs missed part of the mass (a mode) or their spread "
        "understates the error"
    )
    record.update(
        reliable=False,
        reliability_reason=reason,
        advice="trust the exact value beside it; an estimate of this model needs more chains "
        "(--chains) or steps (--betas)",
    )
    record["checks"] = [*(record.get("checks") or []), {
        "name": "agrees with the exact log Z", "passed": False, "reason": reason, "advice": record["advice"],
    }]  # fmt: skip


def _summary(record: dict[str, Any]) -> str:
    """Human-readable lines for a log Z record: the estimate, both ends of a sandwich, what a
    reverse run's upper end is worth, the checks, and the verdict (as in the JSON)."""
    lines = []
    of = f" of the {record['of']}" if record.get("of") else ""  # a DBN's log Z is its top RBM's
    if record.get("log_ratio") is not None:
        lines.append(
            f"log Z_B/Z_A{of} ({record['method']}): {fmt(record['log_ratio'])}  "
            + band_text(record, "log_ratio")
        )
    if record.get("log_z") is not None:
        line = f"log Z{of} ({record['method']}): {fmt(record['log_z'])}"
        if record.get("converged") is not None and record.get("log_z_plus_3sigma") is None:
            line += f"  (bound: {record.get('bound')}, converged: {record['converged']})"
        elif record["method"] == "sandwich":
            spans = "" if record.get("reliable") is False else "; the band spans both ends"
            line += f"  (the forward end{spans})  " + band_text(record, "log_z")
        elif record["method"] != "exact":
            line += "  " + band_text(record, "log_z")
        lines.append(line)
        if record.get("fw_stop") == "steps" and record.get("gap") is not None:  # TRW: which part stopped
            lines.append(
                f"  certified to {record['gap']:.2g} nats at its rho; rho's optimisation stopped after "
                f"{record.get('fw_steps')} Frank-Wolfe steps, duality gap {fmt(record.get('fw_gap'))} "
                "(--fw-steps for more): an upper bound either way"
            )
    if record.get("log_z_upper") is not None or record.get("log_z_lower") is not None:
        lines.append(
            f"sandwich: forward AIS {fmt(record.get('log_z_lower'))} "
            f"({record.get('lower_bound', 'lower bound')}), "
            f"reverse AIS {fmt(record.get('log_z_upper'))} ({record.get('upper_bound', 'upper bound')}), "
            f"gap {fmt(record.get('gap'))} ± {fmt(record.get('gap_stderr'))}"
        )
    elif record.get("method") == "reverse-ais" and record.get("bound"):
        lines.append(f"reverse AIS: {record['bound']}; start: {record.get('start')}")
    if record.get("ess") is not None:
        lines.append(
            f"chains: {record.get('n_chains')}, ESS: {fmt(record['ess'], 1)}, steps: {record.get('n_steps')}"
        )
    for check in record.get("checks") or []:
        if check.get("name") == "schedule halved":
            lines.append(
                f"schedule check: {check['n_steps']} steps and {check['n_chains']} chains give "
                f"{fmt(check['log_z'])} "
                f"(difference {fmt(check['difference'], 3)} ± {fmt(check['difference_stderr'], 3)}): "
                + ("converged" if check["passed"] else "NOT converged")
            )
        elif (line := _probe_line(check)) is not None:
            lines.append(line)
    if record.get("exact_log_z") is not None:
        lines.append(f"exact log Z (enumerated beside it): {fmt(record['exact_log_z'])}")
    if record.get("convention"):
        binary = f"log Z {fmt(record.get('log_z_binary'))}"
        if record.get("log_ratio_binary") is not None:
            binary += f", log Z_B/Z_A {fmt(record['log_ratio_binary'])}"
        lines.append(f"convention: {record['convention']} (in {{0, 1}} units: {binary})")
    if record.get("reliable") is not None:
        verdict = "yes" if record["reliable"] else f"NO: {record.get('reliability_reason')}"
        lines.append(f"reliable: {verdict}")
    lines.append(f"time: {fmt(record.get('seconds'), 2)} s")
    return "\n".join(lines)


def _probe_line(check: dict[str, Any]) -> str | None:
    """The line of a probe check (``boltzkit.estimators.probes``: chains of the target started
    away from where the estimate looked): how many, how long, its p-values, and whether it tested
    anything, which "reliable: yes" alone does not say. ``None`` for other checks."""
    name = str(check.get("name", ""))
    if not name.startswith("probe chains"):
        return None
    reason = str(check.get("reason") or "")
    if reason.startswith("not run"):  # said with what it would have compared (a record may hold two)
        return f"probe check ({name.removeprefix('probe chains ')}): {reason}"
    n = check.get("n_probes") or check.get("n_chains")
    if "excess_log_weight" in check:  # the importance weights of probes against the draws'
        verdict = (
            "none above the draws' weights" if check["passed"] else "FOUND weights the draws never reach"
        )
        return (
            f"probe check: {n} chains of the target started elsewhere, {check.get('sweeps')} sweeps: their "
            f"largest log-weight {check['excess_log_weight']:+.2f} nats from the draws' largest: {verdict}"
        )
    against = name.split("agree with ", 1)[-1]
    looks = check.get("looks") or [
        {
            "sweeps": check.get("sweeps"),
            "p_value": check.get("p_value"),
            "relaxing": reason.startswith("not informative"),
        }
    ]
    seen = ", ".join(
        f"{look['sweeps']:,} sweeps ("
        + ("no test" if look.get("p_value") is None else f"p = {look['p_value']:.2g}")
        + (", still relaxing" if look.get("relaxing") else "")
        + ")"
        for look in looks
    )
    if not check.get("passed"):
        verdict = "DISAGREE"
    elif reason.startswith("not informative"):
        verdict = "not informative (the probes had not relaxed)"
    else:
        verdict = "agree"
    return f"probe check: {n} chains started away from {against}, {seen}: {verdict}"


#: The methods that use an option (others would silently ignore it: a warning says so).
_SAMPLING = ("ais", "reverse-ais", "sandwich", "sis", "bridge")
_USED_BY = {
    "chains": _SAMPLING,
    "betas": ("ais", "reverse-ais", "sandwich"),
    "sweeps": ("ais", "reverse-ais", "sandwich"),
    "sampler": ("ais", "reverse-ais", "sandwich", "bridge"),
    "start_chain_steps": ("reverse-ais", "sandwich", "bridge"),
    "base_rate_data": _SAMPLING,
    "seed": (*_SAMPLING, "mean-field", "tap"),
    "max_bits": ("exact", *_SAMPLING),  # the sampling methods: the exact log Z put beside them
    "damping": ("bethe", "trw", "tap"),  # mean-field updates sequentially, undamped
    "max_iter": ("mean-field", "bethe", "trw", "tap"),
    "tol": ("mean-field", "bethe", "trw", "tap"),
    "rho": ("trw",),
}


def warn_unused(
    ctx: typer.Context, method: str, *, option: str = "--method", among: tuple[str, ...] | None = None
) -> None:
    """Warn about each option given on the command line that the log Z ``method`` does not use
    (``among``: only those options, as ``evaluate --logz`` shares some of them)."""
    unused = [
        name
        for name, users in _USED_BY.items()
        if (among is None or name in among) and method not in users and option_given(ctx, name)
    ]
    if unused:
        warn_ignored(f"{option} {method}", ["--" + name.replace("_", "-") for name in unused])


def command(
    ctx: typer.Context,
    model: ModelArg,
    method: Annotated[LogZMethod, typer.Option("--method", help="Estimator of log Z.")] = LogZMethod["exact"],
    chains: ChainsOpt = 100,
    betas: BetasOpt = None,
    sweeps: SweepsOpt = 1,
    sampler: SamplerOpt = "gibbs",
    base_rate_data: BaseRateOpt = None,
    data_dir: DataDirOpt = None,
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    max_bits: MaxBitsOpt = None,
    start_chain_steps: StartChainStepsOpt = None,
    relative_to: Annotated[
        Path | None,
        typer.Option("--relative-to", help="Estimate log Z_MODEL - log Z_A for this model file A instead."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the result to this JSON file.")
    ] = None,
    keep_weights: Annotated[
        bool,
        typer.Option(
            "--keep-weights",
            help="Keep the raw log-weights (and log_z_start) in the record of --out and --json, for "
            "boltzkit plot logz-runs.",
        ),
    ] = False,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="With --method ais: also record the course of the run (states of a few chains at chosen "
            "betas, log-weight variance along beta) in this .npz file, for boltzkit plot ais-course.",
        ),
    ] = None,
    trace_betas: Annotated[
        str, typer.Option("--trace-betas", help="Betas at which --trace keeps the chains' states.")
    ] = "0,0.5,0.9,1",
    trace_chains: Annotated[
        int, typer.Option("--trace-chains", min=1, help="Chains whose states --trace keeps.")
    ] = 16,
    damping: Annotated[
        float | None,
        non_negative_float_option(
            "--damping",
            help="Variational methods: weight of the old value in each update, in [0, 1) "
            "[default: 0.5; mean-field: sequential, undamped].",
        ),
    ] = None,
    max_iter: Annotated[
        int | None,
        typer.Option("--max-iter", min=1, help="Variational methods: most sweeps [default: per method]."),
    ] = None,
    tol: Annotated[
        float | None,
        positive_float_option(
            "--tol", help="Variational methods: convergence tolerance on the largest change [default: 1e-9]."
        ),
    ] = None,
    rho: Annotated[
        RhoChoice,
        typer.Option(
            "--rho",
            help="TRW edge probabilities: 'uniform' (uniform over spanning trees) or 'optimized' "
            "(Frank-Wolfe, S2 Sec. 5.1).",
        ),
    ] = RhoChoice["optimized"],
    fw_steps: Annotated[
        int | None,
        typer.Option(
            "--fw-steps",
            min=1,
            help=f"TRW with --rho optimized: most Frank-Wolfe steps over rho [default: {FW_STEPS}].",
        ),
    ] = None,
    force: ForceOpt = False,
    as_json: JsonFlag = False,
    progress: ProgressFlag = None,
) -> None:
    """Estimate log Z of MODEL (exactly, or with AIS and its relatives)."""
    check_output(out, "--out", force=force)
    check_output(trace, "--trace", force=force)
    dev = device_from(device)
    rbm, metadata = load_model(model, device=dev)
    reference = load_model(relative_to, device=dev)[0] if relative_to is not None else None
    warn_unused(ctx, method.value)
    if fw_steps is not None and (method.value != "trw" or rho.value != "optimized"):
        warn("--fw-steps applies to --method trw with --rho optimized (Frank-Wolfe over rho): ignored")
    opts = LogZOptions(
        method, chains, betas, sweeps, sampler, base_rate_data, seed, max_bits,
        damping=damping, max_iter=max_iter, tol=tol, rho=rho.value, fw_steps=fw_steps,
        start_chain_steps=start_chain_steps,
    )  # fmt: skip
    if trace is not None:
        units_of = unit_visible(rbm)
        if relative_to is not None or is_stack_model(rbm) or units_of is not None:
            got = "--relative-to" if relative_to is not None else "a stacked model (DBN or mixture)"
            if units_of is not None:
                got = f"{units_of.visible_units.name} visible units"
            raise BoltzkitError(
                "--trace records an AIS run from the base-rate model to a Boltzmann machine of binary units",
                got=got,
                hint="drop --trace, or trace the model's own log Z.",
            )
        result = traced_log_z(
            rbm,
            opts,
            trace,
            at=trace_betas,
            n_show=trace_chains,
            device=dev,
            progress=show_progress(progress),
            data_dir=data_dir,
            metadata=metadata,
            model_path=model,
        )
    elif is_stack_model(rbm) or is_stack_model(reference):
        # a DBN's log Z is its top RBM's; a mixture is normalised
        result = stack_log_z(
            rbm, reference, opts, device=dev, progress=show_progress(progress), data_dir=data_dir,
            metadata=metadata,
        )  # fmt: skip
    else:
        result = estimate(
            rbm,
            opts,
            device=dev,
            progress=show_progress(progress),
            data_dir=data_dir,
            relative_to=reference,
            metadata=metadata,
        )
    record: dict[str, Any] = {**result.to_dict(include_weights=keep_weights), "model": str(model)}
    if (
        opts.method.value != "exact"
        and reference is None
        and not is_stack_model(rbm)
        and enumeration_bits(rbm) <= min(EXACT_BESIDE_BITS, opts.max_bits or EXACT_BESIDE_BITS)
    ):  # cheap to enumerate: the truth beside the estimate or approximation (and in the plot of runs)
        record["exact_log_z"] = exact_log_z(rbm).log_z
        _judge_by_the_truth(record)
    if isinstance(rbm, IsingModel) or isinstance(reference, IsingModel):
        record = in_ising_convention(
            record,
            rbm.log_z_constant if isinstance(rbm, IsingModel) else 0.0,
            reference.log_z_constant if isinstance(reference, IsingModel) else 0.0,
        )
    if keep_weights and result.log_weights is not None:
        record.update(log_z_start=result.log_z_start, reciprocal=result.reciprocal, is_ratio=result.is_ratio)
    if trace is not None:
        record["trace"] = str(trace)
    if relative_to is not None:
        record["relative_to"] = str(relative_to)
    if out is not None:
        save_result_json(withhold_bands(jsonable(record)), out)  # as --json prints it
        record["out"] = str(out)
    warn_if_unreliable(record)
    emit(record, as_json=as_json, human=lambda: _summary(record))
