"""Benchmark: the DBN lower bound (S&M 2008, Eqs. 22-24) on 10,000 test images, next to its bare cost.

A 784-500-2000 DBN (S1's shape), ``M = 5`` samples of the recognition model per image, ``log Z``
given (the AIS on the top RBM is timed by bench_ais.py): ``boltzkit.estimators.dbn_bound``.

Bare cost, same shapes and dtype, preallocated outputs: the three matrix products the bound cannot
avoid, ``q(h_1 | v)`` (``10,000 x 784 x 500``), ``p(v | h_1)`` for every sample (``50,000 x 500 x
784``) and the top RBM's free energy for every sample (``50,000 x 500 x 2000``). A second bare
variant adds the ``50,000 x 500`` uniforms of the samples. The aim: within 1.5x of the products.

Run: python benchmarks/bench_dbn.py [--quick] [--device cpu] [--repeats 5]
Set BOLTZKIT_DATA_DIR to the folder with binarized MNIST for the real test images (else random).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads  # noqa: E402

from boltzkit.estimators.dbn_bound import dbn_bound  # noqa: E402
from boltzkit.models import DBN  # noqa: E402

SIZES = (784, 500, 2000)
N_TEST, M = 10_000, 5
BATCH = 1000


def test_images(n: int, device: torch.device) -> tuple[torch.Tensor, str]:
    try:
        from boltzkit.data import load_dataset

        x = load_dataset("mnist", split="test").x[:n]
        return x.to(device=device, dtype=torch.float32), "MNIST test images"
    except Exception:  # no data: random images of MNIST's density
        g = torch.Generator(device="cpu").manual_seed(0)
        return (torch.rand(n, SIZES[0], generator=g) < 0.13).float().to(device), "random images"


def make_dbn(device: torch.device, sizes=SIZES) -> DBN:
    g = torch.Generator(device="cpu").manual_seed(0)
    return DBN.random(sizes, generator=g, scale=0.05, bias_scale=0.5, dtype=torch.float32).to(device)


def bare_fn(dbn: DBN, x: torch.Tensor, batch: int, uniforms: bool):
    """The products of the bound, batch by batch as the library runs them, into preallocated outputs."""
    dev = x.device
    r0, r1 = dbn.rbms
    n0, n1, n2 = dbn.layer_sizes
    a1 = torch.empty(batch, n1, device=dev)
    h = (
        torch.rand(batch * M, n1, generator=torch.Generator(device=dev).manual_seed(1), device=dev) < 0.5
    ).float()
    u = torch.empty(batch * M, n0, device=dev)
    t = torch.empty(batch * M, n2, device=dev)
    unif = torch.empty(batch * M, n1, device=dev)
    g = torch.Generator(device=dev).manual_seed(2)
    W0, W0t, W1 = r0.W.detach(), r0.W.detach().t(), r1.W.detach()
    c0, b0, c1 = r0.hbias.detach(), r0.vbias.detach(), r1.hbias.detach()

    def go() -> None:
        for start in range(0, x.shape[0], batch):
            torch.addmm(c0, x[start : start + batch], W0, out=a1)
            if uniforms:
                torch.rand(unif.shape, generator=g, out=unif)
            torch.addmm(b0, h, W0t, out=u)
            torch.addmm(c1, h, W1, out=t)

    return go


def library_fn(dbn: DBN, x: torch.Tensor, batch: int):
    def go() -> None:
        dbn_bound(dbn, x, 0.0, n_samples=M, seed=0, batch_size=batch)

    return go


def run(device: str = "cpu", quick: bool = False, repeats: int | None = None):
    dev = torch.device(device)
    repeats = repeats or (3 if quick else 7)
    n = 1000 if quick else N_TEST
    x, source = test_images(n, dev)
    dbn = make_dbn(dev)
    bench = f"DBN bound 784-500-2000, {n:,} {source}, M = {M}, float32 (sums float64)"
    fns = {
        "library": library_fn(dbn, x, BATCH),
        "bare": bare_fn(dbn, x, BATCH, uniforms=False),
        "bare+uniforms": bare_fn(dbn, x, BATCH, uniforms=True),
    }
    samples: dict[str, list[float]] = {}
    t = interleaved(fns, repeats=repeats, device=dev, samples=samples)
    rows = [
        row(
            bench,
            "boltzkit dbn_bound (log Z given)",
            t["library"],
            bare_s=t["bare"],
            vs_bare=paired_ratio(samples["library"], samples["bare"]),
            device=dev,
            note=f"{paired_ratio(samples['library'], samples['bare+uniforms']):.2f}x products + uniforms",
            samples=samples["library"],
        ),
        row(
            bench,
            "bare: the three products (q, p(v|h), top free energy)",
            t["bare"],
            bare_s=t["bare"],
            device=dev,
            note="preallocated outputs",
            samples=samples["bare"],
        ),
        row(
            bench,
            "bare: products and the uniforms of the samples",
            t["bare+uniforms"],
            bare_s=t["bare"],
            device=dev,
            note="",
            samples=samples["bare+uniforms"],
        ),
    ]
    return rows


def aims(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if r["what"].startswith("boltzkit dbn_bound"):
            ok = "met" if r["vs_bare"] <= 1.5 else "NOT met"
            out.append(f"{r['benchmark']}: {r['vs_bare']:.2f}x the bare products (aim <= 1.5: {ok})")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    a = p.parse_args()
    set_threads(a.threads)
    rows = run(a.device, a.quick, a.repeats)
    finish(rows, torch.device(a.device), a.json)
    print("\n".join(aims(rows)))
