"""The zoo of trained models: ``boltzkit.zoo.load(NAME)``, ``names()``, ``read_card(NAME)``,
``verify_file(NAME)``.

The names, paths and cards are :mod:`boltzkit.io.zoo` (re-exported here), which the model files
build on (``zoo:NAME`` is a model path); loading a zoo model and checking it against its card build
on the model files, so they live here, above both. See ``zoo/README.md``.
"""

from __future__ import annotations

import warnings
from typing import Any

from boltzkit.errors import warn
from boltzkit.io.model_files import load_model
from boltzkit.io.zoo import (
    CARD_VERSION,
    PREFIX,
    card_check_images,
    card_path,
    file_sha256,
    model_path,
    names,
    read_card,
    resolve_model_path,
    zoo_dir,
)


def load(name: str, *, device: Any = None, dtype: Any = None) -> tuple[Any, dict[str, Any]]:
    """Zoo model ``name`` and its file metadata, as :func:`~boltzkit.io.model_files.load_model`
    returns them, with a warning where the file is not the one its card describes; the card is
    :func:`read_card`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = str(name).strip()
        loaded = load_model(
            text if text.lower().startswith(PREFIX) else PREFIX + text, device=device, dtype=dtype
        )
    for w in caught:  # raised again at the caller's line, not this one
        warn(w.message)
    return loaded


def verify_file(name: str) -> list[str]:
    """What disagrees between a card and its model file (empty when they agree): the sha256, the
    kind, the layer sizes and the name the file was published under (its ``zoo_name``) and the
    card's own ``name``."""
    path = model_path(name)
    name = path.stem  # as published, however it was typed (letter case, the zoo: prefix)
    card = read_card(name)
    problems = []
    digest = file_sha256(path)
    if card.get("sha256") != digest:
        problems.append(f"sha256 {digest} != card's {card.get('sha256')}")
    _, metadata = load_model(path)
    if card.get("kind") != metadata.get("kind"):
        problems.append(f"kind {metadata.get('kind')!r} != card's {card.get('kind')!r}")
    if list(card.get("layer_sizes", [])) != list(metadata.get("layer_sizes", [])):
        problems.append(f"layer sizes {metadata.get('layer_sizes')} != card's {card.get('layer_sizes')}")
    if metadata.get("zoo_name") != name:
        problems.append(f"the file was published as {metadata.get('zoo_name')!r}, not {name!r}")
    if card.get("name") != name:
        problems.append(f"the card names the model {card.get('name')!r}, not {name!r}")
    return problems


__all__ = [
    "CARD_VERSION",
    "PREFIX",
    "card_check_images",
    "card_path",
    "file_sha256",
    "load",
    "model_path",
    "names",
    "read_card",
    "resolve_model_path",
    "verify_file",
    "zoo_dir",
]
