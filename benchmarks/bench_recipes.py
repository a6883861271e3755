"""Seconds per epoch of each training recipe (784-500 RBM, batch 100) beside the bare cost of the
same work.

* library: one epoch of the recipe (``boltzkit.learning.train_model(..., recipe=NAME)``): the
  trainer of a first one-epoch call is kept and its ``run_epoch`` timed, at the recipe's ``k``
  (``sm2008-cd25`` and ``sm2008-cd25-mean`` at their last, k = 25, and at their mean over the 100
  epochs, k = 13).
* bare: per minibatch the recipe's products and uniforms, preallocated: CD-k with the mean
  reconstruction is ``1 + 2k`` products ``(100,784)x(784,500)``-sized plus the two gradient
  products ``(784,100)x(100,500)``, ``100 x 500`` uniforms k times and ``100 x 784`` uniforms
  ``k - 1`` times (the last visible update is a mean; with the sampled reconstruction of
  ``sm2008-cd25``, k times); SAP/PCD-k with 100 chains is the positive
  product, ``2k`` chain products, the two gradient products and ``k`` draws of each layer;
  centering adds nothing to the bare cost (its rank-two updates are part of what is timed).

Data: the first ``--rows`` binarized MNIST training images (default 10,000: an epoch of CD-25 on
all 50,000 takes a minute); seconds per epoch are scaled to 60,000 images (S1's training set).

Run: python benchmarks/bench_recipes.py [--rows 10000] [--repeats 3] [--threads N] [--json FILE]
"""

from __future__ import annotations

import argparse

import torch
from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads
from bench_cd import BATCH, N_HIDDEN, N_VISIBLE, load_data

from boltzkit.learning.callbacks import Callback
from boltzkit.learning.recipes import RECIPES

#: (label, recipe, changes, k for the bare cost, whether every visible update draws: persistent
#: chains and CD's sampled reconstruction)
CASES = (
    ("sm2008-cd1", "sm2008-cd1", {}, 1, False),
    ("sm2008-cd3", "sm2008-cd3", {}, 3, False),
    ("sm2008-cd25 at k = 13 (its mean)", "sm2008-cd25", {"k_schedule": None, "k": 13}, 13, True),
    ("sm2008-cd25 at k = 25 (its last epochs)", "sm2008-cd25", {"k_schedule": None, "k": 25}, 25, True),
    ("sm2008-cd25-mean at k = 13 (its mean)", "sm2008-cd25-mean", {"k_schedule": None, "k": 13}, 13, False),
    (
        "sm2008-cd25-mean at k = 25 (its last epochs)",
        "sm2008-cd25-mean",
        {"k_schedule": None, "k": 25},
        25,
        False,
    ),
    ("sm2008-cd1 with centering", "sm2008-cd1", {"centering": "average"}, 1, False),
    ("s2008-sap (PCD-5, 100 chains)", "s2008-sap", {}, 5, True),
)


class _Capture(Callback):
    def __init__(self) -> None:
        self.trainer = None

    def on_train_begin(self, trainer) -> None:
        self.trainer = trainer


def library_epoch(x: torch.Tensor, recipe: str, changes: dict, device: torch.device):
    from boltzkit.learning import train_model

    cap = _Capture()
    chosen = RECIPES[recipe].replace(epochs=1, **changes)
    train_model(x, hidden=N_HIDDEN, recipe=chosen, seed=0, device=device, progress=False, callbacks=[cap])
    return cap.trainer.run_epoch


def bare_epoch(n: int, k: int, every_visible_draws: bool, device: torch.device, dtype=torch.float32):
    g = torch.Generator(device=device).manual_seed(1)
    kw = {"device": device, "dtype": dtype}
    W = torch.randn(N_VISIBLE, N_HIDDEN, generator=g, **kw) * 0.01
    Wt = W.t()
    v = (torch.rand(BATCH, N_VISIBLE, generator=g, **kw) < 0.13).to(dtype)
    h = torch.empty(BATCH, N_HIDDEN, **kw)
    vp = torch.empty(BATCH, N_VISIBLE, **kw)
    uh = torch.empty(BATCH, N_HIDDEN, **kw)
    uv = torch.empty(BATCH, N_VISIBLE, **kw)
    gW = torch.empty(N_VISIBLE, N_HIDDEN, **kw)
    n_batches = -(-n // BATCH)
    visible_draws = k if every_visible_draws else k - 1

    def epoch() -> None:
        for _ in range(n_batches):
            torch.mm(v, W, out=h)  # the positive phase
            for step in range(k):
                torch.rand(uh.shape, generator=g, out=uh)
                torch.mm(h, Wt, out=vp)
                if step < visible_draws:
                    torch.rand(uv.shape, generator=g, out=uv)
                torch.mm(v, W, out=h)
            torch.mm(v.t(), h, out=gW)
            torch.mm(v.t(), h, out=gW)

    return epoch


def run(device: str = "cpu", rows: int = 10_000, repeats: int = 3) -> list[dict]:
    dev = torch.device(device)
    x, data_desc = load_data(rows)
    scale = 60_000 / x.shape[0]
    out = []
    for label, recipe, changes, k, every_visible_draws in CASES:
        samples: dict[str, list[float]] = {}
        fns = {
            "library": library_epoch(x, recipe, changes, dev),
            "bare": bare_epoch(x.shape[0], k, every_visible_draws, dev),
        }
        t = interleaved(fns, repeats=repeats, device=dev, warmup=1, samples=samples)
        bench = f"recipe epoch, 784-500, batch 100 (seconds scaled to 60,000 images from {x.shape[0]:,})"
        out.append(
            row(
                bench,
                label,
                t["library"] * scale,
                bare_s=t["bare"] * scale,
                vs_bare=paired_ratio(samples["library"], samples["bare"]),
                device=dev,
                note=f"float32; data: {data_desc}",
                samples=[s * scale for s in samples["library"]],
            )
        )
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    p.add_argument("--rows", type=int, default=10_000)
    a = p.parse_args()
    set_threads(a.threads)
    rows = run(a.device, a.rows, a.repeats or 3)
    finish(rows, torch.device(a.device), a.json)
