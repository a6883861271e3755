"""``boltzkit train --visible gaussian|categorical:Q``: RBMs (:mod:`boltzkit.learning.unit_rbm`) and,
with ``--model dbm``, DBMs (:mod:`boltzkit.learning.unit_dbm`: mean-field and persistent chains)
with real-valued or categorical visible units, trained from the same options and recipe as binary
models (method cd or pcd/sap, k, epochs, lr, batch size, momentum's first value, weight decay, chains);
without --lr a Gaussian layer learns at 0.001 and a categorical one at 0.01, without --momentum or a
recipe the momentum is 0.5. ``--alphabet`` reads aligned sequences (FASTA) as categories and
records the letters in the model file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from boltzkit.cli.common import emit, warn
from boltzkit.data import load_values
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import dataset_log_prob, exact_log_z
from boltzkit.estimators.exact import enumeration_bits
from boltzkit.io import export_npz, save_model
from boltzkit.learning.recipes import Recipe
from boltzkit.learning.unit_dbm import train_unit_dbm
from boltzkit.learning.unit_rbm import train_unit_rbm
from boltzkit.units import Gaussian, unit_type

#: Learning rates when --lr is not given: Gaussian-Bernoulli RBMs need small ones (Hinton 2010,
#: Sec. 13.2).
DEFAULT_LR = {"gaussian": 0.001, "categorical": 0.01}


def train_units(
    *,
    visible: str,
    alphabet: str | None,
    data: str,
    test_data: str | None,
    out: Path,
    hidden: list[int],
    model: str = "rbm",
    recipe: Recipe,
    lr_given: bool,
    momentum_given: bool,
    exact_max_bits: int,
    seed: int,
    data_dir: Path | None,
    command: str,
    progress: bool,
    as_json: bool,
) -> None:
    """Train, save and report an RBM or DBM with ``visible`` units (see the module docstring)."""
    units = unit_type(visible)
    method = {"cd": "cd", "pcd": "pcd", "sap": "pcd"}.get(recipe.method)
    if method is None:
        raise BoltzkitError(f"{units.name} visible units train by cd or pcd", got=f"--method {recipe.method}")
    for option, value in (("--centering", recipe.centering), ("--average", recipe.average)):
        if value is not None and str(value).strip().lower() != "none":
            raise BoltzkitError(
                f"{option} applies to binary units only",
                got=f"{option} {value} with --visible {units.name}",
                hint=f"drop {option} (or use --visible binary).",
            )
    hidden = [int(n) for n in hidden]
    if model == "dbm":
        if len(hidden) < 2:
            raise BoltzkitError(
                "a DBM needs at least two hidden layers", got=f"--hidden {','.join(map(str, hidden))}",
                hint="e.g. --hidden 50,25; one hidden layer is an RBM (--model rbm).",
            )  # fmt: skip
        if method != "pcd":
            warn(f"a DBM learns by persistent chains (S2 Sec. 4.1): --method {recipe.method} taken as pcd")
        method = "pcd"
    elif len(hidden) != 1:
        raise BoltzkitError("an RBM has one hidden layer", got=f"--hidden {','.join(map(str, hidden))}")
    name, x = load_values(data, split="train", data_dir=data_dir, seed=seed, alphabet=alphabet)
    lr = recipe.lr if lr_given else DEFAULT_LR[units.name.split(":")[0]]
    # the first value of a momentum schedule; without a recipe or --momentum, 0.5 ([H10] Sec. 9)
    momentum = float(str(recipe.momentum).split(",")[0].split("@")[0]) if momentum_given else 0.5
    settings: dict[str, Any] = {
        "model": model, "visible_units": units.name, "hidden": hidden, "method": method, "k": recipe.k,
        "epochs": recipe.epochs, "lr": lr, "lr_schedule": "linear", "momentum": momentum,
        "weight_decay": recipe.weight_decay, "batch_size": recipe.batch_size,
        "n_chains": recipe.n_chains if method == "pcd" else None, "seed": seed, "data": name,
        "learn_sigma": isinstance(units, Gaussian), "alphabet": alphabet, "command": command,
    }  # fmt: skip
    t0 = time.perf_counter()
    common = {
        "k": recipe.k, "epochs": recipe.epochs, "lr": lr, "momentum": momentum,
        "weight_decay": recipe.weight_decay, "batch_size": recipe.batch_size, "n_chains": recipe.n_chains,
        "seed": seed, "progress": progress,
    }  # fmt: skip
    if model == "dbm":
        trained, history = train_unit_dbm(x, units, hidden, **common)
    else:
        trained, history = train_unit_rbm(x, units, hidden[0], method=method, **common)
    seconds = time.perf_counter() - t0
    trained.alphabet = alphabet  # the letters of the states, so that sequences read back the same way
    record: dict[str, Any] = {
        "out": str(out), "data": name, "kind": trained.kind, "visible_units": units.name,
        "layer_sizes": list(trained.layer_sizes), "seconds": seconds, "settings": settings,
        "history": history,
    }  # fmt: skip
    if enumeration_bits(trained) <= exact_max_bits:  # exact log Z and log p(v) (exact, or a DBM's bound)
        log_z = exact_log_z(trained)
        record["log_z"] = log_z.log_z
        train_lp = dataset_log_prob(trained, trained.check_data(x), log_z)
        record["train_log_lik"], record["log_lik_bound"] = train_lp.mean_log_prob, train_lp.bound
        if test_data is not None:
            test_name, test_x = load_values(
                test_data, split="test", data_dir=data_dir, seed=seed, alphabet=alphabet
            )
            record["test_log_lik"] = dataset_log_prob(trained, test_x, log_z).mean_log_prob
            record["test_data"] = test_name
    metadata = {"training": settings, "data": name, "seconds": seconds, "command": command}
    (export_npz if out.suffix.lower() == ".npz" else save_model)(trained, out, metadata=metadata)
    emit(record, as_json=as_json, human=lambda: _summary(record))


def _summary(record: dict[str, Any]) -> str:
    shape = "x".join(str(n) for n in record["layer_sizes"])
    lines = [
        f"trained a {record['kind']} {shape} ({record['visible_units']} visible units) on {record['data']} "
        f"in {record['seconds']:.1f} s -> {record['out']}"
    ]
    if "log_z" in record:
        lines.append(f"log Z (exact): {record['log_z']:.4f}")
        bound = " (mean-field lower bound)" if record.get("log_lik_bound") == "lower" else ""
        lines.append(f"mean log p(v) on the training data{bound}: {record['train_log_lik']:.4f}")
        if "test_log_lik" in record:
            lines.append(f"mean log p(v) on {record['test_data']}{bound}: {record['test_log_lik']:.4f}")
    else:
        lines.append(f"for its log-likelihood run: boltzkit evaluate {record['out']} --data DATA --logz ais")
    return "\n".join(lines)


__all__ = ["DEFAULT_LR", "train_units"]
