"""Quality at equal cost: boltzkit's Gaussian-Bernoulli and categorical RBMs against a plain CD-1
reference of the same size on scikit-learn's digits.

The data and settings are the README's (first 1,400 digits for training, the other 397 held out;
standardised for Gaussian units, quantised to 4 levels for categorical units; 16 hidden units, 20
epochs, batch 20). Three models per unit type, each scored by its exact held-out mean log p(v)
(boltzkit's exact log Z, 2^16 hidden states):

* ``boltzkit``: ``boltzkit.learning.train_unit_rbm`` as ``boltzkit train --visible``
  runs it (CD-1, momentum 0.5, the learning rate decaying to 0, visible biases and sigma at the
  data's base rates, sigma learned);
* ``plain CD-1``: a textbook reference written here in a few lines of torch (Hinton 2010,
  Sec. 13.2 for Gaussian units): CD-1 with ``p(h|v)`` in both phases, a constant learning rate, no
  momentum, visible biases at 0 and sigma fixed at 1 (standardised data);
* ``independent``: the visible units' base-rate fit alone (no hidden units; sigma floored as the
  trainer floors it, so that the always-blank corner pixels do not get a vanishing sigma).

Run: python benchmarks/reference_units.py [--seeds 3]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from boltzkit.estimators import dataset_log_prob, exact_log_z
from boltzkit.learning import train_unit_rbm
from boltzkit.learning.unit_rbm import SIGMA_FLOOR
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.units import Categorical, Gaussian

HIDDEN, EPOCHS, BATCH = 16, 20, 20
LR = {"gaussian": 0.001, "categorical": 0.01}


def digits() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    from sklearn.datasets import load_digits

    x = load_digits().data
    train, test = x[:1400], x[1400:]
    mean, std = train.mean(0), train.std(0) + (train.std(0) == 0)
    real = [torch.from_numpy((a - mean) / std).float() for a in (train, test)]
    levels = [torch.from_numpy(np.minimum(a // 4, 3)).float() for a in (train, test)]
    return {"gaussian": tuple(real), "categorical": tuple(levels)}


def plain_cd1(x: torch.Tensor, kind: str, seed: int) -> UnitRBM:
    """The textbook CD-1 reference: gradients written out, constant learning rate, no momentum."""
    g = torch.Generator().manual_seed(seed)
    units = Gaussian() if kind == "gaussian" else Categorical(4)
    model = UnitRBM(units, x.shape[1], HIDDEN, generator=g, init_scale=0.01)
    lr = LR[kind]
    with torch.no_grad():
        for _ in range(EPOCHS):
            order = torch.randperm(len(x), generator=g)
            for start in range(0, len(x), BATCH):
                v0 = x[order[start : start + BATCH]]
                p0 = torch.sigmoid(model.hidden_input(v0))
                h0 = (torch.rand(p0.shape, generator=g) < p0).float()
                v1 = model.sample_visible(h0, g)
                p1 = torch.sigmoid(model.hidden_input(v1))
                s0 = units.stats(v0, model.visible_params()).reshape(len(v0), -1)
                s1 = units.stats(v1, model.visible_params()).reshape(len(v1), -1)
                n = len(v0)
                model.W += lr * ((s0.t() @ p0 - s1.t() @ p1) / n).reshape(model.W.shape)
                model.hbias += lr * (p0 - p1).mean(0)
                if kind == "gaussian":  # sigma = 1: d/db of -(v - b)^2 / 2 is v - b
                    model.vbias += lr * (v0 - v1).mean(0)
                else:
                    model.vbias += lr * (units.stats(v0, {}) - units.stats(v1, {})).mean(0)
    return model


def independent(x: torch.Tensor, kind: str) -> UnitRBM:
    units = Gaussian() if kind == "gaussian" else Categorical(4)
    base = units.fit_base(x)
    if "sigma" in base:  # the trainer's floor (5% of the largest), as boltzkit's models start
        base["sigma"] = base["sigma"].clamp_min(SIGMA_FLOOR * float(base["sigma"].max()))
    return UnitRBM(units, x.shape[1], 1, weights=torch.zeros(units_w_shape(units, x.shape[1])),
                   vbias=base["bias"].float(), sigma=base.get("sigma"), dtype=torch.float64)  # fmt: skip


def units_w_shape(units, n_visible: int) -> tuple[int, ...]:
    return (n_visible, units.n_states, 1) if isinstance(units, Categorical) else (n_visible, 1)


def held_out(model: UnitRBM, test: torch.Tensor) -> float:
    model = model.double()
    return dataset_log_prob(model, test.double(), exact_log_z(model)).mean_log_prob


def main(seeds: int) -> None:
    rows = []
    for kind, (train, test) in digits().items():
        for seed in range(seeds):
            units = "gaussian" if kind == "gaussian" else "categorical:4"
            ours, _ = train_unit_rbm(
                train, units, HIDDEN, epochs=EPOCHS, batch_size=BATCH, lr=LR[kind], seed=seed
            )
            rows.append((kind, seed, "boltzkit", held_out(ours, test)))
            rows.append((kind, seed, "plain CD-1", held_out(plain_cd1(train, kind, seed), test)))
        # one hidden unit with zero couplings adds log 2 to log Z and to log p*: the base rates alone
        rows.append((kind, "-", "independent", held_out(independent(train, kind), test)))
    print("| units | seed | model | held-out mean log p (exact) |\n|---|---|---|---:|")
    for kind, seed, name, value in rows:
        print(f"| {kind} | {seed} | {name} | {value:.2f} |")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=3)
    main(p.parse_args().seeds)
