"""Benchmark: one sequential (single-site) sweep of a layer with dense laterals, next to its bare cost.

The visible layer of a 784-500 SRBM (dense visible laterals ``L``, S2 Sec. 4.2), 100 chains: one
Gibbs sweep over the 784 visible units in index order given the hidden units
(``boltzkit.samplers.sequential.sequential_update``, the kernel every operator uses for layers
with laterals).

Bare cost: the products a single-site sweep cannot avoid, written into preallocated outputs: the
units' inputs ``b + h W^T + v L`` (one ``(100,500)x(500,784)`` and one ``(100,784)x(784,784)``
product), bringing them up to date as units change (in total one more ``(100,784)x(784,784)``
product), and the ``100 x 784`` uniforms. The ratio to one input computation alone is reported too.

Run: python benchmarks/bench_sequential.py [--quick] [--device cpu] [--repeats 15] [--chunks 16,32,48,64]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads  # noqa: E402

from boltzkit.models import BoltzmannMachine  # noqa: E402
from boltzkit.samplers import Gibbs  # noqa: E402
from boltzkit.samplers.sequential import CHUNK, CUDA_CHUNK, sequential_update  # noqa: E402

N_VISIBLE, N_HIDDEN, N_CHAINS = 784, 500, 100


def make_model(dtype: torch.dtype, device: torch.device, scale: float = 0.05) -> BoltzmannMachine:
    g = torch.Generator(device="cpu").manual_seed(0)
    L = torch.randn(N_VISIBLE, N_VISIBLE, generator=g, dtype=torch.float64) * scale
    L = torch.triu(L, 1)
    L = L + L.t()
    W = torch.randn(N_VISIBLE, N_HIDDEN, generator=g, dtype=torch.float64) * scale
    return BoltzmannMachine.srbm(N_VISIBLE, N_HIDDEN, W=W, L=L, dtype=dtype, device=device)


def library_fn(model: BoltzmannMachine, device: torch.device, chunk: int):
    gen = torch.Generator(device=device).manual_seed(1)
    state = model.random_state(N_CHAINS, gen)
    op = Gibbs()

    def go() -> None:
        nonlocal state
        state = state.with_layer(0, sequential_update(model, state, 0, op, generator=gen, chunk=chunk))

    return go


def bare_fn(model: BoltzmannMachine, device: torch.device, updates: bool = True):
    gen = torch.Generator(device=device).manual_seed(2)
    kw = {"dtype": model.dtype, "device": device}
    v = (torch.rand(N_CHAINS, N_VISIBLE, generator=gen, **kw) < 0.5).to(model.dtype)
    h = (torch.rand(N_CHAINS, N_HIDDEN, generator=gen, **kw) < 0.5).to(model.dtype)
    a = torch.empty(N_CHAINS, N_VISIBLE, **kw)
    dv = torch.empty(N_CHAINS, N_VISIBLE, **kw)
    u = torch.empty(N_CHAINS, N_VISIBLE, **kw)
    W_t, L, b = model.W.detach().t(), model.L.detach(), model.vbias.detach()

    def go() -> None:
        torch.addmm(b, h, W_t, out=a)
        a.addmm_(v, L)
        if updates:
            torch.mm(v, L, out=dv)
        torch.rand(u.shape, generator=gen, out=u)

    return go


def graph_fns(model: BoltzmannMachine, device: torch.device, chunk: int) -> dict:
    """CUDA-graph variants of the same Gibbs sweep (the uniforms drawn outside the graph):

    * ``unit-by-unit``: the definition, one unit at a time (784 small steps), captured once and
      replayed;
    * ``chunked, fixed iterations``: the library's chunked fixed-point iteration run for exactly
      ``chunk`` iterations per chunk (enough for exactness, no convergence test, so no host
      synchronisation and capturable).
    """
    kw = {"dtype": model.dtype, "device": device}
    gen = torch.Generator(device=device).manual_seed(3)
    v = (torch.rand(N_CHAINS, N_VISIBLE, generator=gen, **kw) < 0.5).to(model.dtype)
    h = (torch.rand(N_CHAINS, N_HIDDEN, generator=gen, **kw) < 0.5).to(model.dtype)
    u = torch.rand(N_CHAINS, N_VISIBLE, generator=gen, **kw)
    W_t, L, b = model.W.detach().t(), model.L.detach(), model.vbias.detach()
    uppers = [torch.triu(L[i : i + chunk, i : i + chunk], 1) for i in range(0, N_VISIBLE, chunk)]

    def unit_by_unit() -> None:
        a = torch.addmm(b, h, W_t).addmm_(v, L)
        for i in range(N_VISIBLE):
            new = (u[:, i] < torch.sigmoid(a[:, i])).to(v.dtype)
            d = new - v[:, i]
            v[:, i] = new
            a.addr_(d, L[i])

    def chunked() -> None:
        a = torch.addmm(b, h, W_t).addmm_(v, L)
        for k, i0 in enumerate(range(0, N_VISIBLE, chunk)):
            rows = slice(i0, min(i0 + chunk, N_VISIBLE))
            a0, x0, u0 = a[:, rows], v[:, rows].clone(), u[:, rows]
            y = (u0 < torch.sigmoid(a0)).to(v.dtype)
            for _ in range(rows.stop - rows.start):
                y = (u0 < torch.sigmoid(torch.addmm(a0, y - x0, uppers[k]))).to(v.dtype)
            v[:, rows] = y
            a.addmm_(y - x0, L[rows, :])

    out = {}
    for name, fn in (("unit-by-unit", unit_by_unit), (f"chunked {chunk}, fixed iterations", chunked)):
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            fn()  # warm-up outside the graph
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        out[f"CUDA graph: {name}"] = graph.replay
    return out


def run(device: str = "cpu", quick: bool = False, repeats: int | None = None, chunks=None):
    dev = torch.device(device)
    repeats = repeats or (3 if quick else 15)
    default = CHUNK if dev.type == "cpu" else CUDA_CHUNK
    chunks = chunks or ([default] if quick else sorted({16, 32, CHUNK, 64, 96, default}))
    rows = []
    for dtype in (torch.float32, torch.float64):
        name = str(dtype).replace("torch.", "")
        model = make_model(dtype, dev)
        bench = f"sequential sweep, 784 visible units with dense laterals (SRBM 784-500), 100 chains, {name}"
        fns = {f"chunk {c}": library_fn(model, dev, c) for c in chunks}
        fns["bare"] = bare_fn(model, dev)
        fns["input only"] = bare_fn(model, dev, updates=False)
        graphs = graph_fns(model, dev, 16) if dev.type == "cuda" else {}
        fns.update(graphs)
        samples: dict[str, list[float]] = {}
        t = interleaved(fns, repeats=repeats, device=dev, samples=samples)
        for c in chunks:
            key = f"chunk {c}"
            rows.append(
                row(
                    bench,
                    f"boltzkit sequential_update (Gibbs), chunk {c}" + (" (default)" if c == default else ""),
                    t[key],
                    bare_s=t["bare"],
                    vs_bare=paired_ratio(samples[key], samples["bare"]),
                    device=dev,
                    note=f"{paired_ratio(samples[key], samples['input only']):.2f}x one input computation",
                    samples=samples[key],
                )
            )
        for key in graphs:
            rows.append(
                row(
                    bench,
                    key,
                    t[key],
                    bare_s=t["bare"],
                    vs_bare=paired_ratio(samples[key], samples["bare"]),
                    device=dev,
                    note="replay of a captured graph (uniforms drawn outside it)",
                    samples=samples[key],
                )
            )
        rows.append(
            row(
                bench,
                "bare: inputs (h W^T + v L), their updates (one v L product), uniforms",
                t["bare"],
                bare_s=t["bare"],
                device=dev,
                note="preallocated outputs",
                samples=samples["bare"],
            )
        )
        rows.append(
            row(
                bench,
                "bare: inputs only (h W^T + v L) and uniforms",
                t["input only"],
                bare_s=t["bare"],
                device=dev,
                note="a lower bound no exact sweep reaches",
                samples=samples["input only"],
            )
        )
    return rows


def aims(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if r["what"].endswith("(default)"):
            ok = "met" if r["vs_bare"] <= 2.0 else "NOT met"
            out.append(f"{r['benchmark']}: {r['vs_bare']:.2f}x bare (aim <= 2: {ok})")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    p.add_argument("--chunks", default=None, help="comma-separated chunk sizes to time")
    a = p.parse_args()
    set_threads(a.threads)
    chunk_list = [int(c) for c in a.chunks.split(",")] if a.chunks else None
    rows = run(a.device, a.quick, a.repeats, chunk_list)
    finish(rows, torch.device(a.device), a.json)
    print("\n".join(aims(rows)))
