"""Reading and writing models and results: model files, ``.npz`` archives, atomic writes, JSON.

The pieces live in their own modules; this package re-exports their public API so that
``from boltzkit.io import load_model, save_model, ...`` keeps working:

:mod:`boltzkit.atomic`
    Atomic writes (:func:`atomic_open`, :func:`atomic_write_bytes`, :func:`atomic_write_text`).
:mod:`boltzkit.jsonio`
    The one JSON encoder (:func:`to_jsonable`, :func:`to_json_text`, :func:`save_result_json`).
:mod:`boltzkit.io.model_files`
    The model file format (safetensors + JSON metadata), the registry of model kinds,
    :func:`load_model`, :func:`save_model`, :func:`read_metadata`.
:mod:`boltzkit.io.boltzmann_kinds`
    The kinds ``rbm``, ``srbm``, ``bm``, ``dbm``: their arrays, checks and builders.
:mod:`boltzkit.io.stack_kinds`
    The kinds ``dbn`` and ``mixture``.
:mod:`boltzkit.io.unit_kinds`
    The kinds ``gaussian-rbm`` and ``categorical-rbm`` (real-valued and categorical visible units).
:mod:`boltzkit.io.npz`
    ``.npz`` import and export (:func:`import_npz`, :func:`export_npz`).
"""

from boltzkit.atomic import atomic_open, atomic_write_bytes, atomic_write_text
from boltzkit.io.boltzmann_kinds import check_lateral  # registers rbm, srbm, bm and dbm
from boltzkit.io.model_files import (
    FORMAT_NAME,
    FORMAT_VERSION,
    METADATA_KEY,
    PARAMETER_NAMES,
    ArraySpec,
    FileFormat,
    ModelKind,
    get_kind,
    kind_of_model,
    load_model,
    read_metadata,
    register_format,
    register_kind,
    registered_kinds,
    save_model,
    unregister_kind,
)
from boltzkit.io.npz import export_npz, import_npz  # registers .npz
from boltzkit.io.stack_kinds import is_dbn_name  # registers dbn and mixture
from boltzkit.io.unit_kinds import is_categorical_arrays  # registers gaussian-rbm and categorical-rbm
from boltzkit.jsonio import save_json, save_result_json, to_json_text, to_jsonable

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "PARAMETER_NAMES",
    "ArraySpec",
    "FileFormat",
    "ModelKind",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_lateral",
    "export_npz",
    "get_kind",
    "import_npz",
    "is_categorical_arrays",
    "is_dbn_name",
    "kind_of_model",
    "load_model",
    "read_metadata",
    "register_format",
    "register_kind",
    "registered_kinds",
    "save_json",
    "save_model",
    "save_result_json",
    "to_json_text",
    "to_jsonable",
    "unregister_kind",
]
