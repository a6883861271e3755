"""A CD-1 epoch and an AIS step of RBMs with Gaussian and categorical visible units, beside the bare
cost of the same work.

* Gaussian-Bernoulli RBM 784-500 (the size of S1's MNIST RBMs), batch 100, on 10,000 rows of
  standard normal data (the speed does not depend on the values).
* categorical (Potts) RBM with 100 units of Q = 21 states (a protein family's alignment of 100
  columns) and 200 hidden units, batch 100, on 10,000 rows of uniform categories: its coupling
  tensor (100 x 21 x 200 = 420,000) is about as large as the 784-500 RBM's.

library
    ``Trainer.run_epoch`` with the unit RBM's learner (CD-1, momentum 0.5; the one-time set-up of
    ``train_model`` excluded), and
    ``UnitBaseRatePath.step`` on 100 chains (the fused AIS step: log-weight increment and one Gibbs
    sweep).
bare
    per minibatch the products and random numbers CD-1 cannot avoid, preallocated: the positive
    hidden input, the visible field of the drawn ``h``, the negative hidden input and the two
    gradient products (the categorical layer's statistics are its one-hot vectors, so its products
    are ``(100, 2100) x (2100, 200)``-sized), ``100 x 500`` (``100 x 200``) uniforms for ``h``, and
    ``100 x 784`` normals (``100 x 100`` uniforms, one per categorical unit) for ``v``. An AIS step's
    bare cost is the hidden input and the visible field with the same random numbers.
bare-lookup
    categorical units only: the same with the hidden inputs as row lookups of ``W``
    (``embedding_bag``), which is how the library computes them; cheaper than the one-hot product,
    so the ratio against it is the stricter one.

On a GPU (``--device cuda``) the data, the model, the bare tensors and every generator live on
the device, and each timing synchronises it.

Run: python benchmarks/bench_units.py [--device cpu|cuda] [--rows 10000] [--repeats 5] [--threads N]
     [--json FILE]
"""

from __future__ import annotations

import argparse

import torch
from _timing import common_arguments, finish, interleaved, paired_ratio, row, set_threads

from boltzkit._numerics import make_generator
from boltzkit.estimators.unit_rbm import unit_base_rate_path
from boltzkit.learning import train_model
from boltzkit.learning.callbacks import Callback
from boltzkit.learning.unit_rbm import init_unit_rbm
from boltzkit.samplers import make_operator
from boltzkit.units import Categorical, Gaussian

BATCH = 100
N_CHAINS = 100
#: AIS steps per timed run.
STEPS = 200
#: (label, unit type, n_visible, n_hidden)
CASES = (
    ("gaussian-rbm 784-500", Gaussian(), 784, 500),
    ("categorical-rbm 100 x Q=21 - 200", Categorical(21), 100, 200),
)


def make_data(units, n_visible: int, rows: int, device: torch.device) -> torch.Tensor:
    """Synthetic rows (drawn on the CPU, so that every device times the same data) on ``device``."""
    g = torch.Generator().manual_seed(0)
    if isinstance(units, Categorical):
        x = torch.randint(0, units.n_states, (rows, n_visible), generator=g).float()
    else:
        x = torch.randn(rows, n_visible, generator=g)
    return x.to(device)


class _Capture(Callback):
    """Keeps the trainer that ``train_model`` builds."""

    def __init__(self) -> None:
        self.trainer = None

    def on_train_begin(self, trainer) -> None:
        self.trainer = trainer


def library_epoch(x: torch.Tensor, units, n_hidden: int):
    """The epoch of the trainer of every model (``Trainer.run_epoch`` with the unit RBM's learner),
    taken from a first ``train_model`` call (the set-up) and then timed."""
    cap = _Capture()
    train_model(
        x, kind="rbm", hidden=n_hidden, visible=units, method="cd", k=1, epochs=1, lr=1e-4, momentum=0.5,
        lr_schedule="linear", batch_size=BATCH, seed=1, device=x.device, progress=False, callbacks=[cap],
    )  # fmt: skip
    return cap.trainer.run_epoch


def library_ais_step(x: torch.Tensor, units, n_hidden: int):
    init = torch.Generator().manual_seed(2)
    model = init_unit_rbm(x.cpu(), units, n_hidden, generator=init, init_scale=0.1).to(x.device)
    g = make_generator(2, x.device)
    path = unit_base_rate_path(model, data=x[:1000])
    op = make_operator("gibbs")
    state = [path.sample_start(N_CHAINS, g)]

    def step() -> None:
        _, state[0] = path.step(state[0], 0.5, 0.5001, op, g)

    return step


def _bare_tensors(units, n_visible: int, n_hidden: int, n_rows: int, device: torch.device):
    g = make_generator(3, device)
    width = n_visible * (units.n_states if isinstance(units, Categorical) else 1)  # statistics per row
    kw = {"device": device}
    W = torch.randn(width, n_hidden, generator=g, **kw) * 0.01
    v = torch.randn(n_rows, width, generator=g, **kw)
    h = torch.empty(n_rows, n_hidden, **kw)
    vp = torch.empty(n_rows, width, **kw)
    uh = torch.empty(n_rows, n_hidden, **kw)
    uv = torch.empty(n_rows, n_visible, **kw)
    return g, W, v, h, vp, uh, uv


def _hidden_input_fn(units, W: torch.Tensor, v: torch.Tensor, h: torch.Tensor, lookup: bool):
    """The bare hidden input: the one-hot (or real) product ``v W``, or for categorical units with
    ``lookup`` the sum of ``W``'s rows ``(i, x_i)`` (``embedding_bag``, the library's own way)."""
    if not lookup:
        return lambda: torch.mm(v, W, out=h)
    g = make_generator(4, W.device)
    n_visible = W.shape[0] // units.n_states
    rows = torch.randint(0, units.n_states, (v.shape[0], n_visible), generator=g, device=W.device)
    rows += torch.arange(n_visible, device=W.device) * units.n_states
    return lambda: h.copy_(torch.nn.functional.embedding_bag(rows, W, mode="sum"))


def bare_epoch(
    units, n_visible: int, n_hidden: int, n_examples: int, device: torch.device, lookup: bool = False
):
    g, W, v, h, vp, uh, uv = _bare_tensors(units, n_visible, n_hidden, BATCH, device)
    gW = torch.empty_like(W)
    Wt = W.t()
    draw_v = torch.rand if isinstance(units, Categorical) else torch.randn
    hidden_input = _hidden_input_fn(units, W, v, h, lookup)
    n_batches = -(-n_examples // BATCH)

    def epoch() -> None:
        for _ in range(n_batches):
            hidden_input()  # positive hidden input
            torch.rand(uh.shape, generator=g, out=uh)
            torch.mm(h, Wt, out=vp)  # visible field
            draw_v(uv.shape, generator=g, out=uv)
            hidden_input()  # negative hidden input
            torch.mm(v.t(), h, out=gW)  # the two gradient products
            torch.mm(v.t(), h, out=gW)

    return epoch


def bare_ais_step(units, n_visible: int, n_hidden: int, device: torch.device, lookup: bool = False):
    g, W, v, h, vp, uh, uv = _bare_tensors(units, n_visible, n_hidden, N_CHAINS, device)
    Wt = W.t()
    draw_v = torch.rand if isinstance(units, Categorical) else torch.randn
    hidden_input = _hidden_input_fn(units, W, v, h, lookup)

    def step() -> None:
        hidden_input()
        torch.rand(uh.shape, generator=g, out=uh)
        torch.mm(h, Wt, out=vp)
        draw_v(uv.shape, generator=g, out=uv)

    return step


def run(device: str = "cpu", rows: int = 10_000, repeats: int = 5) -> list[dict]:
    dev = torch.device(device)
    out = []
    for label, units, n_visible, n_hidden in CASES:
        x = make_data(units, n_visible, rows, dev)
        samples: dict[str, list[float]] = {}
        fns = {
            "library": library_epoch(x, units, n_hidden),
            "bare": bare_epoch(units, n_visible, n_hidden, rows, dev),
        }
        if isinstance(units, Categorical):
            fns["bare-lookup"] = bare_epoch(units, n_visible, n_hidden, rows, dev, lookup=True)
        t = interleaved(fns, repeats=repeats, device=dev, warmup=1, samples=samples)
        out.append(
            row(
                f"CD-1 epoch, {label}, batch 100, {rows:,} rows",
                "boltzkit epoch (Trainer.run_epoch, UnitRBMLearner)",
                t["library"],
                bare_s=t["bare"],
                vs_bare=paired_ratio(samples["library"], samples["bare"]),
                device=dev,
                note="float32; momentum 0.5; synthetic data",
                samples=samples["library"],
            )
        )
        if "bare-lookup" in t:
            out.append(
                row(
                    f"CD-1 epoch, {label}, batch 100, {rows:,} rows",
                    "boltzkit epoch beside a bare cost with the hidden inputs as row lookups",
                    t["library"],
                    bare_s=t["bare-lookup"],
                    vs_bare=paired_ratio(samples["library"], samples["bare-lookup"]),
                    device=dev,
                    note="the library's own way to the hidden inputs (embedding_bag), in the bare cost too",
                    samples=samples["library"],
                )
            )
        lib_step = library_ais_step(x, units, n_hidden)
        fns = {"library": lambda f=lib_step: [f() for _ in range(STEPS)]}
        bares = {"bare": False, "bare-lookup": True} if isinstance(units, Categorical) else {"bare": False}
        for key, lookup in bares.items():
            bare_step = bare_ais_step(units, n_visible, n_hidden, dev, lookup)
            fns[key] = lambda f=bare_step: [f() for _ in range(STEPS)]
        samples = {}
        t = interleaved(fns, repeats=repeats, device=dev, warmup=1, samples=samples)
        step_note = f"float32 states, float64 log-weights; seconds per step (median of {STEPS}-step runs)"
        for key in bares:
            out.append(
                row(
                    f"AIS step, {label}, {N_CHAINS} chains",
                    "boltzkit fused step (UnitBaseRatePath.step)"
                    + (
                        " beside a bare cost with the hidden input as row lookups"
                        if key == "bare-lookup"
                        else ""
                    ),
                    t["library"] / STEPS,
                    bare_s=t[key] / STEPS,
                    vs_bare=paired_ratio(samples["library"], samples[key]),
                    device=dev,
                    note=step_note,
                    samples=[s / STEPS for s in samples["library"]],
                )
            )
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    p.add_argument("--rows", type=int, default=10_000)
    a = p.parse_args()
    set_threads(a.threads)
    rows = run(a.device, a.rows, a.repeats or 5)
    finish(rows, torch.device(a.device), a.json)
