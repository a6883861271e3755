"""``boltzkit logz MODEL``: the log partition function of a model file.

Exact enumeration for small models, AIS and its relatives (reverse AIS, the forward/reverse
sandwich, simple importance sampling, bridge sampling) for any size. With ``--relative-to A`` it
estimates ``log Z_MODEL - log Z_A`` by annealing from one RBM to the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from boltzkit.cli.common import (
    BaseRateOpt,
    BetasOpt,
    ChainsOpt,
    DataDirOpt,
    DeviceOpt,
    JsonFlag,
    LogZMethod,
    LogZOptions,
    MaxBitsOpt,
    ModelArg,
    ProgressFlag,
    SamplerOpt,
    SeedOpt,
    SweepsOpt,
    device_from,
    emit,
    estimate,
    fmt,
    jsonable,
    show_progress,
    warn_if_unreliable,
)
from boltzkit.io import load_model, save_result_json


def _summary(record: dict[str, Any]) -> str:
    """Human-readable lines for a log Z record."""
    lines = []
    if record.get("log_ratio") is not None:
        lines.append(
            f"log Z_B/Z_A ({record['method']}): {fmt(record['log_ratio'])}  "
            f"[{fmt(record.get('log_ratio_minus_3sigma'))}, {fmt(record.get('log_ratio_plus_3sigma'))}] (±3σ)"
        )
    if record.get("log_z") is not None:
        line = f"log Z ({record['method']}): {fmt(record['log_z'])}"
        if record["method"] != "exact":
            line += (
                f"  [{fmt(record.get('log_z_minus_3sigma'))}, {fmt(record.get('log_z_plus_3sigma'))}] (±3σ)"
            )
        lines.append(line)
    if record.get("log_z_upper") is not None or record.get("log_z_lower") is not None:
        lines.append(
            f"sandwich: forward (lower) {fmt(record.get('log_z_lower'))}, reverse (upper) "
            f"{fmt(record.get('log_z_upper'))}, gap {fmt(record.get('gap'))} ({record.get('bound', '')})"
        )
    if record.get("ess") is not None:
        lines.append(
            f"chains: {record.get('n_chains')}, ESS: {fmt(record['ess'], 1)}, steps: {record.get('n_betas')}"
        )
    lines.append(f"time: {fmt(record.get('seconds'), 2)} s")
    return "\n".join(lines)


def command(
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
    relative_to: Annotated[
        Path | None,
        typer.Option("--relative-to", help="Estimate log Z_MODEL - log Z_A for this model file A instead."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the result to this JSON file.")
    ] = None,
    as_json: JsonFlag = False,
    progress: ProgressFlag = None,
) -> None:
    """Estimate log Z of MODEL (exactly, or with AIS and its relatives)."""
    dev = device_from(device)
    rbm, metadata = load_model(model, device=dev)
    reference = load_model(relative_to, device=dev)[0] if relative_to is not None else None
    opts = LogZOptions(method, chains, betas, sweeps, sampler, base_rate_data, seed, max_bits)
    result = estimate(
        rbm,
        opts,
        device=dev,
        progress=show_progress(progress),
        data_dir=data_dir,
        relative_to=reference,
        recorded_data=metadata.get("data"),
    )
    record: dict[str, Any] = {**result.to_dict(), "model": str(model)}
    if relative_to is not None:
        record["relative_to"] = str(relative_to)
    if out is not None:
        save_result_json(jsonable(record), out)
        record["out"] = str(out)
    warn_if_unreliable(record)
    emit(record, as_json=as_json, human=lambda: _summary(record))
