"""Exact partition functions, log-probabilities, samples and distributions by enumeration.

For an RBM the hidden (or visible) units sum out in closed form, so ``Z`` needs a sum over the
states of the *smaller* layer only (Salakhutdinov & Murray 2008, Sec. 5.1: "summing out the 784
visible units for each configuration of the hiddens")::

    log Z = logsumexp_h [ c^T h + sum_i softplus(b_i + (W h)_i) ]
          = logsumexp_v [ b^T v + sum_j softplus(c_j + (W^T v)_j) ]

The 2^k states are enumerated in chunks, each chunk reduced by log-sum-exp in float64 and merged,
so memory stays bounded and nothing overflows. The softplus sum is evaluated as the log of a
product (see :func:`_layer_log_f_chunks`): per state and unit of the other layer the work is one
multiply-add and one multiplication, not an exponential and a logarithm.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzkit._numerics import make_generator, softplus
from boltzkit.errors import BoltzkitError, IntractableError
from boltzkit.estimators.result import LogZResult
from boltzkit.models.base import EnergyModel
from boltzkit.models.rbm import RBM
from boltzkit.state import ChainState

#: Largest number of units enumerated by default (2^30 states); raise it with ``max_bits``.
DEFAULT_MAX_BITS = 30
#: States per enumeration chunk (memory: about twice ``chunk * n_other`` numbers; 2048 x 784 float64
#: stays within a CPU's last-level cache).
DEFAULT_CHUNK = 1 << 11
#: At most ``2^LOW_BITS`` low-order states share one table of exponentials.
LOW_BITS = 9


def bit_states(start: int, stop: int, n_bits: int, *, device=None, dtype=torch.float64) -> Tensor:
    """Binary expansions of the integers ``start..stop-1``, shape ``(stop - start, n_bits)``.

    Bit ``j`` of integer ``k`` is column ``j`` (least significant first).
    """
    idx = torch.arange(start, stop, device=device, dtype=torch.int64)
    shifts = torch.arange(n_bits, device=device, dtype=torch.int64)
    return ((idx.unsqueeze(1) >> shifts) & 1).to(dtype)


def _check_tractable(n_bits: int, max_bits: int, what: str) -> None:
    if n_bits > max_bits:
        raise IntractableError(
            f"exact enumeration is intractable for this model: {what} needs 2^{n_bits} = "
            f"{2**n_bits:,} states",
            expected=f"at most 2^{max_bits} = {2**max_bits:,} states (the configured limit)",
            hint="estimate log Z with AIS instead (boltzkit logz MODEL --method ais), or raise "
            "the limit (max_bits / --max-bits) if you have the time.",
        )


def _smaller_layer(rbm: RBM) -> str:
    return "hidden" if rbm.n_hidden <= rbm.n_visible else "visible"


def _layer_log_f_chunks(
    rbm: RBM, layer: str, chunk_size: int, dtype: torch.dtype, device
) -> Iterator[Tensor]:
    """``log p*(x)`` of every state of ``layer`` (other layer summed out), chunk by chunk, float64.

    States are numbered so that bit ``j`` of the index is unit ``j``; the chunks come in that order.

    With ``a`` the other layer's bias, the index split into its ``l`` low bits ``x_lo`` and its
    high bits ``x_hi``, and ``pre = a + W_hi x_hi + W_lo x_lo``::

        sum_i softplus(pre_i) = log prod_i (1 + exp(a + W_hi x_hi)_i * exp(W_lo x_lo)_i)

    The ``2^l`` vectors ``exp(W_lo x_lo)`` are tabulated once; a chunk is ``K`` high states times
    all ``2^l`` low ones and costs one multiply-add (in ``dtype``) and one product (accumulated in
    float64) per state and unit. The factors are at least 1, so a product cannot underflow; a state
    whose product overflows (``log p*`` above about 709, or a factor beyond ``dtype``'s range) is
    recomputed with the stable softplus in float64. The linear term ``own_bias . x`` is float64.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise BoltzkitError("chunk_size must be a positive integer", got=repr(chunk_size))
    f64 = torch.float64
    W = rbm.W.detach().to(device=device, dtype=f64)
    if layer == "hidden":
        own_bias, other_bias, W_other = rbm.hbias, rbm.vbias, W.t()
    else:
        own_bias, other_bias, W_other = rbm.vbias, rbm.hbias, W
    own_bias = own_bias.detach().to(device=device, dtype=f64)
    other_bias = other_bias.detach().to(device=device, dtype=f64)
    n_bits, n_other = own_bias.numel(), other_bias.numel()
    low = min(n_bits, chunk_size.bit_length() - 1, LOW_BITS)
    n_low, n_high = 1 << low, 1 << (n_bits - low)
    per_chunk = max(1, chunk_size >> low)  # high states per chunk
    x_lo = bit_states(0, n_low, low, device=device, dtype=f64)
    pre_lo = x_lo @ W_other[:low]  # (n_low, n_other), float64: also serves the fallback
    exp_lo = torch.exp(pre_lo).to(dtype)
    lin_lo = x_lo @ own_bias[:low]
    one = torch.ones((), device=device, dtype=dtype)
    factors = torch.empty((per_chunk, n_low, n_other), device=device, dtype=dtype)
    prods = torch.empty((per_chunk, n_low), device=device, dtype=f64)
    block = max(per_chunk, 256)  # high states whose exponentials are formed together
    for b0 in range(0, n_high, block):
        x_hi = bit_states(b0, min(b0 + block, n_high), n_bits - low, device=device, dtype=f64)
        pre_hi = torch.addmm(other_bias, x_hi, W_other[low:])
        exp_hi = torch.exp(pre_hi).to(dtype).unsqueeze(1)
        lin_hi = (x_hi @ own_bias[low:]).unsqueeze(1)
        for k0 in range(0, x_hi.shape[0], per_chunk):
            k1 = min(k0 + per_chunk, x_hi.shape[0])
            f = torch.addcmul(one, exp_lo, exp_hi[k0:k1], out=factors[: k1 - k0])
            p = torch.prod(f, 2, dtype=f64, out=prods[: k1 - k0])
            log_f = torch.log(p).add_(lin_lo).add_(lin_hi[k0:k1])
            if not bool(torch.isfinite(log_f).all()):
                kk, ll = (~torch.isfinite(log_f)).nonzero(as_tuple=True)
                pre = pre_lo[ll] + pre_hi[k0 + kk]
                log_f[kk, ll] = lin_lo[ll] + lin_hi[k0 + kk, 0] + softplus(pre).sum(1)
            yield log_f.reshape(-1)


@torch.no_grad()
def exact_log_z(
    rbm: RBM,
    *,
    max_bits: int = DEFAULT_MAX_BITS,
    chunk_size: int = DEFAULT_CHUNK,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LogZResult:
    """Exact ``log Z`` of an RBM by enumerating its smaller layer.

    Parameters
    ----------
    rbm
        The model (parameters of any dtype and device).
    max_bits
        Refuse when the smaller layer has more units than this (2^max_bits states).
    chunk_size
        States per chunk (used as a multiple of a power of two no larger than it); memory is
        about ``2 * chunk_size * max(n_visible, n_hidden)`` numbers.
    dtype
        Of the per-state arithmetic (the factors ``1 + e^a e^b``); exponent tables, linear terms,
        products and sums are float64. On a CPU float64 is as fast (see BENCHMARKS.md).
    device
        Where to enumerate (default: the model's device).

    Returns
    -------
    LogZResult
        ``method="exact"``; ``settings`` name the enumerated layer and the number of states.
    """
    t0 = time.perf_counter()
    layer = _smaller_layer(rbm)
    n_bits = min(rbm.n_hidden, rbm.n_visible)
    _check_tractable(n_bits, max_bits, f"summing over the {n_bits} {layer} units")
    device = rbm.device if device is None else torch.device(device)
    # Accumulated in place: long-lived small tensors created between the chunks' large temporaries
    # fragment the CPU heap until it runs out of memory (seen at 2^25 states).
    acc = torch.full((), -math.inf, dtype=torch.float64, device=device)
    for chunk in _layer_log_f_chunks(rbm, layer, chunk_size, dtype, device):
        torch.logaddexp(acc, torch.logsumexp(chunk, 0), out=acc)
    log_z = float(acc)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return LogZResult.exact(
        log_z,
        seconds=time.perf_counter() - t0,
        enumerated_layer=layer,
        n_states=1 << n_bits,
        device=str(device),
    )


@torch.no_grad()
def exact_log_prob(rbm: RBM, v: Tensor, log_z: float | LogZResult | None = None) -> Tensor:
    """``log p(v) = -F(v) - log Z`` for each row of ``v``, float64, shape ``(n,)``."""
    if log_z is None:
        log_z = exact_log_z(rbm)
    if isinstance(log_z, LogZResult):
        log_z = float(log_z.log_z)
    return rbm.log_unnormalized_visible(v.to(device=rbm.device, dtype=rbm.dtype)) - log_z


@torch.no_grad()
def layer_log_probs(rbm: RBM, layer: str, *, max_bits: int = 24) -> tuple[Tensor, Tensor]:
    """All states of ``layer`` ("hidden" or "visible") and their exact marginal log-probabilities.

    Returns ``(states, log_p)`` with shapes ``(2^k, k)`` and ``(2^k,)``, float64.
    """
    n_bits = rbm.n_hidden if layer == "hidden" else rbm.n_visible
    _check_tractable(n_bits, max_bits, f"the marginal of the {n_bits} {layer} units")
    states = bit_states(0, 1 << n_bits, n_bits, device=rbm.device, dtype=torch.float64)
    r64 = rbm.as_float64()
    if layer == "hidden":
        log_f = r64.log_unnormalized_hidden(states)
    else:
        log_f = r64.log_unnormalized_visible(states)
    return states, log_f - torch.logsumexp(log_f, 0)


@dataclass(frozen=True)
class EnumeratedLayer:
    """The unnormalized marginal of an RBM's smaller layer over all its ``2^k`` states.

    One enumeration serves both ``log Z`` and any number of exact samples (RBM-to-RBM AIS needs
    both of its start model). Memory: one float64 number per state.

    Attributes
    ----------
    layer
        ``"hidden"`` or ``"visible"``.
    log_f
        ``log p*(x)`` of state ``x``, float64, shape ``(2^k,)``; bit ``j`` of the index is unit ``j``.
    """

    layer: str
    log_f: Tensor

    @property
    def n_bits(self) -> int:
        return int(self.log_f.numel()).bit_length() - 1

    @property
    def log_z(self) -> float:
        return float(torch.logsumexp(self.log_f, 0))

    def sample(self, rbm: RBM, n_samples: int, generator: torch.Generator) -> ChainState:
        """Exact ``(v, h) ~ p(v, h)``: the layer by inverting its cumulative distribution at uniform
        draws, the other layer from its conditional."""
        cdf = torch.cumsum(torch.exp(self.log_f - self.log_f.max()), 0)
        u = torch.rand(n_samples, generator=generator, device=cdf.device, dtype=torch.float64) * cdf[-1]
        idx = torch.searchsorted(cdf, u, right=True).clamp_max(cdf.numel() - 1)
        shifts = torch.arange(self.n_bits, device=idx.device, dtype=torch.int64)
        x = ((idx.unsqueeze(1) >> shifts) & 1).to(rbm.dtype)
        if self.layer == "hidden":
            return ChainState((rbm.sample_v_given_h(x, generator), x))
        return ChainState((x, rbm.sample_h_given_v(x, generator)))


@torch.no_grad()
def enumerate_smaller_layer(
    rbm: RBM,
    *,
    max_bits: int = 26,
    chunk_size: int = DEFAULT_CHUNK,
    dtype: torch.dtype = torch.float64,
) -> EnumeratedLayer:
    """Enumerate the smaller layer of ``rbm`` (``dtype`` arithmetic, float64 results)."""
    layer = _smaller_layer(rbm)
    n_bits = min(rbm.n_hidden, rbm.n_visible)
    _check_tractable(n_bits, max_bits, f"enumerating the {n_bits} {layer} units")
    log_f = torch.empty(1 << n_bits, dtype=torch.float64, device=rbm.device)
    start = 0
    for chunk in _layer_log_f_chunks(rbm, layer, chunk_size, dtype, rbm.device):
        log_f[start : start + chunk.numel()] = chunk
        start += chunk.numel()
    return EnumeratedLayer(layer, log_f)


@torch.no_grad()
def exact_sample(
    rbm: RBM,
    n_samples: int,
    *,
    generator: torch.Generator | int | None,
    max_bits: int = 26,
    chunk_size: int = DEFAULT_CHUNK,
) -> ChainState:
    """Independent exact samples ``(v, h) ~ p(v, h)``.

    The smaller layer (``k`` units) is drawn from its enumerated marginal
    (:func:`enumerate_smaller_layer`, ``8 * 2^k`` bytes) by inverting the cumulative distribution,
    the other from its conditional. Exact samples start reverse AIS and unbiased RBM-to-RBM AIS.
    """
    gen = make_generator(generator, rbm.device)
    table = enumerate_smaller_layer(rbm, max_bits=max_bits, chunk_size=chunk_size)
    return table.sample(rbm, n_samples, gen)


@torch.no_grad()
def exact_joint_distribution(model: EnergyModel, *, max_bits: int = 22) -> tuple[Tensor, Tensor]:
    """Every joint state of a tiny model and its exact log-probability.

    Returns ``(states, log_p)``: ``states`` has shape ``(2^N, N)`` (layers side by side, visible
    first, bit ``j`` of the state index is unit ``j``), ``log_p`` shape ``(2^N,)``, float64.
    """
    n = model.n_units
    _check_tractable(n, max_bits, f"the joint distribution of {n} units")
    x = bit_states(0, 1 << n, n, device=model.device, dtype=torch.float64)
    state = model.split_units(x.to(model.dtype))
    log_f = -model.joint_energy(state)
    return x, log_f - torch.logsumexp(log_f, 0)


@torch.no_grad()
def log_z_brute_force(model: EnergyModel, *, max_bits: int = 22) -> float:
    """``log Z`` by summing ``exp(-E)`` over all joint states (for tests of tiny models)."""
    n = model.n_units
    _check_tractable(n, max_bits, f"the joint distribution of {n} units")
    x = bit_states(0, 1 << n, n, device=model.device, dtype=torch.float64)
    log_f = -model.joint_energy(model.split_units(x.to(model.dtype)))
    return float(torch.logsumexp(log_f, 0))


__all__ = [
    "EnumeratedLayer",
    "enumerate_smaller_layer",
    "DEFAULT_MAX_BITS",
    "bit_states",
    "exact_joint_distribution",
    "exact_log_prob",
    "exact_log_z",
    "exact_sample",
    "layer_log_probs",
    "log_z_brute_force",
]
