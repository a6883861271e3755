"""AIS on a 784-500 RBM with 100 chains: time per beta step next to the bare cost of the step.

* library: ``boltzkit.estimators.ais.anneal`` along the base-rate -> RBM path (``base_rate_path``,
  the fused step: log-weight increment in float64 plus one Gibbs sweep), timed over a stretch of
  betas spaced like the middle of the paper's schedule (step 1e-4), divided by the number of steps.
* bare: per step the two products ``(100,784)x(784,500)`` and ``(100,500)x(500,784)`` and the
  ``100 x 500 + 100 x 784`` uniforms, in the parameters' dtype, into preallocated outputs.

Float32 and float64 parameters; the log-weights are float64 in both. The projected time of the
paper's estimate (100 chains x 14,500 betas, Salakhutdinov & Murray 2008) is 14,500 steps.

Run: python benchmarks/bench_ais.py [--quick] [--device cpu] [--repeats 7] [--steps 200]
"""

from __future__ import annotations

import argparse

import torch
from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads

from boltzkit.estimators.ais import anneal
from boltzkit.estimators.paths import base_rate_path
from boltzkit.models import RBM
from boltzkit.samplers.operators import Gibbs

N_VISIBLE, N_HIDDEN, N_CHAINS, PAPER_BETAS = 784, 500, 100, 14_500


def make_rbm(dtype: torch.dtype, device: torch.device, seed: int = 0) -> RBM:
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    return RBM(
        N_VISIBLE,
        N_HIDDEN,
        weights=torch.randn(N_VISIBLE, N_HIDDEN, generator=g, dtype=f64) * 0.05,
        vbias=torch.randn(N_VISIBLE, generator=g, dtype=f64) - 1.0,
        hbias=torch.randn(N_HIDDEN, generator=g, dtype=f64) * 0.5,
        dtype=dtype,
        device=device,
    )


def _path_and_start(rbm: RBM, device: torch.device):
    path = base_rate_path(rbm)
    gen = torch.Generator(device=device).manual_seed(1)
    return path, path.sample_start(N_CHAINS, gen), gen


def library_fn(rbm: RBM, n_steps: int, device: torch.device):
    """``anneal`` over ``n_steps`` betas spaced 1e-4 (from the same start each call)."""
    path, init, gen = _path_and_start(rbm, device)
    betas = 0.5 + 1e-4 * torch.arange(n_steps + 1, dtype=torch.float64)
    op = Gibbs()

    def go() -> None:
        anneal(path, betas, init=init, operator=op, generator=gen, final_move=True)

    return go


def library_block_fn(rbm: RBM, block: int, device: torch.device):
    """``block`` further steps of ``anneal``'s loop body (``path.step`` and the float64 log-weight
    sum), continuing along a grid of 10,000 betas spaced 1e-4 across calls."""
    path, init, gen = _path_and_start(rbm, device)
    betas = [0.5 + 1e-4 * k for k in range(10_001)]
    op = Gibbs()
    log_w = torch.zeros(N_CHAINS, dtype=torch.float64, device=device)
    where = {"state": init, "k": 1}

    def go() -> None:
        state, k = where["state"], where["k"]
        for _ in range(block):
            if k == len(betas):
                state, k = init, 1
            delta, state = path.step(state, betas[k - 1], betas[k], op, gen)
            log_w.add_(delta)
            k += 1
        where["state"], where["k"] = state, k

    return go


def bare_fn(rbm: RBM, n_steps: int, device: torch.device):
    dtype = rbm.dtype
    gen = torch.Generator(device=device).manual_seed(2)
    W = rbm.W.detach()
    Wt = W.t()
    kw = {"device": device, "dtype": dtype}
    v = (torch.rand(N_CHAINS, N_VISIBLE, generator=gen, **kw) < 0.13).to(dtype)
    h = (torch.rand(N_CHAINS, N_HIDDEN, generator=gen, **kw) < 0.5).to(dtype)
    pre = torch.empty(N_CHAINS, N_HIDDEN, **kw)
    vl = torch.empty(N_CHAINS, N_VISIBLE, **kw)
    uh = torch.empty(N_CHAINS, N_HIDDEN, **kw)
    uv = torch.empty(N_CHAINS, N_VISIBLE, **kw)

    def go() -> None:
        for _ in range(n_steps):
            torch.mm(v, W, out=pre)
            torch.rand(uh.shape, generator=gen, out=uh)
            torch.mm(h, Wt, out=vl)
            torch.rand(uv.shape, generator=gen, out=uv)

    return go


def run(device: str = "cpu", quick: bool = False, repeats: int | None = None, n_steps: int | None = None):
    """Two measurements per dtype, each interleaved with the bare cost of the same number of steps:
    blocks of 10 steps alternated many times (fine-grained pairing, the "x bare" of record), and
    whole ``anneal`` calls over ``n_steps`` betas (end to end; gives the projected full estimate)."""
    dev = torch.device(device)
    n_steps = n_steps or (50 if quick else 200)
    repeats = repeats or (2 if quick else 7)
    block, rounds = (5, 10) if quick else (10, 20 * repeats)
    rows = []
    for dtype in (torch.float32, torch.float64):
        name = str(dtype).replace("torch.", "")
        rbm = make_rbm(dtype, dev)
        fine: dict[str, list[float]] = {}
        tf = interleaved(
            {"library": library_block_fn(rbm, block, dev), "bare": bare_fn(rbm, block, dev)},
            repeats=rounds,
            device=dev,
            samples=fine,
        )
        whole: dict[str, list[float]] = {}
        tw = interleaved(
            {"library": library_fn(rbm, n_steps, dev), "bare": bare_fn(rbm, n_steps, dev)},
            repeats=repeats,
            device=dev,
            samples=whole,
        )
        bench = f"AIS step, 784-500 RBM, 100 chains, {name} parameters"
        lib_step, bare_step = tf["library"] / block, tf["bare"] / block
        anneal_step, anneal_bare = tw["library"] / n_steps, tw["bare"] / n_steps
        anneal_ratio = paired_ratio(whole["library"], whole["bare"])
        rows.append(
            row(
                bench,
                "boltzkit path.step (anneal's loop body)",
                lib_step,
                bare_s=bare_step,
                vs_bare=paired_ratio(fine["library"], fine["bare"]),
                device=dev,
                note=f"{rounds} alternations of {block}-step blocks; log-weights float64",
                samples=[x / block for x in fine["library"]],
            )
        )
        rows.append(
            row(
                bench,
                "bare: 2 matmuls + uniforms",
                bare_step,
                bare_s=bare_step,
                device=dev,
                note="preallocated outputs",
                samples=[x / block for x in fine["bare"]],
            )
        )
        rows.append(
            row(
                bench,
                f"boltzkit anneal() over {n_steps} betas, per step",
                anneal_step,
                bare_s=anneal_bare,
                vs_bare=anneal_ratio,
                device=dev,
                note=f"end to end, {repeats} alternations with {n_steps} bare steps",
                samples=[x / n_steps for x in whole["library"]],
                bare_samples=[x / n_steps for x in whole["bare"]],
            )
        )
        rows.append(
            row(
                f"AIS full estimate (paper: 100 chains x {PAPER_BETAS:,} betas), {name}",
                "boltzkit, projected",
                anneal_step * PAPER_BETAS,
                bare_s=anneal_bare * PAPER_BETAS,
                vs_bare=anneal_ratio,
                device=dev,
                note="anneal() step time x 14,500",
            )
        )
    return rows


def aims(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if r["what"].startswith("boltzkit path.step"):
            ok = "met" if r["vs_bare"] <= 1.3 else "NOT met"
            out.append(f"{r['benchmark']}: {r['vs_bare']:.2f}x bare (aim <= 1.3: {ok})")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    p.add_argument("--steps", type=int, default=None, help="betas per timed run (default 200)")
    a = p.parse_args()
    set_threads(a.threads)
    rows = run(a.device, a.quick, a.repeats, a.steps)
    finish(rows, torch.device(a.device), a.json)
    print("\n".join(aims(rows)))
