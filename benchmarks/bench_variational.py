"""Benchmark: one sweep of loopy BP / tree-reweighted BP on a 784 x 500 RBM, next to its bare cost.

The S2 Table 2 size (Salakhutdinov 2008): 784 visible and 500 hidden units, 392,000 edges, float64.
A sweep of ``boltzkit.variational.bp.MessagePassing`` updates all visible-to-hidden messages, then
all hidden-to-visible ones (damped, log-ratio messages); the largest change is computed and read
back every sweep on the CPU and every 8th sweep on a GPU, as ``propagate`` does, so a timed call is
that many sweeps and the times are per sweep.

Bare cost: what a sweep cannot avoid, for both directions, into preallocated ``784 x 500`` buffers:
the cavity fields (one broadcast subtraction), the message function (one sigmoid and one ``log1p``
per message with the per-run constants ``sign(w)``, ``expm1(|w|)``, ``min(w, 0)``: two
multiplications and an addition) and the incoming sums of the receiving layer (one reduction; with
per-edge ``rho`` one multiplication more). The library adds the damping, the residual and its
bookkeeping. A second bare variant with the textbook message ``softplus(A + w) - softplus(A)`` is
timed for context (the library's form is both cheaper and more accurate).

Also timed (no bare cost): loopy BP to convergence (the Bethe estimate), the maximum-weight
spanning tree of Frank-Wolfe (scipy) and one Newton step of TRW's node-marginal polish (a dense
1284 x 1284 Hessian and its Cholesky solve).

Run: python benchmarks/bench_variational.py [--quick] [--device cpu|cuda] [--repeats 15]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import common_arguments, finish, interleaved, median_seconds, paired_ratio, row, set_threads  # noqa: E402

from boltzkit._numerics import softplus  # noqa: E402
from boltzkit.models import RBM  # noqa: E402
from boltzkit.variational import BlockGraph, bethe_log_z, max_weight_spanning_tree, uniform_rho  # noqa: E402
from boltzkit.variational.bp import MessagePassing, check_every  # noqa: E402
from boltzkit.variational.node_objective import evaluate, maximise  # noqa: E402

N_VISIBLE, N_HIDDEN = 784, 500
DAMPING = 0.5


def make_model(device: torch.device, scale: float = 0.05) -> RBM:
    g = torch.Generator().manual_seed(0)
    kw = {"generator": g, "dtype": torch.float64}
    return RBM(
        N_VISIBLE,
        N_HIDDEN,
        weights=scale * torch.randn(N_VISIBLE, N_HIDDEN, **kw),
        vbias=0.5 * torch.randn(N_VISIBLE, **kw) - 1.0,
        hbias=0.5 * torch.randn(N_HIDDEN, **kw),
        dtype=torch.float64,
        device=device,
    )


def library_fn(graph: BlockGraph, rho, sweeps: int):
    """``sweeps`` sweeps as :func:`propagate` runs them: the residual is computed and read back on
    the last one only (every sweep on the CPU, every 8th on a GPU: ``check_every``)."""
    engine = MessagePassing(graph, rho, None)

    def go() -> None:
        for _ in range(sweeps - 1):
            engine.sweep(DAMPING, check=False)
        float(engine.sweep(DAMPING))

    return go


def bare_fn(graph: BlockGraph, rho, sweeps: int, softplus_form: bool = False):
    """Cavities, messages and incoming sums for both directions, preallocated, no bookkeeping."""
    w_mat = graph.blocks[0].weights
    r = rho[0]
    w = w_mat / r
    sign = torch.where(w < 0, -1.0, 1.0).to(w.dtype)
    gain = torch.expm1(w.abs().clamp(max=700.0))
    offset = w.clamp(max=0.0)
    fwd = torch.zeros_like(w)
    bwd = torch.zeros_like(w)
    buf = torch.empty_like(w)
    theta_v, theta_h = graph.fields
    s_v, s_h = torch.zeros_like(theta_v), torch.zeros_like(theta_h)

    def message(out: torch.Tensor) -> None:
        if softplus_form:
            out.copy_(softplus(buf + w) - softplus(buf))
            return
        buf.mul_(sign)
        torch.sigmoid(buf, out=buf)
        buf.mul_(gain)
        torch.log1p(buf, out=out)
        out.add_(offset)

    def incoming(u: torch.Tensor, dim: int, out: torch.Tensor) -> None:
        if isinstance(r, torch.Tensor):
            torch.sum(u * r, dim, out=out)
        else:
            torch.sum(u, dim, out=out)
            out.mul_(r)

    def go() -> None:
        for _ in range(sweeps):
            torch.sub((theta_v + s_v)[:, None], bwd, out=buf)
            message(fwd)
            incoming(fwd, 0, s_h)
            torch.sub((theta_h + s_h)[None, :], fwd, out=buf)
            message(bwd)
            incoming(bwd, 1, s_v)

    return go


def run(device: str = "cpu", quick: bool = False, repeats: int | None = None):
    dev = torch.device(device)
    repeats = repeats or (3 if quick else 15)
    model = make_model(dev)
    graph = BlockGraph.from_model(model)
    uni = uniform_rho(graph)
    g = torch.Generator(device="cpu").manual_seed(1)
    per_edge = (uni[0] * (0.5 + torch.rand(N_VISIBLE, N_HIDDEN, generator=g, dtype=torch.float64)).to(dev),)
    k = check_every(dev)  # sweeps per timed call (per convergence check)
    rows = []
    bench = "message sweep, RBM 784x500 (392,000 edges, both directions), float64"
    cases = [
        ("loopy BP (rho = 1)", (1.0,)),
        (f"TRW, uniform rho = {uni[0]:.5f}", uni),
        ("TRW, per-edge rho (after Frank-Wolfe)", per_edge),
    ]
    for label, rho in cases:
        fns = {
            "library": library_fn(graph, rho, k),
            "bare": bare_fn(graph, rho, k),
            "bare (softplus form)": bare_fn(graph, rho, k, softplus_form=True),
        }
        soft = "bare (softplus form)"
        samples: dict[str, list[float]] = {}
        t = interleaved(fns, repeats=repeats, device=dev, samples=samples)
        t = {key: v / k for key, v in t.items()}  # per sweep
        samples = {key: [x / k for x in v] for key, v in samples.items()}
        rows.append(
            row(
                bench,
                f"boltzkit MessagePassing.sweep, {label}",
                t["library"],
                bare_s=t["bare"],
                vs_bare=paired_ratio(samples["library"], samples["bare"]),
                device=dev,
                note=f"{paired_ratio(samples['library'], samples[soft]):.2f}x the softplus-form bare",
                samples=samples["library"],
            )
        )
        rows.append(
            row(
                bench,
                f"bare: cavities, sigmoid/log1p messages, incoming sums ({label})",
                t["bare"],
                bare_s=t["bare"],
                device=dev,
                note="preallocated buffers",
                samples=samples["bare"],
            )
        )
        rows.append(
            row(
                bench,
                f"bare, textbook message softplus(A + w) - softplus(A) ({label})",
                t["bare (softplus form)"],
                bare_s=t["bare"],
                device=dev,
                note="for context",
                samples=samples["bare (softplus form)"],
            )
        )
    # whole runs and the pieces of TRW outside the sweep
    bench2 = "variational log Z pieces, RBM 784x500, float64"
    t0 = time.perf_counter()
    res = bethe_log_z(model)
    rows.append(
        row(
            bench2,
            "loopy BP to convergence (Bethe estimate)",
            time.perf_counter() - t0,
            device=dev,
            note=f"{res.iterations} sweeps, residual {res.residual:.1e}, converged {res.converged}",
        )
    )
    info = (torch.rand(N_VISIBLE, N_HIDDEN, generator=g, dtype=torch.float64).to(dev),)
    rows.append(
        row(
            bench2,
            "maximum-weight spanning tree (scipy, Frank-Wolfe oracle)",
            median_seconds(
                lambda: max_weight_spanning_tree(graph, info), repeats=max(2, repeats // 3), device=dev
            ),
            device=dev,
            note="392,000 edges",
        )
    )
    z = tuple(theta.clone() for theta in graph.fields)
    rows.append(
        row(
            bench2,
            "TRW certificate: F, gradient and gap at given marginals",
            median_seconds(lambda: evaluate(graph, uni, z), repeats=max(2, repeats // 3), device=dev),
            device=dev,
            note="closed-form edge tables",
        )
    )
    rows.append(
        row(
            bench2,
            "TRW Newton step (dense 1284x1284 Hessian, Cholesky, line search)",
            median_seconds(
                lambda: maximise(graph, uni, z, gap_tol=0.0, max_steps=1),
                repeats=max(2, repeats // 3),
                device=dev,
            ),
            device=dev,
            note="includes the evaluations of the line search",
        )
    )
    return rows


def aims(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if r["what"].startswith("boltzkit MessagePassing.sweep"):
            ok = "met" if r["vs_bare"] <= 1.5 else "NOT met"
            out.append(f"{r['what']}: {r['vs_bare']:.2f}x bare (aim <= 1.5: {ok})")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    a = p.parse_args()
    set_threads(a.threads)
    rows = run(a.device, a.quick, a.repeats)
    finish(rows, torch.device(a.device), a.json)
    print("\n".join(aims(rows)))
