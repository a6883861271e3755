"""Benchmark: one round of parallel tempering next to its bare cost, and grid-sweep throughput.

**PT round.** 20 replicas of 100 chains on a 784 x 500 RBM (Brügge, Fischer & Igel 2013, 20-PT_1
with Gibbs inside): ``ParallelTempering.step`` = one Gibbs sweep of all 2,000 chains at their
replicas' inverse temperatures, the joint energies, and a swap round (even pairs, then odd).

Bare cost, same shapes and dtype, preallocated outputs: the two products of a sweep,
``(2000,784)x(784,500)`` and ``(2000,500)x(500,784)``, scaled by the rows' inverse temperatures,
the ``2000 x 500`` and ``2000 x 784`` uniforms, the energies from the visible input already at
hand (``E = -v.(h W^T + b) - c.h``: no third product) and the ``19 x 100`` swap uniforms. The note
gives the ratio to the same bare cost plus one energy product ``(v W) . h``, which is what
``model.joint_energy`` does.

**The same round with flip-the-state inside** (S3's operator; Definition 1): in the bare cost each
unit's sigmoid and draw become the whole flip, in place in one buffer: the sign ``s = 2x - 1``, the
flip probability ``exp(-relu(s a))``, the draw ``u < P`` and the exclusive or ``x = |x - [u < P]|``
(without the library's ties, ``a = 0``, set to 1/2: the ratio to bare is a little high for it).

**Sweep throughput.** Grid tasks per minute in-process and with ``workers=2`` local processes
(each with ``cores // 2`` torch threads), for two task sizes: 8 tiny tasks (CD_5 on 3 x 3 Bars and
Stripes, 9 x 4 RBM, 300 updates), where process start-up dominates, and 8 tasks of S3's kind at
half its length (CD_5 on 4 x 4 Bars and Stripes, 16 x 8 RBM, 10,000 updates, exact log-likelihood
every 100), where it does not. Not run by ``--quick`` unless ``--sweep`` is given.

Run: python benchmarks/bench_tempering.py [--quick] [--device cpu] [--repeats 15] [--sweep | --no-sweep]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads  # noqa: E402

from boltzkit.models import RBM  # noqa: E402
from boltzkit.samplers.tempering import ParallelTempering  # noqa: E402

SIZES = {"full": (784, 500, 20, 100), "quick": (64, 32, 5, 20)}


def make_rbm(n_visible: int, n_hidden: int, dtype: torch.dtype, device: torch.device) -> RBM:
    g = torch.Generator(device="cpu").manual_seed(0)
    return RBM(
        n_visible,
        n_hidden,
        weights=torch.randn(n_visible, n_hidden, generator=g, dtype=torch.float64) * 0.05,
        vbias=torch.randn(n_visible, generator=g, dtype=torch.float64) * 0.1,
        hbias=torch.randn(n_hidden, generator=g, dtype=torch.float64) * 0.1,
        dtype=dtype,
        device=device,
    )


def library_fn(rbm: RBM, pt: ParallelTempering, n_chains: int, device: torch.device):
    gen = torch.Generator(device=device).manual_seed(1)
    state = pt.extend(rbm.random_state(n_chains, gen))

    def go() -> None:
        nonlocal state
        state, _ = pt.step(rbm, state, generator=gen)

    return go


def draw(
    x: torch.Tensor, a: torch.Tensor, u: torch.Tensor, move: torch.Tensor, gen: torch.Generator, flip: bool
) -> None:
    """Bare cost of one block: new states ``x`` from inputs ``a``, in place, uniforms in ``u``
    (``move``: a buffer). Flip-the-state: P(flip) = exp(-relu(s a)), s = 2x - 1 (the other
    state's ratio is exp(-s a)), x ^= [u < P]; Gibbs: x = [u < sigmoid(a)]."""
    torch.rand(u.shape, generator=gen, out=u)
    if flip:
        torch.mul(x, 2.0, out=move).sub_(1.0).mul_(a).relu_().neg_().exp_()
        torch.lt(u, move, out=u)
        x.sub_(u).abs_()
    else:
        torch.lt(u, torch.sigmoid(a), out=x)


def bare_fn(
    rbm: RBM,
    pt: ParallelTempering,
    n_chains: int,
    device: torch.device,
    energy_product: bool,
    flip: bool = False,
):
    gen = torch.Generator(device=device).manual_seed(2)
    rows = pt.n_temperatures * n_chains
    kw = {"dtype": rbm.dtype, "device": device}
    W, W_t, b, c = rbm.W.detach(), rbm.W.detach().t(), rbm.vbias.detach(), rbm.hbias.detach()
    beta = pt.betas.to(**kw).repeat_interleave(n_chains).unsqueeze(1)
    v = (torch.rand(rows, rbm.n_visible, generator=gen, **kw) < 0.5).to(rbm.dtype)
    h = (torch.rand(rows, rbm.n_hidden, generator=gen, **kw) < 0.5).to(rbm.dtype)  # flip reads it
    a_h, u_h = torch.empty_like(h), torch.empty_like(h)
    a_v, u_v = torch.empty_like(v), torch.empty_like(v)
    vw = torch.empty_like(h)
    u_swap = torch.empty(pt.n_temperatures - 1, n_chains, dtype=torch.float64, device=device)

    move_h, move_v = torch.empty_like(h), torch.empty_like(v)

    def go() -> None:
        torch.addmm(c, v, W, out=a_h)
        a_h.mul_(beta)
        draw(h, a_h, u_h, move_h, gen, flip)
        torch.addmm(b, h, W_t, out=a_v)
        energy = -(v * a_v).sum(1) - h @ c  # the visible input before the update: E(v_old, h)
        a_v.mul_(beta)
        draw(v, a_v, u_v, move_v, gen, flip)
        if energy_product:
            torch.mm(v, W, out=vw)
            energy = -(vw * h).sum(1)
        torch.rand(u_swap.shape, generator=gen, out=u_swap)
        return energy

    return go


def run(device: str = "cpu", quick: bool = False, repeats: int | None = None, sweep: bool | None = None):
    dev = torch.device(device)
    repeats = repeats or (3 if quick else 15)
    n_visible, n_hidden, t, n_chains = SIZES["quick" if quick else "full"]
    rows = []
    for dtype in (torch.float32,) if quick else (torch.float32, torch.float64):
        name = str(dtype).replace("torch.", "")
        rbm = make_rbm(n_visible, n_hidden, dtype, dev)
        bench = f"PT round, {t} replicas x {n_chains} chains, RBM {n_visible}x{n_hidden}, {name}"
        gibbs_library = None
        # Gibbs inside, then S3's other operator, flip-the-state, against the same work with the
        # flip (sign, exp, draw, exclusive or) in place of the sigmoid and draw
        for operator, inside in (("gibbs", "Gibbs"), ("flip", "flip-the-state")):
            pt = ParallelTempering(t, operator)
            flip = operator == "flip"
            fns = {
                "library": library_fn(rbm, pt, n_chains, dev),
                "bare": bare_fn(rbm, pt, n_chains, dev, energy_product=False, flip=flip),
            }
            if not flip:
                fns["bare + energy product"] = bare_fn(rbm, pt, n_chains, dev, energy_product=True)
            samples: dict[str, list[float]] = {}
            times = interleaved(fns, repeats=repeats, device=dev, samples=samples)
            if flip:
                note = f"{times['library'] / gibbs_library:.2f}x the Gibbs round"
            else:
                gibbs_library = times["library"]
                with_energy = paired_ratio(samples["library"], samples["bare + energy product"])
                note = f"{with_energy:.2f}x bare with one energy product"
            bare = (
                "bare for flip-the-state: the same, each unit's sigmoid and draw replaced by the flip"
                if flip
                else "bare: 2 tempered products, uniforms, energies from the visible input, swap uniforms"
            )
            what = {
                "library": (f"boltzkit ParallelTempering.step ({inside} inside, k = 1)", note),
                "bare": (bare, "preallocated outputs"),
                "bare + energy product": (
                    "bare + one energy product (v W) . h",
                    "what joint_energy costs on top",
                ),
            }
            for key in fns:
                description, row_note = what[key]
                vs_bare = paired_ratio(samples[key], samples["bare"]) if key == "library" else None
                rows.append(
                    row(
                        bench,
                        description,
                        times[key],
                        bare_s=times["bare"],
                        vs_bare=vs_bare,
                        device=dev,
                        note=row_note,
                        samples=samples[key],
                    )
                )
    if sweep if sweep is not None else not quick:
        rows.extend(sweep_rows())
    return rows


SWEEPS = (
    # (label, data, n_hidden, n_updates)
    ("CD_5, 3x3 Bars and Stripes, 300 updates", "bars-and-stripes:size=3", 4, 300),
    ("CD_5, 4x4 Bars and Stripes, 16 x 8 RBM, 10,000 updates", "bars-and-stripes:size=4", 8, 10_000),
)


def sweep_rows(n_tasks: int = 8) -> list[dict]:
    """Grid tasks per minute: in-process vs two local worker processes, short and long tasks."""
    from boltzkit.experiments.grid import make_grid, run_grid

    out = []
    for label, data, n_hidden, n_updates in SWEEPS:
        tasks = make_grid(
            [data], ["cd:5"], [0.1], ("gibbs", "flip"), n_tasks // 2,
            n_hidden=n_hidden, n_updates=n_updates, eval_every=100,
        )  # fmt: skip
        per_minute = {}
        for executor, workers in (("inline", 1), ("processes", 2)):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                run = run_grid(tasks, d, executor=executor, workers=workers, progress=False)
                seconds = time.perf_counter() - t0
            per_minute[executor] = 60.0 * run.ran / seconds
            note = f"{per_minute[executor]:.1f} tasks/min (process start-up included)"
            if executor == "processes":
                note += f"; {per_minute['processes'] / per_minute['inline']:.2f}x in-process"
            out.append(
                row(
                    f"grid sweep, {len(tasks)} tasks ({label})",
                    f"{executor}" + (f", workers={workers}" if executor == "processes" else ""),
                    seconds,
                    note=note,
                )
            )
    return out


def aims(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if r["what"].startswith("boltzkit ParallelTempering"):
            ok = "met" if r["vs_bare"] <= 1.3 else "NOT met"
            out.append(f"{r['benchmark']}: {r['vs_bare']:.2f}x bare (aim <= 1.3: {ok}; {r['note']})")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    p.add_argument(
        "--sweep",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="time the grid sweep (in-process vs 2 workers); default: yes, except with --quick",
    )
    a = p.parse_args()
    set_threads(a.threads)
    rows = run(a.device, a.quick, a.repeats, sweep=a.sweep)
    finish(rows, torch.device(a.device), a.json)
    print("\n".join(aims(rows)))
