"""The zoo: trained models published with the repository, each with a card of what was measured.

A zoo model is a pair of files in the zoo folder (``zoo/`` at the repository root, or
``$BOLTZKIT_ZOO_DIR``): ``NAME.safetensors``, an ordinary boltzkit model file in float32, and
``NAME.json``, its card: the recipe and the command that trained it, the seed, the seconds and the
machine, the data, the measured ``log Z`` with its band and verdict, the train and test mean
log-probabilities (or lower bounds), the paper's numbers where the model reproduces a table, and
a *check*: the mean log-probability of a fixed subset of the test images, which anyone can
recompute from the file (:func:`card_check_images`).

``zoo:NAME`` works wherever a model file does (:func:`resolve_model_path` is applied by
:func:`~boltzkit.io.model_files.load_model`); :func:`names` and :func:`read_card` list and
describe the zoo. Loading a zoo model (:func:`boltzkit.zoo.load`) and checking a card against its
file (:func:`boltzkit.zoo.verify_file`) build on the model files, which build on this module, so
they live in :mod:`boltzkit.zoo`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from boltzkit.errors import BoltzkitWarning, ModelFileError, warn

#: Prefix of a zoo model where a path is expected.
PREFIX = "zoo:"
#: Environment variable naming the zoo folder.
ZOO_ENV = "BOLTZKIT_ZOO_DIR"
#: Version of the card layout.
CARD_VERSION = 1
#: Every ``CHECK_STRIDE``-th test image (from the first) makes up a card's check subset.
CHECK_STRIDE = 33


def zoo_dir() -> Path:
    """The zoo folder: ``$BOLTZKIT_ZOO_DIR``, else ``zoo/`` at the root of the source checkout."""
    env = os.environ.get(ZOO_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "zoo"


def names() -> list[str]:
    """The zoo's model names (those with both a model file and a card), sorted."""
    folder = zoo_dir()
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.json") if (folder / f"{p.stem}.safetensors").is_file())


def unpaired() -> dict[str, str]:
    """The zoo folder's half pairs: a model file without its card, or a card without its model
    file, by name, with what is missing (``{}`` where every file has its partner). :func:`names`
    leaves them out; ``boltzkit zoo`` lists them and ``zoo verify`` fails them."""
    folder = zoo_dir()
    if not folder.is_dir():
        return {}
    models = {p.stem for p in folder.glob("*.safetensors")}
    cards = {p.stem for p in folder.glob("*.json")}
    out = {name: f"the model file {name}.safetensors has no card {name}.json" for name in models - cards}
    out.update({n: f"the card {n}.json has no model file {n}.safetensors" for n in cards - models})
    return dict(sorted(out.items()))


def missing_text() -> str | None:
    """Why the zoo folder holds no model, where it does not exist (``None`` where it does): the zoo
    ships with the source checkout, not with an installed wheel."""
    folder = zoo_dir()
    if folder.is_dir():
        return None
    if os.environ.get(ZOO_ENV):
        return f"{ZOO_ENV} names {folder}, which is not a directory"
    return (
        f"this install has no zoo folder ({folder}): the zoo's models ship with the source checkout "
        f"(zoo/ at its root), not with an installed package; install from a clone (`pip install -e .`) "
        f"or set {ZOO_ENV} to a zoo folder"
    )


def close_names(name: str, n: int = 3) -> list[str]:
    """Up to ``n`` zoo names close to ``name`` (case ignored), closest first."""
    known = names()
    lowered = [k.lower() for k in known]
    return [known[lowered.index(c)] for c in difflib.get_close_matches(name.lower(), lowered, n=n)]


def _unknown(name: str) -> ModelFileError:
    known = names()
    close = close_names(name)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    empty = missing_text() or f"a model in {zoo_dir()} (the zoo is empty)"
    return ModelFileError(
        "no such model in the zoo",
        got=repr(name),
        expected=", ".join(known) if known else empty,
        hint=f"{hint}`boltzkit zoo` lists the models; set {ZOO_ENV} to use another zoo folder.",
    )


def model_path(name: str) -> Path:
    """The model file of zoo model ``name`` (an error naming the known models if absent)."""
    name = str(name).strip()
    if name.lower().startswith(PREFIX):
        name = name[len(PREFIX) :].strip()
    path = zoo_dir() / f"{name}.safetensors"
    if name and "/" not in name and not path.is_file():  # the name in other letter case
        same = [k for k in names() if k.lower() == name.lower()]
        path = zoo_dir() / f"{same[0]}.safetensors" if len(same) == 1 else path
    if not name or "/" in name or not path.is_file():
        raise _unknown(name)
    return path


def card_path(name: str) -> Path:
    """The card of zoo model ``name``."""
    return model_path(name).with_suffix(".json")


def resolve_model_path(path: str | os.PathLike) -> Path:
    """``zoo:NAME`` as the zoo's model file; any other path unchanged (a value that is no path is
    refused plainly)."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise ModelFileError(
            "a model path must be a string or a path",
            got=repr(path),
            expected="'model.safetensors', a pathlib.Path, or 'zoo:NAME'",
        )
    text = os.fspath(path)
    return model_path(text) if str(text).lower().startswith(PREFIX) else Path(text)


def read_card(name: str) -> dict[str, Any]:
    """The card of zoo model ``name`` (a dict, as stored), checked by :func:`check_card`."""
    path = card_path(name)
    rewrite = "write it with `boltzkit zoo add NAME MODEL --force`, or restore it from version control."
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ModelFileError(
            "the zoo model has no card", got=str(path), expected="a card beside its model file",
            hint=rewrite,
        ) from None  # fmt: skip
    except OSError as exc:
        got = f"{path}: {exc.strerror}"
        raise ModelFileError("cannot read the zoo card", got=got, hint=rewrite) from None
    try:
        card = json.loads(text)
    except ValueError as exc:
        raise ModelFileError(
            "the zoo card is not valid JSON", got=f"{path}: {exc}", expected="a card as `boltzkit zoo add` "
            "writes it (zoo/README.md)", hint=rewrite,
        ) from None  # fmt: skip
    problem = check_card(card)
    if problem is not None:
        raise ModelFileError(
            "the zoo card is malformed",
            got=f"{path}: {problem}",
            expected="a card as `boltzkit zoo add` writes it (zoo/README.md)",
            hint="write it again with `boltzkit zoo add NAME MODEL --force`, or restore it from version "
            "control.",
        )
    return card


def _is_number(value: Any) -> bool:
    """A finite number (a card's NaN or infinity is no measurement)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number_kind(value: Any) -> str:
    """What a card's field should have been: "a finite number" beside a NaN or infinity."""
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return "a finite number" if numeric else "a number"


#: What a card must hold for listing, showing and verifying it: field -> (test, what it should be).
_CARD_FIELDS = {
    "name": (lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    "kind": (lambda v: isinstance(v, str) and bool(v), "a model kind such as 'rbm'"),
    "layer_sizes": (
        lambda v: isinstance(v, list) and bool(v) and all(isinstance(n, int) and n >= 0 for n in v),
        "a list of unit counts",
    ),
    "sha256": (lambda v: isinstance(v, str) and len(v) == 64, "the model file's hex sha256"),
    "test_data": (lambda v: isinstance(v, str) and bool(v), "a data spec such as 'mnist'"),
}
#: Sections of numbers: section -> its fields that must be numbers (``None`` allowed where marked).
_CARD_SECTIONS = {
    "log_z": {"log_z": False},
    "train": {"mean_log_prob": True},
    "test": {"mean_log_prob": True},
    "check": {"mean_log_prob": False, "seed": False},
}


def check_card(card: Any) -> str | None:
    """What is wrong with a zoo card's layout (``None`` when nothing is): the fields that
    listing, showing and verifying a model read, each of the right type."""
    if not isinstance(card, dict):
        return f"a {type(card).__name__}, not a JSON object"
    for key, (test, what) in _CARD_FIELDS.items():
        if key not in card:
            return f"no {key!r} (expected {what})"
        if not test(card[key]):
            return f"{key} is {card[key]!r}, not {what}"
    for section, fields in _CARD_SECTIONS.items():
        part = card.get(section)
        if not isinstance(part, dict):
            return f"{section} is {part!r}, not an object"
        for key, optional in fields.items():
            value = part.get(key)
            if not (_is_number(value) or (optional and value is None)):
                return f"{section}.{key} is {value!r}, not {_number_kind(value)}"
        for key, value in part.items():
            numeric = key.startswith(("mean_log_prob_", "log_z_"))
            if numeric and value is not None and not _is_number(value):
                return f"{section}.{key} is {value!r}, not {_number_kind(value)}"
    if not isinstance(card["check"]["seed"], int):
        return f"check.seed is {card['check']['seed']!r}, not an integer"
    paper = card.get("paper")
    if paper is not None and not isinstance(paper, dict):
        return f"paper is {paper!r}, not an object"
    return None


def warn_if_unpublished(path: Path, raw: bytes) -> None:
    """Warn where the bytes ``raw`` of zoo model file ``path`` are not those its card describes (a
    changed or replaced file, or no readable card): the card's figures do not hold for it."""
    card = path.with_suffix(".json")
    try:
        recorded = json.loads(card.read_text()).get("sha256")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded is None:
        problem = f"has no readable card ({card}), so nothing says what was measured on it"
    elif recorded != hashlib.sha256(raw).hexdigest():
        problem = "is not the file its card describes (another sha256): the card's figures do not hold for it"
    else:
        return
    warn(
        BoltzkitWarning(
            f"zoo model {path.stem!r} {problem}; `boltzkit zoo verify {path.stem}` says what differs, "
            f"and `boltzkit zoo add {path.stem} MODEL --force` measures it again"
        ),
    )


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def card_check_images(n_test: int) -> slice:
    """The test images of a card's check: every :data:`CHECK_STRIDE`-th from the first."""
    return slice(0, n_test, CHECK_STRIDE)


__all__ = [
    "CARD_VERSION",
    "CHECK_STRIDE",
    "PREFIX",
    "ZOO_ENV",
    "card_check_images",
    "card_path",
    "check_card",
    "file_sha256",
    "missing_text",
    "model_path",
    "names",
    "read_card",
    "resolve_model_path",
    "warn_if_unpublished",
    "zoo_dir",
]
