"""The command line for the models that are not Boltzmann machines: DBNs and mixtures of Bernoullis.

``train``, ``logz``, ``evaluate`` and ``sample`` hand these models to the functions here:

* ``train --model dbn --hidden 500,2000``: greedy layer-wise training
  (:func:`~boltzkit.learning.stacking.train_dbn`), with per-layer settings as comma lists
  (``--epochs 50,50 --k 1,3``), ``--init-transpose``, ``--layer-data samples|probs`` and
  ``--bottom MODEL`` (an RBM or DBN file for the lowest layers);
* ``train --model mixture --components 100``: EM (``--epochs`` is the most EM iterations);
* ``logz DBN``: ``log Z`` of the top RBM (base-rate data passed up the recognition model);
* ``evaluate DBN``: the lower bound of S1 Eqs. 22-24 with ``--samples M`` and its error split;
  ``evaluate MIXTURE``: the exact log-probability;
* ``sample``: Gibbs in the top RBM then a directed pass down (DBN), or ancestral samples (mixture).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzkit.cli.common import (
    VARIATIONAL_METHODS,
    LogZOptions,
    band_text,
    base_rate_data,
    deterministic_log_z,
    emit,
    fmt,
    log_prob_what,
    log_z_lines,
    sampling_kwargs,
    training_fingerprint,
    training_overlap_text,
    variational_estimate,
    warn,
)
from boltzkit.data import Dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import estimate_log_z
from boltzkit.estimators.dbn_bound import dbn_bound, dbn_exact_log_prob, top_layer_data
from boltzkit.estimators.result import Band, LogProbResult, LogZResult
from boltzkit.io import load_model, save_model
from boltzkit.learning import train_dbn, train_mixture
from boltzkit.learning.checkpoint import checkpointed_seconds
from boltzkit.learning.recipes import Recipe, get_recipe, recipe_differences, recipe_settings
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.dbn import DBN
from boltzkit.models.mixture import MixtureOfBernoullis
from boltzkit.models.rbm import RBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.samplers import sample, sample_dbn
from boltzkit.samplers.operators import TransitionOperator

#: Model kinds handled here.
STACK_KINDS = ("dbn", "mixture")

#: DBNs whose hidden layers can be enumerated (at most this many units per pair of layers) get
#: exact log-probabilities after training.
EXACT_DBN_BITS = 16
#: Most (row, state of h_1, visible term) triples the exact train/test metrics of a DBN may take
#: (about ten seconds on one core).
EXACT_DBN_WORK = 1 << 31


def is_stack_model(model: object) -> bool:
    return isinstance(model, (DBN, MixtureOfBernoullis))


def parse_list(text: str, kind: type, name: str) -> list[Any]:
    """``"50"`` or ``"50,50"``: one value, or one per layer (``none`` allowed for strings)."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or any(p == "" for p in parts):
        raise BoltzkitError(f"{name} must be values separated by commas", got=text)
    if kind is str:
        return [None if p.lower() == "none" else p for p in parts]
    try:
        return [kind(p) for p in parts]
    except ValueError:
        raise BoltzkitError(f"{name} must be numbers separated by commas", got=text) from None


def single_or_list(values: list[Any]) -> Any:
    return values[0] if len(values) == 1 else values


# ------------------------------------------------------------------------------------- train
def _exact_dbn_metrics(dbn: DBN, splits: dict[str, Tensor]) -> dict[str, Any]:
    sizes = dbn.layer_sizes
    pairs = [
        sizes[l] + (sizes[l + 1] if l + 1 < dbn.n_hidden_layers else 0) for l in range(1, len(sizes) - 1)
    ]
    top_bits = min(dbn.top.n_visible, dbn.top.n_hidden)
    if max(pairs, default=0) > EXACT_DBN_BITS or top_bits > EXACT_DBN_BITS:
        return {}
    # the visible layer's terms pair every row with every state of h_1: skip what would take minutes
    rows = sum(int(x.shape[0]) for x in splits.values())
    if rows * (1 << sizes[1]) * sizes[0] * max(2, dbn.visible_units.n_stats) > EXACT_DBN_WORK:
        return {}
    out: dict[str, Any] = {}
    for split, x in splits.items():
        out[f"{split}_log_lik"] = float(dbn_exact_log_prob(dbn, x, max_bits=EXACT_DBN_BITS).mean())
    return out


def _remove_layer_checkpoints(folder: Path) -> None:
    """Remove a finished DBN's ``layer_L.ckpt`` files, and their folder if nothing else is in it."""
    for path in folder.glob("layer_*.ckpt"):
        path.unlink()
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def train_stack(
    *,
    kind: str,
    train: Dataset,
    test: Dataset | None,
    out: Path,
    hidden: list[int],
    components: int,
    recipe: Recipe,
    recipe_name: str | None,
    per_layer: dict[str, list[Any]],
    init_transpose: bool,
    command: str,
    bottom: Path | None,
    seed: int,
    bottom_model: Any = None,
    device: torch.device,
    checkpoint: Path | None,
    resume: bool,
    progress: bool,
    as_json: bool,
    checkpoint_seconds: float = 0.0,
) -> None:
    """``boltzkit train --model dbn|mixture``: train, save with settings and metrics, report."""
    t0 = time.perf_counter()
    earlier = 0.0  # a resumed DBN's earlier runs (below)
    products: list[bool | None] | None = None  # each layer's products of sparse states (README)
    splits = {"train": train.x}
    if test is not None:
        splits["test"] = test.x
    metrics: dict[str, Any] = {}
    history: list[Any] = []
    if kind == "mixture":
        if "epochs" in per_layer:
            raise BoltzkitError(
                "a mixture takes one --epochs value (its most EM iterations)", got=per_layer["epochs"]
            )
        max_iter = int(recipe.epochs)
        model, hist = train_mixture(
            train.x, int(components), seed=seed, max_iter=max_iter, device=device, progress=progress
        )
        for split, x in splits.items():
            metrics[f"{split}_log_lik"] = float(model.log_prob(x.to(model.device)).mean())
        history = hist.to_list()
        settings: dict[str, Any] = {
            "model": "mixture",
            "components": int(components),
            "max_iter": max_iter,
            "iterations": len(hist),
            "smoothing": 1.0,
            "seed": seed,
        }
    else:
        n = len(hidden)
        below = None
        if bottom is not None:
            base = bottom_model if bottom_model is not None else load_model(bottom, device=device)[0]
            if isinstance(base, BoltzmannMachine) and base.kind == "rbm":
                below = [RBM.from_model(base)]
            elif isinstance(base, DBN):
                below = list(base.rbms)
            elif isinstance(base, UnitRBM):  # Gaussian or categorical visible units below binary layers
                below = [base]
            else:
                raise BoltzkitError(
                    "--bottom must be an RBM (binary, Gaussian or categorical) or a DBN model file",
                    got=f"a {getattr(base, 'kind', type(base))}",
                )
        frozen = 0 if below is None else len(below)
        # a bottom that does not fit the layers, or holds them all, is train_dbn's to refuse
        fits = below is None or (frozen < n and [r.n_hidden for r in below] == list(hidden[:frozen]))
        for name, values in per_layer.items():
            if fits and len(values) != n - frozen:
                option = f"--{name.replace('_', '-')}"
                raise BoltzkitError(
                    f"{option} needs one value, or one per hidden layer trained"
                    + (
                        f" ({n - frozen}: the --bottom's {frozen} layer(s) are trained already)"
                        if frozen
                        else ""
                    ),
                    got=values,
                    expected="1 value" if n - frozen == 1 else f"1 or {n - frozen} values",
                    hint=f"give {option} for the layers above the bottom only." if frozen else None,
                )
        # what each layer was trained with (None: a layer of the --bottom, trained elsewhere)
        per_layer_record = {name: [None] * frozen + list(values) for name, values in per_layer.items()}
        # every run checkpoints its layers, so that an interrupted one can resume: into
        # --checkpoint every epoch, else into OUT.layers at most every checkpoint_seconds
        ckpt_dir = checkpoint if checkpoint is not None else out.with_name(out.name + ".layers")
        if resume and not ckpt_dir.is_file() and not any(ckpt_dir.glob("layer_*.ckpt")):
            warn(
                f"nothing to resume: {ckpt_dir} holds no layer checkpoints, so the DBN is trained from "
                "the start" + (f" and {out} overwritten" if out.exists() else "")
            )
        # a resumed run's cost: the epochs its layers' checkpoints counted, and this run
        if resume and ckpt_dir.is_dir():  # the layers this run trains (not an earlier run's others)
            trained_here = range(0 if below is None else len(below), n)
            earlier = checkpointed_seconds(*(ckpt_dir / f"layer_{l}.ckpt" for l in trained_here))
        model, hists = train_dbn(
            train.x,
            hidden,
            seed=seed,
            device=device,
            recipe=recipe,
            **per_layer,
            init_transpose=bool(init_transpose),  # one flag: every layer above the first
            bottom=below,
            checkpoint_dir=ckpt_dir,
            resume=resume,
            checkpoint_seconds=0.0 if checkpoint is not None else checkpoint_seconds,
            progress=progress,
        )
        history = [None if h is None else h.to_list() for h in hists]
        products = [None if h is None else h.sparse_products for h in hists]
        metrics.update(_exact_dbn_metrics(model, splits))
        metrics["recon_error"] = [
            None if h is None or h.last is None else h.last.get("recon_error") for h in hists
        ]
        settings = {
            "model": "dbn",
            "hidden": hidden,
            **recipe_settings(recipe),
            **({"k": None} if recipe.k_schedule is not None else {}),  # the schedule says what k ran
            **per_layer_record,
            "recipe": recipe_name,
            # where the options given over the recipe changed its settings (of the layers trained here)
            # each layer's list where the layers differ (the first layer's value alone hid them)
            **(
                {
                    "recipe_overrides": recipe_differences(
                        get_recipe(recipe_name), {**recipe_settings(recipe), **per_layer}
                    )
                }
                if recipe_name
                else {}
            ),
            "command": command,
            "init_transpose": init_transpose,
            "bottom": None if bottom is None else str(bottom),
            "seed": seed,
        }
        # what ran in each layer where the recipe left it to train() (None: a given bottom layer)
        for key in ("lr_schedule", "positive"):
            settings[key] = [None if h is None else h.settings.get(key) for h in hists]
    seconds = earlier + time.perf_counter() - t0
    settings.update(device=str(device), data=train.name, n_train=train.n_samples)
    # which data "data" named when the model was trained (evaluate compares against it)
    settings["train_data_fingerprint"] = training_fingerprint(train.x)
    settings["test_data"] = None if test is None else test.name
    save_model(
        model,
        out,
        metadata={
            "data": train.name,
            "image_shape": None if train.image_shape is None else list(train.image_shape),
            "training": settings,
            "metrics": metrics,
            "training_seconds": seconds,
            "sparse_products": products,
        },
    )
    if kind == "dbn":  # the model is saved: its layers' checkpoints are done with
        _remove_layer_checkpoints(ckpt_dir)
    record = {
        "out": str(out),
        "data": train.name,
        "kind": kind,
        "layer_sizes": list(model.layer_sizes) if kind == "dbn" else [model.n_visible],
        "n_visible": model.n_visible,
        "n_components": int(components) if kind == "mixture" else None,
        "seconds": seconds,
        **metrics,
        "settings": settings,
        "history": history,
    }

    def human() -> str:
        what = (
            f"DBN {'x'.join(map(str, record['layer_sizes']))}"
            if kind == "dbn"
            else f"mixture of {components} Bernoullis"
        )
        lines = [f"trained {what} on {train.name} in {fmt(seconds, 1)} s -> {out}"]
        for split in ("train", "test"):
            if record.get(f"{split}_log_lik") is not None:
                lines.append(f"mean log p(v), {split} (exact): {fmt(record[f'{split}_log_lik'])} nats")
        if kind == "dbn" and record.get("train_log_lik") is None:
            lines.append(
                f"for its lower bound run: boltzkit evaluate {out} --data {train.name} --logz ais --samples 5"
            )
        return "\n".join(lines)

    emit(record, as_json=as_json, human=human)


# -------------------------------------------------------------------------------------- log Z
def top_log_z(
    dbn: DBN,
    opts: LogZOptions,
    *,
    device: torch.device,
    progress: bool,
    data_dir: Path | None,
    metadata: Mapping[str, Any] | None,
) -> LogZResult:
    """``log Z`` of a DBN's top RBM with the estimator of ``opts``.

    AIS-type estimators start from a base-rate model fitted to the recognition probabilities at
    layer ``L - 1`` of ``--base-rate-data``, else of the model file's recorded training data, else
    the estimator's own choice of base (the record's ``base_data`` or ``base`` says which). The
    variational methods apply to the top RBM as to any Boltzmann machine.
    """
    if opts.method.value in VARIATIONAL_METHODS:
        return variational_estimate(dbn.top, opts).with_settings(of="top RBM")
    kwargs = sampling_kwargs(opts, device=device, progress=progress)
    method = opts.method.value
    base, source = None, None
    if method != "exact":
        x, spec = base_rate_data(dbn, opts, data_dir=data_dir, metadata=metadata)
        if x is not None:  # visible data (real values or categories too), passed up through q
            base, source = top_layer_data(dbn, x), f"{spec}, passed up to layer {dbn.n_hidden_layers - 1}"
    result = estimate_log_z(dbn.top, method, base_rate_data=base, **kwargs)
    # without data the estimator chose its base itself (its record's ``base`` says which)
    return result.with_settings(of="top RBM", **({"base_data": source} if source else {}))


def stack_log_z(
    model: Any,
    reference: Any,
    opts: LogZOptions,
    *,
    device: torch.device,
    progress: bool,
    data_dir: Path | None,
    metadata: Mapping[str, Any] | None,
) -> LogZResult:
    """``boltzkit logz`` for a DBN (its top RBM's ``log Z``) or a mixture (0, exactly)."""
    if reference is not None:
        raise BoltzkitError(
            "--relative-to compares two Boltzmann machines; not available for DBNs and mixtures",
            hint="estimate each model's log Z on its own.",
        )
    if isinstance(model, MixtureOfBernoullis):
        if opts.method.value != "exact":
            method = opts.method.value
            warn(f"a mixture of Bernoullis is normalised: log Z = 0 exactly; --method {method} not run")
        return LogZResult.exact(0.0, note="a mixture of Bernoullis is normalised")
    return top_log_z(model, opts, device=device, progress=progress, data_dir=data_dir, metadata=metadata)


# ------------------------------------------------------------------------------------ evaluate
def _mixture_result(model: MixtureOfBernoullis, x: Tensor, per_example: bool) -> LogProbResult:
    values = model.log_prob(x.to(model.device)).cpu()
    mean = float(values.mean())
    sd = float(values.std(unbiased=True)) if values.numel() > 1 else 0.0
    zero = Band(0.0, 0.0, 0.0, 0.0, 0.0)
    return LogProbResult(
        mean_log_prob=mean,
        mean_log_prob_minus_sigma=mean,
        mean_log_prob_plus_sigma=mean,
        mean_log_prob_minus_3sigma=mean,
        mean_log_prob_plus_3sigma=mean,
        mean_neg_free_energy=mean,
        data_stderr=sd / math.sqrt(values.numel()) if values.numel() > 1 else None,
        n=int(values.numel()),
        log_z=0.0,
        log_z_method="exact",
        log_z_band=zero,
        bound="exact",
        per_example=values if per_example else None,
        details={"note": "a mixture is normalised: log p(v) is exact"},
    )


def _bound_summary(record: dict[str, Any]) -> str:
    where = f"{record['data']} ({record['split']}, n={record['n']})"
    lines = [
        f"{log_prob_what(record)} on {where}: {fmt(record['mean_log_prob'])} "
        f"(M = {record['n_samples']} samples of q per vector)",
        f"  Monte Carlo error of r_B: ±{fmt(record['mc_error_3std'])} (3 std, given the data); "
        f"±{fmt(record['pooled_error_3std'])} (3 std, S1 Table 2's pooled convention)",
    ]
    verdict = record.get("logz") or {}
    if verdict.get("reliable") is False:
        lines.append(f"  {band_text(record, 'mean_log_prob', verdict=verdict)}")
    elif deterministic_log_z(record):
        lines.append(f"  log Z ({record['log_z_method']}) is deterministic: no error band")
    else:
        if record["log_z_method"] != "exact":
            lines.append(
                f"  error of log Z ({record['log_z_method']}): {fmt(record['ais_error_minus_3sigma'])}, "
                f"+{fmt(record['ais_error_plus_3sigma'])} (log(Z ± 3σ) - log Z)"
            )
        lines.append(
            f"  total: ±{fmt(record['total_error_3std'])} (3 std); range "
            + band_text(record, "mean_log_prob", note="3 std")
        )
    if (overlap := training_overlap_text(record)) is not None:
        lines.append(overlap)
    lines += log_z_lines("log Z of the top RBM", record["log_z_method"], record["log_z"], verdict)
    lines.append(f"time: {fmt(record['seconds'], 2)} s")
    return "\n".join(lines)


def evaluate_stack(
    model: DBN | MixtureOfBernoullis,
    metadata: dict[str, Any],
    dataset: Dataset,
    *,
    model_path: Path,
    opts: LogZOptions,
    samples: int,
    device: torch.device,
    progress: bool,
    data_dir: Path | None,
    per_example: bool,
    t0: float,
) -> tuple[dict[str, Any], Tensor | None]:
    """``boltzkit evaluate`` for a DBN (the bound with its error split) or a mixture (exact)."""
    base = {"model": str(model_path), "data": dataset.name, "split": dataset.split}
    if isinstance(model, MixtureOfBernoullis):
        result = _mixture_result(model, dataset.x, per_example)
        record = {**result.to_dict(), **base, "n_components": model.n_components}
        record["seconds"] = time.perf_counter() - t0
        return record, result.per_example
    log_z = top_log_z(model, opts, device=device, progress=progress, data_dir=data_dir, metadata=metadata)
    bound = dbn_bound(model, dataset.x, log_z, n_samples=samples, seed=opts.seed, per_example=per_example)
    record = {**bound.to_dict(), **base, "logz": log_z.to_dict()}
    record["seconds"] = time.perf_counter() - t0
    return record, bound.per_example


def emit_evaluation(record: dict[str, Any], *, as_json: bool, default_human) -> None:
    """Print an evaluation record (the bound's own summary for a DBN)."""
    human = (lambda: _bound_summary(record)) if record.get("n_samples") is not None else default_human
    emit(record, as_json=as_json, human=human)


# -------------------------------------------------------------------------------------- sample
def draw_visible(
    model: Any,
    operator: TransitionOperator,
    *,
    chains: int,
    steps: int,
    generator: torch.Generator,
    progress: bool,
) -> Tensor:
    """Visible states of ``chains`` samples of any model: chains of ``steps`` sweeps (for a DBN in
    its top RBM, then a directed pass down), or ancestral samples of a mixture (``steps`` unused)."""
    if isinstance(model, MixtureOfBernoullis):
        return model.sample(chains, generator)
    if isinstance(model, DBN):
        state = sample_dbn(
            model, operator, n_chains=chains, n_steps=steps, generator=generator, progress=progress
        )
        return state.visible
    state = sample(model, operator, n_chains=chains, n_steps=steps, generator=generator, progress=progress)
    return state.visible


__all__ = [
    "STACK_KINDS",
    "draw_visible",
    "emit_evaluation",
    "evaluate_stack",
    "is_stack_model",
    "parse_list",
    "stack_log_z",
    "top_log_z",
    "train_stack",
]
