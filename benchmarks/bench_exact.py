"""Exact log Z of a 784 x 20 RBM (2^20 hidden states): the library next to two bare costs.

* library: ``exact_log_z(rbm, dtype=...)`` (float64 default, also float32 arithmetic).
* bare, softplus form: the direct formula on chunks of precomputed hidden states: per chunk one
  ``addmm`` (states x W^T + b), softplus, row sums and a log-sum-exp (float32: softplus in float32,
  sums in float64). This is the work of a straightforward enumeration, without generating states.
* bare, product form: the irreducible work of the formula the library uses
  (``sum_i softplus(pre_i) = log prod_i (1 + e^{a_i} e^{(W x_lo)_i})``, see
  ``boltzkit.estimators.exact._layer_log_f_chunks``) with every table precomputed: per chunk one
  multiply-add, one product (float64 accumulation), a log and a log-sum-exp.

Both bare forms use the library's chunk size. The time for 2^25 states (25 hidden units, needed by
the paper reproduction) is extrapolated linearly (the work is proportional to the number of states)
and, unless --quick, also measured once for the library in float64.

Run: python benchmarks/bench_exact.py [--hidden 20] [--device cpu] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import time

import torch
from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads, sync

from boltzkit.estimators.exact import DEFAULT_CHUNK, LOW_BITS, bit_states, exact_log_z
from boltzkit.models import RBM

F64 = torch.float64


def make_rbm(n_visible: int, n_hidden: int, dtype: torch.dtype, device: torch.device, seed: int = 0) -> RBM:
    """Weights N(0, 0.1^2), visible biases N(-1, 1) (mostly-off pixels, as in MNIST), hidden N(0, 0.5^2)."""
    g = torch.Generator().manual_seed(seed)
    return RBM(
        n_visible,
        n_hidden,
        weights=torch.randn(n_visible, n_hidden, generator=g, dtype=F64) * 0.1,
        vbias=torch.randn(n_visible, generator=g, dtype=F64) - 1.0,
        hbias=torch.randn(n_hidden, generator=g, dtype=F64) * 0.5,
        dtype=dtype,
        device=device,
    )


def bare_softplus_fn(rbm: RBM, dtype: torch.dtype, chunk: int):
    """addmm + softplus + sums + logsumexp over chunks of precomputed states."""
    dev = rbm.device
    W, b, c = (t.detach().to(dtype) for t in (rbm.W, rbm.vbias, rbm.hbias))
    total = 1 << rbm.n_hidden
    chunks = [
        bit_states(s, min(s + chunk, total), rbm.n_hidden, device=dev, dtype=dtype)
        for s in range(0, total, chunk)
    ]
    Wt = W.t()

    def log_z() -> float:
        parts = []
        for h in chunks:
            pre = torch.addmm(b, h, Wt)
            log_f = (h @ c).to(F64) + torch.nn.functional.softplus(pre).sum(1, dtype=F64)
            parts.append(torch.logsumexp(log_f, 0))
        return float(torch.logsumexp(torch.stack(parts), 0))

    return log_z


def bare_product_fn(rbm: RBM, dtype: torch.dtype, chunk: int):
    """multiply-add + product + log + linear term + logsumexp per chunk, every table precomputed."""
    dev = rbm.device
    n = rbm.n_hidden
    low = min(n, chunk.bit_length() - 1, LOW_BITS)
    per = max(1, chunk >> low)
    W = rbm.W.detach().to(F64)
    x_lo = bit_states(0, 1 << low, low, device=dev, dtype=F64)
    exp_lo = torch.exp(x_lo @ W.t()[:low]).to(dtype)
    x_hi = bit_states(0, 1 << (n - low), n - low, device=dev, dtype=F64)
    exp_hi = torch.exp(torch.addmm(rbm.vbias.detach().to(F64), x_hi, W.t()[low:])).to(dtype).unsqueeze(1)
    c = rbm.hbias.detach().to(F64)
    lin_lo = x_lo @ c[:low]
    lin_hi = (x_hi @ c[low:]).unsqueeze(1)
    one = torch.ones((), device=dev, dtype=dtype)
    factors = torch.empty((per, 1 << low, rbm.n_visible), device=dev, dtype=dtype)
    prods = torch.empty((per, 1 << low), device=dev, dtype=F64)

    def log_z() -> float:
        parts = []
        for k0 in range(0, exp_hi.shape[0], per):
            torch.addcmul(one, exp_lo, exp_hi[k0 : k0 + per], out=factors)
            p = torch.prod(factors, 2, dtype=F64, out=prods)
            log_f = torch.log(p).add_(lin_lo).add_(lin_hi[k0 : k0 + per])
            parts.append(torch.logsumexp(log_f.reshape(-1), 0))
        return float(torch.logsumexp(torch.stack(parts), 0))

    return log_z


def run(device: str = "cpu", quick: bool = False, repeats: int | None = None, n_hidden: int | None = None):
    dev = torch.device(device)
    n_hidden = n_hidden or (16 if quick else 20)
    repeats = repeats or (2 if quick else 5)
    n_states = 1 << n_hidden
    rows = []
    extrapolated = {}
    for dtype in (F64, torch.float32):
        name = str(dtype).replace("torch.", "")
        rbm = make_rbm(784, n_hidden, dtype, dev)
        fns = {
            "library": lambda rbm=rbm, dtype=dtype: exact_log_z(rbm, dtype=dtype).log_z,
            "bare_softplus": bare_softplus_fn(rbm, dtype, DEFAULT_CHUNK),
            "bare_product": bare_product_fn(rbm, dtype, DEFAULT_CHUNK),
        }
        values = {k: float(f()) for k, f in fns.items()}
        spread = max(values.values()) - min(values.values())
        assert spread < (1e-9 if dtype == F64 else 1e-3) * max(1.0, abs(values["library"])), values
        samples: dict[str, list[float]] = {}
        t = interleaved(fns, repeats=repeats, device=dev, samples=samples)
        r_soft = paired_ratio(samples["library"], samples["bare_softplus"])
        r_prod = paired_ratio(samples["library"], samples["bare_product"])
        bench = f"exact log Z 784x{n_hidden} (2^{n_hidden} states), {name}"
        ns = t["library"] / n_states * 1e9
        rows.append(
            row(
                bench,
                "boltzkit exact_log_z",
                t["library"],
                bare_s=t["bare_softplus"],
                vs_bare=r_soft,
                device=dev,
                note=f"{ns:.0f} ns/state; {r_prod:.2f}x the product-form bare cost; "
                f"log Z = {values['library']:.6f}",
                samples=samples["library"],
                vs_bare_product=r_prod,
            )
        )
        rows.append(
            row(
                bench,
                "bare, softplus form (addmm + softplus + sums)",
                t["bare_softplus"],
                bare_s=t["bare_softplus"],
                device=dev,
                note="precomputed states",
                samples=samples["bare_softplus"],
            )
        )
        rows.append(
            row(
                bench,
                "bare, product form (multiply-add + product)",
                t["bare_product"],
                bare_s=t["bare_softplus"],
                vs_bare=paired_ratio(samples["bare_product"], samples["bare_softplus"]),
                device=dev,
                note="precomputed tables",
                samples=samples["bare_product"],
            )
        )
        scale = (1 << 25) / n_states
        extrapolated[name] = t["library"] * scale
        rows.append(
            row(
                f"exact log Z 784x25 (2^25 states), {name}",
                "boltzkit, extrapolated from 2^" + str(n_hidden),
                t["library"] * scale,
                bare_s=t["bare_softplus"] * scale,
                vs_bare=r_soft,
                device=dev,
                note="linear in the number of states",
            )
        )
    if not quick:
        rbm25 = make_rbm(784, 25, F64, dev)
        sync(dev)
        t0 = time.perf_counter()
        value = exact_log_z(rbm25).log_z
        sync(dev)
        sec = time.perf_counter() - t0
        rows.append(
            row(
                "exact log Z 784x25 (2^25 states), float64",
                "boltzkit, measured once",
                sec,
                device=dev,
                note=f"log Z = {value:.6f}; extrapolation said {extrapolated['float64']:.1f} s",
            )
        )
    return rows


def aims(rows: list[dict]) -> list[str]:
    """Summary lines (the issue sets no ratio aim here; the per-state cost is what matters)."""
    out = []
    for r in rows:
        if r["what"] == "boltzkit exact_log_z":
            out.append(
                f"{r['benchmark']}: {r['seconds']:.3f} s, {r['vs_bare']:.3f}x the softplus-form bare cost, "
                f"{r['vs_bare_product']:.2f}x the product-form bare cost"
            )
        elif r["what"].startswith("boltzkit, "):
            out.append(f"{r['benchmark']}: {r['what']} {r['seconds']:.1f} s")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    p.add_argument("--hidden", type=int, default=None, help="hidden units of the timed model (default 20)")
    a = p.parse_args()
    set_threads(a.threads)
    rows = run(a.device, a.quick, a.repeats, a.hidden)
    finish(rows, torch.device(a.device), a.json)
    print("\n".join(aims(rows)))
