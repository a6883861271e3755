"""Training RBMs with real-valued or categorical visible units (Gaussian-Bernoulli and Potts RBMs)
by CD-k or PCD, for every unit type at once.

The gradient of the mean log-likelihood of an RBM with binary hidden units is
``-E_data[dF/dtheta] + E_model[dF/dtheta]`` with the free energy ``F(v) = -log p*(v)``
(:meth:`~boltzkit.models.unit_rbm.UnitRBM.free_energy`; Hinton 2002, and S2 Sec. 4.1 for the
persistent version). So the learner minimises ``mean F(v_data) - mean F(v_model)`` with the model
samples held fixed, and autograd gives every parameter's gradient: the couplings, both biases and,
for Gaussian units, ``log sigma`` (learned in the log domain, so that sigma stays positive). The
negative samples are ``k`` block-Gibbs sweeps from the data (CD-k) or from persistent chains (PCD;
Tieleman 2008). torch.optim's SGD applies the learning rate, the momentum and the weight decay (on
the couplings only); the learning rate decays linearly to 0 when asked (S2 Sec. 5).

The visible biases start at the unit type's base-rate fit to the data (the data's means, and for
Gaussian units sigma at the data's standard deviations, floored at 5% of the largest; the log of
the smoothed frequencies for categorical units; Hinton 2010, Sec. 8, for binary units), the
couplings at ``N(0, init_scale^2)``. Gaussian-Bernoulli RBMs need small learning rates (Hinton
2010, Sec. 13.2: about 0.001 on standardised data); a diverging run stops with a clear error.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit.errors import BoltzkitError
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.units import Gaussian, UnitType, unit_type

METHODS = ("cd", "pcd")
#: Gaussian units start at the data's standard deviations, at least this fraction of the largest.
SIGMA_FLOOR = 0.05


def init_unit_rbm(
    x: Tensor,
    visible: UnitType | str,
    n_hidden: int,
    *,
    init_scale: float = 0.01,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
) -> UnitRBM:
    """A :class:`UnitRBM` whose visible units start at the base-rate fit to ``x``."""
    units = unit_type(visible)
    x = torch.as_tensor(x)
    x = units.check_data(x, int(x.shape[-1]))
    base = units.fit_base(x)
    if "sigma" in base:  # a column that barely varies would start at a sigma near 0 and blow up W / sigma
        base["sigma"] = base["sigma"].clamp_min(SIGMA_FLOOR * float(base["sigma"].max()))
    return UnitRBM(
        units, x.shape[1], int(n_hidden), vbias=base["bias"], sigma=base.get("sigma"), init_scale=init_scale,
        generator=generator, dtype=dtype,
    )  # fmt: skip


def train_unit_rbm(
    x: Tensor,
    visible: UnitType | str,
    n_hidden: int,
    *,
    method: str = "cd",
    k: int = 1,
    epochs: int = 10,
    lr: float = 0.001,
    lr_decay: bool = True,
    momentum: float = 0.5,
    weight_decay: float = 0.0,
    batch_size: int = 100,
    n_chains: int = 100,
    learn_sigma: bool = True,
    init_scale: float = 0.01,
    seed: int = 0,
    init: UnitRBM | None = None,
    progress: bool = False,
) -> tuple[UnitRBM, list[dict[str, Any]]]:
    """Train a Gaussian-Bernoulli or categorical RBM on ``x`` (real values or category indices).

    Parameters
    ----------
    x
        Training data, ``(n_examples, n_visible)``.
    visible
        The visible unit type (``"gaussian"``, ``"categorical:Q"``).
    method, k
        ``"cd"`` (CD-k from the data) or ``"pcd"`` (``n_chains`` persistent chains, ``k`` sweeps
        per update).
    epochs, lr, lr_decay, momentum, weight_decay, batch_size
        SGD settings; the learning rate decays linearly to 0 over the updates when ``lr_decay``.
    learn_sigma
        Gaussian units: learn ``log sigma`` too (else sigma stays at the data's standard deviations).
    seed
        One generator for the initial couplings, the minibatch order and every Gibbs draw.
    init
        A model to train further instead of a fresh one.

    Returns
    -------
    (model, history)
        The trained model and one record per epoch (seconds, the mean free-energy gap of the last
        epoch's minibatches, the learning rate).
    """
    method = str(method).lower()
    if method not in METHODS:
        raise BoltzkitError(
            "unknown learning method for these units", got=method, expected=" or ".join(METHODS)
        )
    if int(k) < 1 or int(epochs) < 1 or int(batch_size) < 1:
        raise BoltzkitError("k, epochs and batch_size must be at least 1", got=(k, epochs, batch_size))
    generator = torch.Generator().manual_seed(int(seed))
    units = unit_type(visible)
    model = init or init_unit_rbm(x, units, n_hidden, init_scale=init_scale, generator=generator)
    if model.visible_units != units:
        raise BoltzkitError("the model's visible units differ from --visible", got=model.visible_units.name)
    data = model.check_data(x)
    couplings = [model.W]
    others = [model.vbias, model.hbias]
    if isinstance(units, Gaussian) and learn_sigma:
        others.append(model.log_sigma)
    elif isinstance(units, Gaussian):
        model.log_sigma.requires_grad_(False)
    optimizer = torch.optim.SGD(
        [{"params": couplings, "weight_decay": float(weight_decay)}, {"params": others, "weight_decay": 0.0}],
        lr=float(lr),
        momentum=float(momentum),
    )
    n = data.shape[0]
    per_epoch = (n + int(batch_size) - 1) // int(batch_size)
    total = per_epoch * int(epochs)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: max(0.0, 1.0 - step / total) if lr_decay else 1.0
    )
    chains = model.sample_independent(int(n_chains), generator) if method == "pcd" else None
    history: list[dict[str, Any]] = []
    for epoch in tqdm(range(1, int(epochs) + 1), desc="epochs", disable=not progress):
        t0 = time.perf_counter()
        order = torch.randperm(n, generator=generator)
        gaps = []
        for start in range(0, n, int(batch_size)):
            batch = data[order[start : start + int(batch_size)]]
            with torch.no_grad():
                begin = batch if chains is None else chains
                negative = model.gibbs(begin, int(k), generator).visible
                if chains is not None:
                    chains = negative
            optimizer.zero_grad()
            gap = model.free_energy(batch).mean() - model.free_energy(negative).mean()
            gap.backward()
            optimizer.step()
            scheduler.step()
            gaps.append(float(gap.detach()))
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            raise BoltzkitError(
                f"training diverged in epoch {epoch}: a parameter is no longer finite",
                hint="lower the learning rate (--lr), or keep sigma fixed (learn_sigma=False) for "
                "standardised data.",
            )
        history.append(
            {
                "epoch": epoch,
                "seconds": time.perf_counter() - t0,
                "free_energy_gap": sum(gaps) / len(gaps),
                "lr": optimizer.param_groups[0]["lr"],
            }
        )
    if isinstance(units, Gaussian):
        model.log_sigma.requires_grad_(True)
    return model, history


__all__ = ["init_unit_rbm", "train_unit_rbm"]
