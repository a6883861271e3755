"""``boltzkit convert IN OUT``: write a model file in another format.

The formats are boltzkit's ``.safetensors`` (tensors plus JSON metadata) and plain ``.npz``
archives that other tools read with ``numpy.load`` (no pickle): ``W, vbias, hbias[, L, J]`` for an
RBM, SRBM or BM; ``W_0, vbias_0, hbias_0, W_1, ...`` for a DBN (RBM ``l`` between layers ``l`` and
``l + 1``, the top one undirected); ``W_l, bias_l`` for a DBM; ``weights, means`` for a mixture.
``IN`` may be ``zoo:NAME``. The metadata travels along (in an ``.npz``, as the 0-d string array
``boltzkit``), and the parameters are checked on the way in as on every load.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from boltzkit.cli.common import ForceOpt, JsonFlag, check_output, emit, refuse_zoo_output
from boltzkit.errors import BoltzkitError
from boltzkit.io import export_npz, load_model, save_model
from boltzkit.io.zoo import resolve_model_path

#: Metadata keys that describe the file itself and are written anew (the model's ``created`` time travels).
_FILE_KEYS = ("format", "format_version", "source_format", "arrays", "dtype", "boltzkit_version")


def _written_dtype(model: Any) -> str:
    """The dtype of the parameters written (a half-precision file is read, and so written, as
    float32)."""
    dtypes = {t.dtype for t in model.state_dict().values() if t.is_floating_point()}
    return ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))


def command(
    source: Annotated[str, typer.Argument(metavar="IN", help="Model file (.safetensors, .npz) or zoo:NAME.")],
    target: Annotated[Path, typer.Argument(metavar="OUT", help="Output file: .safetensors or .npz.")],
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype",
            help="float32 or float64 [default: as stored; arrays of mixed precision all take the widest, "
            "float16 becomes float32].",
        ),
    ] = None,
    force: ForceOpt = False,
    as_json: JsonFlag = False,
) -> None:
    """Write a model file in another format (.safetensors <-> .npz); IN may be zoo:NAME."""
    refuse_zoo_output(target, "OUT")
    suffix = target.suffix.lower()
    if suffix not in (".safetensors", ".npz"):
        raise BoltzkitError(
            "unknown output format", got=str(target), expected="a file ending in .safetensors or .npz"
        )
    if dtype is not None and dtype not in ("float32", "float64"):
        raise BoltzkitError("unknown --dtype", got=dtype, expected="float32 or float64")
    origin = resolve_model_path(source)  # a link or a hard link to IN is IN too
    if origin.resolve() == target.resolve() or (target.exists() and os.path.samefile(origin, target)):
        raise BoltzkitError(
            "IN and OUT are the same file", got=str(target), hint="write OUT under another name."
        )
    check_output(target, "OUT", force=force)
    model, metadata = load_model(source, dtype=dtype)
    kept = {key: value for key, value in metadata.items() if key not in _FILE_KEYS}
    (export_npz if suffix == ".npz" else save_model)(model, target, metadata=kept)
    record = {
        "in": source,
        "out": str(target),
        "kind": metadata.get("kind"),
        "layer_sizes": metadata.get("layer_sizes"),
        "from": metadata.get("source_format"),
        "to": suffix.lstrip("."),
        "dtype": _written_dtype(model),
    }
    emit(
        record,
        as_json=as_json,
        human=lambda: (
            f"wrote {record['kind']} {record['layer_sizes']} from {source} ({record['from']}) "
            f"to {target} ({record['to']}, {record['dtype']})"
        ),
    )
