"""Mixing between modes: class changes of chains on Artificial Modes (Brügge, Fischer & Igel
2013, "S3", Sec. 4.4, after Bengio et al. 2013).

Each visible sample is assigned to the class of the mode prototype (Artificial Modes:
:func:`~boltzkit.data.synthetic.artificial_modes_prototypes`) at the smallest Hamming distance;
samples equally close to two or more prototypes are ambiguous and discarded. Two measurements:

* :func:`class_changes_from_ones`: one chain started with every visible unit on runs ``n_steps``
  sweeps; count how often consecutive (non-discarded) samples belong to different classes
  (S3 Table 3: 10,000 steps per RBM);
* :func:`steps_to_first_change`: chains started at training examples; the number of sweeps until
  the first sample whose class differs from the start's (S3 Table 4: 1,000 starts per RBM).

The first sweep draws the hidden units exactly from ``p(h | v)`` (``fresh_layers``), so that any
operator, flip-the-state included, starts from a valid chain state.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError
from boltzkit.models.base import EnergyModel
from boltzkit.samplers.operators import TransitionOperator, make_operator
from boltzkit.state import ChainState

#: Label of an ambiguous sample (equally close to several prototypes).
AMBIGUOUS = -1


def _check_prototypes(prototypes: Tensor, n_visible: int | None = None) -> Tensor:
    p = torch.as_tensor(prototypes)
    if p.dim() != 2 or p.shape[0] < 2 or (n_visible is not None and p.shape[1] != n_visible):
        raise BoltzkitError(
            "mode prototypes must be a matrix with one row per class",
            got=f"shape {tuple(p.shape)}",
            expected=f"(n_classes >= 2, {n_visible if n_visible is not None else 'n_visible'})",
        )
    return p


def classify_modes(v: Tensor, prototypes: Tensor) -> Tensor:
    """Class of each sample: the prototype at the smallest Hamming distance, or :data:`AMBIGUOUS`.

    Parameters
    ----------
    v
        Binary samples, shape ``(..., n_visible)``.
    prototypes
        Binary mode prototypes, shape ``(n_classes, n_visible)``.

    Returns
    -------
    Tensor
        int64, shape ``v.shape[:-1]``: the class index, or -1 where two or more prototypes tie.
    """
    p = _check_prototypes(prototypes, v.shape[-1]).to(device=v.device, dtype=torch.float32)
    x = v.to(torch.float32)
    # Hamming distance |x - p| = x.1 + p.1 - 2 x.p for binary vectors
    dist = x.sum(-1, keepdim=True) + p.sum(-1) - 2.0 * x @ p.t()
    best = dist.min(-1, keepdim=True).values
    ties = (dist == best).sum(-1) > 1
    return torch.where(ties, torch.full_like(ties, AMBIGUOUS, dtype=torch.int64), dist.argmin(-1))


def count_class_changes(labels: Tensor) -> Tensor:
    """Class changes along sequences: consecutive assigned samples of different classes.

    Ambiguous samples (:data:`AMBIGUOUS`) are discarded first, so ``A, ?, B`` is one change.

    Parameters
    ----------
    labels
        int64 labels, shape ``(n_steps,)`` or ``(n_chains, n_steps)``.

    Returns
    -------
    Tensor
        int64 counts, shape ``()`` or ``(n_chains,)``.
    """
    lab = labels if labels.dim() == 2 else labels.unsqueeze(0)
    counts = []
    for row in lab:
        kept = row[row != AMBIGUOUS]
        counts.append(
            (kept[1:] != kept[:-1]).sum() if kept.numel() > 1 else torch.zeros((), dtype=torch.int64)
        )
    out = torch.stack(counts).to(torch.int64)
    return out if labels.dim() == 2 else out[0]


def _start(model: EnergyModel, v: Tensor, generator: torch.Generator) -> ChainState:
    """Chains with the given visible states; the other layers are drawn fresh in the first sweep."""
    state = model.random_state(v.shape[0], generator)
    return state.with_layer(0, v.to(device=state.layers[0].device, dtype=state.layers[0].dtype))


@torch.no_grad()
def visible_sequence(
    model: EnergyModel,
    operator: TransitionOperator | str,
    v0: Tensor,
    n_steps: int,
    *,
    generator: torch.Generator,
) -> Tensor:
    """Visible states after each of ``n_steps`` sweeps from visible states ``v0``.

    Returns ``(n_chains, n_steps, n_visible)`` (the model's dtype). The first sweep draws the
    hidden layers exactly given ``v0``.
    """
    op = make_operator(operator)
    if getattr(op, "n_temperatures", None) is not None:
        raise BoltzkitError("class changes are measured on single chains, not on parallel tempering")
    state = _start(model, v0, generator)
    hidden = tuple(range(1, len(state.layers)))
    out = torch.empty(
        v0.shape[0], n_steps, v0.shape[1], dtype=state.layers[0].dtype, device=state.layers[0].device
    )
    for t in range(n_steps):
        state, _ = op.step(model, state, generator=generator, fresh_layers=hidden if t == 0 else ())
        out[:, t] = state.layers[0]
    return out


@torch.no_grad()
def class_changes_from_ones(
    model: EnergyModel,
    operator: TransitionOperator | str,
    prototypes: Tensor,
    *,
    n_steps: int = 10_000,
    n_chains: int = 1,
    generator: torch.Generator,
) -> Tensor:
    """Class changes in ``n_steps`` samples of chains started with all visible units on (S3 Table 3).

    Returns
    -------
    Tensor
        int64 counts, shape ``(n_chains,)`` (S3: one chain per RBM).
    """
    n_visible = model.layer_sizes[0]
    protos = _check_prototypes(prototypes, n_visible)
    v0 = torch.ones(n_chains, n_visible, dtype=model.dtype, device=model.device)
    seq = visible_sequence(model, operator, v0, n_steps, generator=generator)
    return count_class_changes(classify_modes(seq, protos)).cpu()


@torch.no_grad()
def steps_to_first_change(
    model: EnergyModel,
    operator: TransitionOperator | str,
    prototypes: Tensor,
    starts: Tensor,
    *,
    max_steps: int = 10_000,
    generator: torch.Generator,
) -> Tensor:
    """Sweeps until the first class change of chains started at ``starts`` (S3 Table 4).

    A chain's reference class is its start's class; starts that are ambiguous are discarded. A
    sample that is ambiguous is skipped; the first sample of another class ends the count.

    Parameters
    ----------
    model, operator
        The trained model and the kernel.
    prototypes
        Mode prototypes, ``(n_classes, n_visible)``.
    starts
        Visible start states (e.g. training examples), ``(n_chains, n_visible)``.
    max_steps
        Chains without a change by then are reported as ``max_steps + 1`` (censored).
    generator
        Source of randomness.

    Returns
    -------
    Tensor
        int64, shape ``(n_kept,)``: the sweep (1-based) of the first change of each chain whose
        start was not ambiguous.
    """
    protos = _check_prototypes(prototypes, model.layer_sizes[0])
    start_class = classify_modes(starts, protos)
    keep = start_class != AMBIGUOUS
    v0 = starts[keep].to(device=model.device, dtype=model.dtype)
    ref = start_class[keep].to(model.device)
    op = make_operator(operator)
    if getattr(op, "n_temperatures", None) is not None:
        raise BoltzkitError("class changes are measured on single chains, not on parallel tempering")
    state = _start(model, v0, generator)
    hidden = tuple(range(1, len(state.layers)))
    first = torch.full((v0.shape[0],), max_steps + 1, dtype=torch.int64, device=model.device)
    open_ = torch.ones(v0.shape[0], dtype=torch.bool, device=model.device)
    for t in range(1, max_steps + 1):
        state, _ = op.step(model, state, generator=generator, fresh_layers=hidden if t == 1 else ())
        label = classify_modes(state.layers[0], protos)
        changed = open_ & (label != AMBIGUOUS) & (label != ref)
        first = torch.where(changed, torch.full_like(first, t), first)
        open_ &= ~changed
        if t % 64 == 0 and not bool(open_.any()):
            break
    return first.cpu()


__all__ = [
    "AMBIGUOUS",
    "class_changes_from_ones",
    "classify_modes",
    "count_class_changes",
    "steps_to_first_change",
    "visible_sequence",
]
