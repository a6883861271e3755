"""General binary Boltzmann machines: layers of units, couplings between and within layers.

One model family serves every member (Salakhutdinov 2008, "S2", Secs. 4.1-4.3). With ``x_l`` the
{0, 1} states of layer ``l`` (layer 0 visible), the energy is (S2 Eqs. 32, 45, 48)::

    E(x) = - sum_{l < m} x_l^T W_lm x_m  -  1/2 sum_l x_l^T L_l x_l  -  sum_l b_l^T x_l

where ``W_lm`` (``n_l x n_m``) couples two layers and ``L_l`` (``n_l x n_l``, symmetric, zero
diagonal) couples the units of one layer ("laterals"). Which couplings exist is the *structure*;
the members of the family are structures:

=========== ===================================================================================
``rbm``     two layers, ``W`` only (S2 Eq. 32)
``srbm``    two layers, ``W`` and visible laterals ``L`` (S2 Eq. 45)
``bm``      two layers, ``W``, ``L`` and hidden laterals ``J`` (S2 Eq. 48); any other structure
``dbm``     three or more layers, couplings only between adjacent layers
=========== ===================================================================================

At inverse temperature ``beta`` the distribution is ``p_beta(x) ∝ exp(-beta E(x))``. Every unit's
conditional given all other units is logistic in its *input* (S2 Eqs. 46, 49, 50)::

    p(x_li = 1 | rest) = sigma(beta a_li),   a_l = b_l + sum_{m != l} x_m W_ml + x_l L_l

A layer without laterals is a block of conditionally independent units; a layer with laterals is
updated one unit at a time (a ``sequential`` block). A set of layers without laterals and without
couplings among them can be *summed out* in closed form given the other layers::

    log p*_beta(x_kept) = -beta E_kept(x_kept) + sum_{l summed} sum_i softplus(beta a_li(x_kept))

which is the free energy of S2 Sec. 4.2 (SRBM: the hidden layer) and of a DBM's odd or even layers.

Parameters are named after the files that hold them: two-layer models ``W``, ``L``, ``J``,
``vbias``, ``hbias``; deeper models ``W_0, W_1, ...`` (``W_l`` between layers ``l`` and ``l + 1``),
``L_l``, ``W_l_m`` (non-adjacent layers) and ``bias_0, bias_1, ...``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from boltzkit._numerics import add_product, as_beta, bernoulli, softplus
from boltzkit.errors import BoltzkitError
from boltzkit.models.base import EnergyModel, check_fits_dtype, checked_parameter, layer_size
from boltzkit.state import Block, ChainState

CouplingKey = tuple[int, int]

#: Kinds of model, derived from the structure (see the module docstring).
KINDS = ("rbm", "srbm", "bm", "dbm", "fvbm", "independent")

#: Relative asymmetry of a lateral matrix that is treated as rounding and symmetrised.
SYMMETRY_RTOL = 1e-6
#: ... relative to each pair's own size, at least this fraction of the largest entry (so the
#: rounding of a near-zero pair that cancelled, in ``X @ X.T``, is still rounding)
SYMMETRY_FLOOR = 1e-9


def asymmetric_pairs(v: Tensor) -> Tensor:
    """Bool mask of the entries of a square matrix whose pair differs beyond rounding: by more than
    :data:`SYMMETRY_RTOL` of the pair's larger magnitude (at least :data:`SYMMETRY_FLOOR` of the
    largest entry). The one symmetry rule of lateral couplings, in files and models alike: judged
    against the largest entry alone, a pair of 0.4 and -0.4 beside an entry of 1e6 passed and was
    averaged to zero without a word (a probe of 2026-12-07)."""
    v = v.detach().to(torch.float64)
    floor = SYMMETRY_FLOOR * max(float(v.abs().max()), 1e-300) if v.numel() else 0.0
    size = torch.maximum(v.abs(), v.t().abs()).clamp_min(floor)
    return (v - v.t()).abs() > SYMMETRY_RTOL * size


def coupling_name(key: CouplingKey, n_layers: int) -> str:
    """File and parameter name of the coupling ``key = (l, m)``, ``l <= m``."""
    l, m = key
    if n_layers <= 2:
        return {(0, 1): "W", (0, 0): "L", (1, 1): "J"}[key]
    if l == m:
        return f"L_{l}"
    if m == l + 1:
        return f"W_{l}"
    return f"W_{l}_{m}"


def bias_name(layer: int, n_layers: int) -> str:
    """File and parameter name of the bias of ``layer``."""
    if n_layers <= 2:
        return ("vbias", "hbias")[layer]
    return f"bias_{layer}"


def structure_kind(layer_sizes: Sequence[int], keys: Iterable[CouplingKey]) -> str:
    """The member of the family that a structure (the set of coupling keys) is."""
    keys = frozenset(keys)
    n = len(layer_sizes)
    if not keys:
        return "independent"
    if n == 1:
        return "fvbm"
    if n == 2:
        if keys == {(0, 1)}:
            return "rbm"
        if keys == {(0, 1), (0, 0)}:
            return "srbm"
        return "bm"
    if n >= 3 and keys == {(l, l + 1) for l in range(n - 1)}:
        return "dbm"
    return "bm"


def kind_coupling_keys(kind: str, n_layers: int) -> frozenset[CouplingKey]:
    """The coupling keys of a member of the family (the inverse of :func:`structure_kind`):
    ``rbm`` ``{(0, 1)}``, ``srbm`` adds the visible laterals ``(0, 0)`` (S2 Eq. 45), ``bm`` the
    hidden laterals ``(1, 1)`` too (S2 Eq. 48), ``dbm`` couples adjacent layers, ``fvbm`` is
    ``{(0, 0)}``."""
    kind = str(kind).strip().lower()
    table = {
        "rbm": {(0, 1)},
        "srbm": {(0, 1), (0, 0)},
        "bm": {(0, 1), (0, 0), (1, 1)},
        "fvbm": {(0, 0)},
        "dbm": {(l, l + 1) for l in range(n_layers - 1)},
    }
    if kind not in table:
        raise BoltzkitError("unknown model kind", got=repr(kind), expected=", ".join(table))
    return frozenset(table[kind])


@dataclass(frozen=True)
class PairwiseForm:
    """A model as a pairwise binary MRF over all its units, in {0, 1} and in Ising (+-1) form.

    With ``x`` all units side by side (visible first) and ``Q`` the symmetric unit-level coupling
    matrix (zero diagonal), ``-E(x) = 1/2 x^T Q x + b^T x``. Substituting ``x = (1 + s) / 2``
    (ALGORITHMS.md, section 8)::

        -E = sum_{i<j} J_ij s_i s_j + sum_i h_i s_i + constant,
        J = Q / 4,   h_i = b_i / 2 + sum_j Q_ij / 4,   constant = sum_{i<j} Q_ij / 4 + sum_i b_i / 2

    so that ``log Z = constant + log sum_s exp(sum_{i<j} J_ij s_i s_j + h^T s)``.

    Attributes
    ----------
    couplings
        ``Q``, float64, shape ``(N, N)``, symmetric with zero diagonal.
    biases
        ``b``, float64, shape ``(N,)``.
    layer_sizes
        Units per layer (to map unit indices back to layers).
    mask
        Boolean ``(N, N)``: the unit pairs the model's structure couples (even where the value
        is 0), symmetric with a false diagonal.
    """

    couplings: Tensor
    biases: Tensor
    layer_sizes: tuple[int, ...]
    mask: Tensor

    @property
    def ising_couplings(self) -> Tensor:
        """``J = Q / 4`` (symmetric, zero diagonal)."""
        return self.couplings / 4.0

    @property
    def ising_fields(self) -> Tensor:
        """``h = b / 2 + Q 1 / 4``."""
        return self.biases / 2.0 + self.couplings.sum(1) / 4.0

    @property
    def ising_constant(self) -> float:
        """``sum_{i<j} Q_ij / 4 + sum_i b_i / 2`` (the additive constant of ``log Z``)."""
        return float(self.couplings.sum() / 8.0 + self.biases.sum() / 2.0)

    @property
    def edges(self) -> Tensor:
        """Pairs ``(i, j)``, ``i < j``, with a structural coupling, shape ``(E, 2)``, int64."""
        return torch.nonzero(torch.triu(self.mask, diagonal=1))


class BoltzmannMachine(EnergyModel):
    """A binary Boltzmann machine with any couplings between and within layers.

    Parameters
    ----------
    layer_sizes
        Units per layer, visible first (``len >= 1``; the visible layer has at least one unit).
    couplings
        ``{(l, m): W_lm}`` with ``l <= m``: ``W_lm`` of shape ``(n_l, n_m)`` between two layers,
        or ``L_l`` (``l == m``; symmetric, zero diagonal) within one. A value ``None`` means
        zeros: the coupling exists (it is part of the structure and learnable) but starts at 0.
    biases
        One bias per layer (``None`` entries or ``None`` altogether: zeros).
    dtype, device
        Of the parameters; partition-function sums are float64 whatever the dtype.

    Examples
    --------
    >>> bm = BoltzmannMachine((5, 3), {(0, 1): None, (0, 0): None, (1, 1): None})
    >>> bm.kind, [name for name, _ in bm.named_parameters()]
    ('bm', ['W', 'L', 'J', 'vbias', 'hbias'])
    """

    def __init__(
        self,
        layer_sizes: Sequence[int],
        couplings: Mapping[CouplingKey, Tensor | None] | None = None,
        biases: Sequence[Tensor | None] | None = None,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise BoltzkitError(
                "a model's parameters must be floating point",
                got=str(dtype),
                expected="torch.float32 or float64",
            )
        sizes = tuple(layer_size(n) for n in layer_sizes)
        if not sizes or sizes[0] < 1 or any(n < 0 for n in sizes):
            raise BoltzkitError(
                "a Boltzmann machine needs at least one visible unit and non-negative layer sizes",
                got=f"layer sizes {tuple(layer_sizes)}",
            )
        self._sizes = sizes
        n_layers = len(sizes)
        couplings = dict(couplings or {})
        biases = list(biases) if biases is not None else [None] * n_layers
        if len(biases) != n_layers:
            raise BoltzkitError(
                "one bias per layer is needed", got=f"{len(biases)} biases", expected=f"{n_layers}"
            )
        kw = {"dtype": dtype, "device": device}
        keys = []
        for key in sorted(couplings, key=lambda k: (k[0] == k[1], k[0], k[1])):
            l, m = (int(key[0]), int(key[1]))
            if not (0 <= l <= m < n_layers):
                raise BoltzkitError(
                    "invalid coupling key",
                    got=key,
                    expected=f"(l, m) with 0 <= l <= m < {n_layers}",
                )
            keys.append((l, m))
        self._keys: tuple[CouplingKey, ...] = tuple(keys)
        self._names: dict[CouplingKey, str] = {k: coupling_name(k, n_layers) for k in keys}
        self._bias_names = tuple(bias_name(l, n_layers) for l in range(n_layers))
        for key in keys:
            l, m = key
            name = self._names[key]
            param = nn.Parameter(torch.zeros(sizes[l], sizes[m], **kw))
            value = couplings[key]
            if value is not None:
                value = checked_parameter(value, (sizes[l], sizes[m]), name)
                if l == m:
                    value = _checked_lateral(value, name)
                with torch.no_grad():
                    param.copy_(value)
            self.register_parameter(name, param)
        for layer, value in enumerate(biases):
            name = self._bias_names[layer]
            param = nn.Parameter(torch.zeros(sizes[layer], **kw))
            if value is not None:
                with torch.no_grad():
                    param.copy_(checked_parameter(value, (sizes[layer],), name))
            self.register_parameter(name, param)
        check_fits_dtype(self)
        self._index()

    def _index(self) -> None:
        """Adjacency lists: for each layer the ``(m, key)`` of the other layers it is coupled to."""
        neighbors: dict[int, list[tuple[int, CouplingKey]]] = {l: [] for l in range(len(self._sizes))}
        for l, m in self._keys:
            if l != m:
                neighbors[l].append((m, (l, m)))
                neighbors[m].append((l, (l, m)))
        self._neighbors = {l: tuple(sorted(v)) for l, v in neighbors.items()}

    # ------------------------------------------------------------------------- constructors
    @classmethod
    def srbm(
        cls,
        n_visible: int,
        n_hidden: int,
        *,
        W: Tensor | None = None,
        L: Tensor | None = None,
        vbias: Tensor | None = None,
        hbias: Tensor | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> BoltzmannMachine:
        """Semi-restricted Boltzmann machine (S2 Eq. 45): ``W`` and visible laterals ``L``."""
        return cls((n_visible, n_hidden), {(0, 1): W, (0, 0): L}, [vbias, hbias], dtype=dtype, device=device)

    @classmethod
    def bm(
        cls,
        n_visible: int,
        n_hidden: int,
        *,
        W: Tensor | None = None,
        L: Tensor | None = None,
        J: Tensor | None = None,
        vbias: Tensor | None = None,
        hbias: Tensor | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> BoltzmannMachine:
        """General Boltzmann machine (S2 Eq. 48): ``W``, visible laterals ``L``, hidden laterals ``J``."""
        return cls(
            (n_visible, n_hidden),
            {(0, 1): W, (0, 0): L, (1, 1): J},
            [vbias, hbias],
            dtype=dtype,
            device=device,
        )

    @classmethod
    def dbm(
        cls,
        layer_sizes: Sequence[int],
        *,
        weights: Sequence[Tensor | None] | None = None,
        biases: Sequence[Tensor | None] | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> BoltzmannMachine:
        """Deep Boltzmann machine: couplings ``W_l`` between layers ``l`` and ``l + 1`` only."""
        n = len(layer_sizes)
        weights = list(weights) if weights is not None else [None] * (n - 1)
        if len(weights) != n - 1:
            raise BoltzkitError(
                "a DBM has one weight matrix between each pair of adjacent layers",
                got=f"{len(weights)} matrices for {n} layers",
                expected=f"{n - 1}",
            )
        return cls(
            layer_sizes,
            {(l, l + 1): w for l, w in enumerate(weights)},
            biases,
            dtype=dtype,
            device=device,
        )

    @classmethod
    def independent(
        cls,
        biases: Sequence[Tensor],
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> BoltzmannMachine:
        """A factorial model (no couplings) with the given per-layer biases: the base of AIS."""
        biases = [torch.as_tensor(b) for b in biases]
        dtype = dtype or (biases[0].dtype if biases[0].is_floating_point() else torch.float32)
        device = device if device is not None else biases[0].device
        return cls([b.numel() for b in biases], {}, biases, dtype=dtype, device=device)

    @classmethod
    def random(
        cls,
        layer_sizes: Sequence[int],
        keys: Iterable[CouplingKey],
        *,
        scale: float = 0.01,
        bias_scale: float = 0.0,
        generator: torch.Generator,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> BoltzmannMachine:
        """Couplings ``~ N(0, scale^2)`` (laterals symmetrised, zero diagonal), biases
        ``~ N(0, bias_scale^2)``, all drawn from ``generator``."""
        sizes = tuple(int(n) for n in layer_sizes)
        kw = {"generator": generator, "dtype": dtype, "device": device}
        couplings: dict[CouplingKey, Tensor] = {}
        for l, m in sorted(set(keys)):
            w = torch.randn(sizes[l], sizes[m], **kw) * scale
            if l == m:
                w = torch.triu(w, diagonal=1)
                w = w + w.t()
            couplings[(l, m)] = w
        biases = [torch.randn(n, **kw) * bias_scale for n in sizes]
        return cls(sizes, couplings, biases, dtype=dtype, device=device)

    # ----------------------------------------------------------------------------- structure
    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return self._sizes

    @property
    def n_layers(self) -> int:
        return len(self._sizes)

    @property
    def n_hidden(self) -> int:
        """Number of hidden units (all layers but the visible one)."""
        return sum(self._sizes[1:])

    @property
    def coupling_keys(self) -> tuple[CouplingKey, ...]:
        """The structure: keys ``(l, m)``, ``l <= m``, of the couplings that exist."""
        return self._keys

    @property
    def kind(self) -> str:
        """``"rbm"``, ``"srbm"``, ``"bm"``, ``"dbm"``, ``"fvbm"`` (one layer with laterals: a fully
        visible Boltzmann machine) or ``"independent"`` (from the structure)."""
        return structure_kind(self._sizes, self._keys)

    def coupling_name(self, l: int, m: int) -> str:
        return self._names[(min(l, m), max(l, m))]

    def bias_name(self, layer: int) -> str:
        return self._bias_names[layer]

    def has_coupling(self, l: int, m: int) -> bool:
        return (min(l, m), max(l, m)) in self._names

    def coupling(self, l: int, m: int) -> Tensor:
        """``W_lm`` oriented ``(n_l, n_m)`` (a transposed view when ``l > m``); laterals for ``l == m``."""
        key = (min(l, m), max(l, m))
        if key not in self._names:
            raise KeyError(f"layers {l} and {m} are not coupled in this model")
        w = getattr(self, self._names[key])
        return w if l <= m else w.t()

    def bias(self, layer: int) -> Tensor:
        return getattr(self, self._bias_names[layer])

    def neighbors(self, layer: int) -> tuple[int, ...]:
        """The other layers coupled to ``layer``."""
        return tuple(m for m, _ in self._neighbors[layer])

    def has_laterals(self, layer: int) -> bool:
        return (layer, layer) in self._names and self._sizes[layer] > 1

    def can_sum_out(self, layers: Iterable[int]) -> bool:
        """Whether ``layers`` can be summed out in closed form given the others: no laterals, and
        no coupling between two of them."""
        layers = set(layers)
        for l in layers:
            if self.has_laterals(l) or any(m in layers for m in self.neighbors(l)):
                return False
        return True

    def _check_sum_out(self, layers: Iterable[int]) -> tuple[int, ...]:
        layers = tuple(sorted(set(int(l) for l in layers)))
        if any(not 0 <= l < self.n_layers for l in layers):
            raise BoltzkitError("no such layer to sum out", got=layers, expected=f"0..{self.n_layers - 1}")
        if not self.can_sum_out(layers):
            raise BoltzkitError(
                "these layers cannot be summed out in closed form",
                got=f"layers {layers} of a {self.kind}",
                expected="layers without laterals and not coupled to each other",
                hint="sum out e.g. the odd layers of a DBM or the hidden layer of an SRBM; "
                "enumerate the others (boltzkit.estimators.exact).",
            )
        return layers

    def default_sum_out(self) -> tuple[int, ...]:
        """The layers that AIS and the learners sum out (Rao-Blackwellise) by default: the odd
        layers without laterals that are not coupled to an earlier chosen one (RBM and SRBM: the
        hidden layer; DBM: the odd layers; a BM with hidden laterals: none)."""
        chosen: list[int] = []
        for l in range(1, self.n_layers, 2):
            coupled = any(m in chosen for m in self.neighbors(l))
            if self._sizes[l] and not self.has_laterals(l) and not coupled:
                chosen.append(l)
        return tuple(chosen)

    def hidden_summable(self) -> bool:
        """Whether all hidden layers sum out in closed form given the visible one (RBM, SRBM)."""
        return self.can_sum_out(range(1, self.n_layers))

    def blocks(self) -> tuple[Block, ...]:
        """One sweep: the odd layers, then the even layers (for an RBM: hidden, then visible); a
        layer with laterals is a sequential block (single-site updates in index order)."""
        order = [*range(1, self.n_layers, 2), *range(0, self.n_layers, 2)]
        return tuple(Block(l, sequential=self.has_laterals(l)) for l in order if self._sizes[l])

    def extra_repr(self) -> str:
        sizes = "x".join(str(n) for n in self._sizes)
        names = ", ".join(self._names[k] for k in self._keys)
        return f"kind={self.kind}, layers={sizes}, couplings=[{names}], dtype={self.dtype}"

    # ------------------------------------------------------------------------ conditionals
    def layer_input(self, state: ChainState, layer: int, beta: float | Tensor = 1.0) -> Tensor:
        """``beta a_l = beta (b_l + sum_{m != l} x_m W_ml + x_l L_l)``, shape ``(n, n_l)``.

        Uses the current value of every other layer (and of ``layer`` itself through its
        laterals, whose zero diagonal keeps each unit out of its own input).
        """
        x = state.layers
        out: Tensor | None = None
        for m, _ in self._neighbors[layer]:  # a sparse binary layer as a sum of rows of W (add_product)
            out = add_product(self.bias(layer), x[m], self.coupling(m, layer), out)
        if (layer, layer) in self._names:
            w = self.coupling(layer, layer)
            out = torch.addmm(self.bias(layer), x[layer], w) if out is None else out.addmm_(x[layer], w)
        if out is None:
            out = self.bias(layer).expand(x[0].shape[0], -1).clone()
        b = as_beta(beta, out)
        return out if isinstance(b, float) and b == 1.0 else out * b

    def block_logits(self, state: ChainState, block: Block, beta: float | Tensor = 1.0) -> Tensor:
        logits = self.layer_input(state, block.layer, beta)
        return logits if block.units is None else logits[:, block.units]

    def laterals(self, layer: int) -> tuple[tuple[float, Tensor], ...]:
        """The lateral couplings of ``layer`` as ``(scale, L)`` terms (one term here; a path's
        intermediate model mixes two)."""
        if (layer, layer) not in self._names:
            return ()
        return ((1.0, self.coupling(layer, layer)),)

    def conditional_probs(self, state: ChainState, layer: int, beta: float | Tensor = 1.0) -> Tensor:
        """``p(x_l = 1 | other layers)`` of a layer without laterals, shape ``(n, n_l)``."""
        return torch.sigmoid(self.layer_input(state, layer, beta))

    def sample_layer(
        self, state: ChainState, layer: int, generator: torch.Generator, beta: float | Tensor = 1.0
    ) -> Tensor:
        """Draw a layer without laterals from its conditional given the other layers."""
        return bernoulli(self.conditional_probs(state, layer, beta), generator)

    def rao_blackwellize(self, state: ChainState, layers: Iterable[int] | None = None) -> ChainState:
        """Replace ``layers`` (default: :meth:`default_sum_out`) by their conditional means given
        the other layers. Valid for statistics linear in each of those units, such as the
        sufficient statistics (the layers are conditionally independent of each other)."""
        layers = self.default_sum_out() if layers is None else self._check_sum_out(layers)
        for l in layers:
            state = state.with_layer(l, self.conditional_probs(state, l))
        return state

    # ----------------------------------------------------------------------------- energies
    def energy_of(self, state: ChainState, layers: Iterable[int] | None = None) -> Tensor:
        """Energy of the terms among ``layers`` (default: all), float64, shape ``(n,)``.

        Couplings with a layer outside ``layers`` are left out, as are that layer's biases: this
        is the part of ``E`` that does not involve summed-out layers. Products are formed in the
        parameters' dtype and summed in float64.
        """
        keep = set(range(self.n_layers)) if layers is None else set(layers)
        x = state.layers
        x64: dict[int, Tensor] = {}

        def as64(l: int) -> Tensor:
            if l not in x64:
                x64[l] = x[l].to(torch.float64)
            return x64[l]

        e = torch.zeros(x[0].shape[0], dtype=torch.float64, device=x[0].device)
        for l, m in self._keys:
            if l in keep and m in keep and self._sizes[l] and self._sizes[m]:
                w = getattr(self, self._names[(l, m)]).detach()
                term = ((x[l].to(w.dtype) @ w).to(torch.float64) * as64(m)).sum(1)
                e = e - (0.5 * term if l == m else term)
        for l in sorted(keep):
            if self._sizes[l]:
                e = e - as64(l) @ self.bias(l).detach().to(torch.float64)
        return e

    def joint_energy(self, state: ChainState) -> Tensor:
        """``E(x)`` (S2 Eq. 48) of each chain's full state, float64, shape ``(n,)``."""
        return self.energy_of(state)

    def log_unnormalized(
        self, state: ChainState, beta: float | Tensor = 1.0, sum_out: Iterable[int] = ()
    ) -> Tensor:
        """``log p*_beta`` of the kept layers with ``sum_out`` summed out, float64, ``(n,)``::

        -beta E_kept(x) + sum_{l in sum_out} sum_i softplus(beta a_li(x_kept))
        """
        summed = self._check_sum_out(sum_out)
        kept = [l for l in range(self.n_layers) if l not in summed]
        e = self.energy_of(state, kept)
        b = as_beta(beta, e.unsqueeze(1))
        out = -(e * (b if isinstance(b, float) else b.squeeze(1)))
        for l in summed:
            if self._sizes[l]:
                out = out + softplus(self.layer_input(state, l, beta)).to(torch.float64).sum(1)
        return out

    def state_from_visible(self, v: Tensor) -> ChainState:
        """A state with visible ``v`` and every other layer at zero (to be resampled)."""
        v = v.to(device=self.device, dtype=self.dtype)
        return ChainState((v, *(v.new_zeros(v.shape[0], n) for n in self._sizes[1:])))

    def log_unnormalized_visible(self, v: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``log p*_beta(v) = -F_beta(v)`` with every hidden layer summed out, float64, ``(n,)``.

        Only for models whose hidden layers sum out in closed form (RBM, SRBM); for the others
        ``boltzkit.estimators.exact.exact_log_unnormalized_visible`` enumerates them.
        """
        if not self.hidden_summable():
            raise BoltzkitError(
                f"the hidden units of a {self.kind} do not sum out in closed form",
                hint="use boltzkit.estimators.exact_log_unnormalized_visible (enumeration) or the "
                "mean-field lower bound.",
            )
        return self.log_unnormalized(self.state_from_visible(v), beta, range(1, self.n_layers))

    def free_energy(self, v: Tensor, beta: float | Tensor = 1.0) -> Tensor:
        """``F_beta(v) = -log p*_beta(v)`` (hidden layers summed out; RBM and SRBM), float64."""
        return -self.log_unnormalized_visible(v, beta)

    # ---------------------------------------------------------------------- learning support
    @torch.no_grad()
    def set_gradients(self, positive: ChainState, negative: ChainState) -> None:
        """Write the negative log-likelihood gradient estimate into every parameter's ``.grad``.

        For a coupling ``W_lm``: ``<x_l x_m^T>_negative - <x_l x_m^T>_positive`` (S2 Eqs. 35,
        47, 51, with the sign flipped for minimisation); for laterals the same with a zero
        diagonal; for biases ``<x_l>_negative - <x_l>_positive``. ``positive`` and ``negative``
        hold samples or conditional means (S2 Sec. 4.3: mean-field ``mu`` in the positive phase).
        Existing gradients are overwritten.
        """
        p, q = positive.layers, negative.layers
        n_p, n_q = p[0].shape[0], q[0].shape[0]
        for l, m in self._keys:
            param = getattr(self, self._names[(l, m)])
            g = _grad_buffer(param)
            torch.mm(p[l].t(), p[m], out=g)
            g.addmm_(q[l].t(), q[m], beta=-1.0 / n_p, alpha=1.0 / n_q)
            if l == m:  # a product x^T x is symmetric only up to rounding: make it exactly so,
                g.copy_(torch.add(g, g.t()).mul_(0.5))  # so that updates keep L = L^T exactly
                g.fill_diagonal_(0.0)
        for layer in range(self.n_layers):
            g = _grad_buffer(self.bias(layer))
            torch.sum(q[layer], 0, out=g)
            g.mul_(1.0 / n_q).sub_(p[layer].sum(0), alpha=1.0 / n_p)

    # ------------------------------------------------------------------------------- forms
    @torch.no_grad()
    def pairwise(self) -> PairwiseForm:
        """The model as a pairwise MRF over all units (float64), with its Ising (+-1) form."""
        sizes = self._sizes
        offsets = [0]
        for n in sizes:
            offsets.append(offsets[-1] + n)
        total = offsets[-1]
        kw = {"dtype": torch.float64, "device": self.device}
        q = torch.zeros(total, total, **kw)
        mask = torch.zeros(total, total, dtype=torch.bool, device=self.device)
        for l, m in self._keys:
            w = getattr(self, self._names[(l, m)]).detach().to(torch.float64)
            rl, rm = slice(offsets[l], offsets[l + 1]), slice(offsets[m], offsets[m + 1])
            q[rl, rm] = w
            q[rm, rl] = w.t()
            mask[rl, rm] = True
            mask[rm, rl] = True
        mask.fill_diagonal_(False)
        b = torch.cat([self.bias(l).detach().to(torch.float64) for l in range(self.n_layers)])
        return PairwiseForm(couplings=q, biases=b, layer_sizes=sizes, mask=mask)

    def detached_copy(
        self, *, dtype: torch.dtype | None = None, device: torch.device | str | None = None
    ) -> BoltzmannMachine:
        """A copy with the same structure and values, detached from autograd, optionally
        converted."""
        copy_ = copy.deepcopy(self)
        copy_.zero_grad(set_to_none=True)
        return copy_.to(dtype=dtype or self.dtype, device=device or self.device)

    def embedded(self, keys: Iterable[CouplingKey]) -> BoltzmannMachine:
        """This model as a member of a larger structure: the couplings ``keys`` (which must include
        its own), those it lacks set to zero, so the distribution over all units is unchanged.

        An RBM embedded in the SRBM or BM structure (``{(0, 1), (0, 0)}`` or ``{(0, 1), (0, 0),
        (1, 1)}``) is the start of an SRBM or BM trained further from it: with ``L = J = 0`` the
        energy of S2 Eq. 48 is the RBM's of Eq. 44.

        Raises
        ------
        BoltzkitError
            When ``keys`` drops a coupling of this model or names an invalid pair of layers.
        """
        keys = {(int(l), int(m)) for l, m in keys}
        missing = set(self.coupling_keys) - keys
        if missing:
            names = ", ".join(self.coupling_name(l, m) for l, m in sorted(missing))
            raise BoltzkitError(
                "a model can only be embedded in a structure that keeps all its couplings",
                got=f"a {self.kind} whose {names} the new structure lacks",
            )
        kw = {"dtype": self.dtype, "device": self.device}
        couplings = {
            key: self.coupling(*key).detach().clone() if self.has_coupling(*key) else None for key in keys
        }
        biases = [self.bias(l).detach().clone() for l in range(self.n_layers)]
        return BoltzmannMachine(self.layer_sizes, couplings, biases, **kw)

    def as_float64(self) -> BoltzmannMachine:
        """This model in float64 (itself when it already is)."""
        return self if self.dtype == torch.float64 else self.detached_copy(dtype=torch.float64)


def _checked_lateral(value: Tensor, name: str) -> Tensor:
    """A lateral matrix must be symmetric with a zero diagonal; rounding-level asymmetry is averaged."""
    v = value.detach()
    if v.numel() == 0:
        return value
    if not bool(torch.isfinite(v).all()):
        raise BoltzkitError(f"lateral couplings {name} hold NaN or infinite values")
    diag = torch.diagonal(v)
    if bool((diag != 0).any()):
        i = int(torch.nonzero(diag != 0)[0])
        raise BoltzkitError(
            f"lateral couplings {name} must have a zero diagonal",
            got=f"{name}[{i}, {i}] = {float(diag[i]):g}",
            expected="zeros on the diagonal (a unit is not coupled to itself)",
            hint=f"x_i^2 = x_i for binary units, so move diag({name}) / 2 into the layer's bias and "
            "zero the diagonal.",
        )
    asym = float((v - v.t()).abs().max())
    bad = asymmetric_pairs(v)
    if bool(bad.any()):
        i, j = (int(k) for k in torch.nonzero(bad)[0])
        raise BoltzkitError(
            f"lateral couplings {name} must be symmetric",
            got=f"{name}[{i}, {j}] = {float(v[i, j]):g} but {name}[{j}, {i}] = {float(v[j, i]):g}",
            expected=f"{name} == {name}^T",
            hint=f"use ({name} + {name}.T) / 2.",
        )
    return (value + value.t()) / 2 if asym > 0 else value


def _grad_buffer(param: nn.Parameter) -> Tensor:
    """``param.grad``, allocated (uninitialised) when absent; callers overwrite it."""
    if param.grad is None or param.grad.shape != param.shape or param.grad.dtype != param.dtype:
        param.grad = torch.empty_like(param)
    return param.grad


def log_z_independent(model: BoltzmannMachine) -> float:
    """``log Z = sum softplus(b)`` of a model without couplings (exact, float64)."""
    if model.coupling_keys:
        raise BoltzkitError("log_z_independent needs a model without couplings", got=model.kind)
    return float(sum(softplus(model.bias(l).detach().to(torch.float64)).sum() for l in range(model.n_layers)))


def binary_entropy(p: Tensor) -> Tensor:
    """``-p log p - (1 - p) log(1 - p)`` elementwise, float64, 0 at p in {0, 1}."""
    p = p.to(torch.float64)
    return -(torch.xlogy(p, p) + torch.xlogy(1.0 - p, 1.0 - p))


__all__ = [
    "KINDS",
    "BoltzmannMachine",
    "CouplingKey",
    "PairwiseForm",
    "bias_name",
    "binary_entropy",
    "coupling_name",
    "log_z_independent",
    "structure_kind",
]
