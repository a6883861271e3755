"""The variational lower bound on the log-probability a DBN assigns to data (S1, Sec. 4.2).

For a DBN with two hidden layers and the factorial recognition model ``q(h_1 | v)`` that greedy
learning leaves behind (``sigmoid(W_0^T v + hbias_0)``: the *bottom* RBM's hidden biases),
Salakhutdinov & Murray (2008, "S1"), Eq. 22::

    log p(v) >= sum_h1 q(h_1 | v) log p*(v, h_1) - log Z + H(q(h_1 | v)) = B(v)

with ``log p*(v, h_1) = log p(v | h_1) + log p*(h_1)``, ``p(v | h_1)`` the normalised directed
conditional and ``p*(h_1)`` the top RBM's unnormalised marginal (its hidden units summed out).
The entropy is computed exactly (``q`` is factorial); the expectation by simple Monte Carlo with
``M`` samples ``h_1^(i) ~ q(h_1 | v)`` (S1 Eq. 23, ``M = 5`` in S1); ``log Z`` is the top RBM's, exact
by enumeration when tractable, else from AIS. Averaged over ``N`` data vectors (S1 Eq. 24)::

    r_bound = 1/N sum_n [ 1/M sum_i log p*(v_n, h^(i)) + H(q(h_1 | v_n)) ] - log Z_hat = r_B - log Z_hat

For ``L >= 3`` hidden layers, with ``p(v, h_1, ..., h_L) = p(v | h_1) ... p(h_(L-2) | h_(L-1))
p(h_(L-1), h_L)`` and ``q(h_1, ..., h_(L-1) | v) = q(h_1 | v) ... q(h_(L-1) | h_(L-2))`` (S1 Sec.
4.2), each lower layer's ``log p(h_l)`` is replaced by its own bound, which gives the bound of the
whole chain: every sample is an ancestral draw ``h_1, ..., h_(L-1)`` from ``q`` and contributes::

    log p(v | h_1) + sum_(l=1..L-2) [ log p(h_l | h_(l+1)) + H(q(h_(l+1) | h_l)) ] + log p*(h_(L-1))

(the entropies of the deeper layers given the sampled layer below are exact too). A one-layer DBN
is an RBM: its "bound" is its exact ``log p(v)`` given ``log Z``.

Errors (S1 Table 2): ``Var(r_bound) = Var(r_B) + Var(log Z_hat)``. The record
(:class:`~boltzkit.estimators.result.DBNBoundResult`) gives the Monte Carlo error of ``r_B``
(given the data, and in S1's pooled convention), the AIS error ``log(Z_hat ± 3 sigma_hat) -
log Z_hat``, and their combination.

Numerics: products in the model's dtype, every sum over units and the entropies in float64;
the computation is vectorised over a batch of data vectors and their ``M`` samples at once.

:func:`dbn_exact_log_prob` and :func:`dbn_exact_bound` enumerate the hidden layers of a tiny DBN:
the exact ``log p(v)`` and the exact ``B(v)`` that the Monte Carlo estimate is unbiased for.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import make_generator
from boltzkit.data.dataset import check_binary
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.api import estimate_log_z
from boltzkit.estimators.exact import _check_tractable, bit_states, enumeration_plan, exact_log_z
from boltzkit.estimators.result import DBNBoundResult, LogZResult, log_prob_bound
from boltzkit.models.dbn import DBN, log_bernoulli
from boltzkit.models.rbm import RBM

#: ``log Z`` of the top RBM: exact when at most this many of its units must be enumerated (``"auto"``).
AUTO_EXACT_BITS = 20

#: Methods of :func:`dbn_top_log_z`.
TOP_LOG_Z_METHODS = ("auto", "exact", "ais")


# ------------------------------------------------------------------------------- log Z of the top
def top_layer_data(dbn: DBN, x: Tensor, *, batch_size: int = 10_000) -> Tensor:
    """The recognition probabilities of layer ``L - 1`` for the data ``x`` (the mean-field pass
    up), in the DBN's dtype: what the base-rate model of AIS on the top RBM is fitted to."""
    parts = []
    with torch.no_grad():
        for start in range(0, x.shape[0], batch_size):
            xb = x[start : start + batch_size].to(device=dbn.device, dtype=dbn.dtype)
            parts.append(dbn.propagate_up(xb, dbn.n_hidden_layers - 1, mode="probs"))
    return torch.cat(parts)


def dbn_top_log_z(
    dbn: DBN,
    method: str = "auto",
    *,
    data: Tensor | None = None,
    n_chains: int = 100,
    betas: str | int | Tensor | None = None,
    sweeps: int = 1,
    sampler: str = "gibbs",
    seed: int | torch.Generator | None = 0,
    max_bits: int = AUTO_EXACT_BITS,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> LogZResult:
    """``log Z`` of the DBN's top RBM: exact enumeration when tractable, else AIS.

    Parameters
    ----------
    dbn
        The DBN.
    method
        ``"auto"`` (exact when at most ``max_bits`` units must be enumerated, else AIS),
        ``"exact"`` or ``"ais"``.
    data
        Visible data; AIS fits its base-rate model (S1 Eq. 18) to their recognition
        probabilities at layer ``L - 1`` (:func:`top_layer_data`). Without data the base takes
        the top RBM's own visible biases.
    n_chains, betas, sweeps, sampler, seed, progress
        AIS settings (:func:`~boltzkit.estimators.api.estimate_log_z`; default schedule: the
        paper's 14,500 steps; S1 Table 2 used 15,000 and 500 runs).
    max_bits
        The enumeration limit.

    Returns
    -------
    LogZResult
        Of the top RBM; ``settings["of"] = "top RBM"``.
    """
    name = str(method).strip().lower()
    if name not in TOP_LOG_Z_METHODS:
        raise BoltzkitError(
            "unknown log Z method for a DBN", got=method, expected=", ".join(TOP_LOG_Z_METHODS)
        )
    top = dbn.top
    if name == "auto":
        name = "exact" if enumeration_plan(top).n_bits <= int(max_bits) else "ais"
    if name == "exact":
        return exact_log_z(top, max_bits=int(max_bits)).with_settings(of="top RBM")
    base = None if data is None else top_layer_data(dbn, data)
    kwargs: dict[str, Any] = {
        "n_chains": n_chains,
        "sweeps": sweeps,
        "sampler": sampler,
        "seed": seed,
        "device": device,
        "progress": progress,
    }
    if betas is not None:
        kwargs["betas"] = betas
    result = estimate_log_z(top, "ais", base_rate_data=base, **kwargs)
    base_note = "recognition probabilities of the data" if base is not None else "top RBM visible biases"
    return result.with_settings(of="top RBM", base_data=base_note)


# ---------------------------------------------------------------------------------- the bound
#: ``softplus(x) = log1p(exp(min(x, C))) + max(x - C, 0)``: exact to float64 resolution for ``C = 30``
#: (``log1p(exp(-30)) < 1e-13``), and ``exp(30)`` cannot overflow in float32.
_SOFTPLUS_CLAMP = 30.0

#: Row sums add blocks of at most this many units in the tensor's dtype, then the blocks in float64.
_BLOCK = 128


def _block(n: int) -> int:
    """The largest divisor of ``n`` no larger than :data:`_BLOCK` (1 when there is none above 15)."""
    for d in range(min(n, _BLOCK), 15, -1):
        if n % d == 0:
            return d
    return 1


def rowsum64(x: Tensor) -> Tensor:
    """Row sums of a contiguous ``(..., n)`` tensor in float64.

    Blocks of at most 128 consecutive entries are added in ``x``'s dtype (their rounding error is a
    few units in the last place of a block's sum), the blocks in float64: float64 accuracy where it
    matters, at the speed of a float32 reduction (a direct float64 reduction of float32 data converts
    every element and is ~15x slower on a CPU).
    """
    n = x.shape[-1]
    d = _block(n)
    if x.dtype == torch.float64 or d == 1 or not x.is_contiguous():
        return torch.sum(x, dim=-1, dtype=torch.float64)
    return x.view(*x.shape[:-1], n // d, d).sum(-1).sum(-1, dtype=torch.float64)


def sum_softplus_(x: Tensor) -> Tensor:
    """``sum_j softplus(x_j)`` of every row, float64; ``x`` is overwritten (in-place exp and log1p,
    3x faster than torch's softplus kernel on a CPU; entries above 30 are clamped and their excess
    added back, so nothing overflows)."""
    if x.numel() and float(x.amax()) > _SOFTPLUS_CLAMP:
        extra = rowsum64((x - _SOFTPLUS_CLAMP).clamp_min_(0.0))
        x.clamp_(max=_SOFTPLUS_CLAMP)
    else:
        extra = None
    x.exp_().log1p_()
    total = rowsum64(x)
    return total if extra is None else total + extra


def _entropy_from_logits(a: Tensor, q: Tensor) -> Tensor:
    """``sum_j H(q_j)`` with ``q = sigmoid(a)``: ``H = softplus(a) - q a``, float64 sums, ``(n,)``."""
    return sum_softplus_(a.clone()) - rowsum64(q * a)


def _log_bernoulli_(x: Tensor, u: Tensor) -> Tensor:
    """``sum_i log p(x_i)`` for Bernoulli units with logits ``u`` (overwritten), float64; ``x`` may
    broadcast against ``u``: ``log p = -softplus((1 - 2 x) u)``."""
    u.mul_(1.0 - 2.0 * x)
    return -sum_softplus_(u)


class _Workspace:
    """Buffers of one batch, reused from batch to batch (large fresh allocations cost page faults)."""

    def __init__(self) -> None:
        self.buffers: dict[str, Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
        buf = self.buffers.get(name)
        numel = 1
        for n in shape:
            numel *= n
        if buf is None or buf.dtype != dtype or buf.device != device or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, device=device)
            self.buffers[name] = buf
        return buf[:numel].view(shape)


def _affine(bias: Tensor, x: Tensor, w: Tensor, out: Tensor) -> Tensor:
    """``bias + x @ w`` into ``out``."""
    return torch.addmm(bias.detach(), x, w.detach(), out=out)


def _bernoulli_into(
    q: Tensor, shape: tuple[int, ...], gen: torch.Generator, ws: _Workspace, name: str
) -> Tensor:
    u = ws.get(name + "_u", shape, q.dtype, q.device)
    torch.rand(shape, generator=gen, out=u)
    mask = torch.lt(u, q, out=ws.get(name + "_mask", shape, torch.bool, q.device))
    return mask.to(q.dtype)


@torch.no_grad()
def _batch_terms(
    dbn: DBN, v: Tensor, m: int, generator: torch.Generator, ws: _Workspace | None = None
) -> tuple[Tensor, Tensor]:
    """Per-sample terms ``(B, M)`` and the exact first-layer entropies ``(B,)`` (float64) of one batch.

    ``terms[b, i] = log p(v_b | h_1) + sum_l [log p(h_l | h_(l+1)) + H(q(h_(l+1) | h_l))] +
    log p*(h_(L-1))`` for the ``i``-th ancestral sample of ``q`` given ``v_b``.
    """
    ws = _Workspace() if ws is None else ws
    rbms: list[RBM] = list(dbn.rbms)
    n_b = v.shape[0]
    dt, dev = v.dtype, v.device
    if len(rbms) == 1:
        top = rbms[0]
        zeros = torch.zeros(n_b, dtype=torch.float64, device=dev)
        return top.log_unnormalized_visible(v).unsqueeze(1), zeros
    bottom = rbms[0]
    unit_bottom = dbn.unit_bottom
    if unit_bottom is not None:  # Gaussian or categorical v: q from phi(v) W_0, p(v | h_1) by the unit type
        a1 = unit_bottom.hidden_input(v)
    else:
        a1 = _affine(bottom.hbias, v, bottom.W, ws.get("a1", (n_b, bottom.n_hidden), dt, dev))  # hbias_0: q
    q1 = torch.sigmoid(a1)
    entropy = _entropy_from_logits(a1, q1)
    h = _bernoulli_into(q1.unsqueeze(1), (n_b, m, bottom.n_hidden), generator, ws, "h1").view(n_b * m, -1)
    if unit_bottom is not None:
        v_rows = v.unsqueeze(1).expand(n_b, m, *v.shape[1:]).reshape(n_b * m, *v.shape[1:])
        terms = dbn.log_prob_down(0, v_rows, h)
    else:  # log p(v | h_1), v broadcast over its M samples (a view, not a copy)
        u = _affine(bottom.vbias, h, bottom.W.t(), ws.get("u", (n_b * m, bottom.n_visible), dt, dev))
        terms = _log_bernoulli_(v.unsqueeze(1), u.view(n_b, m, -1)).view(n_b * m)
    for l in range(1, len(rbms) - 1):
        rbm = rbms[l]
        a = rbm.hidden_logits(h)
        q = torch.sigmoid(a)
        terms += _entropy_from_logits(a, q)
        upper = _bernoulli_into(q, tuple(q.shape), generator, ws, f"h{l + 1}")
        terms += _log_bernoulli_(h, rbm.visible_logits(upper))
        h = upper
    top = rbms[-1]
    t = _affine(top.hbias, h, top.W, ws.get("t", (n_b * m, top.n_hidden), dt, dev))
    terms += sum_softplus_(t)
    terms += rowsum64(h * top.vbias.detach())
    return terms.view(n_b, m), entropy


def _as_log_z(dbn: DBN, log_z: LogZResult | float | str, x: Tensor, seed) -> LogZResult:
    if isinstance(log_z, LogZResult):
        result = log_z
    elif isinstance(log_z, str):
        result = dbn_top_log_z(dbn, log_z, data=x, seed=seed)
    else:
        value = float(log_z)
        if not math.isfinite(value):
            raise BoltzkitError("log Z must be a finite number", got=log_z)
        result = LogZResult.exact(value, source="given number")
    if result.log_z is None or not math.isfinite(float(result.log_z)):
        raise BoltzkitError(
            "this log Z record has no log Z of the top RBM",
            got=f"method {result.method!r}, log_z={result.log_z}",
        )
    return result


@torch.no_grad()
def dbn_bound(
    dbn: DBN,
    x: Tensor,
    log_z: LogZResult | float | str = "auto",
    *,
    n_samples: int = 5,
    seed: int | torch.Generator | None = 0,
    batch_size: int = 1000,
    per_example: bool = False,
) -> DBNBoundResult:
    """Estimate the lower bound on the mean ``log p(v)`` of the rows of ``x`` (S1 Eqs. 22-24).

    Parameters
    ----------
    dbn
        The DBN (any depth).
    x
        Binary data ``(N, n_visible)``.
    log_z
        ``log Z`` of the top RBM: a :class:`~boltzkit.estimators.result.LogZResult` (e.g. from
        :func:`dbn_top_log_z`), a number taken as exact, or a method name for
        :func:`dbn_top_log_z` (``"auto"``, ``"exact"``, ``"ais"``: its base-rate data are ``x``).
    n_samples
        ``M``, samples of the recognition model per data vector (S1: 5).
    seed
        Seed or generator (on the DBN's device) of the samples.
    batch_size
        Data vectors per batch (``batch_size * M`` rows per product).
    per_example
        Keep every data vector's bound ``B(v_n)``.

    Returns
    -------
    DBNBoundResult
        ``bound="lower"`` (``"exact"`` for a one-layer DBN); see its attributes for the errors.
    """
    t0 = time.perf_counter()
    m = int(n_samples)
    if isinstance(n_samples, bool) or m < 1:
        raise BoltzkitError("n_samples must be a positive integer", got=n_samples)
    if isinstance(batch_size, bool) or int(batch_size) < 1:
        raise BoltzkitError("batch_size must be at least 1", got=batch_size)
    data = _checked_data(dbn, x)
    log_z_result = _as_log_z(dbn, log_z, data, seed if not isinstance(seed, torch.Generator) else 0)
    one_layer = dbn.n_hidden_layers == 1
    if one_layer:
        m = 1
    gen = make_generator(seed, dbn.device)
    ws = _Workspace()
    n = data.shape[0]
    all_terms = torch.empty(n, m, dtype=torch.float64)
    entropies = torch.empty(n, dtype=torch.float64)
    for start in range(0, n, int(batch_size)):
        vb = data[start : start + int(batch_size)].to(device=dbn.device, dtype=dbn.dtype)
        terms, ent = _batch_terms(dbn, vb, m, gen, ws)
        all_terms[start : start + vb.shape[0]] = terms.cpu()
        entropies[start : start + vb.shape[0]] = ent.cpu()
    value = float(log_z_result.log_z)
    mean_terms = all_terms.mean(1)
    per = mean_terms + entropies  # B(v_n) + log Z
    r_b = float(per.mean())
    if one_layer:
        mc = 0.0
    elif m > 1:
        mc = math.sqrt(float(all_terms.var(dim=1, unbiased=True).sum()) / m) / n
    else:
        mc = None
    pooled_values = (all_terms + entropies.unsqueeze(1)).flatten()
    pooled = float(pooled_values.std(unbiased=True)) / math.sqrt(pooled_values.numel()) if n * m > 1 else None
    data_se = float(per.std(unbiased=True)) / math.sqrt(n) if n > 1 else None  # undefined for one vector
    bound, note = log_prob_bound("exact" if one_layer else "lower", log_z_result)
    return DBNBoundResult(
        mean_bound=r_b - value,
        r_b=r_b,
        mean_expected_log_joint=float(mean_terms.mean()),
        mean_entropy=float(entropies.mean()),
        mc_stderr=mc,
        pooled_stderr=0.0 if one_layer else pooled,
        data_stderr=data_se,
        n=int(n),
        n_samples=m,
        layer_sizes=tuple(dbn.layer_sizes),
        log_z=value,
        log_z_method=log_z_result.method,
        log_z_band=log_z_result.band,
        log_z_stderr=log_z_result.log_z_stderr,
        bound=bound,
        per_example=(per - value) if per_example else None,
        seconds=time.perf_counter() - t0,
        settings={
            "seed": seed if isinstance(seed, int) else None,
            "batch_size": int(batch_size),
            "log_z_settings": {k: v for k, v in log_z_result.settings.items() if k != "log_weights"},
            "log_z_n_chains": log_z_result.n_chains,
            "log_z_n_steps": log_z_result.n_steps,
            **({} if note is None else {"bound_note": note}),
            # the verdict on log Z: its bands, and so the bound's, stand or fall with it
            **({} if (verdict := log_z_result.reliability()) is None else verdict.as_dict()),
        },
    )


def _checked_data(dbn: DBN, x: Tensor) -> Tensor:
    """The data as the DBN's visible units take them: binary, or checked by its unit bottom."""
    bottom = dbn.unit_bottom
    if bottom is not None:  # on the CPU: batches go to the device one at a time
        return bottom.visible_units.check_data(torch.as_tensor(x), bottom.n_visible, "data")
    return check_binary(x, source="data", n_visible=dbn.n_visible)


# ------------------------------------------------------------------------------- enumeration
#: Elements of the largest ``(rows, states, units)`` array the enumeration of a binary visible
#: layer builds at once (float64: 256 MB; its temporaries add a few times that). A Gaussian or
#: categorical bottom builds ``(rows, states)`` arrays only (:meth:`DBN.log_prob_down_pairs`).
_ENUMERATION_CHUNK = 1 << 25


def _row_chunks(dbn: DBN, v: Tensor, states: Tensor) -> list[Tensor]:
    """``v`` in pieces whose pairs with every row of ``states`` (times the visible units of a
    binary layer, or the hidden units of ``states``) stay within :data:`_ENUMERATION_CHUNK`
    elements."""
    width = int(v.shape[1]) if dbn.unit_bottom is None else 1
    width = max(width, int(states.shape[1]), 1)
    rows = max(1, _ENUMERATION_CHUNK // max(1, int(states.shape[0]) * width))
    return list(torch.split(v, rows)) if v.shape[0] else [v]


def _layer_states(dbn: DBN, max_bits: int) -> list[Tensor]:
    """All states of the hidden layers ``1 .. L-1`` (those that do not sum out), float64."""
    sizes = dbn.layer_sizes
    for l in range(1, dbn.n_hidden_layers):
        pair = sizes[l] + (sizes[l + 1] if l + 1 < dbn.n_hidden_layers else 0)
        _check_tractable(pair, max_bits, f"enumerating hidden layers {l} and {l + 1} of the DBN")
    return [bit_states(0, 1 << sizes[l], sizes[l], device=dbn.device) for l in range(1, dbn.n_hidden_layers)]


@torch.no_grad()
def dbn_exact_log_prob(dbn: DBN, x: Tensor, *, max_bits: int = 20) -> Tensor:
    """Exact ``log p(v)`` of each row of ``x`` under a tiny DBN, by enumeration (float64, ``(n,)``).

    ``log p(h_(L-1)) = log p*(h_(L-1)) - log Z`` (the top RBM's exact marginal), then down the
    directed part ``log p(h_l) = logsumexp_(h_(l+1)) [log p(h_l | h_(l+1)) + log p(h_(l+1))]``, and
    ``log p(v) = logsumexp_(h_1) [log p(v | h_1) + log p(h_1)]``.
    """
    d = dbn.detached_copy(dtype=torch.float64)
    v = _checked_data(d, x).to(device=d.device, dtype=torch.float64)
    log_z = float(exact_log_z(d.top, max_bits=max_bits).log_z)
    if d.n_hidden_layers == 1:
        return d.top.log_unnormalized_visible(v) - log_z
    states = _layer_states(d, max_bits)
    log_p = d.log_unnormalized_top(states[-1]) - log_z  # over the states of layer L-1
    for l in range(d.n_hidden_layers - 2, 0, -1):  # layers L-2 .. 1
        lower, upper = states[l - 1], states[l]
        # [i, j] = log p(lower_i | upper_j)
        cond = log_bernoulli(lower.unsqueeze(1), d.down_logits(l, upper).unsqueeze(0))
        log_p = torch.logsumexp(cond + log_p.unsqueeze(0), dim=1)
    parts = []
    for rows in _row_chunks(d, v, states[0]):  # [n, h1] in pieces that fit in memory
        cond = d.log_prob_down_pairs(0, rows, states[0])
        parts.append(torch.logsumexp(cond + log_p.unsqueeze(0), dim=1))
    return torch.cat(parts)


@torch.no_grad()
def dbn_exact_bound(dbn: DBN, x: Tensor, *, max_bits: int = 20) -> Tensor:
    """The exact bound ``B(v)`` of each row (the expectation over ``q`` done by enumeration),
    with the exact ``log Z`` of the top RBM: what :func:`dbn_bound` estimates (float64, ``(n,)``)."""
    d = dbn.detached_copy(dtype=torch.float64)
    v = _checked_data(d, x).to(device=d.device, dtype=torch.float64)
    log_z = float(exact_log_z(d.top, max_bits=max_bits).log_z)
    if d.n_hidden_layers == 1:
        return d.top.log_unnormalized_visible(v) - log_z
    states = _layer_states(d, max_bits)
    g = d.log_unnormalized_top(states[-1])  # G_(L-1)(h) = log p*(h)
    for l in range(d.n_hidden_layers - 2, 0, -1):
        lower, upper = states[l - 1], states[l]
        a = d.up_logits(l, lower)  # q(h_(l+1) | h_l) for every lower state
        log_q = log_bernoulli(upper.unsqueeze(0), a.unsqueeze(1))  # [i, j]
        cond = log_bernoulli(
            lower.unsqueeze(1), d.down_logits(l, upper).unsqueeze(0)
        )  # log p(lower_i | upper_j)
        ent = _entropy_from_logits(a, torch.sigmoid(a))
        g = (torch.exp(log_q) * (cond + g.unsqueeze(0))).sum(1) + ent
    parts = []
    for rows in _row_chunks(d, v, states[0]):  # [n, h1] in pieces that fit in memory
        a1 = d.up_logits(0, rows)
        log_q = log_bernoulli(states[0].unsqueeze(0), a1.unsqueeze(1))
        cond = d.log_prob_down_pairs(0, rows, states[0])
        ent = _entropy_from_logits(a1, torch.sigmoid(a1))
        parts.append((torch.exp(log_q) * (cond + g.unsqueeze(0))).sum(1) + ent - log_z)
    return torch.cat(parts)


__all__ = [
    "AUTO_EXACT_BITS",
    "TOP_LOG_Z_METHODS",
    "dbn_bound",
    "dbn_exact_bound",
    "dbn_exact_log_prob",
    "dbn_top_log_z",
    "top_layer_data",
]
