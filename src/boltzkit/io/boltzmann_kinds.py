"""The kinds of the Boltzmann machine family in model files: ``rbm``, ``srbm``, ``bm``, ``dbm``.

Each kind is registered with :func:`~boltzkit.io.model_files.register_kind` (importing
:mod:`boltzkit.io` does it): which arrays its files hold, how they are checked and how the model is
built from them. The arrays are the parameters of :class:`~boltzkit.models.BoltzmannMachine`,
under their parameter names:

========= ===========================================================================================
``rbm``   ``W`` (n_visible x n_hidden), ``vbias`` (n_visible,), ``hbias`` (n_hidden,); loaded as
          an :class:`~boltzkit.models.RBM`
``srbm``  as ``rbm``, and ``L`` (n_visible x n_visible, symmetric, zero diagonal)
``bm``    as ``rbm``, ``J`` (n_hidden x n_hidden, symmetric, zero diagonal), optionally ``L``; or,
          with three or more layers, ``bias_0, bias_1, ...`` and any of ``W_l``, ``W_l_m``, ``L_l``
``dbm``   ``W_0, W_1, ...`` (``W_l`` is n_l x n_(l+1), layer 0 visible), ``bias_0, bias_1, ...``,
          numbered without gaps, at least three layers
========= ===========================================================================================

In a file without metadata the kind is recognised from the names: ``J`` makes a ``bm``, ``L``
alone an ``srbm``, ``W_0``/``bias_0`` a ``dbm`` (a ``bm`` with ``L_l`` or ``W_l_m``); anything
else is read as an ``rbm``.

Beyond the generic checks of every model file, the arrays' shapes must fit together (``W_l`` is
``(n_l, n_(l+1))`` with ``n_l`` the length of ``bias_l``; ``L`` is ``n_visible x n_visible`` and
``J`` ``n_hidden x n_hidden``) and lateral couplings must be symmetric with a zero diagonal
(:func:`check_lateral`). Every message names the file and the array.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzkit.errors import ModelFileError
from boltzkit.io.model_files import (
    PARAMETER_NAMES,
    ArraySpec,
    ModelKind,
    listed,
    natural_key,
    refuse_far_numbers,
    register_kind,
)
from boltzkit.models.boltzmann import BoltzmannMachine, asymmetric_pairs, coupling_name
from boltzkit.models.ising import IsingModel
from boltzkit.models.rbm import RBM

__all__ = ["check_lateral"]

_TWO_LAYER_NAMES = ("W", "L", "J", "vbias", "hbias")
_DEEP_NAME = re.compile(r"W_(\d+)(?:_(\d+))?|L_(\d+)|bias_(\d+)")
_DBN_BIAS = re.compile(r"[vh]bias_\d+")


def _deep_key(name: str) -> tuple[str, int, int] | None:
    """``("bias", l, l)`` or ``("coupling", l, m)`` for a deep model's array name, else ``None``."""
    match = _DEEP_NAME.fullmatch(name)
    if match is None:
        return None
    w, w_to, lateral, bias = match.groups()
    if bias is not None:
        key = ("bias", int(bias), int(bias))
        canonical = f"bias_{int(bias)}"
    elif lateral is not None:
        key = ("coupling", int(lateral), int(lateral))
        canonical = f"L_{int(lateral)}"
    else:
        l = int(w)
        m = int(w_to) if w_to is not None else l + 1
        if m <= l:
            return None
        key = ("coupling", l, m)
        canonical = coupling_name((l, m), 3)
    return key if canonical == name else None  # W_01, W_0_1: not ours


def _is_deep(names: Collection[str]) -> bool:
    return any(_deep_key(n) is not None for n in names)


def _looks_deep(names: Collection[str]) -> bool:
    """Deep names only (a file mixing them with W, vbias, ... is read as a two-layer model; one
    with a DBN's vbias_l / hbias_l is a DBN's, see :mod:`boltzkit.io.stack_kinds`)."""
    return _is_deep(names) and not any(n in _TWO_LAYER_NAMES or _DBN_BIAS.fullmatch(n) for n in names)


_LATERAL_EXPECTED = "symmetric, zero diagonal"
_RBM_EXPECTED = "arrays W (n_visible x n_hidden), vbias (n_visible,) and hbias (n_hidden,)"
_L_EXPECTED = f"L (n_visible x n_visible, {_LATERAL_EXPECTED})"
_J_EXPECTED = f"J (n_hidden x n_hidden, {_LATERAL_EXPECTED})"
_DEEP_EXPECTED = (
    "arrays W_0, W_1, ... (W_l is n_l x n_(l+1), between layers l and l + 1; layer 0 is visible) "
    "and bias_0, bias_1, ... (bias_l is (n_l,)), numbered without gaps, for at least three layers"
)
_DEEP_BM_EXPECTED = (
    "arrays bias_0, bias_1, ... (one per layer, numbered without gaps, at least three layers) and "
    "any of W_l (n_l x n_(l+1)), W_l_m (n_l x n_m, non-adjacent layers) and L_l (n_l x n_l, "
    f"{_LATERAL_EXPECTED})"
)


def _rbm_arrays(found: Collection[str]) -> ArraySpec:
    return ArraySpec(PARAMETER_NAMES, expected=_RBM_EXPECTED)


def _srbm_arrays(found: Collection[str]) -> ArraySpec:
    return ArraySpec(
        ("W", "L", "vbias", "hbias"),
        expected=f"arrays W (n_visible x n_hidden), {_L_EXPECTED}, vbias (n_visible,) and hbias (n_hidden,)",
        hint="an SRBM file holds W, L, vbias and hbias; hidden laterals J make it a BM.",
    )


def _numbering_gap(kind: str, found: Collection[str], *, couplings: bool) -> None:
    """Refuse a deep file whose biases (or, for a DBM, weights) skip a number."""
    by_type: dict[str, list[int]] = {"bias": [], "W": []}
    for name in found:
        key = _deep_key(name)
        if key is None:
            continue
        if key[0] == "bias":
            by_type["bias"].append(key[1])
        elif couplings and key[2] == key[1] + 1:
            by_type["W"].append(key[1])
    missing = []
    for prefix in ("W", "bias"):
        present = set(by_type[prefix])
        if present:
            missing += [f"{prefix}_{i}" for i in range(max(present)) if i not in present]
    if missing:
        raise ModelFileError(
            f"the {kind} arrays have a gap in their numbering: {listed(missing)} "
            + ("is" if len(missing) == 1 else "are")
            + " missing",
            got="arrays " + listed(sorted(found, key=natural_key)),
            expected=_DEEP_EXPECTED if kind == "DBM" else _DEEP_BM_EXPECTED,
            hint="W_l couples layers l and l + 1 and bias_l belongs to layer l, l = 0, 1, ...; "
            "renumber the arrays (or add the missing ones: zeros are a valid coupling).",
        )


def _deep_layers(found: Collection[str]) -> int:
    numbers = {name: key[2] for name in found if (key := _deep_key(name)) is not None}
    refuse_far_numbers(found, numbers, _DEEP_EXPECTED)
    return max(3, 1 + max(numbers.values(), default=0))


def _dbm_arrays(found: Collection[str]) -> ArraySpec:
    n = _deep_layers(
        [n for n in found if (k := _deep_key(n)) is not None and (k[0] == "bias" or k[2] == k[1] + 1)]
    )
    _numbering_gap("DBM", found, couplings=True)
    return ArraySpec(
        (*(f"W_{l}" for l in range(n - 1)), *(f"bias_{l}" for l in range(n))),
        expected=_DEEP_EXPECTED,
        hint="a DBM couples adjacent layers only; with laterals (L_l) or non-adjacent couplings "
        "(W_l_m) the model is a 'bm'. Without metadata a file of adjacent couplings is read as a "
        "DBM's: a BM in which a layer has no coupling to the next holds that W_l as zeros (the same "
        "model). A two-layer model is stored as W, vbias and hbias.",
    )


def _bm_arrays(found: Collection[str]) -> ArraySpec:
    if not _looks_deep(found):
        return ArraySpec(
            ("W", "vbias", "hbias", "J"),
            ("L",),
            expected=f"arrays W (n_visible x n_hidden), vbias (n_visible,), hbias (n_hidden,), {_J_EXPECTED} "
            f"and optionally {_L_EXPECTED}",
            hint="a two-layer BM file holds W, vbias, hbias, J and optionally L; without J it is an "
            "SRBM (W, L) or an RBM (W).",
        )
    n = _deep_layers(found)
    _numbering_gap("BM", found, couplings=False)
    couplings = [coupling_name((l, m), n) for l in range(n) for m in range(l, n)]
    return ArraySpec(
        tuple(f"bias_{l}" for l in range(n)),
        tuple(couplings),
        expected=_DEEP_BM_EXPECTED,
        hint="a BM with three or more layers holds bias_0, bias_1, ... and its couplings W_l, W_l_m, L_l.",
    )


def _recognize_srbm(names: Collection[str]) -> bool:
    # without W the laterals are a fully visible BM's ({L, vbias}: the fvbm kind)
    return not _looks_deep(names) and "L" in names and "J" not in names and "W" in names


def _recognize_bm(names: Collection[str]) -> bool:
    if not _looks_deep(names):
        return "J" in names and "W" in names
    return any((k := _deep_key(n)) is not None and k[0] == "coupling" and k[2] != k[1] + 1 for n in names)


def _recognize_dbm(names: Collection[str]) -> bool:
    # with sigma the arrays are a Gaussian DBM's (boltzkit.io.unit_kinds)
    return _looks_deep(names) and not _recognize_bm(names) and "sigma" not in names


def _shapes(tensors: Mapping[str, Tensor], names: Sequence[str]) -> str:
    return ", ".join(f"{n} {tuple(tensors[n].shape)}" for n in names if n in tensors)


def _check_two_layer(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, ...]:
    W, vb, hb = (tensors[n] for n in PARAMETER_NAMES)
    laterals = [n for n in ("L", "J") if n in tensors]
    shapes = _shapes(tensors, (*PARAMETER_NAMES, *laterals))
    expected = "W (n_visible, n_hidden), vbias (n_visible,), hbias (n_hidden,)"
    expected += "".join(
        {"L": ", L (n_visible, n_visible)", "J": ", J (n_hidden, n_hidden)"}[n] for n in laterals
    )
    if W.dim() != 2 or vb.dim() != 1 or hb.dim() != 1 or any(tensors[n].dim() != 2 for n in laterals):
        raise ModelFileError(
            "the model arrays have the wrong number of dimensions",
            got=f"{shapes} (in {p})",
            expected=expected,
        )
    n_visible, n_hidden = int(W.shape[0]), int(W.shape[1])
    if vb.shape[0] != n_visible or hb.shape[0] != n_hidden:
        transposed = vb.shape[0] == n_hidden and hb.shape[0] == n_visible
        raise ModelFileError(
            "the model arrays have inconsistent shapes",
            got=f"{shapes} (in {p})",
            expected=f"W (n_visible, n_hidden), vbias (n_visible,), hbias (n_hidden,); from W: "
            f"vbias ({n_visible},), hbias ({n_hidden},)",
            hint="W looks transposed: it must be n_visible x n_hidden; store W.T instead."
            if transposed
            else "the arrays do not belong to one model; check where they came from.",
        )
    if n_visible < 1:
        raise ModelFileError("the model has no visible units", got=f"{shapes} (in {p})")
    sizes = {"L": (n_visible, "n_visible", "visible"), "J": (n_hidden, "n_hidden", "hidden")}
    for name in laterals:
        n, symbol, layer = sizes[name]
        shape = tuple(tensors[name].shape)
        if shape != (n, n):
            other = "J" if name == "L" else "L"
            swapped = shape == (sizes[other][0],) * 2 and shape[0] != n
            raise ModelFileError(
                f"the lateral couplings {name} have the wrong shape",
                got=f"{name} {shape} in {p}, with W {tuple(W.shape)}",
                expected=f"{name} ({symbol}, {symbol}) = ({n}, {n}): {name} couples the {layer} units "
                "with each other",
                hint=f"this looks like {other}: L couples the visible units, J the hidden units; "
                "store the array under its right name."
                if swapped
                else "the arrays do not belong to one model; check where they came from.",
            )
    for name in laterals:
        check_lateral(name, tensors[name], p, bias="vbias" if name == "L" else "hbias")
    return n_visible, n_hidden


def _check_deep(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, ...]:
    keys = {name: _deep_key(name) for name in tensors}
    n = 1 + max(k[1] for k in keys.values() if k is not None and k[0] == "bias")
    biases = [f"bias_{l}" for l in range(n)]
    couplings = sorted(
        (name for name, k in keys.items() if k is not None and k[0] == "coupling"), key=natural_key
    )
    order = [*couplings, *biases]
    bad_dims = [b for b in biases if tensors[b].dim() != 1] + [c for c in couplings if tensors[c].dim() != 2]
    if bad_dims:
        raise ModelFileError(
            "the model arrays have the wrong number of dimensions",
            got=f"{_shapes(tensors, order)} (in {p})",
            expected="W_l, W_l_m and L_l two-dimensional, bias_l one-dimensional",
        )
    sizes = tuple(int(tensors[b].shape[0]) for b in biases)
    if sizes[0] < 1:
        raise ModelFileError("the model has no visible units", got=f"bias_0 (0,) in {p}")
    for name in couplings:
        _, l, m = keys[name]  # type: ignore[misc]
        shape = tuple(tensors[name].shape)
        want = (sizes[l], sizes[m])
        if shape == want:
            continue
        what = "the DBM arrays do not chain" if m == l + 1 else f"the coupling {name} has the wrong shape"
        raise ModelFileError(
            f"{what}: {name} is {shape[0]} x {shape[1]} but layers {l} and {m} have {want[0]} and "
            f"{want[1]} units",
            got=f"{_shapes(tensors, order)} (in {p})",
            expected=f"{name} ({want[0]}, {want[1]}): W_l is (n_l, n_(l+1)) and W_l_m is (n_l, n_m), "
            "with n_l the length of bias_l",
            hint=f"{name} looks transposed; store {name}.T instead."
            if shape == want[::-1]
            else "the arrays do not belong to one model; check where they came from.",
        )
    for name in couplings:
        _, l, m = keys[name]  # type: ignore[misc]
        if l == m:
            check_lateral(name, tensors[name], p, bias=f"bias_{l}")
    return sizes


def _check_family(tensors: Mapping[str, Tensor], p: Path) -> tuple[int, ...]:
    return _check_deep(tensors, p) if "bias_0" in tensors else _check_two_layer(tensors, p)


def check_lateral(
    name: str, t: Tensor, p: Path | str, *, bias: str = "the layer's bias", spins: bool = False
) -> None:
    """Refuse a lateral coupling matrix that is not symmetric or has a non-zero diagonal.

    Asymmetry within the rounding tolerance of :class:`~boltzkit.models.BoltzmannMachine`
    (:func:`~boltzkit.models.boltzmann.asymmetric_pairs`: ``SYMMETRY_RTOL`` relative to each pair)
    is accepted; the model averages it out.

    Parameters
    ----------
    name
        The array's name, for the message.
    t
        A square, finite matrix.
    p
        The file, for the message.
    bias
        The name of the bias of the same layer, for the hint about the diagonal.
    spins
        The units are +-1 spins (an Ising model's ``J``): the diagonal is a constant, not a bias.

    Raises
    ------
    ModelFileError
        Naming the array and the first offending entry (and how many there are).
    """
    v = t.detach().to(torch.float64)
    n = int(v.shape[0])
    if n == 0:
        return
    diag = torch.diagonal(v)
    nonzero = torch.nonzero(diag != 0).flatten()
    if nonzero.numel():
        i = int(nonzero[0])
        raise ModelFileError(
            f"the lateral couplings {name} have a non-zero diagonal",
            got=f"{name}[{i}, {i}] = {float(diag[i]):g}; {nonzero.numel()} of {n} diagonal entries are "
            f"non-zero (in {p})",
            expected="zeros on the diagonal (a unit is not coupled to itself)",
            hint=(
                f"s_i^2 = 1 for +-1 spins: diag({name}) only adds sum(diag({name})) / 2 to log Z, so zero "
                "the diagonal (and add that constant back if you need it)."
                if spins
                else f"x_i^2 = x_i for binary units, so add diag({name}) / 2 to {bias} and zero the diagonal."
            ),
        )
    bad = torch.nonzero(torch.triu(asymmetric_pairs(v), diagonal=1))
    if bad.numel():
        i, j = (int(k) for k in bad[0])
        raise ModelFileError(
            f"the lateral couplings {name} are not symmetric",
            got=f"{name}[{i}, {j}] = {float(v[i, j]):g} but {name}[{j}, {i}] = {float(v[j, i]):g}; "
            f"{bad.shape[0]} of {n * (n - 1) // 2} pairs differ (in {p})",
            expected=f"{name} == {name}.T (each pair of units has one coupling)",
            hint=f"if the exporting tool stored each coupling once, use {name} + {name}.T (upper and "
            f"lower triangle); if the asymmetry is noise, ({name} + {name}.T) / 2.",
        )


def _family_layout(
    tensors: Mapping[str, Tensor],
) -> tuple[tuple[int, ...], dict[tuple[int, int], Tensor], list[Tensor]]:
    if "bias_0" in tensors:
        keys = {name: _deep_key(name) for name in tensors}
        n = 1 + max(k[1] for k in keys.values() if k is not None and k[0] == "bias")
        biases = [tensors[f"bias_{l}"] for l in range(n)]
        couplings = {(k[1], k[2]): tensors[name] for name, k in keys.items() if k and k[0] == "coupling"}
    else:
        biases = [tensors["vbias"], tensors["hbias"]]
        names = {"W": (0, 1), "L": (0, 0), "J": (1, 1)}
        couplings = {key: tensors[name] for name, key in names.items() if name in tensors}
    return tuple(int(b.shape[0]) for b in biases), couplings, biases


def _build_rbm(
    tensors: Mapping[str, Tensor], md: Mapping[str, Any], dtype: torch.dtype, device: torch.device
) -> RBM:
    W = tensors["W"]
    return RBM(
        int(W.shape[0]),
        int(W.shape[1]),
        weights=W,
        vbias=tensors["vbias"],
        hbias=tensors["hbias"],
        dtype=dtype,
        device=device,
    )


def _build_machine(
    tensors: Mapping[str, Tensor], md: Mapping[str, Any], dtype: torch.dtype, device: torch.device
) -> BoltzmannMachine:
    sizes, couplings, biases = _family_layout(tensors)
    return BoltzmannMachine(sizes, couplings, biases, dtype=dtype, device=device)


def _refine_rbm(tensors: Mapping[str, Tensor]) -> str | None:
    """A plain ``W, vbias, hbias`` file whose ``W`` has three dimensions holds a categorical RBM."""
    from boltzkit.io.unit_kinds import is_categorical_arrays

    return "categorical-rbm" if is_categorical_arrays(tensors) else None


def _refine_dbm(tensors: Mapping[str, Tensor]) -> str | None:
    """A DBM file whose ``W_0`` has three dimensions holds a categorical DBM."""
    from boltzkit.io.unit_kinds import refine_dbm

    return refine_dbm(tensors)


register_kind(
    ModelKind(
        name="rbm",
        label="RBM",
        arrays=_rbm_arrays,
        check=_check_two_layer,
        build=_build_rbm,  # an RBM instance, with its fused products
        model_type=BoltzmannMachine,  # a BoltzmannMachine with W only is saved as an RBM too
        refine=_refine_rbm,
    )
)
register_kind(
    ModelKind(
        name="srbm",
        label="SRBM",
        arrays=_srbm_arrays,
        check=_check_two_layer,
        build=_build_machine,
        recognize=_recognize_srbm,
        model_type=BoltzmannMachine,
    )
)
register_kind(
    ModelKind(
        name="bm",
        label="BM",
        arrays=_bm_arrays,
        check=_check_family,
        build=_build_machine,
        recognize=_recognize_bm,
        model_type=BoltzmannMachine,
    )
)
register_kind(
    ModelKind(
        name="dbm",
        label="DBM",
        arrays=_dbm_arrays,
        check=_check_deep,
        build=_build_machine,
        recognize=_recognize_dbm,
        model_type=BoltzmannMachine,
        refine=_refine_dbm,
    )
)


# ------------------------------------------------------------------ one layer: fvbm and ising
def _one_layer_check(tensors: Mapping[str, Tensor], p: Path, coupling: str, bias: str) -> tuple[int, ...]:
    c, b = tensors[coupling], tensors[bias]
    shapes = _shapes(tensors, (coupling, bias))
    if c.dim() != 2 or b.dim() != 1 or c.shape[0] != c.shape[1] or c.shape[0] != b.shape[0]:
        raise ModelFileError(
            "the model arrays have inconsistent shapes",
            got=f"{shapes} (in {p})",
            expected=f"{coupling} (n, n) and {bias} (n,)",
        )
    if b.shape[0] < 1:
        raise ModelFileError("the model has no units", got=f"{shapes} (in {p})")
    check_lateral(coupling, c, p, bias=bias, spins=coupling == "J")  # an Ising model's J couples spins
    return (int(b.shape[0]),)


def _fvbm_arrays(found: Collection[str]) -> ArraySpec:
    return ArraySpec(
        ("L", "vbias"),
        expected=f"arrays {_L_EXPECTED} and vbias (n_visible,)",
        hint="a fully visible Boltzmann machine (no hidden units) holds L and vbias in {0, 1} units; "
        "an Ising model in +-1 units holds J and h.",
    )


def _build_fvbm(tensors, md, dtype, device) -> BoltzmannMachine:  # noqa: ANN001
    n = int(tensors["vbias"].shape[0])
    return BoltzmannMachine([n], {(0, 0): tensors["L"]}, [tensors["vbias"]], dtype=dtype, device=device)


def _ising_arrays(found: Collection[str]) -> ArraySpec:
    return ArraySpec(
        ("J", "h"),
        expected="arrays J (N x N, symmetric, zero diagonal) and h (N,): the weight "
        "exp(sum_{i<j} J_ij s_i s_j + h's) of spins s in {-1, +1}",
        hint="an Ising model or spin glass file holds J and h (+-1 convention).",
    )


def _build_ising(tensors, md, dtype, device) -> IsingModel:  # noqa: ANN001
    return IsingModel(tensors["J"], tensors["h"], dtype=dtype, device=device)


def _ising_tensors(model) -> dict[str, Tensor]:  # noqa: ANN001
    """``J, h`` from the model's {0, 1} parameters, worked out in float64 and rounded once to the
    model's dtype: a float32 model then changes by at most that one rounding in a save and load
    (the {0, 1} biases are rebuilt in float64 too, :class:`~boltzkit.models.ising.IsingModel`),
    not by two roundings a trip that add up over repeated round trips."""
    couplings = model.coupling(0, 0).detach().to(torch.float64)
    bias = model.bias(0).detach().to(torch.float64)
    dtype = model.coupling(0, 0).dtype
    return {"J": (couplings / 4.0).to(dtype), "h": (bias / 2.0 + couplings.sum(1) / 4.0).to(dtype)}


def _ising_facts(model) -> dict[str, Any]:  # noqa: ANN001
    return {
        "layer_sizes": [int(model.n_visible)],
        "convention": "ising: spins s in {-1, +1}, weight exp(sum_{i<j} J_ij s_i s_j + h's)",
        "log_z_constant": model.log_z_constant,
    }


register_kind(
    ModelKind(
        name="fvbm",
        label="fully visible BM",
        arrays=_fvbm_arrays,
        check=lambda t, p: _one_layer_check(t, p, "L", "vbias"),
        build=_build_fvbm,
        recognize=lambda names: set(names) == {"L", "vbias"},
        model_type=BoltzmannMachine,
    )
)
register_kind(
    ModelKind(
        name="ising",
        label="Ising model",
        arrays=_ising_arrays,
        check=lambda t, p: _one_layer_check(t, p, "J", "h"),
        build=_build_ising,
        recognize=lambda names: set(names) == {"J", "h"},
        model_type=IsingModel,
        tensors_of=_ising_tensors,
        facts=_ising_facts,
    )
)
