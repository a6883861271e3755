"""The zoo of trained models: ``boltzkit.zoo.load(NAME)``, ``names()``, ``read_card(NAME)``.

See :mod:`boltzkit.io.zoo` (this module re-exports it) and ``zoo/README.md``.
"""

from boltzkit.io.zoo import (
    CARD_VERSION,
    PREFIX,
    card_check_images,
    card_path,
    file_sha256,
    load,
    model_path,
    names,
    read_card,
    resolve_model_path,
    verify_file,
    zoo_dir,
)

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
