"""``boltzkit train``: train an RBM by CD-k or PCD-k and save it with its settings and metrics.

After training, when the smaller layer has at most ``--exact-max-bits`` units, ``log Z`` and the
mean log-likelihoods of the training data (and of the validation and test data, when there are
any) are computed exactly; the reconstruction error is always reported.
"""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import torch
import typer

from boltzkit.cli.common import (
    DataDirOpt,
    DataOpt,
    DeviceOpt,
    JsonFlag,
    ProgressFlag,
    SamplerOpt,
    SeedOpt,
    device_from,
    emit,
    fmt,
    non_negative_float_option,
    positive_float_option,
    show_progress,
)
from boltzkit.data import Dataset, load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.likelihood import dataset_log_prob
from boltzkit.io import save_model
from boltzkit.learning import train_rbm


class ModelKind(str, Enum):
    """Models ``train`` can fit."""

    rbm = "rbm"


class TrainMethod(str, Enum):
    """Learning rules."""

    cd = "cd"
    pcd = "pcd"


def _test_data(
    spec: str, test_spec: str, train_x: torch.Tensor, *, data_dir: Path | None, seed: int
) -> Dataset | None:
    """The held-out data for the final metrics: ``--test-data``, or with ``auto`` the ``test``
    split of ``--data`` when it holds other examples than the training split (a file, or Bars
    and Stripes, gives the same rows for every split)."""
    if test_spec == "none":
        return None
    n_visible = int(train_x.shape[1])
    if test_spec != "auto":
        return load_dataset(test_spec, split="test", data_dir=data_dir, seed=seed, n_visible=n_visible)
    test = load_dataset(spec, split="test", data_dir=data_dir, seed=seed, n_visible=n_visible)
    return None if torch.equal(test.x, train_x) else test


def _summary(record: dict[str, Any]) -> str:
    settings = record["settings"]
    epochs = f"{settings['epochs']} epoch" + ("s" if settings["epochs"] != 1 else "")
    lines = [
        f"trained RBM {record['n_visible']}x{record['n_hidden']} on {record['data']} "
        f"({settings['method']}-{settings['k_schedule'] or settings['k']}, {epochs}) "
        f"in {fmt(record['seconds'], 1)} s -> {record['out']}",
        f"reconstruction error: {fmt(record.get('recon_error'))}",
    ]
    if record.get("log_z") is not None:
        lines.append(f"log Z (exact): {fmt(record['log_z'])}")
        for split in ("train", "valid", "test"):
            if record.get(f"{split}_log_lik") is not None:
                lines.append(f"mean log p(v), {split}: {fmt(record[f'{split}_log_lik'])} nats")
    else:
        lines.append(
            "log Z not computed (model too large to enumerate); "
            f"run: boltzkit evaluate {record['out']} --data {record['data']} --logz ais"
        )
    return "\n".join(lines)


def command(
    data: DataOpt,
    out: Annotated[Path, typer.Option("--out", help="Where to save the model (.safetensors or .npz).")],
    hidden: Annotated[int, typer.Option("--hidden", min=1, help="Number of hidden units.")] = 25,
    model: Annotated[ModelKind, typer.Option("--model", help="Model to train.")] = ModelKind.rbm,
    method: Annotated[
        TrainMethod, typer.Option("--method", help="CD-k or persistent CD-k.")
    ] = TrainMethod.cd,
    k: Annotated[int, typer.Option("--k", min=1, help="Sampling sweeps per update.")] = 1,
    k_schedule: Annotated[
        str | None,
        typer.Option("--k-schedule", help="k over epochs: 'K_START:K_END', 'linear:1:25', 'geometric:1:25'."),
    ] = None,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the training data.")] = 1,
    lr: Annotated[float, positive_float_option("--lr", help="Learning rate (> 0).")] = 0.05,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Examples per update.")] = 100,
    sampler: SamplerOpt = "gibbs",
    chains: Annotated[int, typer.Option("--chains", min=1, help="Persistent chains (PCD only).")] = 100,
    momentum: Annotated[
        float, non_negative_float_option("--momentum", help="SGD momentum, in [0, 1).")
    ] = 0.0,
    weight_decay: Annotated[
        float, non_negative_float_option("--weight-decay", help="L2 penalty on the weights.")
    ] = 0.0,
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    data_dir: DataDirOpt = None,
    valid_data: Annotated[
        str | None,
        typer.Option(
            "--valid-data", help="Validation data (its 'valid' split), scored every epoch when exact."
        ),
    ] = None,
    test_data: Annotated[
        str,
        typer.Option(
            "--test-data",
            help="Data scored at the end: 'auto' (the test split of --data, when it differs from "
            "the training data), 'none', or a data spec.",
        ),
    ] = "auto",
    exact_max_bits: Annotated[
        int,
        typer.Option(
            "--exact-max-bits",
            min=0,
            max=30,
            help="Exact log Z and log-likelihoods up to 2^N states (0: never).",
        ),
    ] = 20,
    checkpoint: Annotated[
        Path | None, typer.Option("--checkpoint", help="Checkpoint file [default: OUT.ckpt when needed].")
    ] = None,
    checkpoint_every: Annotated[
        int, typer.Option("--checkpoint-every", min=0, help="Checkpoint every N epochs (0: only at the end).")
    ] = 0,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from the checkpoint when it exists.")
    ] = False,
    history: Annotated[
        Path | None, typer.Option("--history", help="Write per-epoch records to FILE.csv and FILE.json.")
    ] = None,
    as_json: JsonFlag = False,
    progress: ProgressFlag = None,
) -> None:
    """Train an RBM on binary data and save it with its training settings and final metrics."""
    if not out.parent.is_dir():
        raise BoltzkitError("the directory of --out does not exist", got=str(out))
    dev = device_from(device)
    train = load_dataset(data, split="train", data_dir=data_dir, seed=seed)
    valid = None
    if valid_data is not None:
        valid = load_dataset(
            valid_data, split="valid", data_dir=data_dir, seed=seed, n_visible=train.n_visible
        )
    test = _test_data(data, test_data, train.x, data_dir=data_dir, seed=seed)
    if checkpoint is None and (checkpoint_every > 0 or resume):
        checkpoint = out.with_name(out.name + ".ckpt")

    t0 = time.perf_counter()
    rbm, hist = train_rbm(
        train.x,
        n_hidden=hidden,
        method=method.value,
        k=k,
        k_schedule=k_schedule,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        sampler=sampler,
        n_chains=chains,
        momentum=momentum,
        weight_decay=weight_decay,
        seed=seed,
        device=dev,
        valid_x=None if valid is None else valid.x,
        checkpoint_path=checkpoint,
        checkpoint_every=checkpoint_every,
        resume=resume,
        history_path=history,
        progress=show_progress(progress),
        exact_ll_max_bits=exact_max_bits,
    )
    seconds = time.perf_counter() - t0

    last = dict(hist.last or {})
    metrics: dict[str, Any] = {
        key: last.get(key) for key in ("recon_error", "log_z", "train_log_lik", "valid_log_lik")
    }
    metrics["test_log_lik"] = None
    if test is not None and metrics["log_z"] is not None:
        metrics["test_log_lik"] = dataset_log_prob(rbm, test.x, metrics["log_z"]).mean_log_prob
    settings = {
        "model": model.value,
        "method": method.value,
        "k": k,
        "k_schedule": k_schedule,
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "sampler": sampler,
        "chains": chains if method is TrainMethod.pcd else None,
        "momentum": momentum,
        "weight_decay": weight_decay,
        "seed": seed,
        "device": str(dev),
        "data": train.name,
        "n_train": train.n_samples,
        "valid_data": None if valid is None else valid.name,
        "test_data": None if test is None else test.name,
    }
    save_model(
        rbm,
        out,
        metadata={
            "data": train.name,
            "image_shape": None if train.image_shape is None else list(train.image_shape),
            "training": settings,
            "metrics": metrics,
            "training_seconds": seconds,
        },
    )
    record = {
        "out": str(out),
        "data": train.name,
        "n_visible": rbm.n_visible,
        "n_hidden": rbm.n_hidden,
        "seconds": seconds,
        **metrics,
        "settings": settings,
        "history": hist.to_list(),
    }
    emit(record, as_json=as_json, human=lambda: _summary(record))
