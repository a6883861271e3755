"""Model files: safetensors with JSON metadata, and the registry of the kinds of model they hold.

A model is stored as one `safetensors <https://huggingface.co/docs/safetensors>`_ file: its
parameters as named tensors and, in the header's string metadata under the key ``"boltzkit"``, a
JSON object describing it::

    {"format": "boltzkit.model", "format_version": 1, "kind": "srbm", "n_visible": 784,
     "n_hidden": 500, "layer_sizes": [784, 500], "arrays": ["W", "L", "vbias", "hbias"],
     "dtype": "float32", "boltzkit_version": "0.1.0", "created": "2024-05-01T12:00:00+00:00",
     "training": {...}, "data": "mnist", ...}

``n_visible`` and ``n_hidden`` are recorded for two-layer models only. No pickle is involved
anywhere.

Loading dispatches on the recorded ``kind`` through a registry of kinds (:class:`ModelKind`); a
file without boltzkit metadata (a plain ``.npz`` or safetensors file from elsewhere) has its kind
recognised from its array names. Every array in the file must belong to the kind: none is
ignored. The kinds of the Boltzmann machine family (``rbm``, ``srbm``, ``bm``, ``dbm``) and their
arrays are in :mod:`boltzkit.io.boltzmann_kinds`. Files written before ``layer_sizes`` and
``arrays`` were recorded (kind ``"rbm"``) load as they always did.

Adding a kind
    Register a :class:`ModelKind`: its name, which arrays it needs (:class:`ArraySpec`), how to
    check them (shapes, laterals) and how to build the model from the checked tensors and the
    metadata::

        register_kind(ModelKind(name="dbn", label="DBN", arrays=..., check=..., build=...,
                                model_type=DBN))

    :func:`save_model` then writes any model whose ``kind`` attribute is ``"dbn"`` (its
    ``named_parameters()`` unless ``tensors_of`` says otherwise), and :func:`load_model` reads it
    back. The generic checks (every array present and known, floating point, finite, agreeing
    with the metadata, none left unused by the built model) apply to every kind. See
    :mod:`boltzkit.io.boltzmann_kinds` for a complete example; register a new kind where the
    ``boltzkit.io`` package imports it, so that it is known whenever model files are read.

Everything read is validated at this boundary; bad input raises
:class:`~boltzkit.errors.ModelFileError` with what was wrong, what was found and what was expected.
Every file is written atomically (:mod:`boltzkit.atomic`).
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from boltzkit._numerics import resolve_device
from boltzkit.atomic import PathLike, atomic_write_bytes
from boltzkit.errors import BoltzkitError, BoltzkitWarning, ModelFileError, warn
from boltzkit.io.zoo import PREFIX, close_names, resolve_model_path, warn_if_unpublished
from boltzkit.jsonio import dumps

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "PARAMETER_NAMES",
    "ArraySpec",
    "ModelKind",
    "get_kind",
    "kind_of_model",
    "load_model",
    "read_metadata",
    "register_kind",
    "registered_kinds",
    "save_model",
    "unregister_kind",
]

METADATA_KEY = "boltzkit"
"""Key of the JSON metadata in the safetensors header (and name of its array in an ``.npz``)."""

FORMAT_NAME = "boltzkit.model"
FORMAT_VERSION = 1
PARAMETER_NAMES = ("W", "vbias", "hbias")
"""The arrays of an RBM file."""

NOT_OURS = "not a boltzkit model file"
FORMATS_HINT = (
    "load_model reads boltzkit .safetensors files (written by save_model) and .npz archives with "
    "arrays W, vbias and hbias (and the laterals L, J; sigma for Gaussian visible units), W_0, W_1, ..., "
    "bias_0, bias_1, ... for a DBM, or W_0, vbias_0, hbias_0, W_1, ... for a DBN (README, 'The command "
    "line')."
)
ZIP_MAGIC = b"PK\x03\x04"
#: The first bytes of a single ``.npy`` array (which np.load reads too; the npz reader names it).
NPY_MAGIC = b"\x93NUMPY"
_MAX_HEADER_BYTES = 100 * 1024 * 1024
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Names other tools commonly use for the RBM's arrays; used only to suggest a renaming.
_ALTERNATIVE_NAMES = {
    "W": ("weights", "weight", "w", "vishid", "vis_hid", "visible_hidden", "components_", "coef_"),
    "vbias": ("visbiases", "visbias", "vb", "b", "bv", "visible_bias", "vis_bias", "intercept_visible_"),
    "hbias": ("hidbiases", "hidbias", "hb", "c", "bh", "hidden_bias", "hid_bias", "intercept_hidden_"),
}


# ------------------------------------------------------------------------------------------------
# The registry of kinds
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArraySpec:
    """The arrays a file of some kind holds, given the names found in it.

    Attributes
    ----------
    required
        Names that must be present, in their canonical order.
    optional
        Names that may be present; any other name is refused.
    expected
        The arrays in words, for error messages (``"arrays W (n_visible x n_hidden), ..."``).
    hint
        How to fix a file that lacks an array or holds a foreign one.
    """

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    expected: str = ""
    hint: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.required, *self.optional)


def parameter_tensors(model: nn.Module) -> dict[str, Tensor]:
    """The tensors saved for a model: its ``named_parameters()``, by parameter name."""
    return {name: p for name, p in model.named_parameters()}


def layer_facts(model: nn.Module) -> dict[str, Any]:
    """Metadata derived from a layered model: ``n_visible`` and ``n_hidden`` (two layers) and
    ``layer_sizes``."""
    sizes = [int(n) for n in model.layer_sizes]  # type: ignore[union-attr]
    facts: dict[str, Any] = {}
    if len(sizes) == 2:
        facts.update(n_visible=sizes[0], n_hidden=sizes[1])
    facts["layer_sizes"] = sizes
    return facts


BuildFn = Callable[[Mapping[str, Tensor], Mapping[str, Any], torch.dtype, torch.device], nn.Module]


@dataclass(frozen=True)
class ModelKind:
    """A kind of model that model files can hold.

    Attributes
    ----------
    name
        The ``kind`` recorded in the metadata (and the model's ``kind`` attribute).
    label
        Its name in messages (``"RBM"``).
    arrays
        ``arrays(names_found) -> ArraySpec``: which arrays a file of this kind needs. It may raise
        :class:`~boltzkit.errors.ModelFileError` itself (e.g. for a gap in a numbering).
    check
        ``check(tensors, path) -> layer_sizes``: validate the arrays' shapes and values beyond the
        generic checks (which have already passed: all arrays present and known, floating point,
        finite), raising :class:`~boltzkit.errors.ModelFileError` naming the file and the array.
    build
        ``build(tensors, metadata, dtype, device) -> model`` from the checked tensors, already in
        ``dtype``, and the stored metadata (``{}`` for a file without it).
    recognize
        ``recognize(names) -> bool``: whether a file *without* boltzkit metadata holds this kind,
        by its array names. ``None``: never guessed (the ``rbm`` kind is the fallback).
    model_type
        Models of this class (and a ``kind`` attribute equal to ``name``) are saved as this kind.
    tensors_of
        ``tensors_of(model) -> {name: tensor}``: what is saved (default: the named parameters).
    facts
        ``facts(model) -> dict``: metadata derived from the model (default: ``layer_sizes``, and
        ``n_visible``/``n_hidden`` for two layers); it cannot be overridden by the caller's.
    refine
        ``refine(tensors) -> kind name | None``: for a file without metadata recognised as this
        kind by its names, the kind its arrays' shapes make instead (a ``W, vbias, hbias`` file
        whose ``W`` has three dimensions is a categorical RBM).
    """

    name: str
    label: str
    arrays: Callable[[Collection[str]], ArraySpec]
    check: Callable[[Mapping[str, Tensor], Path], tuple[int, ...]]
    build: BuildFn
    recognize: Callable[[Collection[str]], bool] | None = None
    model_type: type = nn.Module
    tensors_of: Callable[[nn.Module], dict[str, Tensor]] = parameter_tensors
    facts: Callable[[nn.Module], dict[str, Any]] = layer_facts
    refine: Callable[[Mapping[str, Tensor]], str | None] | None = None


_KINDS: dict[str, ModelKind] = {}
DEFAULT_KIND = "rbm"
"""The kind of a file without metadata whose array names no kind recognises."""


def register_kind(kind: ModelKind, *, replace: bool = False) -> ModelKind:
    """Make ``kind`` readable and writable by :func:`load_model` and :func:`save_model`.

    Parameters
    ----------
    kind
        The kind.
    replace
        Allow replacing a registered kind of the same name.

    Returns
    -------
    ModelKind
        ``kind``.

    Raises
    ------
    BoltzkitError
        When a kind of that name is registered already (and ``replace`` is false).
    """
    if kind.name in _KINDS and not replace:
        raise BoltzkitError(
            "a model kind of this name is registered already", got=repr(kind.name), hint="pass replace=True."
        )
    _KINDS[kind.name] = kind
    return kind


def unregister_kind(name: str) -> ModelKind:
    """Remove the kind ``name`` from the registry (for tests and plugins); return it.

    Raises
    ------
    BoltzkitError
        When no kind of that name is registered.
    """
    if name not in _KINDS:
        raise BoltzkitError("no model kind of this name is registered", got=repr(name))
    return _KINDS.pop(name)


def registered_kinds() -> tuple[str, ...]:
    """The names of the registered kinds, in registration order."""
    return tuple(_KINDS)


def get_kind(name: object) -> ModelKind:
    """The registered kind ``name``.

    Raises
    ------
    ModelFileError
        When no kind of that name is registered.
    """
    if isinstance(name, str) and name in _KINDS:
        return _KINDS[name]
    raise ModelFileError(
        "the model file holds a model of another kind, which this version of boltzkit cannot read",
        got=repr(name),
        expected="one of " + ", ".join(repr(k) for k in _KINDS),
        hint="the file may come from a newer boltzkit; upgrade boltzkit to read it.",
    )


def _labels() -> str:
    labels = [f"{kind.label}s" for kind in _KINDS.values()]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def kind_of_model(model: object) -> ModelKind:
    """The registered kind a model is saved as (from its ``kind`` attribute and class).

    Raises
    ------
    ModelFileError
        When the model is of no registered kind.
    """
    name = getattr(model, "kind", None) if isinstance(model, nn.Module) else None
    kind = _KINDS.get(name) if isinstance(name, str) else None
    if kind is None or not isinstance(model, kind.model_type):
        got = type(model).__name__ + (f" of kind {name!r}" if isinstance(name, str) else "")
        raise ModelFileError(
            f"only {_labels()} can be saved as model files",
            got=got,
            expected="a boltzkit model of one of the kinds " + ", ".join(repr(k) for k in _KINDS),
        )
    return kind


# ------------------------------------------------------------------------------------------------
# Generic checks
# ------------------------------------------------------------------------------------------------
#: At most this many names in one message; the rest are counted.
LISTED_NAMES = 20


def listed(names: Sequence[str]) -> str:
    """``'a', 'b'`` for messages (``(none)`` when empty; beyond :data:`LISTED_NAMES` the rest
    counted, so that a stray name cannot make a message of megabytes)."""
    if not names:
        return "(none)"
    shown = ", ".join(repr(n) for n in names[:LISTED_NAMES])
    rest = len(names) - LISTED_NAMES
    return shown + (f" and {rest} more" if rest > 0 else "")


def refuse_far_numbers(found: Collection[str], numbers: Mapping[str, int], expected: str) -> None:
    """Refuse arrays numbered beyond what ``found`` can number without a gap (a model of ``n``
    layers or RBMs holds at least ``n`` numbered arrays), before anything lists the names up to
    that number (a stray ``bias_100000000`` would make a hundred million of them).

    ``numbers`` maps each numbered array name to its number."""
    far = sorted((name for name, number in numbers.items() if number >= len(found)), key=natural_key)
    if far:
        raise ModelFileError(
            f"the model file's arrays are numbered beyond what its {len(found)} arrays can number "
            f"without a gap: {listed(far)}",
            got="arrays " + listed(sorted(found, key=natural_key)),
            expected=expected,
            hint="number the layers' arrays 0, 1, ... without gaps, or remove the stray ones.",
        )


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key putting ``W_2`` before ``W_10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _guess_renaming(found: Sequence[str]) -> dict[str, str]:
    lowered = {n.lower(): n for n in found}
    guess = {}
    for target, alternatives in _ALTERNATIVE_NAMES.items():
        if target in found:
            continue
        for alt in (target, *alternatives):  # the name itself in other case, too ("VBIAS")
            if alt.lower() in lowered:
                guess[target] = lowered[alt.lower()]
                break
    return guess


def kind_for(md: Mapping[str, Any] | None, names: Collection[str]) -> ModelKind:
    """The kind of a file: the recorded one, else the one its array names are recognised as."""
    if md is not None:
        return get_kind(md.get("kind", DEFAULT_KIND))
    for kind in _KINDS.values():
        if kind.recognize is not None and kind.recognize(names):
            return kind
    return _KINDS[DEFAULT_KIND]


def check_names(
    kind: ModelKind, found: Sequence[str], p: Path, *, npz: bool, recorded: bool = False
) -> ArraySpec:
    """Refuse a file that lacks an array of its kind or holds one its kind does not have
    (``recorded``: the kind is the one the file's metadata records, not read off its arrays)."""
    spec = kind.arrays(found)
    missing = [n for n in spec.required if n not in found]
    unknown = [n for n in found if n not in spec.names]
    if missing:
        _raise_missing(kind, spec, missing, list(found), p, npz=npz)
    if unknown:
        which = "an array" if len(unknown) == 1 else "arrays"
        raise ModelFileError(
            f"the model file holds {which} that a {kind.label} file does not have: {listed(unknown)} "
            "(no array in a model file is ignored)",
            got=f"{p}: arrays {listed(list(found))}",
            expected=spec.expected,
            hint=spec.hint
            or (
                f"the file's metadata{' (its ' + repr(METADATA_KEY) + ' array)' if npz else ''} records "
                f"the kind {kind.name!r}, which decides the arrays it holds: remove the other arrays, or "
                "save the arrays without that metadata so that their names decide the kind."
                if recorded
                else "remove the other arrays, or store them in a file of their own."
            ),
        )
    return spec


def _kinds_sharing(found: Sequence[str], besides: ModelKind) -> list[str]:
    """The other kinds whose arrays include some of ``found``, each with what it holds: the hint
    for a file of no recognised kind (an Ising model's ``J`` without its ``h``, say)."""
    near = []
    for kind in _KINDS.values():
        if kind.name == besides.name:
            continue
        spec = kind.arrays(found)
        if set(found) & set(spec.names):
            article = "an" if kind.label[:1].lower() in "aeiou" else "a"
            near.append(f"{article} {kind.label} ({spec.expected})")
    return near


def _raise_missing(
    kind: ModelKind, spec: ArraySpec, missing: list[str], found: list[str], p: Path, *, npz: bool
) -> None:
    which = "array" if len(missing) == 1 else "arrays"
    hint = "save the parameters under the expected names" + (f"; {spec.hint}" if spec.hint else ".")
    guess = _guess_renaming(found)
    if guess and npz:
        args = ", ".join(f"{t}=a[{s!r}]" for t, s in guess.items())
        keep = ", ".join(f"{n}=a[{n!r}]" for n in spec.names if n in found)
        args = ", ".join(x for x in (keep, args) if x)
        hint = (
            f"the file seems to use other names; rename them, e.g. a = np.load({str(p)!r}); "
            f"np.savez('renamed.npz', {args}) (check that W is n_visible x n_hidden)."
        )
    elif guess:
        hint = "the file seems to use other names (" + ", ".join(f"{s!r} for {t}" for t, s in guess.items())
        hint += "); save the parameters under the expected names."
    elif kind.name == DEFAULT_KIND and (near := _kinds_sharing(found, kind)):
        hint = "its arrays are some of " + "; ".join(near) + ": give that kind all of its arrays."
    raise ModelFileError(
        f"the model file lacks the {which} {listed(missing)}"
        + ("" if kind.name == DEFAULT_KIND else f" of a {kind.label}"),
        got="arrays " + listed(found),
        expected=spec.expected,
        hint=hint,
    )


def _check_floating(tensors: Mapping[str, Tensor], p: Path) -> None:
    for name, t in tensors.items():
        if t.dtype not in _FLOAT_DTYPES:
            raise ModelFileError(
                f"the model array {name} is not floating point",
                got=f"dtype {_dtype_name(t.dtype)} (in {p})",
                expected="float32 or float64 (float16 and bfloat16 are accepted too)",
                hint="convert the arrays with .astype(np.float32) before saving.",
            )


def check_finite(tensors: Mapping[str, Tensor], p: Path | None = None, *, saving: bool = False) -> None:
    """Refuse NaN and infinite parameters, counted per array (``p``: the file read, if any)."""
    bad = []
    for name, t in tensors.items():
        n_nan = int(torch.isnan(t).sum())
        n_inf = int(torch.isinf(t).sum())
        if n_nan or n_inf:
            bad.append(f"{name} has {n_nan} NaN and {n_inf} inf values (of {t.numel()})")
    if bad:
        raise ModelFileError(
            ("refusing to save a model with" if saving else "the model file holds")
            + " non-finite parameters",
            got="; ".join(bad) + (f" (in {p})" if p is not None else ""),
            expected="finite values in every array (" + ", ".join(tensors) + ")",
            hint="if training wrote them, it diverged: lower the learning rate (and check momentum and "
            "weight decay), then train again or resume from an earlier checkpoint; if another tool wrote "
            "the file, the values are not a model's parameters.",
        )


def _is_int(value: Any, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: The metadata keys boltzkit itself reads, each with the test its value must pass where the key
#: is present and not null, and what the test asks for (:func:`_check_metadata_types`).
METADATA_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "format_version": (_is_int, "an integer"),
    "training": (lambda v: isinstance(v, dict), "an object (the training record)"),
    "metrics": (lambda v: isinstance(v, dict), "an object of numbers by name"),
    "image_shape": (
        lambda v: isinstance(v, (list, tuple)) and len(v) == 2 and all(_is_int(x, 1) for x in v),
        "[HEIGHT, WIDTH], two positive integers",
    ),
    "data": (lambda v: isinstance(v, (str, dict)), "the name of the training data, or an object"),
    "zoo_name": (lambda v: isinstance(v, str), "a string"),
    "training_seconds": (lambda v: _is_number(v) and v >= 0, "a number of seconds"),
}
#: The same for the keys of the training record that boltzkit reads (resume, the data check).
TRAINING_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "seed": (lambda v: _is_int(v, -(2**63)), "an integer"),  # (older versions took negative seeds)
    "train_data_fingerprint": (lambda v: isinstance(v, str), "a string"),
    "n_train": (_is_int, "a non-negative integer"),
    "sparse_products": (lambda v: isinstance(v, bool), "true or false"),
}


def _metadata_type_problems(md: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """The keys of ``md`` that boltzkit reads (:data:`METADATA_TYPES`, :data:`TRAINING_TYPES`)
    whose values fail their test: ``(key, value, what it should be)`` each."""
    checks = [(key, md.get(key), *test) for key, test in METADATA_TYPES.items()]
    training = md.get("training")
    if isinstance(training, dict):
        checks += [(f"training.{key}", training.get(key), *test) for key, test in TRAINING_TYPES.items()]
    return [(k, value, wanted) for k, value, test, wanted in checks if value is not None and not test(value)]


def _check_metadata_types(md: dict[str, Any] | None, p: Path) -> None:
    """Set aside, with a warning that names it, each metadata key boltzkit reads whose value is
    of the wrong type (a training record that is a string, a negative image shape, a seed of
    "zero"; a review of 2026-12-07 found them failing later with an unexplained error, or passing
    unread). The model itself is sound, so it loads; :func:`prepare_save` refuses such a value."""
    if md is None:
        return
    for key, value, expected in _metadata_type_problems(md):
        warn(
            f"{p}: the metadata key {key!r} holds {value!r}, where boltzkit reads {expected}: the key is "
            "ignored (fix or remove it, or re-save the model)",
            BoltzkitWarning,
        )
        if key.startswith("training."):
            md["training"].pop(key.split(".", 1)[1], None)
        else:
            md.pop(key, None)


def _check_metadata_agrees(
    md: Mapping[str, Any] | None, sizes: tuple[int, ...], names: Collection[str], p: Path
) -> None:
    if md is None:
        return
    hint = "the file was edited or corrupted; re-save the model."
    if len(sizes) == 2:
        claimed = (md.get("n_visible", sizes[0]), md.get("n_hidden", sizes[1]))
        if claimed != sizes:
            raise ModelFileError(
                "the model file's metadata disagrees with its arrays",
                got=f"metadata n_visible={claimed[0]!r}, n_hidden={claimed[1]!r}; W {sizes[0]} x {sizes[1]}",
                hint=hint,
            )
    elif "n_visible" in md and md["n_visible"] != sizes[0]:
        raise ModelFileError(
            "the model file's metadata disagrees with its arrays",
            got=f"metadata n_visible={md['n_visible']!r}; bias_0 ({sizes[0]},)",
            hint=hint,
        )
    if "layer_sizes" in md and md["layer_sizes"] != list(sizes):
        raise ModelFileError(
            "the model file's metadata disagrees with its arrays",
            got=f"metadata layer_sizes={md['layer_sizes']}; the arrays make layers {list(sizes)}",
            hint=hint,
        )
    if "arrays" in md and (not isinstance(md["arrays"], list) or set(md["arrays"]) != set(names)):
        raise ModelFileError(
            "the model file's metadata disagrees with its arrays",
            got=f"metadata arrays {md['arrays']!r}; the file holds {listed(sorted(names, key=natural_key))}",
            hint=hint,
        )


#: The facts that say what a model is, which a file's metadata may not contradict
#: (:func:`_check_facts_agree`); the other facts (an Ising model's ``convention`` text and
#: ``log_z_constant``) describe it and are taken from the model as loaded, without a check.
CHECKED_FACTS = ("visible_units", "alphabet", "n_components", "n_visible", "n_hidden", "layer_sizes")


def _check_facts_agree(md: Mapping[str, Any] | None, facts: Mapping[str, Any], p: Path) -> None:
    """Refuse a file whose metadata states a fact about the model (:data:`CHECKED_FACTS`:
    ``visible_units``, ``n_components``, ...) that the model its arrays make contradicts: the label
    would otherwise travel on with the model (``load_model``'s metadata, ``convert``'s output). A
    kind whose facts name no ``visible_units`` has binary visible units (and ``save_model`` stores
    no other label for it)."""
    if md is None:
        return
    for key, value in {"visible_units": "binary", **facts}.items():
        if key not in md or key not in CHECKED_FACTS:
            continue
        expected = json.loads(dumps(value, what="model metadata"))
        if md[key] != expected:
            raise ModelFileError(
                "the model file's metadata disagrees with its arrays",
                got=f"metadata {key}={md[key]!r}; the arrays make a model with {key}={expected!r} (in {p})",
                hint="the file was edited or written by another tool; remove the key or re-save the model.",
            )


# ------------------------------------------------------------------------------------------------
# Saving
# ------------------------------------------------------------------------------------------------
def _boltzkit_version() -> str:
    # Looked up at call time so that boltzkit/__init__ may import this module.
    import boltzkit

    return str(getattr(boltzkit, "__version__", "unknown"))


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


_DERIVED = ("format", "format_version", "kind", "n_visible", "n_hidden", "layer_sizes", "arrays", "dtype")


def prepare_save(
    model: nn.Module,
    metadata: Mapping[str, Any] | None,
    *,
    stored: Callable[[Tensor], Tensor] | None = None,
) -> tuple[dict[str, Tensor], str]:
    """The tensors (detached, on the CPU) and the metadata JSON text of a model to be saved;
    ``stored`` turns each tensor into what the format stores (its dtype is the one recorded)."""
    kind = kind_of_model(model)
    tensors = {name: t.detach().cpu().contiguous() for name, t in kind.tensors_of(model).items()}
    if stored is not None:
        tensors = {name: stored(t) for name, t in tensors.items()}
    spec = kind.arrays(list(tensors))
    missing = [n for n in spec.required if n not in tensors]
    unknown = [n for n in tensors if n not in spec.names]
    if missing or unknown:
        raise ModelFileError(
            f"this {kind.label} cannot be stored in a model file",
            got=f"parameters {listed(list(tensors))}",
            expected=spec.expected,
        )
    check_finite(tensors, saving=True)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ModelFileError("metadata must be a dict", got=type(metadata).__name__)
    first = next(iter(tensors.values()), None)
    md: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "kind": kind.name,
        **kind.facts(model),
        "arrays": list(tensors),
        "dtype": _dtype_name(first.dtype if first is not None else torch.float32),
        "boltzkit_version": _boltzkit_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "training": {},
        "data": None,
    }
    # Facts about the model itself always come from the model (a binary kind states no visible units,
    # and a label given for it is dropped, as load_model would refuse it); "source_format" is added
    # by load_model.
    derived = {*_DERIVED, *CHECKED_FACTS, *md} - {"created", "training", "data"}
    for key, value in (metadata or {}).items():
        if key not in derived and key != "source_format":
            md[str(key)] = value
    for key, value, expected in _metadata_type_problems(md):
        raise ModelFileError(
            f"the metadata key {key!r} is one boltzkit reads, as {expected}",
            got=repr(value),
            hint=f"give {key!r} as {expected}, or keep the value under a key of your own.",
        )
    try:
        text = dumps(md, what="model metadata")
    except BoltzkitError as exc:
        raise ModelFileError(exc.what, got=exc.got, expected=exc.expected, hint=exc.hint) from exc
    return tensors, text


def save_model(model: nn.Module, path: PathLike, *, metadata: Mapping[str, Any] | None = None) -> None:
    """Save a model with its metadata to one ``.safetensors`` file, atomically.

    Parameters
    ----------
    model
        A model of a registered kind: an RBM, SRBM, BM or DBM (a
        :class:`~boltzkit.models.BoltzmannMachine`). Its parameters are stored in their own
        dtype, under their parameter names.
    path
        Target file, conventionally ``*.safetensors``. A path ending in ``.npz`` is written with
        :func:`~boltzkit.io.export_npz` instead. The directory must exist.
    metadata
        Extra JSON-serializable information, stored next to what is derived from the model
        (``format``, ``format_version``, ``kind``, ``layer_sizes``, ``n_visible``, ``n_hidden``,
        ``visible_units``, ``alphabet``, ``n_components``, ``arrays``, ``dtype``,
        ``boltzkit_version`` and the kind's other facts, which cannot be overridden). Conventional
        keys: ``"training"`` (dict of training settings, default ``{}``), ``"data"`` (training
        data name, default ``None``), ``"created"`` (ISO time; now when not given, so a
        round-tripped dict keeps the original time).

    Raises
    ------
    ModelFileError
        When the model is of no registered kind, holds NaN/inf parameters, the metadata cannot be
        stored as JSON, or the file cannot be written. The previous file, if any, is then
        unchanged.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from boltzkit.models import RBM
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "rbm.safetensors"
    >>> save_model(RBM(7, 3), path, metadata={"data": "bars-and-stripes"})
    >>> model, md = load_model(path)
    >>> md["kind"], md["layer_sizes"], md["data"]
    ('rbm', [7, 3], 'bars-and-stripes')
    """
    for fmt in FORMATS:
        if Path(path).suffix.lower() == fmt.suffix:
            fmt.write(model, path, metadata=metadata)
            return
    tensors, md_text = prepare_save(model, metadata)
    from safetensors.torch import save as safetensors_save

    data = safetensors_save(tensors, metadata={METADATA_KEY: md_text})
    atomic_write_bytes(path, data, error_cls=ModelFileError)


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------
def stat_model_file(path: PathLike) -> Path:
    """``path`` as a :class:`~pathlib.Path`, refused when it is missing or a directory."""
    p = Path(path)
    text = os.fspath(path)
    if not p.exists() and text != text.strip():  # " zoo:NAME" printed as "zoo:NAME" misled
        raise ModelFileError(
            "model file not found: the path begins or ends with a space",
            got=repr(text),
            hint=f"remove the spaces: {text.strip()!r}.",
        )
    if not p.exists():
        parent_hint = "" if p.parent.is_dir() else f" (the directory {p.parent} does not exist either)"
        zoo = close_names(str(path)) if p.parent == Path(".") and not p.suffix else []
        raise ModelFileError(
            f"model file not found{parent_hint}",
            got=str(p),
            hint=f"a model of the zoo is named with its prefix: {PREFIX}{zoo[0]}."
            if zoo
            else "check the path; model files are written by `save_model` or `boltzkit train`.",
        )
    if p.is_dir():
        raise ModelFileError("the model path is a directory, not a file", got=str(p))
    return p


def read_bytes(p: Path) -> bytes:
    """The bytes of a model file; an unreadable one is a :class:`ModelFileError`."""
    try:
        return p.read_bytes()
    except OSError as exc:
        raise ModelFileError("cannot read the model file", got=f"{p} ({exc.strerror or exc})") from exc


def _parse_safetensors_header(raw: bytes, p: Path) -> dict[str, Any]:
    """Check the framing of a safetensors file and return its JSON header."""
    size = len(raw)
    if size == 0:
        raise ModelFileError(f"{NOT_OURS}: the file is empty", got=str(p), hint=FORMATS_HINT)
    if size < 8:
        raise ModelFileError(
            f"{NOT_OURS}: the file is truncated or of another format",
            got=f"{p} ({size} bytes)",
            hint=FORMATS_HINT,
        )
    (n_header,) = struct.unpack("<Q", raw[:8])
    looks_like_header = raw[8:9] == b"{"
    if not looks_like_header or n_header < 2 or n_header > _MAX_HEADER_BYTES:
        raise ModelFileError(
            f"{NOT_OURS}: it does not start with a safetensors header",
            got=f"{p} (first bytes {raw[:8]!r})",
            hint=FORMATS_HINT,
        )
    if 8 + n_header > size:
        raise ModelFileError(
            f"{NOT_OURS}: the file is truncated inside its header",
            got=f"{p}: {size} bytes",
            expected=f"at least {8 + n_header} bytes",
            hint="the file was cut short (an interrupted copy or download?); copy it again.",
        )
    try:
        header = json.loads(raw[8 : 8 + n_header].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelFileError(
            f"{NOT_OURS}: its safetensors header is not valid JSON", got=str(p), hint=FORMATS_HINT
        ) from exc
    if not isinstance(header, dict):
        raise ModelFileError(f"{NOT_OURS}: its safetensors header is not a JSON object", got=str(p))
    data_len = size - 8 - n_header
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and o >= 0 for o in offsets)
        ):
            raise ModelFileError(
                f"{NOT_OURS}: the safetensors header entry {name!r} is malformed", got=str(p)
            )
        end = max(end, offsets[1])
    if end > data_len:
        raise ModelFileError(
            "the model file is truncated",
            got=f"{p}: {data_len} bytes of tensor data",
            expected=f"{end} bytes, as its header says",
            hint="the file was cut short (an interrupted save, copy or download?); copy or save it again.",
        )
    return header


def parse_metadata_text(text: Any, p: Path) -> dict[str, Any]:
    """The boltzkit metadata of a file from its JSON text; its format and kind are checked."""
    try:
        md = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ModelFileError(
            "the model file's boltzkit metadata is corrupt (not valid JSON)",
            got=str(p),
            hint="the tensors may still be intact; re-save the model with save_model.",
        ) from exc
    if not isinstance(md, dict):
        raise ModelFileError(
            "the model file's boltzkit metadata is not a JSON object", got=f"{type(md).__name__} in {p}"
        )
    if "format" in md and md["format"] != FORMAT_NAME:
        raise ModelFileError(
            f"{NOT_OURS}: its metadata names another format",
            got=f"{md['format']!r} in {p}",
            expected=repr(FORMAT_NAME),
        )
    version = md.get("format_version", FORMAT_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ModelFileError(
            "the model file was written in a newer version of the format",
            got=f"format_version {version} in {p}",
            expected=f"format_version {FORMAT_VERSION} or lower",
            hint="upgrade boltzkit to read it.",
        )
    get_kind(md.get("kind", DEFAULT_KIND))
    return md


def _load_safetensors(raw: bytes, p: Path) -> tuple[dict[str, Tensor], dict[str, Any] | None]:
    header = _parse_safetensors_header(raw, p)
    strings = header.get("__metadata__")
    md = None
    if isinstance(strings, dict) and METADATA_KEY in strings:
        md = parse_metadata_text(strings[METADATA_KEY], p)
    from safetensors.torch import load as safetensors_load

    try:
        tensors = safetensors_load(raw)
    except Exception as exc:  # the Rust parser's own error type; turn it into ours
        raise ModelFileError(
            f"{NOT_OURS}: the safetensors data cannot be decoded",
            got=f"{p} ({exc})",
            hint=FORMATS_HINT,
        ) from exc
    return tensors, md


def _resolve_dtype(dtype: torch.dtype | str | None, stored: torch.dtype) -> torch.dtype:
    if dtype is None:
        # half precision is fine for storage but too coarse for sampling and log Z
        return stored if stored in (torch.float32, torch.float64) else torch.float32
    if isinstance(dtype, str):
        resolved = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(resolved, torch.dtype):
            raise BoltzkitError("unknown dtype", got=repr(dtype), expected="'float32' or 'float64'")
        dtype = resolved
    if dtype not in _FLOAT_DTYPES:
        raise BoltzkitError(
            "a model's parameters must be floating point", got=str(dtype), expected="float32 or float64"
        )
    return dtype


def _resolve_load_device(device: torch.device | str | None) -> torch.device:
    if device is None:
        return torch.device("cpu")
    return resolve_device(device)


def _stored_dtype(tensors: Mapping[str, Tensor], spec: ArraySpec) -> torch.dtype:
    """The dtype a file is said to be stored in: the widest of its arrays' (a float64 bias beside
    float32 weights keeps its precision on loading)."""
    present = [tensors[n] for n in spec.names if n in tensors] or list(tensors.values())
    return max((t.dtype for t in present), key=lambda d: torch.finfo(d).bits)


#: A DBM's arrays of one hidden layer, as an RBM's: another tool writing DBMs of any depth writes
#: an RBM so (a Gaussian one with ``sigma`` beside them).
ONE_HIDDEN_LAYER = {"W_0": "W", "bias_0": "vbias", "bias_1": "hbias"}


def one_hidden_layer(names: Collection[str]) -> dict[str, str]:
    """The renaming of :data:`ONE_HIDDEN_LAYER` where ``names`` are a DBM's of one hidden layer
    (``W_0, bias_0, bias_1``, and perhaps ``sigma``), else ``{}``."""
    return dict(ONE_HIDDEN_LAYER) if set(names) - {"sigma"} == set(ONE_HIDDEN_LAYER) else {}


def model_from_arrays(
    tensors: dict[str, Tensor],
    md: dict[str, Any] | None,
    p: Path,
    *,
    source: str,
    dtype: torch.dtype | str | None = None,
    device: torch.device | str | None = None,
) -> tuple[nn.Module, dict[str, Any]]:
    """Validate the arrays and metadata read from a file and build the model (see :func:`load_model`).

    A file of a DBM's arrays for one hidden layer (``W_0, bias_0, bias_1``) without metadata is an
    RBM's (:func:`one_hidden_layer`); what is wrong with it is said with that reading."""
    renaming = one_hidden_layer(tensors) if md is None else {}
    if not renaming:
        return _model_from_arrays(tensors, md, p, source=source, dtype=dtype, device=device)
    renamed = {renaming.get(name, name): tensor for name, tensor in tensors.items()}
    try:
        return _model_from_arrays(renamed, md, p, source=source, dtype=dtype, device=device)
    except ModelFileError as exc:
        reading = (
            "W_0, bias_0 and bias_1 (a DBM of one hidden layer) were read as an RBM's W, vbias and hbias"
        )
        raise ModelFileError(
            exc.what,
            got=exc.got,
            expected=exc.expected,
            hint=f"{exc.hint} ({reading})" if exc.hint else reading,
        ) from exc


def _model_from_arrays(tensors, md, p, *, source, dtype, device) -> tuple[nn.Module, dict[str, Any]]:  # noqa: ANN001
    """:func:`model_from_arrays` on the arrays under the names they are read by."""
    kind = kind_for(md, list(tensors))
    if md is None and kind.refine is not None and (refined := kind.refine(tensors)) is not None:
        kind = get_kind(refined)
    spec = check_names(kind, list(tensors), p, npz=source == "npz", recorded=md is not None)
    _check_floating(tensors, p)
    check_finite(tensors, p)
    sizes = kind.check(tensors, p)
    _check_metadata_agrees(md, tuple(sizes), list(tensors), p)
    _check_metadata_types(md, p)
    stored = _stored_dtype(tensors, spec)
    target = _resolve_dtype(dtype, stored)
    converted = {n: t.to(target) for n, t in tensors.items()}
    if any(not bool(torch.isfinite(t).all()) for t in converted.values()):
        raise ModelFileError(
            f"the model's parameters overflow {_dtype_name(target)}",
            got=f"stored as {_dtype_name(stored)}, largest |value| "
            f"{max(float(t.abs().max()) for t in tensors.values() if t.numel()):.3g}",
            hint="load it in float64: load_model(PATH, dtype=torch.float64) in Python, "
            "`boltzkit convert IN OUT --dtype float64` on the command line.",
        )
    try:
        model = kind.build(converted, md or {}, target, _resolve_load_device(device))
    except ModelFileError:
        raise
    except BoltzkitError as exc:
        raise ModelFileError(
            f"the arrays of {p} do not make a valid {kind.label}: {exc.what.rstrip('.')}",
            got=exc.got,
            expected=exc.expected,
            hint=exc.hint,
        ) from exc
    built_kind = getattr(model, "kind", kind.name)
    used = set(kind.tensors_of(model))
    if built_kind != kind.name or used != set(tensors):
        raise ModelFileError(
            "the model file's arrays do not make the kind of model it says",
            got=f"kind {kind.name!r} with arrays {listed(list(tensors))}; they make a {built_kind!r} with "
            f"{listed(sorted(used, key=natural_key))}",
            expected=spec.expected,
        )
    out: dict[str, Any] = dict(md) if md is not None else {}
    out["kind"] = kind.name
    facts = kind.facts(model)
    _check_facts_agree(md, facts, p)
    out.update(facts)
    out.setdefault("arrays", list(kind.tensors_of(model)))
    out["dtype"] = _dtype_name(stored)
    out["source_format"] = source
    return model, out


@dataclass(frozen=True)
class FileFormat:
    """A model-file format besides safetensors: ``detect(first_16_bytes, path)`` says whether a file
    is in it, ``read(raw, path)`` gives its arrays and metadata (or ``None``), and
    ``write(model, path, metadata=...)`` writes a model to a file with ``suffix``."""

    name: str
    suffix: str
    detect: Callable[[bytes, Path], bool]
    read: Callable[[bytes, Path], tuple[dict[str, Tensor], dict[str, Any] | None]]
    write: Callable[..., None]


#: The formats other modules add (:mod:`boltzkit.io.npz` registers ``.npz`` when :mod:`boltzkit.io`
#: is imported): the seam through which :func:`load_model` and :func:`save_model` read and write
#: them, by content and by suffix.
FORMATS: list[FileFormat] = []


def register_format(fmt: FileFormat) -> None:
    """Let :func:`load_model` and :func:`save_model` read and write ``fmt``."""
    FORMATS[:] = [f for f in FORMATS if f.name != fmt.name] + [fmt]


def is_npz(raw_head: bytes, p: Path) -> bool:
    """Whether a file is read as an ``.npz`` archive: by content, falling back to the extension."""
    if raw_head.startswith((ZIP_MAGIC, NPY_MAGIC)):
        return True
    # An .npz-named file that is not a zip archive is reported by the npz reader.
    return p.suffix.lower() == ".npz" and raw_head[8:9] != b"{"


def load_model(
    path: PathLike,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
) -> tuple[nn.Module, dict[str, Any]]:
    """Load a model from a boltzkit ``.safetensors`` file or an ``.npz`` archive.

    The format is recognized by content (a zip archive is read as ``.npz``), falling back to the
    extension; the kind of model by the recorded ``kind`` (or, without metadata, by the array
    names). Everything is validated: the file exists and is complete, it holds exactly the
    arrays of its kind (see the module docstring) with consistent shapes, a floating dtype and
    finite values, and lateral couplings are symmetric with a zero diagonal.

    Parameters
    ----------
    path
        The model file, or ``"zoo:NAME"`` for a model of the zoo (:mod:`boltzkit.io.zoo`).
    device
        Where to put the parameters: ``None`` (CPU), ``"auto"`` (CUDA when present), or a device.
    dtype
        Parameter dtype; ``None`` keeps the stored float32/float64 (half precision is widened to
        float32).

    Returns
    -------
    model : BoltzmannMachine
        The model: an :class:`~boltzkit.models.RBM` for kind ``"rbm"``, else a
        :class:`~boltzkit.models.BoltzmannMachine` (or the class of a registered kind).
    metadata : dict
        The stored metadata (see :func:`save_model`), or, for files without boltzkit metadata
        (plain ``.npz`` archives), one describing the arrays; ``kind``, ``layer_sizes`` and
        ``arrays`` are always there (``n_visible``, ``n_hidden`` for two-layer models).
        ``"source_format"`` is ``"safetensors"`` or ``"npz"``; ``"dtype"`` is the stored dtype.

    Raises
    ------
    ModelFileError
        When the file is missing, empty, truncated or of another format ("not a boltzkit model
        file"), of an unknown kind, lacks an array (all arrays found are listed) or holds one its
        kind does not have, has inconsistent shapes, a non-floating dtype, NaN/inf values
        (counted per array), or laterals that are not symmetric or have a non-zero diagonal.
    """
    p = stat_model_file(resolve_model_path(path))
    raw = read_bytes(p)
    if os.fspath(path).lower().startswith(PREFIX):
        warn_if_unpublished(p, raw)
    fmt = next((f for f in FORMATS if f.detect(raw[:16], p)), None)
    if fmt is not None:
        tensors, md = fmt.read(raw, p)
    else:
        tensors, md = _load_safetensors(raw, p)
    return model_from_arrays(
        tensors, md, p, source=fmt.name if fmt else "safetensors", dtype=dtype, device=device
    )


def read_metadata(path: PathLike) -> dict[str, Any]:
    """The metadata of a model file, as returned by :func:`load_model` (the file is fully validated).

    Parameters
    ----------
    path
        A boltzkit ``.safetensors`` file or an ``.npz`` archive.

    Returns
    -------
    dict
        The metadata; validation is as thorough as in :func:`load_model`.
    """
    return load_model(path)[1]
