"""Class changes on Artificial Modes (Brügge, Fischer & Igel 2013, Sec. 4.4): assignment by Hamming
distance with ties discarded, counts of changes and the first change, against exact answers for
a model whose chains draw independent samples."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import F64, K_SIGMA, bit_matrix

from boltzkit.data.synthetic import artificial_modes_prototypes, artificial_modes_with_labels
from boltzkit.diagnostics.class_changes import (
    AMBIGUOUS,
    class_changes_from_ones,
    classify_modes,
    count_class_changes,
    steps_to_first_change,
)
from boltzkit.errors import BoltzkitError
from boltzkit.models import RBM

PROTOS4 = torch.tensor([[0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 1, 1]], dtype=F64)


def _brute_force_classes(x: torch.Tensor, protos: torch.Tensor) -> torch.Tensor:
    out = []
    for row in x:
        d = [int((row != p).sum()) for p in protos]
        best = min(d)
        out.append(d.index(best) if d.count(best) == 1 else AMBIGUOUS)
    return torch.tensor(out)


def test_classes_match_a_brute_force_assignment():
    x = bit_matrix(4)
    assert torch.equal(classify_modes(x, PROTOS4), _brute_force_classes(x, PROTOS4))
    protos = artificial_modes_prototypes()
    data, labels = artificial_modes_with_labels(500, 0.1, seed=3)
    got = classify_modes(data, protos)
    assert torch.equal(got, _brute_force_classes(data, protos))
    clear = got != AMBIGUOUS
    assert float((got[clear] == labels[clear]).float().mean()) > 0.95
    assert classify_modes(data.reshape(5, 100, 16), protos).shape == (5, 100)


def test_class_changes_skip_ambiguous_samples():
    labels = torch.tensor([0, 0, AMBIGUOUS, 1, 1, AMBIGUOUS, 1, 2])
    assert int(count_class_changes(labels)) == 2
    both = count_class_changes(torch.stack([labels, torch.tensor([AMBIGUOUS] * 7 + [0])]))
    assert both.tolist() == [2, 0]


def _independent_model(seed: int) -> RBM:
    """W = 0: a Gibbs sweep draws v from p(v) = prod sigma(b) independently of the past."""
    g = torch.Generator().manual_seed(seed)
    b = torch.randn(4, generator=g, dtype=F64)
    return RBM(4, 3, weights=torch.zeros(4, 3, dtype=F64), vbias=b, dtype=F64)


@torch.no_grad()
def _class_probabilities(rbm: RBM) -> torch.Tensor:
    """Exact probability of each class and of an ambiguous sample (last entry)."""
    v = bit_matrix(4)
    p = torch.softmax(v @ rbm.vbias, 0)
    labels = _brute_force_classes(v, PROTOS4)
    out = torch.zeros(PROTOS4.shape[0] + 1, dtype=F64)
    out.index_add_(0, torch.where(labels == AMBIGUOUS, PROTOS4.shape[0], labels), p)
    return out


def test_steps_to_first_change_are_geometric_for_independent_samples():
    rbm = _independent_model(1)
    probs = _class_probabilities(rbm)
    q = float(1.0 - probs[0] - probs[-1])  # a sample of another class than the start's (class 0)
    n = 4000
    starts = torch.zeros(n, 4, dtype=F64)
    first = steps_to_first_change(
        rbm, "gibbs", PROTOS4, starts, max_steps=2000, generator=torch.Generator().manual_seed(2)
    )
    assert first.shape == (n,) and int(first.min()) >= 1 and int(first.max()) <= 2000
    se = math.sqrt(1 - q) / q / math.sqrt(n)
    assert abs(float(first.double().mean()) - 1 / q) < K_SIGMA * se, (float(first.double().mean()), 1 / q)


def test_changes_from_all_ones_match_independent_draws():
    rbm = _independent_model(3)
    probs = _class_probabilities(rbm)
    ambiguous = float(probs[-1])
    pi = probs[:-1] / (1 - ambiguous)
    n_steps, n_chains = 300, 400
    counts = class_changes_from_ones(
        rbm, "gibbs", PROTOS4, n_steps=n_steps, n_chains=n_chains, generator=torch.Generator().manual_seed(4)
    )
    # given K kept samples, E[changes] = (K - 1)(1 - sum pi^2); E[K] = n (1 - ambiguous)
    expected = (n_steps * (1 - ambiguous) - 1) * float(1 - (pi**2).sum())
    mean = float(counts.double().mean())
    se = float(counts.double().std()) / math.sqrt(n_chains)
    assert abs(mean - expected) < K_SIGMA * se, (mean, expected, se)


def test_ambiguous_starts_are_discarded_and_bad_input_refused():
    rbm = _independent_model(1)
    starts = torch.tensor([[0, 0, 0, 0], [0, 0, 0, 1], [1, 1, 1, 1]], dtype=F64)  # 0001 ties 0000 and 0011
    out = steps_to_first_change(
        rbm, "flip", PROTOS4, starts, max_steps=50, generator=torch.Generator().manual_seed(0)
    )
    assert out.shape == (2,)
    with pytest.raises(BoltzkitError, match="prototypes"):
        classify_modes(starts, torch.zeros(3, 5))
    with pytest.raises(BoltzkitError, match="parallel tempering"):
        steps_to_first_change(rbm, "pt:3", PROTOS4, starts, generator=torch.Generator())
