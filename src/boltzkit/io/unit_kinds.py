"""The kinds ``gaussian-rbm``, ``categorical-rbm``, ``gaussian-dbm`` and ``categorical-dbm`` in
model files (real-valued and categorical visible units: :class:`~boltzkit.models.unit_rbm.UnitRBM`
and :class:`~boltzkit.models.unit_dbm.UnitDBM`).

A DBM's file holds ``W_0, W_1, ...`` and ``bias_0, bias_1, ...`` as a binary DBM's does, with
``W_0`` and ``bias_0`` shaped as the RBM's ``W`` and ``vbias`` of its visible unit type, and
``sigma`` for Gaussian units; a file without metadata is told apart by ``sigma``, or by a
three-dimensional ``W_0`` (:func:`refine_dbm`).

========================= ===================================================================================
``gaussian-rbm``          ``W`` (n_visible x n_hidden), ``vbias`` (n_visible,), ``hbias`` (n_hidden,),
                          ``sigma`` (n_visible,), all > 0:
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
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.units import Categorical, Gaussian

_GAUSSIAN_EXPECTED = (
    "arrays W (n_visible x n_hidden), vbias (n_visible,), hbias (n_hidden,) and sigma (n_visible,), all > 0"
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
    if model.visible_units.has_sigma:
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

# ------------------------------------------------------------------ DBMs over real or categorical data
_DBM_EXPECTED = {
    "gaussian-dbm": "arrays W_0 (n_visible x n_1), W_1 (n_1 x n_2), ..., bias_0 (n_visible,), bias_1, ..., "
    "and sigma (n_visible,), all > 0",
    "categorical-dbm": "arrays W_0 (n_visible x Q x n_1), W_1 (n_1 x n_2), ..., bias_0 (n_visible x Q), "
    "bias_1, ...",
}


def _n_dbm_layers(found: Collection[str]) -> int:
    return sum(1 for n in found if n.startswith("bias_") and n[5:].isdigit())


def _dbm_arrays(kind: str):  # noqa: ANN202
    def spec(found: Collection[str]) -> ArraySpec:
        n = max(3, _n_dbm_layers(found))
        names = (*(f"W_{l}" for l in range(n - 1)), *(f"bias_{l}" for l in range(n)))
        return ArraySpec((*names, "sigma") if kind == "gaussian-dbm" else names, expected=_DBM_EXPECTED[kind])

    return spec


def _check_dbm(kind: str):  # noqa: ANN202
    def check(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, ...]:
        n = _n_dbm_layers(tensors)
        W0, b0 = tensors["W_0"], tensors["bias_0"]
        categorical = kind == "categorical-dbm"
        sizes = [int(W0.shape[0]), int(W0.shape[-1])]
        ok = W0.dim() == (3 if categorical else 2) and b0.shape == (
            W0.shape[:2] if categorical else W0.shape[:1]
        )
        ok = ok and (not categorical or W0.shape[1] >= 2)
        for l in range(1, n - 1):
            W = tensors[f"W_{l}"]
            ok = ok and W.dim() == 2 and W.shape[0] == sizes[-1]
            sizes.append(int(W.shape[-1]) if W.dim() == 2 else -1)
        ok = ok and all(tensors[f"bias_{l}"].shape == (sizes[l],) for l in range(1, n))
        if "sigma" in tensors:
            ok = ok and tensors["sigma"].shape == (sizes[0],)
        if not ok:
            raise ModelFileError(
                f"the {kind}'s arrays have inconsistent shapes",
                got=f"{_shapes(tensors)} (in {p})",
                expected=_DBM_EXPECTED[kind],
            )
        if "sigma" in tensors and not bool((tensors["sigma"] > 0).all()):
            raise ModelFileError(
                f"the {kind}'s sigma holds a value that is not positive",
                got=f"min(sigma) = {float(tensors['sigma'].min()):g} (in {p})",
                expected="standard deviations > 0, one per visible unit",
            )
        return tuple(sizes)

    return check


def _build_dbm(tensors, md, dtype, device) -> UnitDBM:  # noqa: ANN001
    n = _n_dbm_layers(tensors)
    W0 = tensors["W_0"]
    units = Categorical(int(W0.shape[1])) if W0.dim() == 3 else Gaussian()
    sizes = [int(W0.shape[0]), int(W0.shape[-1])] + [int(tensors[f"W_{l}"].shape[1]) for l in range(1, n - 1)]
    return UnitDBM(
        units, sizes, weights=[tensors[f"W_{l}"] for l in range(n - 1)],
        biases=[tensors[f"bias_{l}"] for l in range(n)], sigma=tensors.get("sigma"), dtype=dtype,
        device=device, alphabet=(md or {}).get("alphabet"),
    )  # fmt: skip


def _dbm_tensors(model: UnitDBM) -> dict[str, Tensor]:
    out = {f"W_{l}": w for l, w in enumerate(model.weights)}
    out.update({f"bias_{l}": b for l, b in enumerate(model.biases)})
    if model.visible_units.has_sigma:
        out["sigma"] = model.sigma.detach()
    return out


def _dbm_facts(model: UnitDBM) -> dict[str, Any]:
    return {
        "layer_sizes": list(model.layer_sizes),
        "visible_units": model.visible_units.name,
        **({"alphabet": model.alphabet} if model.alphabet else {}),
    }


def refine_dbm(tensors: Mapping[str, Tensor]) -> str | None:
    """A DBM file without metadata whose ``W_0`` has three dimensions holds a categorical DBM."""
    return "categorical-dbm" if "W_0" in tensors and tensors["W_0"].dim() == 3 else None


def _recognize_gaussian_dbm(names: Collection[str]) -> bool:
    """``W_0, W_1, ..., bias_0, bias_1, ...`` with ``sigma``: a Gaussian DBM's arrays."""
    others = [n for n in names if n != "sigma"]
    return "sigma" in names and "W_1" in others and all(n.startswith(("W_", "bias_")) for n in others)


for _kind, _label in (("gaussian-dbm", "Gaussian-Bernoulli DBM"), ("categorical-dbm", "categorical DBM")):
    register_kind(
        ModelKind(
            name=_kind,
            label=_label,
            arrays=_dbm_arrays(_kind),
            check=_check_dbm(_kind),
            build=_build_dbm,
            recognize=_recognize_gaussian_dbm if _kind == "gaussian-dbm" else None,
            model_type=UnitDBM,
            tensors_of=_dbm_tensors,
            facts=_dbm_facts,
        )
    )

__all__ = [
    "build_categorical",
    "build_gaussian",
    "check_categorical",
    "check_gaussian",
    "is_categorical_arrays",
    "refine_dbm",
]
