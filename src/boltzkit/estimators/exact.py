"""Exact partition functions, log-probabilities, samples and distributions by enumeration.

For an RBM the hidden (or visible) units sum out in closed form, so ``Z`` needs a sum over the
states of the *smaller* layer only (Salakhutdinov & Murray 2008, Sec. 5.1: "summing out the 784
visible units for each configuration of the hiddens")::

    log Z = logsumexp_h [ c^T h + sum_i softplus(b_i + (W h)_i) ]
          = logsumexp_v [ b^T v + sum_j softplus(c_j + (W^T v)_j) ]

The 2^k states are generated in chunks from integer ranges with bit masks, each chunk reduced by
log-sum-exp in float64 and merged, so memory stays bounded and nothing overflows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch
from torch import Tensor

from boltzkit._numerics import make_generator, softplus
from boltzkit.errors import IntractableError
from boltzkit.estimators.result import LogZResult
from boltzkit.models.base import EnergyModel
from boltzkit.models.rbm import RBM
from boltzkit.state import ChainState

#: Largest number of units enumerated by default (2^30 states); raise it with ``max_bits``.
DEFAULT_MAX_BITS = 30
#: Rows per enumeration chunk.
DEFAULT_CHUNK = 1 << 13


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

    States are numbered so that bit ``j`` of the index is unit ``j``.
    """
    W = rbm.W.detach().to(device=device, dtype=dtype)
    if layer == "hidden":
        own_bias, other_bias, W_other = rbm.hbias, rbm.vbias, W.t()
    else:
        own_bias, other_bias, W_other = rbm.vbias, rbm.hbias, W
    own_bias = own_bias.detach().to(device=device, dtype=dtype)
    other_bias = other_bias.detach().to(device=device, dtype=dtype)
    n_bits = own_bias.numel()
    total = 1 << n_bits
    for start in range(0, total, chunk_size):
        x = bit_states(start, min(start + chunk_size, total), n_bits, device=device, dtype=dtype)
        pre = torch.addmm(other_bias, x, W_other)
        log_f = (x @ own_bias).to(torch.float64) + softplus(pre).to(torch.float64).sum(1)
        yield log_f


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
        States per chunk; memory is ``chunk_size * max(n_visible, n_hidden)`` numbers.
    dtype
        Of the enumeration arithmetic; sums are always float64.
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
    parts = [torch.logsumexp(c, 0) for c in _layer_log_f_chunks(rbm, layer, chunk_size, dtype, device)]
    log_z = float(torch.logsumexp(torch.stack(parts), 0))
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

    The smaller layer (``k`` units) is drawn from its enumerated marginal: the ``2^k`` unnormalized
    log-probabilities are computed chunk by chunk (float64, ``8 * 2^k`` bytes), and states are
    drawn by inverting the cumulative distribution at uniform draws. The other layer is drawn
    from its conditional. Exact samples start reverse AIS and unbiased RBM-to-RBM AIS.
    """
    gen = make_generator(generator, rbm.device)
    layer = _smaller_layer(rbm)
    n_bits = min(rbm.n_hidden, rbm.n_visible)
    _check_tractable(n_bits, max_bits, f"exact sampling of the {n_bits} {layer} units")
    log_f = torch.cat(list(_layer_log_f_chunks(rbm, layer, chunk_size, torch.float64, rbm.device)))
    cdf = torch.cumsum(torch.exp(log_f - log_f.max()), 0)
    u = torch.rand(n_samples, generator=gen, device=cdf.device, dtype=torch.float64) * cdf[-1]
    idx = torch.searchsorted(cdf, u, right=True).clamp_max(cdf.numel() - 1)
    shifts = torch.arange(n_bits, device=idx.device, dtype=torch.int64)
    x = ((idx.unsqueeze(1) >> shifts) & 1).to(rbm.dtype)
    if layer == "hidden":
        v = rbm.sample_v_given_h(x, gen)
        return ChainState((v, x))
    h = rbm.sample_h_given_v(x, gen)
    return ChainState((x, h))


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
    "DEFAULT_MAX_BITS",
    "bit_states",
    "exact_joint_distribution",
    "exact_log_prob",
    "exact_log_z",
    "exact_sample",
    "layer_log_probs",
    "log_z_brute_force",
]
