"""Publishing a trained model to the zoo: measure it and write its card (:mod:`boltzkit.io.zoo`).

:func:`measure` gives what a card records about a model's quality:

* ``log Z``: exact when at most ``exact_max_bits`` units must be enumerated; otherwise forward AIS
  from a base-rate model fitted to the training data (S&M 2008, Eq. 18) on the given schedule,
  confirmed by reverse AIS started from the forward run's final states (a *heuristic* upper end,
  since those are approximate samples: the card says so), with both verdicts;
* the mean log-probability of the training and the test data (exact ``log p*(v)`` for RBMs and
  SRBMs; the mean-field lower bound for BMs and DBMs; the lower bound of S&M 2008, Eqs. 22-24 for
  DBNs), with the band that ``log Z``'s uncertainty implies;
* the *check*: the same on every :data:`~boltzkit.io.zoo.CHECK_STRIDE`-th test image, which a
  reader recomputes from the file alone (for a DBN with the card's seed and number of samples).

:func:`publish` writes the model in float32 and the card next to it, atomically.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzkit.atomic import PathLike
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import estimate_log_z
from boltzkit.estimators.dbn_bound import dbn_bound, dbn_top_log_z, top_layer_data
from boltzkit.estimators.exact import enumeration_bits, enumeration_plan
from boltzkit.estimators.likelihood import dataset_log_prob
from boltzkit.estimators.result import LogZResult
from boltzkit.io import load_model, save_model
from boltzkit.io.zoo import CARD_VERSION, card_check_images, file_sha256, zoo_dir
from boltzkit.jsonio import save_json
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.dbn import DBN

#: Keys of a log Z record kept on a card.
_LOG_Z_KEYS = (
    "method", "log_z", "log_z_minus_sigma", "log_z_plus_sigma", "log_z_minus_3sigma", "log_z_plus_3sigma",
    "log_z_stderr", "ess", "n_chains", "n_steps", "reliable", "reliability_reason", "advice", "k_hat", "schedule",
    "seconds", "base_data", "log_z_lower", "log_z_upper", "gap", "gap_stderr", "bound",
)  # fmt: skip
#: Keys of a log-probability record kept on a card.
_LOG_P_KEYS = (
    "mean_log_prob", "mean_log_prob_minus_3sigma", "mean_log_prob_plus_3sigma", "data_stderr", "n", "bound",
    "mc_error_3std", "pooled_error_3std", "total_error_3std", "n_samples",
)  # fmt: skip


def machine() -> str:
    """A one-line description of this machine: processor, cores, torch build."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cuda = (
        f", CUDA {torch.version.cuda} ({torch.cuda.get_device_name()})"
        if torch.cuda.is_available()
        else ", CPU build"
    )
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}{cuda}"


def _keep(record: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: record[k] for k in keys if k in record}


def _log_z_record(result: LogZResult) -> dict[str, Any]:
    full = result.to_dict()
    record = _keep(full, _LOG_Z_KEYS)
    if record.get("method") == "sandwich":  # a card names each end
        record["lower"] = {
            "method": "ais",
            "log_z": record.pop("log_z_lower", None),
            "bound": full.get("lower_bound"),
        }
        record["upper"] = {
            "method": "reverse-ais",
            "log_z": record.pop("log_z_upper", None),
            "bound": full.get("upper_bound"),
            "start": full.get("start"),
        }
    if full.get("checks"):
        record["checks"] = full["checks"]
    return record


def measure(
    model: BoltzmannMachine | DBN,
    *,
    train_x: Tensor,
    test_x: Tensor,
    n_chains: int = 100,
    betas: str | int | Tensor = "paper",
    seed: int = 0,
    exact_max_bits: int = 25,
    reverse: bool = True,
    dbn_samples: int = 5,
    progress: bool = False,
) -> dict[str, Any]:
    """What a card records about ``model``: ``log_z``, ``train``, ``test`` and ``check``.

    Parameters
    ----------
    model
        A member of the Boltzmann machine family or a DBN.
    train_x, test_x
        The training data (also the base-rate model's) and the test data, binary.
    n_chains, betas, seed
        AIS runs, schedule and seed (each direction for the sandwich).
    exact_max_bits
        Enumerate ``log Z`` when at most this many units must be enumerated.
    reverse
        Confirm an AIS estimate with reverse AIS (the sandwich) when ``log Z`` is not exact.
    dbn_samples
        Samples of the recognition model per image for a DBN's bound (S1: 5).
    """
    check_x = test_x[card_check_images(test_x.shape[0])]
    if isinstance(model, DBN):
        top = model.top
        exact = enumeration_plan(top).n_bits <= exact_max_bits
        if exact or not reverse:
            log_z = dbn_top_log_z(
                model, "exact" if exact else "ais", data=train_x, n_chains=n_chains, betas=betas, seed=seed,
                max_bits=exact_max_bits, progress=progress,
            )  # fmt: skip
        else:
            base = top_layer_data(model, train_x)
            log_z = estimate_log_z(
                top, "sandwich", base_rate_data=base, n_chains=n_chains, betas=betas, seed=seed,
                progress=progress,
            ).with_settings(of="top RBM", base_data="recognition probabilities of the training data")  # fmt: skip

        def log_p(x: Tensor) -> dict[str, Any]:
            return dbn_bound(model, x, log_z, n_samples=dbn_samples, seed=seed).to_dict()

    else:
        exact = enumeration_bits(model) <= exact_max_bits
        method = "exact" if exact else ("sandwich" if reverse else "ais")
        log_z = estimate_log_z(
            model, method, base_rate_data=None if exact else train_x, n_chains=n_chains, betas=betas,
            seed=seed, max_bits=max(exact_max_bits, 30) if exact else 30, progress=progress,
        )  # fmt: skip

        def log_p(x: Tensor) -> dict[str, Any]:
            return dataset_log_prob(model, x.to(device=model.device, dtype=model.dtype), log_z).to_dict()

    train, test = log_p(train_x), log_p(test_x)
    check = check_log_prob(model, check_x, log_z, seed=seed, n_samples=dbn_samples)
    return {
        "log_z": _log_z_record(log_z),
        "train": _keep(train, _LOG_P_KEYS),
        "test": _keep(test, _LOG_P_KEYS),
        "check": {
            "images": f"test[0::{card_check_images(test_x.shape[0]).step}]",
            "n": int(check_x.shape[0]),
            "device": "cpu",
            "mean_log_prob": check,
            "mean_log_prob_minus_3sigma": _shifted(check, test, "mean_log_prob_minus_3sigma"),
            "mean_log_prob_plus_3sigma": _shifted(check, test, "mean_log_prob_plus_3sigma"),
            "seed": seed,
            "n_samples": dbn_samples if isinstance(model, DBN) else None,
        },
    }


def check_log_prob(
    model: BoltzmannMachine | DBN, x: Tensor, log_z: LogZResult, *, seed: int, n_samples: int
) -> float:
    """A card's check: the mean log-probability of the check images ``x`` given ``log_z``,
    computed on the CPU in the model's float32 (for a DBN, the bound of S&M 2008 Eq. 24 with
    ``n_samples`` samples drawn from a CPU generator seeded with ``seed``), so that any reader
    recomputes it from the file alone, whatever device measured the card."""
    cpu = model.detached_copy(dtype=torch.float32, device="cpu")
    log_z = LogZResult.exact(float(log_z.log_z), source="the card")
    if isinstance(cpu, DBN):
        return float(dbn_bound(cpu, x.to("cpu"), log_z, n_samples=int(n_samples), seed=int(seed)).mean_bound)
    return float(dataset_log_prob(cpu, x.to(device="cpu", dtype=torch.float32), log_z).mean_log_prob)


def _shifted(check: float, test: dict[str, Any], key: str) -> float | None:
    """The check's band: the test mean's band from log Z's uncertainty, moved to the check's value
    (the same log Z shifts every image's log-probability alike)."""
    edge = test.get(key)
    return None if edge is None else check + float(edge) - float(test["mean_log_prob"])


#: The metadata of a trained model's file that its published copy keeps (with its ``zoo_name``);
#: ``created`` too, so that a model measured again in place (``zoo add X zoo:X --force``) keeps its bytes.
PUBLISHED_METADATA = (
    "training",
    "metrics",
    "training_seconds",
    "sparse_products",
    "data",
    "image_shape",
    "created",
)


def publish(
    source: PathLike,
    name: str,
    *,
    measured: dict[str, Any],
    command: str,
    data: str,
    test_data: str,
    paper: dict[str, Any] | None = None,
    notes: str | None = None,
    folder: PathLike | None = None,
) -> Path:
    """Write ``source`` as ``NAME.safetensors`` (float32) into the zoo and its card ``NAME.json``.

    ``measured`` is :func:`measure`'s record; ``command`` the command that trained the model;
    ``paper`` the paper's numbers the model stands beside (e.g. ``{"source": "S1 Table 1",
    "test": -125.53}``). The recipe, seed and seconds come from the model file's metadata.
    """
    check_name(name)
    folder = Path(folder) if folder is not None else zoo_dir()
    folder.mkdir(parents=True, exist_ok=True)
    model, metadata = load_model(source, dtype="float32")
    target = folder / f"{name}.safetensors"
    kept = {k: v for k, v in metadata.items() if k in PUBLISHED_METADATA}
    save_model(model, target, metadata={**kept, "zoo_name": name})
    training = metadata.get("training") or {}
    card = {
        "card_version": CARD_VERSION,
        "name": name,
        "file": target.name,
        "sha256": file_sha256(target),
        "bytes": target.stat().st_size,
        "kind": metadata.get("kind"),
        "layer_sizes": metadata.get("layer_sizes"),
        "dtype": "float32",
        "recipe": training.get("recipe"),
        "training": training,
        "command": command,
        "seed": training.get("seed"),
        "training_seconds": metadata.get("training_seconds"),
        "machine": machine(),
        "data": data,
        "test_data": test_data,
        **measured,
        "paper": paper,
        "notes": notes,
    }
    save_json(card, folder / f"{name}.json")
    return target


def rename(old: str, new: str) -> Path:
    """Publish zoo model ``old`` as ``new``: the file again with ``zoo_name`` set to ``new`` (its
    arrays and every other metadata as they are), and its card with the new name, file, sha256 and
    size (every measurement as it is, since the numbers do not change); then the old pair is
    removed. The new pair is written (atomically) before the old one goes, so an interrupted
    rename leaves the model under one name or both, never under none. Other models that name it
    (``zoo:OLD``, a DBN's bottom) name it anew (:func:`rename_references`).

    Returns the new model file's path.
    """
    from boltzkit.io.zoo import read_card

    old, new = old.strip(), new.strip()
    check_name(new)
    folder = zoo_dir()
    if new == old:
        raise BoltzkitError("a model is renamed to another name", got=f"{old!r} to {new!r}")
    if (folder / f"{new}.safetensors").exists() or (folder / f"{new}.json").exists():
        raise BoltzkitError(
            f"the zoo already holds a model named {new!r}",
            hint="remove it first or choose another name.",
        )
    card = read_card(old)
    source = folder / f"{old}.safetensors"
    model, metadata = load_model(source, dtype="float32")
    target = folder / f"{new}.safetensors"
    kept = {k: v for k, v in metadata.items() if k in PUBLISHED_METADATA}
    save_model(model, target, metadata={**kept, "zoo_name": new})
    card = {
        **card,
        "name": new,
        "file": target.name,
        "sha256": file_sha256(target),
        "bytes": target.stat().st_size,
    }
    save_json(card, folder / f"{new}.json")
    source.unlink()
    (folder / f"{old}.json").unlink()
    rename_references(old, new)
    return target


def _renamed(value: Any, pattern: re.Pattern[str], new: str) -> Any:
    """``value`` (JSON-like) with every ``zoo:OLD`` that ``pattern`` finds in its strings made ``zoo:NEW``."""
    if isinstance(value, str):
        return pattern.sub(f"zoo:{new}", value)
    if isinstance(value, dict):
        return {k: _renamed(v, pattern, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, pattern, new) for v in value]
    return value


def rename_references(old: str, new: str) -> list[str]:
    """Make every ``zoo:OLD`` in the zoo's cards and model files' metadata ``zoo:NEW`` (a DBN names
    its bottom RBM so, and its command), after model ``old`` was renamed ``new``. A file whose
    metadata changes is written again (its arrays as they are) and its card takes the new sha256
    and size. Returns the names of the models changed."""
    from boltzkit.io.zoo import read_card

    pattern = re.compile(rf"zoo:{re.escape(old)}(?![A-Za-z0-9._-])")
    folder = zoo_dir()
    changed = []
    for path in sorted(folder.glob("*.json")):
        name = path.stem
        if name == new or not pattern.search(path.read_text()):
            continue
        card = _renamed(read_card(name), pattern, new)
        target = folder / f"{name}.safetensors"
        model, metadata = load_model(target)  # in its stored dtype, every metadata kept
        kept = {k: v for k, v in metadata.items() if k != "source_format"}
        renamed = _renamed(kept, pattern, new)
        if renamed != kept:
            save_model(model, target, metadata=renamed)
            card = {**card, "sha256": file_sha256(target), "bytes": target.stat().st_size}
        save_json(card, path)
        changed.append(name)
    return changed


#: A zoo name: one word, as it names two files and ``zoo:NAME``.
ZOO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_name(name: str) -> None:
    """Refuse a zoo name that is not one word (it names two files and ``zoo:NAME``)."""
    if not isinstance(name, str) or not ZOO_NAME.fullmatch(name):
        raise BoltzkitError(
            "a zoo name is one word of letters, digits, '-', '_' and '.', starting with a letter or digit",
            got=repr(name),
            hint="for example sm2008-cd25-500",
        )


def recompute_check(name: str, *, data_dir: PathLike | None = None) -> dict[str, Any]:
    """Recompute a card's check from the model file alone: the mean log-probability of the check
    images with the card's ``log Z`` (for a DBN, its bound with the card's seed and number of
    samples). Returns ``{"mean_log_prob", "card", "lower", "upper", "within"}``: ``within`` says
    whether the recomputed value lies inside the card's ±3σ band (widened by 1e-3 nats of
    rounding)."""
    from boltzkit.data import load_dataset
    from boltzkit.zoo import load, read_card

    card = read_card(name)
    model, _ = load(name)
    check = card["check"]
    test_x = load_dataset(card["test_data"], split="test", data_dir=data_dir, n_visible=model.n_visible).x
    x = test_x[card_check_images(test_x.shape[0])]
    log_z = LogZResult.exact(float(card["log_z"]["log_z"]), source=f"the card of {name}")
    value = check_log_prob(
        model, x, log_z, seed=int(check["seed"]), n_samples=int(check.get("n_samples") or 1)
    )
    lower = check.get("mean_log_prob_minus_3sigma")
    upper = check.get("mean_log_prob_plus_3sigma")
    centre = float(check["mean_log_prob"])
    lo = (centre if lower is None else float(lower)) - 1e-3
    hi = (centre if upper is None else float(upper)) + 1e-3
    return {
        "mean_log_prob": float(value),
        "card": centre,
        "lower": lo,
        "upper": hi,
        "within": lo <= value <= hi,
    }


__all__ = [
    "PUBLISHED_METADATA",
    "ZOO_NAME",
    "check_name",
    "machine",
    "measure",
    "publish",
    "recompute_check",
    "rename",
    "rename_references",
]
