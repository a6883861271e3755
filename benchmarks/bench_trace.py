"""Benchmark: the energy trace of one chain, S3 Table 2's measurement, next to its bare cost.

**Energy trace.** ``energy_trace(rbm, op, n_chains=1, ...)`` on a 784 x 500 RBM (Brügge, Fischer &
Igel 2013, Table 2 and Fig. 4: MNIST with 500 hidden units, chains of 10^6 steps), in float32 (the
precision those RBMs train in) and float64, with Gibbs and with flip-the-state inside. Per step:
one block sweep of the single chain and its joint energy ``E(v, h)`` in float64 (S3 Eq. 16).

Bare cost, same shapes, preallocated outputs, one chain: the two products ``(1,784)x(784,500)``
and ``(1,500)x(500,784)`` with their biases, the uniforms and the draws (Gibbs: ``u < sigmoid(a)``;
flip: sign, ``exp(-relu(s a))``, draw, exclusive or, as in bench_tempering.py) and the energy
``-(v W) . h - b.v - c.h`` in float64 from float64 parameters at hand. The row "bare + per-step
conversion" adds what the library did before it kept one float64 copy of a float32 model's
parameters for the whole trace: converting them at every step.

Run: python benchmarks/bench_trace.py [--quick] [--device cpu] [--repeats 15]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads  # noqa: E402
from bench_tempering import draw, make_rbm  # noqa: E402

from boltzkit.diagnostics.autocorrelation import energy_trace  # noqa: E402
from boltzkit.models import RBM  # noqa: E402

SIZES = {"full": (784, 500, 400), "quick": (64, 32, 50)}  # visible, hidden, steps per timing


def library_fn(rbm: RBM, operator: str, n_steps: int, device: torch.device):
    gen = torch.Generator(device=device).manual_seed(1)
    return lambda: energy_trace(rbm, operator, n_chains=1, n_steps=n_steps, generator=gen)


def bare_fn(rbm: RBM, operator: str, n_steps: int, device: torch.device, convert: bool = False):
    gen = torch.Generator(device=device).manual_seed(2)
    kw = {"dtype": rbm.dtype, "device": device}
    W, W_t, b, c = rbm.W.detach(), rbm.W.detach().t(), rbm.vbias.detach(), rbm.hbias.detach()
    W64, b64, c64 = (p.to(torch.float64) for p in (W, b, c))
    v = (torch.rand(1, rbm.n_visible, generator=gen, **kw) < 0.5).to(rbm.dtype)
    h = (torch.rand(1, rbm.n_hidden, generator=gen, **kw) < 0.5).to(rbm.dtype)
    a_h, u_h, move_h = torch.empty_like(h), torch.empty_like(h), torch.empty_like(h)
    a_v, u_v, move_v = torch.empty_like(v), torch.empty_like(v), torch.empty_like(v)
    out = torch.empty(n_steps, dtype=torch.float64, device=device)
    flip = operator == "flip"

    def go() -> None:
        for step in range(n_steps):
            torch.addmm(c, v, W, out=a_h)
            draw(h, a_h, u_h, move_h, gen, flip)
            torch.addmm(b, h, W_t, out=a_v)
            draw(v, a_v, u_v, move_v, gen, flip)
            w64 = W.to(torch.float64) if convert else W64
            v64, h64 = v.to(torch.float64), h.to(torch.float64)
            out[step] = -((v64 @ w64) * h64).sum() - v64 @ b64 - h64 @ c64

    return go


def run(device: str = "cpu", quick: bool = False, repeats: int | None = None):
    dev = torch.device(device)
    repeats = repeats or (3 if quick else 15)
    n_visible, n_hidden, n_steps = SIZES["quick" if quick else "full"]
    rows = []
    for dtype in (torch.float32, torch.float64):
        name = str(dtype).replace("torch.", "")
        rbm = make_rbm(n_visible, n_hidden, dtype, dev)
        for operator, label in (("gibbs", "Gibbs"), ("flip", "flip-the-state")):
            bench = f"energy trace, 1 chain, RBM {n_visible}x{n_hidden}, {name}, {label} (per step)"
            fns = {
                "library": library_fn(rbm, operator, n_steps, dev),
                "bare": bare_fn(rbm, operator, n_steps, dev),
            }
            if dtype != torch.float64:
                fns["bare + per-step conversion"] = bare_fn(rbm, operator, n_steps, dev, convert=True)
            samples: dict[str, list[float]] = {}
            times = interleaved(fns, repeats=repeats, device=dev, samples=samples)
            per_step = {k: [s / n_steps for s in v] for k, v in samples.items()}
            what = {
                "library": (f"boltzkit energy_trace ({n_steps} steps a call)", "float64 energies"),
                "bare": ("bare: 2 products, uniforms, draws, float64 energy", "preallocated outputs"),
                "bare + per-step conversion": (
                    "bare + the parameters converted to float64 at every step",
                    "the library's cost before its one float64 copy",
                ),
            }
            for key in fns:
                description, note = what[key]
                rows.append(
                    row(
                        bench,
                        description,
                        times[key] / n_steps,
                        bare_s=times["bare"] / n_steps,
                        vs_bare=paired_ratio(samples[key], samples["bare"]) if key != "bare" else None,
                        device=dev,
                        note=note,
                        samples=per_step[key],
                    )
                )
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    a = p.parse_args()
    set_threads(a.threads)
    finish(run(a.device, a.quick, a.repeats), torch.device(a.device), a.json)
