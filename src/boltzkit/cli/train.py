"""``boltzkit train``: train an RBM, SRBM, BM, DBM, DBN or mixture of Bernoullis and save it with its
settings and metrics.

``--model rbm|srbm|bm|dbm`` with ``--hidden 500`` (a DBM: ``--hidden 500,1000``); ``--method cd``
(CD-k), ``pcd`` or ``sap`` (persistent chains, Salakhutdinov 2008 Sec. 4.1.1), or ``pt`` (persistent
chains by parallel tempering); the positive phase is the exact ``p(h | v)`` for RBMs and SRBMs and
damped mean-field for BMs and DBMs (``--positive``). ``--model dbn`` stacks RBMs greedily and
``--model mixture`` fits a mixture of Bernoullis by EM (``cli/stack.py``); ``--recipe NAME`` takes
a named recipe's settings, under the options given explicitly.
After training, when ``log Z`` and ``log p*(v)`` need at most ``--exact-max-bits`` enumerated units,
``log Z`` and the mean log-likelihoods of the training data (and of the validation and test data,
when there are any) are computed exactly; the reconstruction error is always reported.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import torch
import typer

from boltzkit.cli.common import (
    AlphabetOpt,
    DataDirOpt,
    DataOpt,
    DeviceOpt,
    ForceOpt,
    ProgressFlag,
    SamplerOpt,
    SeedOpt,
    check_alphabet,
    check_output,
    command_line,
    device_from,
    emit,
    fmt,
    json_line,
    non_negative_float_option,
    option_given,
    positive_float_option,
    refuse_zoo_output,
    show_progress,
    training_fingerprint,
    unit_dataset,
    unit_interval_option,
    unit_visible,
    warn,
    warn_if_training_rows,
)
from boltzkit.cli.stack import STACK_KINDS, parse_list, train_stack
from boltzkit.data import Dataset, alphabet_letters, load_dataset, load_values
from boltzkit.data.files import file_splits, lone_split_name
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.likelihood import exact_log_likelihoods
from boltzkit.io import export_npz, load_model, save_model
from boltzkit.learning import train_model
from boltzkit.learning.api import unit_training_defaults
from boltzkit.learning.averaging import parse_average
from boltzkit.learning.centering import parse_centering
from boltzkit.learning.checkpoint import checkpointed_seconds
from boltzkit.learning.recipes import (
    RECIPES,
    VBIAS_INITS,
    Recipe,
    get_recipe,
    recipe_differences,
    recipe_settings,
)
from boltzkit.learning.schedules import parse_lr_schedule, parse_momentum
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.units import Categorical, UnitType, unit_type

ModelKind = Enum("ModelKind", {k: k for k in ("rbm", "srbm", "bm", "dbm", "dbn", "mixture")}, type=str)
#: The implicit checkpoint (OUT.ckpt) is written after an epoch only when this many seconds have
#: passed since the last write: many short epochs cost a few writes, an interruption loses <= this.
DEFAULT_CHECKPOINT_SECONDS = 30.0
LayerData = Enum("LayerData", {k: k for k in ("samples", "probs")}, type=str)
TrainMethod = Enum("TrainMethod", {k: k for k in ("cd", "pcd", "sap", "pt")}, type=str)
Ladder = Enum("Ladder", {k: k for k in ("uniform", "geometric", "adaptive")}, type=str)
Reconstruction = Enum("Reconstruction", {k: k for k in ("sample", "mean")}, type=str)
VbiasInit = Enum("VbiasInit", {k: k for k in VBIAS_INITS}, type=str)
PositiveKind = Enum(
    "PositiveKind", {k: k for k in ("auto", "exact", "mean-field", "clamped-chains")}, type=str
)


def _hidden_sizes(text: str) -> list[int] | None:
    try:
        sizes = [int(part) for part in str(text).replace(" ", "").split(",")]  # "3," and "3,,2" fail
    except ValueError:
        return None
    if sizes == [0]:  # no hidden units: a fully visible model
        return sizes
    return sizes if sizes and all(n >= 1 for n in sizes) else None


def _check_hidden(text: str) -> str:
    """``--hidden`` must be positive whole numbers separated by commas (a usage error otherwise)."""
    if _hidden_sizes(text) is None:
        raise typer.BadParameter(
            f"{text!r} is not a list of positive whole numbers, e.g. 500 or 500,1000 (or 0: no hidden units)"
        )
    return text


def parse_hidden(text: str, kind: str) -> list[int]:
    """``"500"`` or ``"500,1000"`` (one size per hidden layer; several only for a DBM)."""
    sizes = _hidden_sizes(text)
    if sizes is None:
        raise BoltzkitError(
            "--hidden must be positive whole numbers separated by commas",
            got=text,
            hint="for example --hidden 500, or --model dbm --hidden 500,1000",
        )
    if kind not in ("dbm", "dbn") and len(sizes) != 1:
        raise BoltzkitError(
            f"a {kind} has one hidden layer",
            got=f"--hidden {text}",
            hint="use --model dbm (or dbn) for several layers.",
        )
    if kind == "dbm" and len(sizes) < 2:
        raise BoltzkitError(
            "a DBM has two or more hidden layers",
            got=f"--hidden {text}",
            hint="one hidden layer is an RBM: use --model rbm, or give two sizes (--hidden 500,1000).",
        )
    return sizes


def _per_layer_option(kind: type, what: str):
    """A callback checking a value, or comma-separated values one per layer (a usage error otherwise)."""

    def check(text: str | None) -> str | None:
        if text is None:
            return text
        try:
            values = [kind(part) for part in str(text).split(",")]
        except ValueError:
            values = []
        if not values or not all(math.isfinite(v) and v > 0 for v in values):
            raise typer.BadParameter(f"{text!r} is not {what} (or one per layer, separated by commas)")
        return text

    return check


def _test_data(
    spec: str, test_spec: str, train_x: torch.Tensor, *, data_dir: Path | None, seed: int
) -> Dataset | None:
    """The held-out data for the final metrics: ``--test-data``, or with ``auto`` the ``test``
    split of ``--data`` when it holds other examples than the training split (a file, or Bars
    and Stripes, gives the same rows for every split; an archive of split-named arrays without a
    ``test`` one has none)."""
    if test_spec == "none":
        return None
    n_visible = int(train_x.shape[1])
    if test_spec != "auto":
        return load_dataset(test_spec, split="test", data_dir=data_dir, seed=seed, n_visible=n_visible)
    splits = file_splits(spec)
    if splits and "test" not in splits:  # an archive of train (and valid) arrays: no test split
        return None
    if lone_split_name(spec) not in (None, "test"):  # one array, named after another split
        return None
    test = load_dataset(spec, split="test", data_dir=data_dir, seed=seed, n_visible=n_visible)
    return None if torch.equal(test.x, train_x) else test


def _splits_of(spec: str) -> list[str]:
    """The splits a data file holds as split-named arrays (none for a named set or a plain file)."""
    try:
        return file_splits(spec) if Path(spec).is_file() else []
    except (OSError, ValueError):
        return []


def _unit_data(
    units: UnitType,
    spec: str,
    split: str,
    *,
    data_dir: Path | None,
    seed: int,
    alphabet: str | None,
    n_units: int | None = None,
) -> Dataset:
    """A data set of real values or category indices, checked by ``units`` (aligned sequences of a
    FASTA file read with ``alphabet``), of ``n_units`` columns where given (held-out data: the
    training data's width, checked before the training, not after it)."""
    name, values = load_values(spec, split=split, data_dir=data_dir, seed=seed, alphabet=alphabet)
    width = int(values.shape[-1]) if n_units is None or values.dim() != 2 else n_units
    x = units.check_data(values, width, f"the {split} data {spec}")
    return Dataset(name=name, x=x, image_shape=None, split=split)


def _summary(record: dict[str, Any]) -> str:
    settings = record["settings"]
    epochs = f"{settings['epochs']} epoch" + ("s" if settings["epochs"] != 1 else "")
    shape = "x".join(str(n) for n in record["layer_sizes"])
    lines = [
        f"trained {record['kind'].upper()} {shape} on {record['data']} "
        f"({settings['method']}-{settings['k_schedule'] or settings['k']}, {epochs}) "
        f"in {fmt(record['seconds'], 1)} s -> {record['out']}",
    ]
    last = record["history"][-1] if record.get("history") else {}
    if record.get("recon_error") is not None or "free_energy_gap" not in last:
        # measured during the epoch, on the iterates: with --average the saved model is their average
        of = " (of the training iterates, not their average)" if settings.get("average") else ""
        lines.append(f"reconstruction error{of}: {fmt(record.get('recon_error'))}")
    else:  # a unit RBM's learner monitors the free-energy gap of data and negative samples
        lines.append(f"free-energy gap, data - samples: {fmt(last['free_energy_gap'])}")
    if last.get("swap_rates") is not None:
        rates = ", ".join(f"{r:.2f}" for r in last["swap_rates"])
        lines.append(f"swap rates (hot to cold): {rates}; round trips: {last.get('round_trips')}")
    if record.get("log_z") is not None:
        lines.append(f"log Z (exact): {fmt(record['log_z'])}")
        for split in ("train", "valid", "test"):
            if record.get(f"{split}_log_lik") is not None:
                lines.append(f"mean log p(v), {split}: {fmt(record[f'{split}_log_lik'])} nats")
    else:
        off = (record.get("settings") or {}).get("exact_max_bits") == 0
        why = "exact computation off: --exact-max-bits 0" if off else "model too large to enumerate"
        lines.append(
            f"log Z not computed ({why}); "
            f"run: boltzkit evaluate {record['out']} --data {record['data']} --logz ais"
        )
    return "\n".join(lines)


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not left at its default)."""
    return option_given(ctx, {"n_chains": "chains"}.get(name, name))


#: The note of a run that starts over where an interrupted run left its checkpoint.
_EARLIER_CHECKPOINT = (
    "{path} holds {what} of an earlier, interrupted run: this run starts over and replaces it "
    "(run the same command with --resume to continue that run instead)"
)
#: What a mixture of Bernoullis (fit by EM: ``--components``, ``--epochs``, ``--seed``) does not use.
_NOT_EM = (
    "method", "positive", "damping", "k", "k_schedule", "lr", "batch_size", "sampler", "chains",
    "temperatures", "ladder", "momentum", "lr_schedule", "reconstruction", "centering", "average",
    "init_scale", "init_vbias", "weight_decay", "valid_data", "monitor_every", "checkpoint",
    "checkpoint_every", "resume", "init", "history",
)  # fmt: skip
#: What a DBN's greedy stacking (cli/stack.py) does not take.
_NOT_STACKING = (
    "valid_data", "history", "monitor_every", "checkpoint_every", "exact_max_bits", "components",
    "positive", "damping", "ladder",
)  # fmt: skip


def _refuse_unused_options(
    ctx: typer.Context, kind: str, method: str, positive: str, *, started: bool = False
) -> None:
    """Refuse an option given on the command line that this run would not use (a silent no-op
    would let a researcher believe it took effect); ``started``: the run starts from ``--init``."""
    fresh = "a fresh model's initial weights (a run without --init)"
    scoped = {  # option: (whether it applies, where it does)
        "init_scale": (not started, fresh),
        "init_vbias": (not started, fresh),
        "bottom": (kind == "dbn", "DBNs (--model dbn)"),
        "init_transpose": (kind == "dbn", "DBNs (--model dbn)"),
        "layer_data": (kind == "dbn", "DBNs (--model dbn)"),
        "components": (kind == "mixture", "--model mixture"),
        "chains": (method != "cd", "persistent chains: --method pcd, sap or pt"),
        "temperatures": (method == "pt", "--method pt"),
        "ladder": (method == "pt", "--method pt"),
        "damping": (
            positive == "mean-field" or (positive == "auto" and kind in ("bm", "dbm")),
            "a mean-field positive phase: --model bm or dbm, or --positive mean-field",
        ),
    }
    if kind == "mixture":
        scoped.update(
            {
                name: (False, "single Boltzmann machines, not a mixture fit by EM")
                if name in _NOT_STACKING  # nor a DBN's stacking: not "Boltzmann machines and DBNs"
                else (False, "Boltzmann machines and DBNs, not a mixture fit by EM")
                for name in _NOT_EM
            }
        )
    elif kind == "dbn":
        scoped.update({name: (False, "single models, not a DBN's greedy stacking") for name in _NOT_STACKING})
    for name, (applies, where) in scoped.items():
        if not applies and _given(ctx, name):
            flag = "--" + name.replace("_", "-")
            raise BoltzkitError(
                f"{flag} applies to {where}; this run would not use it",
                # the method where it was given or decides the scope (not a DBN's or mixture's default)
                got=f"--model {kind}"
                + (f" --method {method}" if kind not in ("mixture", "dbn") or _given(ctx, "method") else ""),
                hint=f"drop {flag}.",
            )


def _spec_check(parse: Callable[[Any], object]) -> Callable[[str | None], str | None]:
    """A typer callback that validates a spec option with ``parse`` (a usage error if it fails)
    and passes the text on unchanged."""

    def check(text: str | None) -> str | None:
        try:
            parse(text)
        except BoltzkitError as exc:
            raise typer.BadParameter(str(exc)) from None
        return text

    return check


_check_momentum = _spec_check(parse_momentum)
_check_lr_schedule = _spec_check(parse_lr_schedule)
_check_average = _spec_check(parse_average)
_check_centering = _spec_check(parse_centering)


def _none_as_null(spec: str | None) -> str | None:
    """An option's ``none`` as ``None`` (what a recipe holds where it leaves the setting off)."""
    return None if spec is None or spec.strip().lower() == "none" else spec


def _list_recipes_once_both_known(ctx: typer.Context, key: str, value: bool) -> bool:
    """--list-recipes [--json]: print every recipe with its sources (as one JSON object with
    ``--json``) and exit, before --data and --out are asked for.

    Both options are eager, so click processes them before every other option, in the order they
    were given (an absent one last); whichever comes second sees both values and prints.
    """
    seen = ctx.meta.setdefault("boltzkit.train.list", {})
    seen[key] = value
    if len(seen) == 2 and seen["list"]:
        if seen["json"]:
            typer.echo(json_line({"recipes": [r.to_dict() for r in RECIPES.values()]}))
        else:
            typer.echo("\n\n".join(r.describe() for r in RECIPES.values()))
        raise typer.Exit()
    return value


def _print_recipes(ctx: typer.Context, value: bool) -> bool:
    return _list_recipes_once_both_known(ctx, "list", value)


def _json_for_recipes(ctx: typer.Context, value: bool) -> bool:
    return _list_recipes_once_both_known(ctx, "json", value)


def command(
    data: DataOpt,
    out: Annotated[Path, typer.Option("--out", help="Where to save the model (.safetensors or .npz).")],
    hidden: Annotated[
        str,
        typer.Option(
            "--hidden",
            help="Hidden units; for a DBM one number per layer, e.g. 500,1000.",
            callback=_check_hidden,
        ),
    ] = "25",
    model: Annotated[ModelKind, typer.Option("--model", help="Model to train.")] = ModelKind["rbm"],
    visible: Annotated[
        str,
        typer.Option(
            "--visible",
            help="Visible units of an RBM or DBM: binary, gaussian (real values; sigma learned) or "
            "categorical:Q (category indices 0..Q-1).",
        ),
    ] = "binary",
    learn_sigma: Annotated[
        bool,
        typer.Option(
            "--learn-sigma/--fixed-sigma",
            help="Gaussian visible units: learn sigma (in the log domain), or keep it at the data's "
            "standard deviations (floored at 5% of the largest, as every Gaussian start is).",
        ),
    ] = True,
    alphabet: AlphabetOpt = None,
    method: Annotated[
        TrainMethod,
        typer.Option(
            "--method",
            help="cd (CD-k), pcd or sap (persistent chains: Tieleman's PCD and S2's SAP are one "
            "algorithm) or pt (parallel tempering: --temperatures replicas, --k sweeps between swaps) "
            "[default: cd for --model rbm or dbn; sap for --model srbm, bm or dbm, as S2 trains "
            "them].",
            show_default=False,
        ),
    ] = TrainMethod["cd"],
    positive: Annotated[
        PositiveKind,
        typer.Option(
            "--positive",
            help="Positive phase: auto (exact p(h|v) for RBM/SRBM, mean-field for BM/DBM), exact, "
            "mean-field or clamped-chains.",
        ),
    ] = PositiveKind["auto"],
    damping: Annotated[float, unit_interval_option("--damping", help="Mean-field damping, in [0, 1).")] = 0.5,
    k: Annotated[
        str,
        typer.Option(
            "--k",
            help="Sampling sweeps per update (a DBN: one per layer trained, e.g. 1,3); with --recipe, "
            "replaces its k schedule unless --k-schedule is given.",
            callback=_per_layer_option(int, "a positive whole number"),
        ),
    ] = "1",
    k_schedule: Annotated[
        str | None,
        typer.Option(
            "--k-schedule",
            help="k over epochs: 'K_START:K_END', 'linear:1:25', 'geometric:1:25', 'step:EVERY:K_MAX'.",
        ),
    ] = None,
    epochs: Annotated[
        str,
        typer.Option(
            "--epochs",
            help="Passes over the training data (a DBN: one per layer trained, e.g. 50,50; a mixture: EM "
            "iterations).",
            callback=_per_layer_option(int, "a positive whole number"),
        ),
    ] = "1",
    lr: Annotated[
        str,
        typer.Option(
            "--lr",
            help="Learning rate (> 0; a DBN: one per layer trained, those above --bottom).",
            callback=_per_layer_option(float, "a positive number"),
        ),
    ] = "0.05",
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Examples per update.")] = 100,
    sampler: SamplerOpt = "gibbs",
    chains: Annotated[
        int, typer.Option("--chains", min=1, help="Persistent chains (pcd, sap; pt: per replica).")
    ] = 100,
    temperatures: Annotated[
        int,
        typer.Option("--temperatures", min=2, help="pt: tempered replicas (inverse temperatures in [0, 1])."),
    ] = 10,
    ladder: Annotated[
        Ladder, typer.Option("--ladder", help="pt: uniform (as Brügge et al. 2013), geometric or adaptive.")
    ] = Ladder["uniform"],
    momentum: Annotated[
        str,
        typer.Option(
            "--momentum",
            help="SGD momentum in [0, 1), or a schedule 'M0,M1@E' (M0 for the first E epochs, then M1).",
            callback=_check_momentum,
        ),
    ] = "0",
    lr_schedule: Annotated[
        str | None,
        typer.Option(
            "--lr-schedule",
            help="Learning rate by update: constant, linear (to 0), linear-after:E, inverse:E, step:E "
            "(the rate over ceil(epoch / E)) [default: linear for pcd/sap/pt, constant "
            "for cd].",
            callback=_check_lr_schedule,
        ),
    ] = None,
    reconstruction: Annotated[
        Reconstruction,
        typer.Option(
            "--reconstruction",
            help="CD's last visible update: a sample, or its mean p(v|h) (Hinton & Salakhutdinov's code).",
        ),
    ] = Reconstruction["sample"],
    centering: Annotated[
        str,
        typer.Option(
            "--centering",
            help="Centered gradients (Melchior et al. 2016): none, data, model or average, optionally :RATE.",
            callback=_check_centering,
        ),
    ] = "none",
    average: Annotated[
        str,
        typer.Option(
            "--average",
            help="Iterate averaging: none, ema:DECAY[@E] (moving average per update from epoch E) "
            "or polyak:E (mean of the iterates from epoch E); the saved model holds the average.",
            callback=_check_average,
        ),
    ] = "none",
    init_scale: Annotated[
        float, positive_float_option("--init-scale", help="Standard deviation of the initial couplings.")
    ] = 0.01,
    init_vbias: Annotated[
        VbiasInit,
        typer.Option(
            "--init-vbias",
            help="Initial visible biases: the log-odds of the data means (Hinton's guide, Sec. 8) or zero.",
        ),
    ] = VbiasInit["data"],
    recipe: Annotated[
        str | None,
        typer.Option(
            "--recipe",
            help="A named training recipe (see --list-recipes); options given explicitly override it.",
        ),
    ] = None,
    list_recipes: Annotated[
        bool,
        typer.Option(
            "--list-recipes",
            help="Print the training recipes and their sources, then exit.",
            is_eager=True,
            callback=_print_recipes,
        ),
    ] = False,
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
            help="Exact log Z and log-likelihoods when at most N units must be enumerated (0: never).",
        ),
    ] = 20,
    monitor_every: Annotated[
        int,
        typer.Option(
            "--monitor-every",
            min=1,
            help="Measure the exact log-likelihoods every N epochs (and after the last); a large "
            "enumeration per epoch can cost more than the training.",
        ),
    ] = 1,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="Checkpoint file, written every epoch [default: OUT.ckpt, written after an epoch when "
            f"{DEFAULT_CHECKPOINT_SECONDS:g} s have passed since the last]; removed when the run finishes.",
        ),
    ] = None,
    checkpoint_every: Annotated[
        int,
        typer.Option(
            "--checkpoint-every",
            min=0,
            show_default=False,
            help="Checkpoint every N epochs [default: 1, or by time for the implicit checkpoint].",
        ),
    ] = 0,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from the checkpoint when it exists.")
    ] = False,
    force: ForceOpt = False,
    init: Annotated[
        Path | None,
        typer.Option(
            "--init",
            help="Start from this model (a file or zoo:NAME of the same sizes, and the same kind or one the "
            "model extends: an RBM starts an SRBM or BM) instead of a fresh one: train a finished model "
            "further.",
        ),
    ] = None,
    history: Annotated[
        Path | None, typer.Option("--history", help="Write per-epoch records to FILE.csv and FILE.json.")
    ] = None,
    components: Annotated[
        int, typer.Option("--components", min=1, help="Components of a mixture (--model mixture).")
    ] = 100,
    init_transpose: Annotated[
        bool,
        typer.Option(
            "--init-transpose",
            help="DBN: start each layer above the first as the transposed RBM below (S&M 2008 Sec. 5.2).",
        ),
    ] = False,
    layer_data: Annotated[
        LayerData,
        typer.Option("--layer-data", help="DBN: train upper layers on posterior samples or probabilities."),
    ] = LayerData["samples"],
    bottom: Annotated[
        Path | None,
        typer.Option("--bottom", help="DBN: an RBM or DBN file, kept frozen as the lowest layers."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object as the last stdout line.",
            is_eager=True,
            callback=_json_for_recipes,
        ),
    ] = False,
    progress: ProgressFlag = None,
    ctx: typer.Context = None,  # type: ignore[assignment]
) -> None:
    """Train an RBM, SRBM, BM, DBM, DBN or mixture (binary data, or with --visible real values and
    categories) and save it with its settings and final metrics."""
    command = command_line(ctx)
    refuse_zoo_output(out)
    check_output(out, "--out", force=force or resume)
    if out.suffix.lower() not in (".safetensors", ".npz"):
        raise BoltzkitError(
            "unknown model file type for --out",
            got=str(out),
            expected="a file ending in .safetensors (boltzkit's format) or .npz (plain arrays)",
        )
    if model.value == "mixture":  # fit by EM: no hidden layer, no recipe (one would go unused)
        instead = {
            "hidden": "--components N (its components)",
            "recipe": "--epochs N (its most EM iterations)",
        }
        for name, hint in instead.items():
            if _given(ctx, name):
                raise BoltzkitError(
                    f"a mixture of Bernoullis is fit by EM: --{name} does not apply",
                    got=f"--model mixture --{name}",
                    hint=f"give {hint}.",
                )
    hidden_sizes = parse_hidden(hidden, model.value)
    method_value = method.value
    if recipe is None and not _given(ctx, "method") and model.value in ("srbm", "bm", "dbm"):
        method_value = "sap"  # S2 Sec. 4-5 (and the sklearn estimator's "auto")
    k_list, epoch_list = parse_list(k, int, "--k"), parse_list(epochs, int, "--epochs")
    lr_list = parse_list(lr, float, "--lr")
    schedule_list = parse_list(k_schedule, str, "--k-schedule") if k_schedule is not None else [None]
    given = {
        "method": method_value, "k": k_list[0], "k_schedule": schedule_list[0], "epochs": epoch_list[0],
        "lr": lr_list[0], "layer_data": layer_data.value,
        "lr_schedule": lr_schedule, "batch_size": batch_size, "sampler": sampler, "n_chains": chains,
        "momentum": momentum, "weight_decay": weight_decay, "reconstruction": reconstruction.value,
        # "none" is no centering and no average, recorded as null, as a recipe records them
        "centering": _none_as_null(centering), "average": _none_as_null(average),
        "temperatures": temperatures, "init_scale": init_scale,
        "init_vbias": init_vbias.value,
    }  # fmt: skip
    if recipe is not None:  # the recipe's settings, with the options given explicitly on top
        overrides = {key: value for key, value in given.items() if _given(ctx, key)}
        named = get_recipe(recipe)
        recipe = named.name  # recorded as the recipe is named, however it was typed
        chosen = named.replace(**overrides)
    else:  # the options themselves, as a recipe without a name
        chosen = Recipe(name="command-line", summary="the options of this command", **given)
    if init is not None:  # train further: the sizes and units of the model it starts from
        started = load_model(init)[0]
        if not _given(ctx, "hidden") and hasattr(started, "layer_sizes"):
            hidden_sizes = [int(n) for n in started.layer_sizes[1:]]
        started_units = unit_visible(started)
        if started_units is not None and not _given(ctx, "visible"):
            visible = started_units.visible_units.name
            alphabet = alphabet if alphabet is not None else started_units.alphabet
    if alphabet is not None:  # aligned sequences: categorical units with one state per letter
        letters = alphabet_letters(alphabet)
        if unit_type(visible).name == "binary" and not _given(ctx, "visible"):
            visible = f"categorical:{len(letters)}"
        elif unit_type(visible) != Categorical(len(letters)):
            raise BoltzkitError(
                "the alphabet does not fit the visible units",
                got=f"--alphabet {alphabet} ({len(letters)} letters) with --visible {visible}",
                expected=f"--visible categorical:{len(letters)}, or no --visible",
            )
    units = unit_type(visible)
    unit_dbm_cd = units.name != "binary" and model.value == "dbm" and chosen.method == "cd"
    _refuse_unused_options(
        ctx, model.value, "pcd" if unit_dbm_cd else chosen.method, positive.value, started=init is not None
    )
    if units.name != "binary":
        if model.value not in ("rbm", "dbm"):
            raise BoltzkitError(
                "--visible gaussian or categorical:Q trains an RBM or a DBM",
                got=f"--model {model.value}",
                hint="use --model rbm or dbm; a DBN over such data builds on a trained one: --model dbn "
                "--bottom RBM_FILE.",
            )
        if model.value == "dbm" and chosen.method == "cd":
            warn(f"a DBM learns by persistent chains (S2 Sec. 4.1): --method {chosen.method} taken as pcd")
            chosen = chosen.replace(method="pcd")
        # the defaults of these units where neither an option nor a recipe says otherwise
        unit_defaults = unit_training_defaults(units)
        unit_lr = unit_defaults["lr"]
        if recipe is not None and not _given(ctx, "lr") and chosen.lr > unit_lr:
            warn(
                f"recipe {recipe} learns at {chosen.lr:g}, set for binary units; {units.name} units usually "
                f"need less (boltzkit's default for them: {unit_lr:g}; Hinton 2010, Sec. 13.2): give --lr"
            )
        defaults = {
            key: value if recipe is None else getattr(chosen, key) for key, value in unit_defaults.items()
        }
        chosen = chosen.replace(**{key: value for key, value in defaults.items() if not _given(ctx, key)})
    if not learn_sigma and not units.has_sigma:
        raise BoltzkitError("--fixed-sigma applies to Gaussian visible units", got=f"--visible {visible}")
    if model.value in STACK_KINDS:
        if init is not None:
            raise BoltzkitError(
                f"--init applies to RBMs, SRBMs, BMs and DBMs, not a {model.value}",
                hint="a DBN builds on --bottom.",
            )
        if bottom is not None and model.value != "dbn":
            raise BoltzkitError(
                f"--bottom applies to DBNs, not a {model.value}", hint="drop --bottom, or use --model dbn."
            )
        dev = device_from(device)
        below = None if bottom is None else load_model(bottom, device=dev)[0]
        units_of = unit_visible(below)
        if units_of is not None:  # a Gaussian or categorical bottom: its data are values, not bits
            kw = {"data_dir": data_dir, "seed": seed, "alphabet": alphabet}
            train = unit_dataset(units_of, data, split="train", **kw)
            test = (
                None
                if test_data in ("none", "auto")
                else unit_dataset(units_of, test_data, split="test", **kw)
            )
        else:
            train = load_dataset(data, split="train", data_dir=data_dir, seed=seed)
            test = _test_data(data, test_data, train.x, data_dir=data_dir, seed=seed)
        if test is not None:
            warn_if_training_rows(test.x, train.x, f"--test-data {test.name}")
        per_layer = {
            name: values
            for name, values in (
                ("k", k_list),
                ("epochs", epoch_list),
                ("lr", lr_list),
                ("k_schedule", schedule_list),
            )
            if len(values) > 1
        }
        if model.value == "dbn":
            layers = checkpoint if checkpoint is not None else out.with_name(out.name + ".layers")
            if not resume and layers.is_dir() and any(layers.iterdir()):
                warn(_EARLIER_CHECKPOINT.format(path=layers, what="layer checkpoints"))
            stack_started = time.time()
            # the layers' checkpoints of this run or of the run it resumes (not an earlier run's left there)
            ctx.meta["on_interrupt"] = lambda: (
                f"the layers' last checkpoints are in {layers}: run the same command with --resume to "
                "continue"
                if layers.is_dir()
                and any(resume or path.stat().st_mtime >= stack_started - 1.0 for path in layers.iterdir())
                else "no layer of this run was checkpointed yet: run the same command again to start over"
            )
        train_stack(
            kind=model.value, train=train, test=test, out=out, hidden=hidden_sizes, components=components,
            recipe=chosen, recipe_name=recipe, per_layer=per_layer, init_transpose=init_transpose,
            command=command, bottom=bottom, bottom_model=below, seed=seed, device=dev, checkpoint=checkpoint,
            resume=resume, progress=show_progress(progress), as_json=as_json,
            checkpoint_seconds=DEFAULT_CHECKPOINT_SECONDS,
        )  # fmt: skip
        return
    for name, values in (("--k", k_list), ("--epochs", epoch_list), ("--lr", lr_list)):
        if len(values) != 1:
            raise BoltzkitError(
                f"a {model.value} takes one {name} value", got=values, hint="lists are per DBN layer."
            )
    training = {"positive": positive.value, "damping": damping}
    if chosen.method == "pt":
        training["ladder"] = ladder.value
    dev = device_from(device)
    letters = None if alphabet is None else alphabet_letters(alphabet)
    if units.name != "binary":  # real values or category indices, checked by the unit type
        train = _unit_data(units, data, "train", data_dir=data_dir, seed=seed, alphabet=letters)
        # --test-data auto: the test split of an archive of split-named arrays, as for binary data
        auto_test = data if test_data == "auto" and "test" in _splits_of(data) else None
        valid, test = (
            None if spec in (None, "none", "auto")
            else _unit_data(units, spec, split, data_dir=data_dir, seed=seed, alphabet=letters,
                            n_units=int(train.x.shape[1]))
            for spec, split in ((valid_data, "valid"), (auto_test or test_data, "test"))
        )  # fmt: skip
    else:
        train = load_dataset(data, split="train", data_dir=data_dir, seed=seed)
        valid = None
        if valid_data is not None:
            valid = load_dataset(
                valid_data, split="valid", data_dir=data_dir, seed=seed, n_visible=train.n_visible
            )
        test = _test_data(data, test_data, train.x, data_dir=data_dir, seed=seed)
    for held, option in ((valid, "--valid-data"), (test, "--test-data")):
        if held is not None:
            warn_if_training_rows(held.x, train.x, f"{option} {held.name}")
    # every run checkpoints, so that an interrupted one can resume; the implicit checkpoint is
    # written at most every DEFAULT_CHECKPOINT_SECONDS (many short epochs then cost a few writes)
    checkpoint_seconds = 0.0
    if checkpoint is None:
        checkpoint = out.with_name(out.name + ".ckpt")
        checkpoint_seconds = 0.0 if checkpoint_every else DEFAULT_CHECKPOINT_SECONDS
    checkpoint_every = checkpoint_every or 1  # an explicit --checkpoint, too, is written every epoch
    if not resume and checkpoint.exists():
        warn(_EARLIER_CHECKPOINT.format(path=checkpoint, what="a checkpoint"))
    if resume and out.exists() and not checkpoint.exists() and not force:
        warn(
            f"nothing to resume: {out} exists and its run left no checkpoint (a finished run removes "
            "it), so it is trained again from the start and overwritten (--init OUT trains a finished "
            "model further)"
        )
    started = time.time()
    # a checkpoint to resume from: this run's, or the one it resumed (not an earlier run's left there)
    ctx.meta["on_interrupt"] = lambda: (
        f"the last checkpointed epoch is in {checkpoint}: run the same command with --resume to continue"
        if checkpoint.exists() and (resume or checkpoint.stat().st_mtime >= started - 1.0)
        else "no epoch of this run was checkpointed yet (the first checkpoint is written after "
        f"{checkpoint_seconds:g} s of training or at the end of an epoch, whichever is later): run the "
        "same command again"
    )

    # a resumed run's cost: its earlier runs' epochs (the checkpoint's elapsed time) and this run
    earlier = checkpointed_seconds(checkpoint) if resume else 0.0
    t0 = time.perf_counter()
    monitor = partial(exact_log_likelihoods, max_bits=exact_max_bits) if exact_max_bits > 0 else None
    start = None
    if init is not None:
        start, _ = load_model(init, device=dev)
        if not isinstance(start, (BoltzmannMachine, UnitRBM, UnitDBM)):
            raise BoltzkitError("--init takes an RBM, SRBM, BM or DBM file", got=f"a {type(start).__name__}")
        check_alphabet(start, alphabet, what="the --init model")
    if units.name != "binary":  # a unit DBM's mean field is undamped: --damping only when given
        if not _given(ctx, "damping"):
            del training["damping"]
        if units.has_sigma:
            training["learn_sigma"] = learn_sigma
    trained, hist = train_model(
        train.x,
        kind=model.value,
        hidden=hidden_sizes,
        init=start,
        recipe=chosen,
        visible=units,
        **training,
        seed=seed,
        device=dev,
        valid_x=None if valid is None else valid.x,
        checkpoint_path=checkpoint,
        checkpoint_every=checkpoint_every,
        checkpoint_seconds=checkpoint_seconds,
        resume=resume,
        history_path=history,
        progress=show_progress(progress),
        monitor=monitor,
        monitor_every=monitor_every,
    )
    last = dict(hist.last or {})
    seconds = earlier + time.perf_counter() - t0
    metrics: dict[str, Any] = {
        key: last.get(key) for key in ("recon_error", "log_z", "train_log_lik", "valid_log_lik")
    }
    metrics["test_log_lik"] = None
    if test is not None and monitor is not None and metrics["log_z"] is not None:
        metrics["test_log_lik"] = monitor(trained, {"test": test.x.to(trained.device)}).get("test_log_lik")
    if last.get("log_lik_bound") is not None:  # a DBM's mean-field lower bound, not log p(v) itself
        metrics["log_lik_bound"] = last["log_lik_bound"]
    if units.name != "binary":
        # the letters of the states, so that sequences read back the same way (a model trained
        # further keeps its own when --alphabet is not given)
        trained.alphabet = letters or getattr(start, "alphabet", None)
    settings = {
        "model": model.value,
        **({"visible_units": units.name, "alphabet": letters} if units.name != "binary" else {}),
        "hidden": hidden_sizes,
        **recipe_settings(chosen),
        "recipe": recipe,
        # where the options given over the recipe changed its settings
        **({"recipe_overrides": recipe_differences(named, recipe_settings(chosen))} if recipe else {}),
        "command": command,
        **training,
        # what ran where the options left it to train(): the rate's schedule and the positive phase
        # (whose damping is recorded only where a mean field used it)
        **{key: hist.settings[key] for key in ("lr_schedule", "positive") if key in hist.settings},
        **(
            {"damping": hist.settings["positive_settings"].get("damping")}
            if "positive_settings" in hist.settings and "damping" in training
            else {}
        ),
        **({"k": None} if chosen.k_schedule is not None else {}),  # the schedule says what k ran
        "seed": seed,
        "device": str(dev),
        "data": train.name,
        "n_train": train.n_samples,
        # which data "data" named when the model was trained (evaluate compares against it)
        "train_data_fingerprint": training_fingerprint(train.x),
        "valid_data": None if valid is None else valid.name,
        "test_data": None if test is None else test.name,
        "exact_max_bits": exact_max_bits,
    }
    (export_npz if out.suffix.lower() == ".npz" else save_model)(
        trained,
        out,
        metadata={
            "data": train.name,
            "image_shape": None if train.image_shape is None else list(train.image_shape),
            "training": settings,
            "metrics": metrics,
            "training_seconds": seconds,
            "sparse_products": hist.sparse_products,  # which products the run took (README)
        },
    )
    if checkpoint is not None and checkpoint.exists():  # the model is saved: its checkpoint is done with
        checkpoint.unlink()
    record = {
        "out": str(out),
        "data": train.name,
        "kind": trained.kind,
        **({"visible_units": units.name} if units.name != "binary" else {}),
        "layer_sizes": list(trained.layer_sizes),
        "n_visible": trained.n_visible,
        "n_hidden": trained.n_hidden,
        "seconds": seconds,
        **metrics,
        "settings": settings,
        "history": hist.to_list(),
    }
    emit(record, as_json=as_json, human=lambda: _summary(record))
