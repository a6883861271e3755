"""One CD-1 epoch of a 784-500 RBM on binarized MNIST (batch 100): library, bare cost, scikit-learn.

* library: the epoch of ``boltzkit.learning.train_model`` (CD-1, Gibbs, SGD, progress off); the
  trainer is taken from a first ``train_model`` call (which is the warm-up and gives the one-time setup:
  data checks, copies, initialisation) and its ``run_epoch`` is timed.
* bare: per minibatch the five products of CD-1 in the same dtype, ``(100,784)x(784,500)``,
  ``(100,500)x(500,784)``, ``(100,784)x(784,500)`` and two ``(784,100)x(100,500)``, and the
  ``100 x 500 + 100 x 784`` uniforms, into preallocated outputs; nothing else.
* library with iterate averaging: the same epoch with ``average="ema:0.999"``: after every update
  the moving average of the 393,284 parameters (torch's ``AveragedModel``) is folded in; its cost
  over the plain epoch is what ``--average`` costs at the cheapest update there is.
* scikit-learn: ``BernoulliRBM(n_components=500, batch_size=100, n_iter=1)`` with the same learning
  rate, ``fit`` on float64 data (what it converts uint8, bool or float64 input to) and on float32
  data (kept in float32). Its ``fit`` includes its own small setup (input check, initialisation).
  BernoulliRBM is PCD-1 with the same five products per minibatch.

Data: binarized MNIST train (50,000 x 784) from ``BOLTZKIT_DATA_DIR`` when set, else random binary
data of that shape with about 13% ones.

Run: python benchmarks/bench_cd.py [--quick] [--device cpu] [--repeats 7] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads

from boltzkit.learning.callbacks import Callback

N_VISIBLE, N_HIDDEN, BATCH, LR = 784, 500, 100, 0.05


def load_data(n: int) -> tuple[torch.Tensor, str]:
    """Binarized MNIST train rows (first ``n``) or random binary data; float32, CPU."""
    if os.environ.get("BOLTZKIT_DATA_DIR"):
        try:
            from boltzkit.data import load_dataset

            x = load_dataset("mnist", split="train").x[:n]
            return x.contiguous(), f"binarized MNIST train, {x.shape[0]} x {x.shape[1]}"
        except Exception as exc:  # noqa: BLE001 - fall back to synthetic data, and say so
            reason = f"MNIST not loaded ({type(exc).__name__})"
    else:
        reason = "BOLTZKIT_DATA_DIR not set"
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(n, N_VISIBLE, generator=g) < 0.13).to(torch.float32)
    return x, f"random binary {n} x {N_VISIBLE}, 13% ones ({reason})"


class _Capture(Callback):
    """Callback that keeps the trainer ``train_rbm`` builds."""

    def __init__(self) -> None:
        self.trainer = None

    def on_train_begin(self, trainer) -> None:
        self.trainer = trainer


def library_trainer(x: torch.Tensor, device: torch.device, dtype: torch.dtype, average: str | None = None):
    """Run ``train_model`` (the RBM of ``train_rbm``) for one epoch; return (trainer, total seconds,
    epoch seconds)."""
    from boltzkit.learning import train_model

    cap = _Capture()
    t0 = time.perf_counter()
    _, history = train_model(
        x,
        kind="rbm",
        hidden=N_HIDDEN,
        average=average,
        method="cd",
        k=1,
        epochs=1,
        lr=LR,
        batch_size=BATCH,
        seed=0,
        device=device,
        dtype=dtype,
        progress=False,
        callbacks=[cap],
    )
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    total = time.perf_counter() - t0
    return cap.trainer, total, float(history.records[-1]["seconds"])


def bare_epoch_fn(n: int, device: torch.device, dtype: torch.dtype):
    """The five products and the uniforms of every CD-1 minibatch, preallocated."""
    g = torch.Generator(device=device).manual_seed(1)
    kw = {"device": device, "dtype": dtype}
    W = torch.randn(N_VISIBLE, N_HIDDEN, generator=g, **kw) * 0.01
    Wt = W.t()
    v0 = (torch.rand(BATCH, N_VISIBLE, generator=g, **kw) < 0.13).to(dtype)
    v1 = v0.clone()
    h0 = torch.empty(BATCH, N_HIDDEN, **kw)
    # hidden states as CD draws them (0/1): an uninitialised buffer may hold denormals, whose
    # products ran 5-20x slower on an Intel host and made the bare cost 12-28 s
    hs = (torch.rand(BATCH, N_HIDDEN, generator=g, **kw) < 0.5).to(dtype)
    vp = torch.empty(BATCH, N_VISIBLE, **kw)
    h1 = torch.empty(BATCH, N_HIDDEN, **kw)
    uh = torch.empty(BATCH, N_HIDDEN, **kw)
    uv = torch.empty(BATCH, N_VISIBLE, **kw)
    gW = torch.empty(N_VISIBLE, N_HIDDEN, **kw)
    gW2 = torch.empty(N_VISIBLE, N_HIDDEN, **kw)
    n_batches = -(-n // BATCH)

    def epoch() -> None:
        for _ in range(n_batches):
            torch.mm(v0, W, out=h0)
            torch.rand(uh.shape, generator=g, out=uh)
            torch.mm(hs, Wt, out=vp)
            torch.rand(uv.shape, generator=g, out=uv)
            torch.mm(v1, W, out=h1)
            torch.mm(v0.t(), h0, out=gW)
            torch.mm(v1.t(), h1, out=gW2)

    return epoch


def sklearn_fit_fn(x_np, seed: int = 0):
    from sklearn.neural_network import BernoulliRBM

    def fit() -> None:
        BernoulliRBM(
            n_components=N_HIDDEN, learning_rate=LR, batch_size=BATCH, n_iter=1, random_state=seed
        ).fit(x_np)

    return fit


def run(
    device: str = "cpu", quick: bool = False, repeats: int | None = None, sklearn: bool = True
) -> list[dict]:
    dev = torch.device(device)
    n = 5_000 if quick else 50_000
    repeats = repeats or (1 if quick else 7)
    x, data_desc = load_data(n)
    dtype = torch.float32
    bench = f"CD-1 epoch 784-500, batch 100, {x.shape[0]:,} rows"

    trainer, first_total, first_epoch = library_trainer(x, dev, dtype)
    setup_s = first_total - first_epoch
    averaging, _, _ = library_trainer(x, dev, dtype, average="ema:0.999")
    fns = {
        "library": trainer.run_epoch,
        "library_ema": averaging.run_epoch,
        "bare": bare_epoch_fn(x.shape[0], dev, dtype),
    }
    if sklearn:
        import numpy as np

        x64 = x.numpy().astype(np.float64)
        x32 = x.numpy().astype(np.float32)
        fns["sklearn_f64"] = sklearn_fit_fn(x64)
        fns["sklearn_f32"] = sklearn_fit_fn(x32)
    samples: dict[str, list[float]] = {}
    t = interleaved(fns, repeats=repeats, device=dev, warmup=0 if quick else 1, samples=samples)
    # one-time setup of train_rbm, measured again now that everything is warm
    _, total2, epoch2 = library_trainer(x, dev, dtype)
    setup_s = min(setup_s, total2 - epoch2)
    bare = t["bare"]
    rows = [
        row(
            bench,
            "boltzkit epoch (train_model's Trainer.run_epoch)",
            t["library"],
            bare_s=bare,
            vs_bare=paired_ratio(samples["library"], samples["bare"]),
            device=dev,
            note=f"float32; data: {data_desc}",
            samples=samples["library"],
        ),
        row(
            bench,
            "boltzkit epoch with an EMA of the iterates (average='ema:0.999')",
            t["library_ema"],
            bare_s=bare,
            vs_bare=paired_ratio(samples["library_ema"], samples["bare"]),
            device=dev,
            note=f"{paired_ratio(samples['library_ema'], samples['library']):.3f}x the plain epoch",
            samples=samples["library_ema"],
        ),
        row(
            bench,
            "bare: 5 matmuls + uniforms per batch",
            bare,
            bare_s=bare,
            device=dev,
            note="float32, preallocated outputs",
            samples=samples["bare"],
        ),
        row(
            bench,
            "boltzkit one-time setup (train_rbm minus its epoch)",
            setup_s,
            device=dev,
            note="data checks, copy to device/dtype, fingerprint, init; not in the epoch figure",
        ),
    ]
    if sklearn:
        for key, label in (("sklearn_f64", "float64"), ("sklearn_f32", "float32")):
            speedup = paired_ratio(samples[key], samples["library"])
            rows.append(
                row(
                    bench,
                    f"scikit-learn BernoulliRBM fit, n_iter=1, {label} data",
                    t[key],
                    bare_s=bare,
                    vs_bare=paired_ratio(samples[key], samples["bare"]),
                    device="cpu",
                    note=f"boltzkit is {speedup:.2f}x faster",
                    speedup_of_library=speedup,
                    samples=samples[key],
                )
            )
    return rows


def aims(rows: list[dict]) -> list[str]:
    """The issue's aims, met or not, in words."""
    lib = next(r for r in rows if r["what"].startswith("boltzkit epoch"))
    ok = "met" if lib["vs_bare"] <= 1.3 else "NOT met"
    out = [f"CD-1: boltzkit epoch / bare = {lib['vs_bare']:.2f} (aim <= 1.3: {ok})"]
    for r in rows:
        if r["what"].startswith("scikit-learn"):
            s = r["speedup_of_library"]
            ok = "met" if s >= 1.7 else "NOT met"
            out.append(
                f"CD-1: vs {r['what']}: boltzkit {s:.2f}x faster (aim >= 1.7: {ok}); "
                f"scikit-learn itself takes {r['vs_bare']:.2f}x the bare cost"
            )
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    p.add_argument("--no-sklearn", action="store_true")
    a = p.parse_args()
    set_threads(a.threads)
    rows = run(a.device, a.quick, a.repeats, sklearn=not a.no_sklearn)
    finish(rows, torch.device(a.device), a.json)
    print("\n".join(aims(rows)))
