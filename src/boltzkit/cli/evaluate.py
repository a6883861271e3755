"""``boltzkit evaluate MODEL --data DATA``: mean log-probability of a data set under a model.

``log p(v) = log p*(v) - log Z``: ``log p*(v)`` is exact for RBMs and SRBMs (the hidden units sum
out) and for models whose remaining hidden units can be enumerated, else the mean-field lower
bound (``--log-p``); ``log Z`` comes from ``--logz`` (exact enumeration, an AIS-type estimate,
whose band carries over to the mean log-probability, or a variational bound or approximation).
The JSON's ``"bound"`` says what the mean is: ``"exact"`` (``log Z`` exact too), ``"estimate"``
(exact ``log p*``, sampled ``log Z``: its band carries the error), ``"lower"`` (a mean-field ``log p*``,
or TRW's upper bound on ``log Z``), ``"upper"`` (mean-field's lower bound on ``log Z``) or
``"none"`` (:func:`~boltzkit.estimators.result.log_prob_bound`; see
:mod:`boltzkit.estimators.likelihood`).
"""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from boltzkit.atomic import atomic_open
from boltzkit.cli.common import (
    AlphabetOpt,
    BaseRateOpt,
    BetasOpt,
    ChainsOpt,
    DataDirOpt,
    DataOpt,
    DeviceOpt,
    ForceOpt,
    JsonFlag,
    LogZMethod,
    LogZOptions,
    MaxBitsOpt,
    ModelArg,
    ProgressFlag,
    SamplerOpt,
    SeedOpt,
    SweepsOpt,
    band_text,
    check_alphabet,
    check_output,
    deterministic_log_z,
    device_from,
    emit,
    estimate,
    fmt,
    in_ising_convention,
    log_prob_what,
    log_z_lines,
    option_given,
    recorded_data_seed,
    show_progress,
    training_overlap,
    training_overlap_text,
    unit_dataset,
    unit_interval_option,
    unit_visible,
    warn,
    warn_if_unreliable,
    warn_ignored,
)
from boltzkit.cli.logz import warn_unused
from boltzkit.cli.stack import emit_evaluation, evaluate_stack, is_stack_model
from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.likelihood import VISIBLE_METHODS, dataset_log_prob
from boltzkit.io import load_model
from boltzkit.models.ising import IsingModel
from boltzkit.models.unit_rbm import UnitRBM

PER_EXAMPLE_FORMATS = (".npy", ".txt", ".csv")

LogPMethod = Enum("LogPMethod", {k: k for k in VISIBLE_METHODS}, type=str)


def _write_per_example(path: Path, values: np.ndarray) -> None:
    """``log p(v_n)`` to ``.npy`` (float64) or text (one value a line), atomically."""

    if path.suffix.lower() == ".npy":
        with atomic_open(path, "wb") as f:
            np.save(f, values)
    else:
        with atomic_open(path, "w") as f:
            np.savetxt(f, values, fmt="%.10g")


def _summary(record: dict[str, Any]) -> str:
    where = f"{record['data']} ({record['split']}, n={record['n']})"
    line = f"{log_prob_what(record)} on {where}: {fmt(record['mean_log_prob'])}"
    sandwich = record["log_z_method"] == "sandwich"
    if sandwich:
        line += "  (with the forward end of log Z)"
    if record["log_z_method"] != "exact" and not deterministic_log_z(record):
        line += "  " + band_text(record, "mean_log_prob", note="log Z ±3σ")
    lines = [line]
    if (
        sandwich
        and record.get("mean_log_prob_conservative") is not None
        and record.get("reliable") is not False
    ):
        lines.append(
            f"  with the reverse (upper) end of log Z: {fmt(record['mean_log_prob_conservative'])} "
            "(the conservative figure: the truth lies between the two while the ends agree)"
        )
    if record.get("data_stderr") is not None:
        lines.append(
            f"  the data's own sampling error (standard error over the {record['n']} examples): "
            f"±{fmt(record['data_stderr'])}"
        )
    elif record.get("data_stderr_note"):
        lines.append(f"  the data's own sampling error: n/a ({record['data_stderr_note']})")
    if (overlap := training_overlap_text(record)) is not None:
        lines.append(overlap)
    if record.get("convention"):
        lines.append(
            f"convention: {record['convention']} (in {{0, 1}} units: log Z {fmt(record['log_z_binary'])})"
        )
    lines += log_z_lines("log Z", record["log_z_method"], record["log_z"], record)
    lines.append(f"time: {fmt(record['seconds'], 2)} s")
    return "\n".join(lines)


def _warn_damping_unused(ctx: typer.Context, log_p: str, record: dict[str, Any]) -> None:
    """``--damping`` given where the mean field damps nothing (``record["damping"]`` is ``None``):
    ``log p*(v)`` exact, or no free layer with laterals (the only layers damped)."""
    if not option_given(ctx, "damping") or record.get("damping") is not None:
        return
    if record.get("mean_field_iterations") is None:
        why = None if log_p == "exact" else "log p*(v) is exact here: no mean field to damp"
    else:
        why = "no hidden layer has lateral connections, the only layers the mean field damps"
    warn_ignored(f"--log-p {log_p}", ["--damping"], why)


def command(
    ctx: typer.Context,
    model: ModelArg,
    data: DataOpt,
    split: Annotated[str, typer.Option("--split", help="train, valid or test.")] = "test",
    logz: Annotated[LogZMethod, typer.Option("--logz", help="How log Z is obtained.")] = LogZMethod["exact"],
    chains: ChainsOpt = 100,
    betas: BetasOpt = None,
    sweeps: SweepsOpt = 1,
    sampler: SamplerOpt = "gibbs",
    base_rate_data: BaseRateOpt = None,
    data_dir: DataDirOpt = None,
    seed: SeedOpt = 0,
    data_seed: Annotated[
        int | None,
        typer.Option(
            "--data-seed",
            min=0,
            help="Seed of a generated data set (mnist-patches, artificial-modes) [default: the seed the "
            "model was trained with, as recorded, so that it sees the data train saw; else --seed].",
        ),
    ] = None,
    device: DeviceOpt = "auto",
    max_bits: MaxBitsOpt = None,
    log_p: Annotated[
        LogPMethod,
        typer.Option(
            "--log-p",
            help="log p*(v): auto (exact when the hidden units sum out or few must be enumerated, else the "
            "mean-field lower bound), exact, or mean-field.",
        ),
    ] = LogPMethod["auto"],
    damping: Annotated[
        float,
        unit_interval_option(
            "--damping",
            help="Mean-field damping of hidden layers with lateral connections, in [0, 1) (no other "
            "layer is damped).",
        ),
    ] = 0.5,
    per_example: Annotated[
        Path | None,
        typer.Option("--per-example", help="Write every log p(v) to FILE (.npy, .txt or .csv)."),
    ] = None,
    samples: Annotated[
        int,
        typer.Option("--samples", min=1, help="DBN: samples M of the recognition model per data vector."),
    ] = 5,
    alphabet: AlphabetOpt = None,
    force: ForceOpt = False,
    as_json: JsonFlag = False,
    progress: ProgressFlag = None,
) -> None:
    """Mean log-probability of a data set under MODEL, with log Z exact or estimated (a DBN: the
    lower bound of S&M 2008 Eqs. 22-24 with its error split; a mixture: exact)."""
    check_output(per_example, "--per-example", force=force)

    if per_example is not None and per_example.suffix.lower() not in PER_EXAMPLE_FORMATS:
        raise BoltzkitError(
            "unknown --per-example file type",
            got=str(per_example),
            expected="a file ending in " + ", ".join(PER_EXAMPLE_FORMATS),
        )
    t0 = time.perf_counter()
    # the sampling options of log Z, given with a --logz that samples nothing (seed and max-bits
    # also serve the data and log p here)
    warn_unused(
        ctx, logz.value, option="--logz", among=("chains", "betas", "sweeps", "sampler", "base_rate_data")
    )
    dev = device_from(device)
    rbm, metadata = load_model(model, device=dev)
    units_of = unit_visible(rbm)
    if data_seed is None:  # generated data sets are drawn from the seed: the one train drew them with
        recorded = recorded_data_seed(metadata)
        data_seed = seed if recorded is None else recorded
    if alphabet is not None and units_of is None:
        check_alphabet(rbm, alphabet)  # a model of binary units reads no sequences
    # a split asked for by name: data without one of its own warns that all of it is used
    kw = {"split": split, "data_dir": data_dir, "seed": data_seed, "named_split": option_given(ctx, "split")}
    if units_of is not None:  # real values or category indices, checked by the unit type
        dataset = unit_dataset(units_of, data, **kw, alphabet=alphabet)
    else:
        dataset = load_dataset(data, **kw, n_visible=rbm.n_visible)
    # how much of the data the model was trained on (its training split drawn from its own seed)
    overlap = training_overlap(rbm, metadata, dataset, data_dir=data_dir, seed=data_seed)
    opts = LogZOptions(logz, chains, betas, sweeps, sampler, base_rate_data, seed, max_bits)
    if is_stack_model(rbm):
        given = [f for f, key in (("--log-p", "log_p"), ("--damping", "damping")) if option_given(ctx, key)]
        if given:
            warn_ignored("evaluating a stacked model (DBN or mixture)", given)
        if getattr(rbm, "kind", None) == "mixture":  # normalised: nothing about log Z applies
            log_z_options = (
                "logz",
                "chains",
                "betas",
                "sweeps",
                "sampler",
                "base_rate_data",
                "max_bits",
                "samples",
            )
            ignored = [f"--{key.replace('_', '-')}" for key in log_z_options if option_given(ctx, key)]
            if ignored:
                warn_ignored("a mixture (its log p(v) is exact: no log Z to estimate)", ignored)
        record, values = evaluate_stack(
            rbm, metadata, dataset, model_path=model, opts=opts, samples=samples, device=dev,
            progress=show_progress(progress), data_dir=data_dir, per_example=per_example is not None, t0=t0,
        )  # fmt: skip
        record["data_seed"] = data_seed
        record["training_data"] = overlap
        record["damping"] = None
        if per_example is not None:
            _write_per_example(per_example, values.numpy())
            record["per_example_file"] = str(per_example)
        warn_if_unreliable(record.get("logz", {}))
        emit_evaluation(record, as_json=as_json, default_human=lambda: _summary(record))
        return
    log_z = estimate(
        rbm,
        opts,
        device=dev,
        progress=show_progress(progress),
        data_dir=data_dir,
        metadata=metadata,
    )
    if isinstance(rbm, UnitRBM) and log_p.value == "mean-field":
        warn("an RBM's hidden units sum out exactly: log p*(v) is exact, --log-p mean-field not needed")
    result = dataset_log_prob(
        rbm, dataset.x, log_z, per_example=per_example is not None, method=log_p.value, damping=damping
    )
    if per_example is not None:
        _write_per_example(per_example, result.per_example.numpy())
    record: dict[str, Any] = {
        **result.to_dict(),
        "model": str(model),
        "data": dataset.name,
        "split": dataset.split,
        "data_seed": data_seed,
        "training_data": overlap,
        "seconds": time.perf_counter() - t0,
        "logz": log_z.to_dict(),
    }
    record["damping"] = record.get("damping")  # None: nothing was damped (exact log p*, or no laterals)
    _warn_damping_unused(ctx, log_p.value, record)
    if per_example is not None:
        record["per_example_file"] = str(per_example)
    if isinstance(rbm, IsingModel):  # log Z (and log p*) in the model's +-1 convention, as logz reports it
        record = in_ising_convention(record, rbm.log_z_constant)
    warn_if_unreliable(record)
    if record.get("mean_field_converged") is False:
        warn("the mean-field iteration did not converge; the bound holds but may be loose (raise --max-iter)")
    emit(record, as_json=as_json, human=lambda: _summary(record))
