"""The kinds ``gaussian-rbm`` and ``categorical-rbm`` in model files (real-valued and categorical
visible units, :class:`~boltzkit.models.unit_rbm.UnitRBM`).

========================= ===================================================================================
``gaussian-rbm``          ``W`` (n_visible x n_hidden), ``vbias`` (n_visible,), ``hbias`` (n_hidden,),
                          ``sigma`` (n_visible,, all > 0):
                          ``E = sum_i (v_i - b_i)^2 / (2 sigma_i^2) - sum_ij (v_i / sigma_i) W_ij h_j - c'h``
``categorical-rbm``       ``W`` (n_visible x Q x n_hidden), ``vbias`` (n_visible x Q), ``hbias`` (n_hidden,):
                          ``E = -sum_i vbias[i, v_i] - c'h - sum_ij W[i, v_i, j] h_j``, v_i in 0..Q-1
========================= ===================================================================================

A file without metadata is a ``gaussian-rbm`` when it holds ``sigma``; a plain ``W, vbias,
hbias`` file whose ``W`` has three dimensions is read as a ``categorical-rbm`` (the ``rbm`` kind
hands it over, :func:`is_categorical_arrays`). Safetensors files record the kind, so the unit type
comes back with the model, and a categorical model's ``alphabet`` (the letter of each state) when it
has one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from torch import Tensor

from boltzkit.errors import ModelFileError
from boltzkit.io.model_files import ArraySpec, ModelKind, register_kind
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.units import Categorical, Gaussian

_GAUSSIAN_EXPECTED = (
    "arrays W (n_visible x n_hidden), vbias (n_visible,), hbias (n_hidden,) and sigma (n_visible,, all > 0)"
)
_CATEGORICAL_EXPECTED = "arrays W (n_visible x Q x n_hidden), vbias (n_visible x Q) and hbias (n_hidden,)"


def _shapes(tensors: Mapping[str, Tensor]) -> str:
    return ", ".join(f"{k} {tuple(v.shape)}" for k, v in tensors.items())


def is_categorical_arrays(tensors: Mapping[str, Tensor]) -> bool:
    """Whether ``W, vbias, hbias`` arrays are a categorical RBM's (``W`` with three dimensions)."""
    return set(tensors) == {"W", "vbias", "hbias"} and tensors["W"].dim() == 3


def check_gaussian(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, ...]:
    W, vb, hb, sigma = (tensors[n] for n in ("W", "vbias", "hbias", "sigma"))
    if W.dim() != 2 or vb.shape != (W.shape[0],) or hb.shape != (W.shape[1],) or sigma.shape != vb.shape:
        raise ModelFileError(
            "the Gaussian-Bernoulli RBM's arrays have inconsistent shapes",
            got=f"{_shapes(tensors)} (in {p})",
            expected=_GAUSSIAN_EXPECTED,
        )
    if not bool((sigma > 0).all()):
        raise ModelFileError(
            "the Gaussian-Bernoulli RBM's sigma holds a value that is not positive",
            got=f"min(sigma) = {float(sigma.min()):g} (in {p})",
            expected="standard deviations > 0, one per visible unit",
        )
    return (int(W.shape[0]), int(W.shape[1]))


def check_categorical(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, ...]:
    W, vb, hb = (tensors[n] for n in ("W", "vbias", "hbias"))
    if W.dim() != 3 or vb.shape != W.shape[:2] or hb.shape != (W.shape[2],):
        raise ModelFileError(
            "the categorical RBM's arrays have inconsistent shapes",
            got=f"{_shapes(tensors)} (in {p})",
            expected=_CATEGORICAL_EXPECTED,
        )
    if W.shape[1] < 2:
        raise ModelFileError(
            "a categorical RBM needs at least 2 states per unit", got=f"Q = {W.shape[1]} (in {p})"
        )
    return (int(W.shape[0]), int(W.shape[2]))


def build_gaussian(tensors, md, dtype, device) -> UnitRBM:  # noqa: ANN001
    W = tensors["W"]
    return UnitRBM(
        Gaussian(), int(W.shape[0]), int(W.shape[1]), weights=W, vbias=tensors["vbias"],
        hbias=tensors["hbias"], sigma=tensors["sigma"], dtype=dtype, device=device,
    )  # fmt: skip


def build_categorical(tensors, md, dtype, device) -> UnitRBM:  # noqa: ANN001
    W = tensors["W"]
    return UnitRBM(
        Categorical(int(W.shape[1])), int(W.shape[0]), int(W.shape[2]), weights=W, vbias=tensors["vbias"],
        hbias=tensors["hbias"], dtype=dtype, device=device, alphabet=(md or {}).get("alphabet"),
    )  # fmt: skip


def _tensors(model: UnitRBM) -> dict[str, Tensor]:
    out = {"W": model.W, "vbias": model.vbias, "hbias": model.hbias}
    if isinstance(model.visible_units, Gaussian):
        out["sigma"] = model.sigma.detach()
    return out


def _facts(model: UnitRBM) -> dict[str, Any]:
    return {
        "n_visible": model.n_visible,
        "n_hidden": model.n_hidden,
        "layer_sizes": [model.n_visible, model.n_hidden],
        "visible_units": model.visible_units.name,
        **({"alphabet": model.alphabet} if model.alphabet else {}),
    }


def _arrays(names: tuple[str, ...], expected: str):  # noqa: ANN202
    def spec(found: Collection[str]) -> ArraySpec:
        return ArraySpec(names, expected=expected)

    return spec


register_kind(
    ModelKind(
        name="gaussian-rbm",
        label="Gaussian-Bernoulli RBM",
        arrays=_arrays(("W", "vbias", "hbias", "sigma"), _GAUSSIAN_EXPECTED),
        check=check_gaussian,
        build=build_gaussian,
        recognize=lambda names: set(names) == {"W", "vbias", "hbias", "sigma"},
        model_type=UnitRBM,
        tensors_of=_tensors,
        facts=_facts,
    )
)
register_kind(
    ModelKind(
        name="categorical-rbm",
        label="categorical RBM",
        arrays=_arrays(("W", "vbias", "hbias"), _CATEGORICAL_EXPECTED),
        check=check_categorical,
        build=build_categorical,
        model_type=UnitRBM,
        tensors_of=_tensors,
        facts=_facts,
    )
)

__all__ = [
    "build_categorical",
    "build_gaussian",
    "check_categorical",
    "check_gaussian",
    "is_categorical_arrays",
]
