"""Training checkpoints: one safetensors file with a JSON document in its header.

A checkpoint holds everything a run needs to continue bit for bit: model parameters, optimizer and
learning-rate scheduler state, the ``torch.Generator`` state, the learner's state (PCD chains, k),
the epoch counter, the history and the run's settings. Nested state (such as
``optimizer.state_dict()``) is split into its tensors, stored as safetensors, and a JSON skeleton
that refers to them by name and keeps what JSON alone would lose (integer dict keys, tuples,
non-finite floats). Nothing is pickled. A float16, bfloat16, float32 or float64 tensor of at least
:data:`MIN_PACKED` entries, each exactly +0.0 or 1.0 (the persistent chains of binary units), is
stored bit-packed, eight entries to a byte, and restored exactly: a tempering learner's 20 x 100 x
784 float64 chains take 196 kB instead of 12.5 MB, so an unfinished training's checkpoint can travel
with a repository.

Files are written atomically: to a temporary file in the target's folder, flushed and synced,
then moved over the target with :func:`os.replace`, so a run killed while saving leaves the
previous checkpoint intact.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save
from torch import Tensor

from boltzkit._numerics import tensors_digest
from boltzkit.atomic import atomic_write_bytes
from boltzkit.errors import ModelFileError

#: Key of the JSON document in the safetensors header metadata.
METADATA_KEY = "boltzkit_checkpoint"
#: Version of the checkpoint layout (2: bit-packed binary tensors; 3: a SHA-256 of the stored
#: tensors, checked on reading; files of versions 1 and 2 read as before, unchecked).
FORMAT_VERSION = 3
#: Layout versions this module reads.
READABLE_VERSIONS = (1, 2, 3)
#: Tensors with fewer entries are stored as they are, even when binary.
MIN_PACKED = 64


#: Floating-point types a binary tensor is packed from (not float8, whose sign test is missing).
PACKED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _is_binary(t: Tensor) -> bool:
    """Whether ``t`` is of a :data:`PACKED_DTYPES` type, of at least :data:`MIN_PACKED` entries,
    each exactly +0.0 or 1.0."""
    if t.dtype not in PACKED_DTYPES or t.numel() < MIN_PACKED:
        return False
    return bool(((t == 0) | (t == 1)).all()) and not bool(torch.signbit(t).any())


# --------------------------------------------------------------------------- state encoding
def _encode(obj: Any, tensors: dict[str, Tensor]) -> Any:
    """JSON skeleton of ``obj``; tensors go to ``tensors`` under fresh names."""
    if isinstance(obj, Tensor):
        name = f"t{len(tensors)}"
        t = obj.detach().to("cpu").contiguous()
        if _is_binary(t):
            tensors[name] = torch.from_numpy(np.packbits((t != 0).reshape(-1).numpy()))
            return {"__bits__": name, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
        tensors[name] = t.clone()
        return {"__tensor__": name}
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _encode(v, tensors) for k, v in obj.items()}
        return {"__items__": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    raise TypeError(f"cannot store a {type(obj).__name__} in a checkpoint: {obj!r}")


def _decode(obj: Any, tensors: dict[str, Tensor]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__bits__" in obj:
            shape = [int(d) for d in obj["shape"]]
            bits = np.unpackbits(tensors[obj["__bits__"]].numpy(), count=math.prod(shape))
            return torch.from_numpy(bits).to(getattr(torch, obj["dtype"])).reshape(shape)
        if "__float__" in obj:
            return float(obj["__float__"])
        if "__tuple__" in obj:
            return tuple(_decode(v, tensors) for v in obj["__tuple__"])
        if "__items__" in obj:
            return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["__items__"]}
        return {k: _decode(v, tensors) for k, v in obj.items()}
    return obj


def encode_state(state: dict[str, Any]) -> bytes:
    """Serialise nested state (dicts, lists, tuples, numbers, strings, tensors) to safetensors bytes."""
    tensors: dict[str, Tensor] = {}
    skeleton = _encode(state, tensors)
    doc = json.dumps(
        {"format_version": FORMAT_VERSION, "sha256": tensors_digest(tensors), "state": skeleton},
        allow_nan=False,
    )
    return _st_save(tensors, metadata={METADATA_KEY: doc})


def decode_state(data: bytes, *, source: str = "checkpoint") -> dict[str, Any]:
    """Inverse of :func:`encode_state`."""
    try:
        (header_len,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + header_len].decode("utf-8"))
        doc = json.loads(header["__metadata__"][METADATA_KEY])
        tensors = _st_load(data)
    except Exception as exc:  # any damage: truncated file, foreign file, bad JSON
        raise ModelFileError(
            "cannot read the training checkpoint",
            got=f"{source} ({type(exc).__name__}: {exc})",
            expected="a boltzkit checkpoint (safetensors with a 'boltzkit_checkpoint' header entry)",
            hint="delete the file to start over, or point --checkpoint at the right file.",
        ) from exc
    if doc.get("format_version") not in READABLE_VERSIONS:
        raise ModelFileError(
            "unsupported checkpoint version",
            got=doc.get("format_version"),
            expected=" or ".join(map(str, READABLE_VERSIONS)),
            hint="a newer boltzkit wrote it: upgrade, or delete the file to start the run over.",
        )
    if doc["format_version"] >= 3 and doc.get("sha256") != tensors_digest(tensors):
        raise ModelFileError(
            "the training checkpoint is damaged: its arrays do not match the checksum they were saved with",
            got=source,
            hint="delete the file to start the run over (or restore it from a copy).",
        )
    return _decode(doc["state"], tensors)


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Atomically write ``state`` (see :func:`encode_state`) to ``path``."""
    return atomic_write_bytes(path, encode_state(state), parents=True)


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`; tensors come back on the CPU."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFileError(
            "cannot open the training checkpoint",
            got=f"{path} ({exc.strerror or exc})",
            hint="check the path; a run that was never checkpointed cannot be resumed.",
        ) from exc
    return decode_state(data, source=str(path))


def checkpointed_seconds(*paths: str | os.PathLike) -> float:
    """The training seconds that these checkpoints have counted (the sum of their ``elapsed``: the
    epochs of the runs that wrote them), for a resumed run's total cost. A missing or unreadable
    file counts 0: the run then starts afresh, or its resume says what is wrong with the file."""
    total = 0.0
    for path in paths:
        if not Path(path).is_file():
            continue
        try:
            total += float(load_checkpoint(path).get("elapsed") or 0.0)
        except Exception:  # noqa: BLE001 - the resume itself reports a bad checkpoint
            continue
    return total


def generator_state(generator: torch.Generator) -> Tensor:
    """The generator's state as a CPU ``uint8`` tensor (works for CPU and CUDA generators)."""
    return generator.get_state().clone()


def state_to(value: Any, device: torch.device | str, dtype: torch.dtype) -> Any:
    """Tensors in nested state (a learner's chains) moved to a model's device and dtype; the rest
    unchanged (a checkpoint's tensors come back on the CPU)."""
    if isinstance(value, Tensor):
        return value.to(device=device, dtype=dtype)
    if isinstance(value, dict):
        return {k: state_to(v, device, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(state_to(v, device, dtype) for v in value)
    return value


def restore_generator(generator: torch.Generator, state: Tensor) -> None:
    """Set ``generator`` to a state from :func:`generator_state`."""
    generator.set_state(state.to(device="cpu", dtype=torch.uint8).contiguous())


__all__ = [
    "decode_state",
    "encode_state",
    "generator_state",
    "load_checkpoint",
    "restore_generator",
    "save_checkpoint",
    "state_to",
]
