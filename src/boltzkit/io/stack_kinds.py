"""The kinds ``dbn`` and ``mixture`` in model files (and plain ``.npz`` archives).

=========== =========================================================================================
``dbn``     ``W_0, vbias_0, hbias_0, W_1, vbias_1, hbias_1, ...``: RBM ``l`` between layers ``l`` and
            ``l + 1`` (layer 0 visible); ``W_l`` is ``n_l x n_(l+1)``, ``vbias_l`` ``(n_l,)``,
            ``hbias_l`` ``(n_(l+1),)``, numbered without gaps, at least one RBM. Loaded as a
            :class:`~boltzkit.models.DBN`. ``vbias_l`` of a lower RBM is the bias of the directed
            conditional ``p(x_l | x_(l+1))``, ``hbias_l`` that of the recognition model
            ``q(x_(l+1) | x_l)``. A Gaussian bottom adds ``sigma_0`` ``(n_0,)`` (all > 0); a
            categorical bottom has ``W_0`` ``n_0 x Q x n_1`` and ``vbias_0`` ``n_0 x Q``, as the
            ``gaussian-rbm`` and ``categorical-rbm`` kinds (:mod:`boltzkit.io.unit_kinds`).
``mixture`` ``weights`` ``(K,)`` (positive, summing to 1) and ``means`` ``(K, n_visible)``
            (strictly between 0 and 1): a :class:`~boltzkit.models.MixtureOfBernoullis`.
=========== =========================================================================================

In a file without metadata a DBN is recognised by its names ``vbias_l`` / ``hbias_l`` (a DBM's
are ``bias_l``), a mixture by exactly ``weights`` and ``means``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from boltzkit.errors import ModelFileError
from boltzkit.io.model_files import ArraySpec, ModelKind, natural_key, refuse_far_numbers, register_kind
from boltzkit.models.dbn import DBN
from boltzkit.models.mixture import WEIGHT_SUM_TOL, MixtureOfBernoullis
from boltzkit.models.rbm import RBM

__all__ = ["DBN_NAME", "is_dbn_name"]

#: The array names of a DBN file.
DBN_NAME = re.compile(r"(W|vbias|hbias)_(\d+)")

_DBN_EXPECTED = (
    "arrays W_0, vbias_0, hbias_0, W_1, vbias_1, hbias_1, ... (RBM l between layers l and l + 1, "
    "layer 0 visible: W_l is n_l x n_(l+1), vbias_l (n_l,), hbias_l (n_(l+1),)), numbered without gaps; "
    "a Gaussian bottom adds sigma_0 (n_0,), a categorical one has W_0 n_0 x Q x n_1 and vbias_0 n_0 x Q"
)
_MIXTURE_EXPECTED = "arrays weights (K,), summing to 1, and means (K, n_visible), strictly between 0 and 1"


def is_dbn_name(name: str) -> bool:
    """Whether ``name`` is one of a DBN file's array names (``W_l``, ``vbias_l``, ``hbias_l``)."""
    m = DBN_NAME.fullmatch(name)
    return m is not None and str(int(m.group(2))) == m.group(2)


# ------------------------------------------------------------------------------------------- dbn
def _dbn_count(found: Collection[str]) -> int:
    numbers = {n: int(DBN_NAME.fullmatch(n).group(2)) for n in found if is_dbn_name(n)}  # type: ignore[union-attr]
    refuse_far_numbers(found, numbers, _DBN_EXPECTED)
    return 1 + max(numbers.values()) if numbers else 1


def _dbn_arrays(found: Collection[str]) -> ArraySpec:
    n = _dbn_count(found)
    return ArraySpec(
        tuple(f"{p}_{l}" for l in range(n) for p in ("W", "vbias", "hbias")),
        optional=("sigma_0",),
        expected=_DBN_EXPECTED,
        hint="a DBN file holds W_l, vbias_l and hbias_l for every RBM l = 0, 1, ...; a DBM's arrays "
        "are W_l and bias_l.",
    )


def _recognize_dbn(names: Collection[str]) -> bool:
    return any(n.startswith(("vbias_", "hbias_")) and is_dbn_name(n) for n in names)


def _bottom_arrays(tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The bottom RBM's arrays under a unit RBM's names (``W, vbias, hbias[, sigma]``)."""
    out = {"W": tensors["W_0"], "vbias": tensors["vbias_0"], "hbias": tensors["hbias_0"]}
    if "sigma_0" in tensors:
        out["sigma"] = tensors["sigma_0"]
    return out


def _unit_bottom(tensors: Mapping[str, Tensor]) -> str | None:
    """``"gaussian"`` (``sigma_0`` present), ``"categorical"`` (``W_0`` with three dimensions) or
    ``None`` (a binary bottom)."""
    if "sigma_0" in tensors:
        return "gaussian"
    return "categorical" if tensors["W_0"].dim() == 3 else None


def _check_dbn(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, ...]:
    n = _dbn_count(tensors)
    order = sorted(tensors, key=natural_key)
    shapes = ", ".join(f"{k} {tuple(tensors[k].shape)}" for k in order)
    sizes: list[int] = []
    bottom = _unit_bottom(tensors)
    if bottom is not None:
        if n < 2:
            raise ModelFileError(
                f"a DBN with a {bottom} bottom needs a binary RBM above it",
                got=f"{shapes} (in {p})",
                hint="a single Gaussian or categorical RBM is a gaussian-rbm or categorical-rbm file.",
            )
        from boltzkit.io.unit_kinds import check_categorical, check_gaussian  # registered after dbn

        checked = check_gaussian if bottom == "gaussian" else check_categorical
        sizes.extend(checked(_bottom_arrays(tensors), p))
    for l in range(1 if bottom is not None else 0, n):
        w, vb, hb = tensors[f"W_{l}"], tensors[f"vbias_{l}"], tensors[f"hbias_{l}"]
        if w.dim() != 2 or vb.dim() != 1 or hb.dim() != 1:
            raise ModelFileError(
                "the DBN arrays have the wrong number of dimensions",
                got=f"{shapes} (in {p})",
                expected="W_l two-dimensional, vbias_l and hbias_l one-dimensional",
            )
        rows, cols = int(w.shape[0]), int(w.shape[1])
        if vb.shape[0] != rows or hb.shape[0] != cols:
            transposed = vb.shape[0] == cols and hb.shape[0] == rows
            raise ModelFileError(
                f"the arrays of RBM {l} have inconsistent shapes: W_{l} is {rows} x {cols}, vbias_{l} "
                f"has {vb.shape[0]} and hbias_{l} {hb.shape[0]} entries",
                got=f"{shapes} (in {p})",
                expected=f"vbias_{l} ({rows},) and hbias_{l} ({cols},)",
                hint=f"W_{l} looks transposed: it must be n_{l} x n_{l + 1}; store W_{l}.T instead."
                if transposed
                else "the arrays do not belong to one model; check where they came from.",
            )
        if l == 0:
            sizes.append(rows)
        elif rows != sizes[-1]:
            raise ModelFileError(
                f"the DBN arrays do not chain: W_{l} has {rows} rows but layer {l} has {sizes[-1]} units",
                got=f"{shapes} (in {p})",
                expected=f"W_{l} ({sizes[-1]}, n_{l + 1}): RBM l's hidden layer is RBM l + 1's visible layer",
            )
        sizes.append(cols)
    if sizes[0] < 1:
        raise ModelFileError("the model has no visible units", got=f"{shapes} (in {p})")
    return tuple(sizes)


def _build_dbn(tensors: Mapping[str, Tensor], md: Mapping[str, Any], dtype: torch.dtype, device) -> DBN:
    n = _dbn_count(tensors)
    rbms: list[Any] = []
    bottom = _unit_bottom(tensors)
    found = {None: "binary", "gaussian": "gaussian"}.get(bottom) or f"categorical:{tensors['W_0'].shape[1]}"
    recorded = (md or {}).get("visible_units")  # files of binary DBNs and bare .npz archives name none
    if recorded is not None and recorded != found:
        raise ModelFileError(
            "the DBN file's arrays do not hold the visible units its metadata name",
            got=f"metadata: {recorded} visible units; arrays: {found} (sigma_0 "
            f"{'present' if 'sigma_0' in tensors else 'absent'}, W_0 {tuple(tensors['W_0'].shape)})",
            expected="sigma_0 for Gaussian units, a three-dimensional W_0 for categorical units, neither "
            "for binary units",
        )
    if bottom is not None:
        from boltzkit.io.unit_kinds import build_categorical, build_gaussian

        build = build_gaussian if bottom == "gaussian" else build_categorical
        rbms.append(build(_bottom_arrays(tensors), md, dtype, device))
    for l in range(len(rbms), n):
        w = tensors[f"W_{l}"]
        rbms.append(
            RBM(
                int(w.shape[0]),
                int(w.shape[1]),
                weights=w,
                vbias=tensors[f"vbias_{l}"],
                hbias=tensors[f"hbias_{l}"],
                dtype=dtype,
                device=device,
            )
        )
    return DBN(rbms)


def _dbn_tensors(model: nn.Module) -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    for l, rbm in enumerate(model.rbms):  # type: ignore[union-attr]
        out[f"W_{l}"] = rbm.W
        out[f"vbias_{l}"] = rbm.vbias
        out[f"hbias_{l}"] = rbm.hbias
    bottom = model.unit_bottom  # type: ignore[union-attr]
    if bottom is not None and bottom.visible_units.has_sigma:
        out["sigma_0"] = bottom.sigma.detach()
    return out


def _dbn_facts(model: nn.Module) -> dict[str, Any]:
    sizes = [int(n) for n in model.layer_sizes]  # type: ignore[union-attr]
    facts: dict[str, Any] = {"n_visible": sizes[0]}
    if len(sizes) == 2:
        facts["n_hidden"] = sizes[1]
    facts["layer_sizes"] = sizes
    bottom = model.unit_bottom  # type: ignore[union-attr]
    if bottom is not None:
        facts["visible_units"] = bottom.visible_units.name
        if bottom.alphabet:
            facts["alphabet"] = bottom.alphabet
    return facts


# --------------------------------------------------------------------------------------- mixture
def _mixture_arrays(found: Collection[str]) -> ArraySpec:
    return ArraySpec(
        ("weights", "means"),
        expected=_MIXTURE_EXPECTED,
        hint="a mixture file holds weights (mixing proportions) and means (pixel probabilities).",
    )


def _recognize_mixture(names: Collection[str]) -> bool:
    return set(names) == {"weights", "means"}


def _check_mixture(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, ...]:
    w, mu = tensors["weights"], tensors["means"]
    if w.dim() != 1 or mu.dim() != 2 or w.shape[0] != mu.shape[0] or w.shape[0] < 1 or mu.shape[1] < 1:
        raise ModelFileError(
            "the mixture arrays have the wrong shapes",
            got=f"weights {tuple(w.shape)}, means {tuple(mu.shape)} (in {p})",
            expected="weights (K,) and means (K, n_visible), K >= 1",
        )
    w64, mu64 = w.to(torch.float64), mu.to(torch.float64)
    if bool((w64 <= 0).any()) or abs(float(w64.sum()) - 1.0) > WEIGHT_SUM_TOL:
        raise ModelFileError(
            "the mixing proportions must be positive and sum to 1",
            got=f"min {float(w64.min()):g}, sum {float(w64.sum()):.9g} (in {p})",
            expected=f"weights > 0 summing to 1 within {WEIGHT_SUM_TOL:g}",
        )
    bad = (mu64 <= 0) | (mu64 >= 1)
    if bool(bad.any()):
        k, i = (int(j) for j in torch.nonzero(bad)[0])
        raise ModelFileError(
            "the pixel probabilities of the mixture must lie strictly between 0 and 1",
            got=f"means[{k}, {i}] = {float(mu64[k, i]):g}; {int(bad.sum())} of {mu.numel()} entries are 0 "
            f"or 1 (in {p})",
            expected="0 < means < 1",
            hint="smooth them, e.g. (count + 1) / (n + 2), so that no data vector gets probability 0.",
        )
    return (int(mu.shape[1]),)


def _build_mixture(
    tensors: Mapping[str, Tensor], md: Mapping[str, Any], dtype, device
) -> MixtureOfBernoullis:
    return MixtureOfBernoullis(tensors["weights"], tensors["means"], dtype=dtype, device=device)


def _mixture_facts(model: nn.Module) -> dict[str, Any]:
    return {
        "n_visible": int(model.n_visible),  # type: ignore[union-attr]
        "n_components": int(model.n_components),  # type: ignore[union-attr]
        "layer_sizes": [int(model.n_visible)],  # type: ignore[union-attr]
    }


def _mixture_tensors(model: nn.Module) -> dict[str, Tensor]:
    return {"weights": model.weights, "means": model.means}  # type: ignore[union-attr]


register_kind(
    ModelKind(
        name="dbn",
        label="DBN",
        arrays=_dbn_arrays,
        check=_check_dbn,
        build=_build_dbn,
        recognize=_recognize_dbn,
        model_type=DBN,
        tensors_of=_dbn_tensors,
        facts=_dbn_facts,
    )
)
register_kind(
    ModelKind(
        name="mixture",
        label="mixture",
        arrays=_mixture_arrays,
        check=_check_mixture,
        build=_build_mixture,
        recognize=_recognize_mixture,
        model_type=MixtureOfBernoullis,
        tensors_of=_mixture_tensors,
        facts=_mixture_facts,
    )
)
