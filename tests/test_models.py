"""The Boltzmann machine family: energies, conditionals, summing out, pairwise forms, mean field.

Every identity is checked against brute-force enumeration of tiny float64 models of each kind
(Salakhutdinov 2008, "S2", Eqs. 45-50, 52-54).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from conftest import F64, STRUCTURES, bit_matrix, random_machine, random_rbm

from boltzkit.errors import BoltzkitError
from boltzkit.estimators.exact import (
    exact_joint_distribution,
    exact_log_unnormalized_visible,
    log_z_brute_force,
)
from boltzkit.models import RBM, BoltzmannMachine
from boltzkit.models.mean_field import mean_field, mean_field_bound
from boltzkit.state import ChainState

KINDS = [("rbm", (5, 3)), ("srbm", (5, 3)), ("bm", (5, 3)), ("dbm", (3, 2, 3))]


def _split(model, x: torch.Tensor) -> ChainState:
    return model.split_units(x)


# ---------------------------------------------------------------------------------- kinds
def test_kinds_and_parameter_names_follow_the_structure():
    assert random_rbm(3, 2, 0).kind == "rbm"
    names = {
        "srbm": ["W", "L", "vbias", "hbias"],
        "bm": ["W", "L", "J", "vbias", "hbias"],
    }
    for kind, expected in names.items():
        m = random_machine(kind, (5, 3), 0)
        assert m.kind == kind and [n for n, _ in m.named_parameters()] == expected
    d = random_machine("dbm", (5, 3, 2, 7), 0)
    assert d.kind == "dbm"
    assert [n for n, _ in d.named_parameters()] == [
        "W_0",
        "W_1",
        "W_2",
        "bias_0",
        "bias_1",
        "bias_2",
        "bias_3",
    ]
    assert d.default_sum_out() == (1, 3) and [b.layer for b in d.blocks()] == [1, 3, 0, 2]
    assert BoltzmannMachine.independent([torch.zeros(3)]).kind == "independent"
    # an RBM is a member of the family, with its named parameters shared
    rbm = random_rbm(5, 3, 1)
    assert isinstance(rbm, BoltzmannMachine) and rbm.coupling(0, 1) is rbm.W
    assert torch.equal(rbm.coupling(1, 0), rbm.W.t())


def test_blocks_are_sequential_exactly_for_layers_with_laterals():
    srbm = random_machine("srbm", (5, 3), 0)
    assert [(b.layer, b.sequential) for b in srbm.blocks()] == [(1, False), (0, True)]
    bm = random_machine("bm", (5, 3), 0)
    assert [(b.layer, b.sequential) for b in bm.blocks()] == [(1, True), (0, True)]
    assert srbm.default_sum_out() == (1,) and bm.default_sum_out() == ()
    assert srbm.hidden_summable() and not bm.hidden_summable()


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (torch.tensor([[0.0, 1.0], [2.0, 0.0]], dtype=F64), "symmetric"),
        (torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=F64), "zero diagonal"),
        (torch.zeros(3, 3, dtype=F64), "wrong shape"),
        (torch.tensor([[0.0, math.nan], [math.nan, 0.0]], dtype=F64), "NaN"),
    ],
)
def test_bad_laterals_are_refused(value, match):
    with pytest.raises(BoltzkitError, match=match):
        BoltzmannMachine.srbm(2, 3, L=value, dtype=F64)


def test_rounding_level_asymmetry_is_averaged_away():
    a = torch.tensor([[0.0, 1.0], [1.0 + 1e-12, 0.0]], dtype=F64)
    m = BoltzmannMachine.srbm(2, 1, L=a, dtype=F64)
    assert torch.equal(m.L, m.L.t())


def test_bad_structures_are_refused():
    with pytest.raises(BoltzkitError, match="coupling key"):
        BoltzmannMachine((3, 2), {(0, 2): None})
    with pytest.raises(BoltzkitError, match="visible unit"):
        BoltzmannMachine((0, 2), {})
    with pytest.raises(BoltzkitError, match="one bias per layer"):
        BoltzmannMachine((3, 2), {}, [None])
    with pytest.raises(BoltzkitError, match="cannot be summed out"):
        random_machine("bm", (3, 2), 0).log_unnormalized(
            random_machine("bm", (3, 2), 0).random_state(2, torch.Generator()), sum_out=(1,)
        )


# ---------------------------------------------------------------------- energies and sums
@pytest.mark.parametrize(("kind", "sizes"), KINDS)
def test_energy_matches_the_pairwise_form_and_its_ising_constant(kind, sizes):
    model = random_machine(kind, sizes, seed=3)
    n = sum(sizes)
    x = bit_matrix(n)
    form = model.pairwise()
    energy = model.joint_energy(_split(model, x))
    by_form = -(0.5 * ((x @ form.couplings) * x).sum(1) + x @ form.biases)
    torch.testing.assert_close(energy, by_form, rtol=0, atol=1e-12)
    # Ising form: log Z = constant + log sum_s exp(sum_{i<j} J s_i s_j + h s)
    s = 2 * x - 1
    log_z_ising = float(
        torch.logsumexp(0.5 * ((s @ form.ising_couplings) * s).sum(1) + s @ form.ising_fields, 0)
    )
    assert log_z_ising + form.ising_constant == pytest.approx(log_z_brute_force(model), abs=1e-12)
    # the mask covers exactly the structure
    assert int(form.mask.sum()) == int((form.couplings != 0).sum())


@pytest.mark.parametrize(("kind", "sizes"), KINDS)
@pytest.mark.parametrize("beta", [1.0, 0.37])
def test_conditionals_are_ratios_of_the_joint(kind, sizes, beta):
    model = random_machine(kind, sizes, seed=4, scale=1.3)
    n = sum(sizes)
    x = bit_matrix(n)
    log_f = -beta * model.joint_energy(_split(model, x))
    offsets = [0, *itertools.accumulate(sizes)]
    for layer in range(len(sizes)):
        logits = model.layer_input(_split(model, x), layer, beta)
        for i in range(sizes[layer]):
            unit = offsets[layer] + i
            flipped = x.clone()
            flipped[:, unit] = 1 - flipped[:, unit]
            log_f_flip = -beta * model.joint_energy(_split(model, flipped))
            on = torch.where(x[:, unit] > 0, log_f, log_f_flip)
            off = torch.where(x[:, unit] > 0, log_f_flip, log_f)
            torch.testing.assert_close(logits[:, i], on - off, rtol=0, atol=1e-11)


@pytest.mark.parametrize(
    ("kind", "sizes"), [("rbm", (5, 3)), ("srbm", (5, 3)), ("dbm", (3, 2, 3)), ("dbm", (2, 3, 2, 3))]
)
@pytest.mark.parametrize("beta", [1.0, 0.37])
def test_summing_out_matches_enumeration(kind, sizes, beta):
    model = random_machine(kind, sizes, seed=5)
    summed = model.default_sum_out()
    n = sum(sizes)
    x = bit_matrix(n)
    log_f = -beta * model.joint_energy(_split(model, x))
    # group joint states by the kept units' values and sum out the rest
    offsets = [0, *itertools.accumulate(sizes)]
    kept_cols = [c for l in range(len(sizes)) if l not in summed for c in range(offsets[l], offsets[l + 1])]
    weights = 2 ** torch.arange(len(kept_cols))
    key = (x[:, kept_cols].long() * weights).sum(1)
    expected = torch.stack([torch.logsumexp(log_f[key == k], 0) for k in range(1 << len(kept_cols))])
    kept = bit_matrix(len(kept_cols))
    full = torch.zeros(kept.shape[0], n, dtype=F64)
    full[:, kept_cols] = kept
    got = model.log_unnormalized(_split(model, full), beta, summed)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-11)


def test_srbm_free_energy_and_the_rbm_fast_paths_agree_with_the_general_ones():
    rbm = random_rbm(7, 3, seed=6)
    general = BoltzmannMachine(
        (7, 3), {(0, 1): rbm.W.detach()}, [rbm.vbias.detach(), rbm.hbias.detach()], dtype=F64
    )
    state = rbm.random_state(13, torch.Generator().manual_seed(0))
    for layer in (0, 1):
        torch.testing.assert_close(rbm.layer_input(state, layer, 0.7), general.layer_input(state, layer, 0.7))
    torch.testing.assert_close(rbm.free_energy(state.visible), general.free_energy(state.visible))
    torch.testing.assert_close(rbm.joint_energy(state), general.joint_energy(state))
    assert isinstance(RBM.from_model(general), RBM) and torch.equal(RBM.from_model(general).W, rbm.W)


def test_set_gradients_writes_statistics_differences_with_zero_lateral_diagonals():
    model = random_machine("bm", (5, 3), seed=7)
    g = torch.Generator().manual_seed(1)
    pos = ChainState((torch.rand(11, 5, generator=g, dtype=F64), torch.rand(11, 3, generator=g, dtype=F64)))
    neg = model.random_state(13, g)
    model.set_gradients(pos, neg)
    for (l, m), name in (((0, 1), "W"), ((0, 0), "L"), ((1, 1), "J")):
        expected = neg.layers[l].t() @ neg.layers[m] / 13 - pos.layers[l].t() @ pos.layers[m] / 11
        if l == m:
            expected.fill_diagonal_(0)
        torch.testing.assert_close(getattr(model, name).grad, expected)
    torch.testing.assert_close(model.hbias.grad, neg.hidden.mean(0) - pos.hidden.mean(0))


# ------------------------------------------------------------------------------- mean field
@pytest.mark.parametrize(("kind", "sizes"), [("bm", (5, 4)), ("dbm", (4, 3, 3)), ("srbm", (5, 3))])
@pytest.mark.parametrize("seed", range(5))
def test_mean_field_bound_is_below_the_exact_log_p_star(kind, sizes, seed):
    model = random_machine(kind, sizes, seed=seed, scale=1.5)
    v = bit_matrix(sizes[0])
    exact = exact_log_unnormalized_visible(model, v)
    for sequential in (False, True):
        q = mean_field(model, {0: v}, sequential=sequential, tol=1e-10, max_iter=2000)
        assert q.converged
        bound = mean_field_bound(model, q)
        assert bool((bound <= exact + 1e-9).all()), float((bound - exact).max())
    if kind == "srbm":  # the posterior factorises: mean field is exact
        torch.testing.assert_close(bound, exact, rtol=0, atol=1e-9)


def test_sequential_mean_field_never_decreases_the_bound():
    model = random_machine("bm", (6, 5), seed=11, scale=2.0)
    v = bit_matrix(6)
    last = None
    q = None
    for it in range(1, 8):
        q = mean_field(
            model, {0: v}, sequential=True, max_iter=it, tol=1e-300, init=None if q is None else None
        )
        b = mean_field_bound(model, q)
        if last is not None:
            assert bool((b >= last - 1e-10).all())
        last = b


def test_mean_field_refuses_bad_settings():
    model = random_machine("bm", (3, 2), 0)
    v = bit_matrix(3)
    with pytest.raises(BoltzkitError, match="damping"):
        mean_field(model, {0: v}, damping=1.0)
    with pytest.raises(BoltzkitError, match="tolerance"):
        mean_field(model, {0: v}, tol=0.0)


def test_exact_distribution_of_every_kind_is_normalised():
    for kind, sizes in KINDS:
        _, log_p = exact_joint_distribution(random_machine(kind, sizes, seed=2))
        assert float(torch.logsumexp(log_p, 0)) == pytest.approx(0.0, abs=1e-12)
    assert set(STRUCTURES) == {"rbm", "srbm", "bm", "dbm"}


@pytest.mark.parametrize(("source", "target"), [("rbm", "srbm"), ("rbm", "bm"), ("srbm", "bm")])
def test_an_embedded_model_keeps_its_distribution(source, target):
    # S2 Eqs. 44, 45, 48: with the added laterals zero the energy is the smaller model's, so
    # log p(v) agrees on every visible state and log Z is unchanged.
    from boltzkit.models.boltzmann import kind_coupling_keys

    small = random_machine(source, (5, 3), seed=11)
    big = small.embedded(kind_coupling_keys(target, 2))
    assert big.kind == target
    v = bit_matrix(5)
    small_lp = exact_log_unnormalized_visible(small, v) - log_z_brute_force(small)
    big_lp = exact_log_unnormalized_visible(big, v) - log_z_brute_force(big)
    torch.testing.assert_close(big_lp, small_lp, rtol=0, atol=1e-10)
    with pytest.raises(BoltzkitError, match="keeps all its couplings"):
        big.embedded(kind_coupling_keys(source, 2))


def test_an_rbm_starts_an_srbm_and_bm_and_a_bm_refuses_to_start_an_rbm():
    from boltzkit.learning.api import train_model

    x = (torch.rand(64, 6, generator=torch.Generator().manual_seed(0)) < 0.4).float()
    rbm, _ = train_model(x, kind="rbm", hidden=4, epochs=1, progress=False, seed=1)
    for kind, new_keys in (("srbm", [(0, 0)]), ("bm", [(0, 0), (1, 1)])):
        model, _ = train_model(x, kind=kind, hidden=4, init=rbm, epochs=1, progress=False, seed=1)
        assert model.kind == kind and rbm.kind == "rbm"  # the start is copied, not changed
        for key in new_keys:  # the couplings the RBM lacks started at zero and were trained
            assert float(model.coupling(*key).detach().abs().max()) > 0
        torch.testing.assert_close(model.coupling(0, 1), rbm.coupling(0, 1), rtol=0, atol=0.2)
    bm = model
    with pytest.raises(BoltzkitError, match="does not match"):
        train_model(x, kind="rbm", hidden=4, init=bm, epochs=1, progress=False, seed=1)


@pytest.mark.parametrize("density", [0.0, 0.05, 0.13, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_product_of_sparse_binary_states_is_the_dense_one(density, dtype, monkeypatch) -> None:  # noqa: ANN001
    """``add_product`` sums rows of a wide ``W`` for mostly-zero {0, 1} states and multiplies
    otherwise; either way it is ``bias + x W`` (to the rounding of the sums), in place into ``out``
    too, and probabilities are never taken for states."""
    from boltzkit._numerics import SPARSE_DENSITY, SPARSE_MIN_COLUMNS, add_product

    lookups = []
    lookup = torch.nn.functional.embedding_bag
    monkeypatch.setattr(
        torch.nn.functional, "embedding_bag", lambda *a, **k: lookups.append(1) or lookup(*a, **k)
    )
    g = torch.Generator().manual_seed(int(100 * density))
    x = (torch.rand(50, 784, generator=g) < density).to(dtype)
    width = SPARSE_MIN_COLUMNS
    w, b = torch.randn(784, width, generator=g, dtype=dtype), torch.randn(width, generator=g, dtype=dtype)
    tol = 1e-4 if dtype == torch.float32 else 1e-12
    narrow = w[:, : width - 1].contiguous()
    assert torch.allclose(add_product(b[:-1], x, narrow), torch.addmm(b[:-1], x, narrow), atol=tol)
    assert not lookups  # a narrower W is always the dense product
    assert torch.allclose(add_product(b, x, w), torch.addmm(b, x, w), atol=tol)
    out = torch.ones(50, width, dtype=dtype)
    assert add_product(b, x, w, out) is out and torch.allclose(out, 1 + x @ w, atol=tol)
    probs = x * 0.5  # as sparse as x, but not states
    assert torch.allclose(add_product(b, probs, w), torch.addmm(b, probs, w), atol=tol)
    # the states, not the probabilities (all-zero probabilities are states too)
    assert len(lookups) == (0 if density >= SPARSE_DENSITY else 3 if density == 0 else 2)
    rbm = RBM.random(784, 30, generator=g, dtype=dtype)  # the RBM's and the family's hidden inputs use it
    assert torch.allclose(rbm.hidden_logits(x), torch.addmm(rbm.hbias, x, rbm.W), atol=tol)


@pytest.fixture
def product_policy(tmp_path, monkeypatch):  # noqa: ANN001
    """Restores the process's sparse-product choice after a test that changes it; the host's
    remembered measurements go to a cache of the test's own."""
    from boltzkit import _numerics

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kept = _numerics._sparse_products
    yield _numerics
    _numerics.set_sparse_products(kept)


def test_the_lookup_is_taken_where_this_host_runs_it_faster_or_as_told(
    product_policy, monkeypatch, tmp_path
) -> None:  # noqa: ANN001
    """``BOLTZKIT_SPARSE_PRODUCTS`` on / off decides; ``auto`` measures once, and takes the lookup
    only where it is faster by the margin; off, the states get the dense product."""
    numerics = product_policy
    measured = []

    def timings(lookup: float, dense: float):
        return lambda: measured.append(1) or (lookup, dense)

    for i, (setting, times, expected) in enumerate(
        [
            ("on", (9.0, 1.0), True),
            ("OFF", (1.0, 9.0), False),
            ("auto", (1.0, 2.0), True),
            ("auto", (0.9, 1.0), False),  # faster, but not by the margin
            ("", (0.5, 1.0), True),
        ]
    ):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / f"host-{i}"))  # a host not measured yet
        monkeypatch.setenv(numerics.SPARSE_PRODUCTS_ENV, setting)
        monkeypatch.setattr(numerics, "_time_lookup_against_dense", timings(*times))
        numerics.set_sparse_products(None)
        measured.clear()
        assert numerics.sparse_products() is expected and numerics.sparse_products() is expected
        assert len(measured) == (0 if setting.lower() in ("on", "off") else 1)  # measured once
    numerics.set_sparse_products(False)
    lookups = []
    real = torch.nn.functional.embedding_bag
    monkeypatch.setattr(
        torch.nn.functional, "embedding_bag", lambda *a, **k: lookups.append(1) or real(*a, **k)
    )
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(20, 784, generator=g) < 0.1).to(F64)
    w, b = torch.randn(784, 300, generator=g, dtype=F64), torch.randn(300, generator=g, dtype=F64)
    assert torch.equal(numerics.add_product(b, x, w), torch.addmm(b, x, w)) and not lookups
    numerics.set_sparse_products(True)
    assert torch.allclose(numerics.add_product(b, x, w), torch.addmm(b, x, w), atol=1e-12) and lookups


def test_the_measurement_is_made_once_per_host_and_remembered(product_policy, monkeypatch, tmp_path) -> None:  # noqa: ANN001
    """Every later process on the host reads the first one's figures (the same choice, whatever
    a second measurement would say); another thread count is another key; ``measure`` measures
    again and keeps the new figures; a torn file or an unwritable cache is measured over."""
    import json

    from boltzkit import _host

    numerics = product_policy
    measured = []
    times = [(1.0, 2.0)]
    monkeypatch.setattr(numerics, "_time_lookup_against_dense", lambda: measured.append(1) or times[0])
    monkeypatch.setenv(numerics.SPARSE_PRODUCTS_ENV, "auto")

    def a_new_process() -> bool:
        numerics.set_sparse_products(None)
        return numerics.sparse_products()

    assert a_new_process() is True and len(measured) == 1
    record = json.loads(_host.remembered_path().read_text())["sparse_products"]
    (key,) = record
    assert key == _host.host_key() and f"torch {torch.__version__}" in key
    assert record[key]["lookup_s"] == 1.0 and record[key]["dense_s"] == 2.0
    times[0] = (2.0, 1.0)  # this host would now measure the other way: its first figures hold
    assert a_new_process() is True and len(measured) == 1
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:  # another thread count is measured on its own, and both are kept
        assert a_new_process() is False and len(measured) == 2
        assert len(json.loads(_host.remembered_path().read_text())["sparse_products"]) == 2
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setenv(numerics.SPARSE_PRODUCTS_ENV, "measure")
    assert a_new_process() is False and len(measured) == 3
    monkeypatch.setenv(numerics.SPARSE_PRODUCTS_ENV, "auto")
    assert a_new_process() is False and len(measured) == 3  # the new figures are remembered
    _host.remembered_path().write_text("{not json")
    times[0] = (1.0, 2.0)
    assert a_new_process() is True and len(measured) == 4
    record = json.loads(_host.remembered_path().read_text())
    record["sparse_products"][_host.host_key()] = {"lookup_s": "fast"}  # edited by hand
    _host.remembered_path().write_text(json.dumps(record))
    assert a_new_process() is True and len(measured) == 5
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert a_new_process() is True and len(measured) == 6  # decided, for this process only
    assert a_new_process() is True and len(measured) == 7


def test_two_processes_on_one_host_choose_alike(tmp_path) -> None:  # noqa: ANN001
    """The second process reads what the first measured: same choice, no second measurement."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "BOLTZKIT_SPARSE_PRODUCTS": "auto"}
    code = (
        "import torch; torch.set_num_threads(1)\n"
        "from boltzkit import _numerics\n"
        "print(_numerics.sparse_products())\n"
    )
    first, second = (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        for _ in range(2)
    )
    assert first.stdout == second.stdout and first.stdout.strip() in ("True", "False")
    (record,) = json.loads((tmp_path / "boltzkit" / "host-measurements.json").read_text())[
        "sparse_products"
    ].values()
    assert 0 < record["lookup_s"] < 1 and 0 < record["dense_s"] < 1


def test_processes_that_start_together_on_a_new_host_take_turns(tmp_path) -> None:  # noqa: ANN001
    """Found by a review: two processes that started on a host with no record both measured, and
    each kept its own choice. The lock makes the second read the first's record."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, time\n"
        "from boltzkit import _host\n"
        "def measure():\n"
        "    time.sleep(0.5)\n"
        "    return {'lookup_s': float(sys.argv[1]), 'dense_s': 2.0}\n"
        "print(_host.remembered('sparse_products', measure)['lookup_s'])\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = [
        subprocess.Popen([sys.executable, "-c", code, value], env=env, stdout=subprocess.PIPE, text=True)
        for value in ("1.0", "3.0")  # the two would choose differently
    ]
    outputs = {run.communicate(timeout=60)[0].strip() for run in runs}
    assert len(outputs) == 1 and outputs <= {"1.0", "3.0"}


def test_the_measurement_times_both_products_on_the_reference_work(product_policy, monkeypatch) -> None:  # noqa: ANN001
    """On float32 CPU tensors whatever torch's defaults; a setting it cannot read is said."""
    lookup, dense = product_policy._time_lookup_against_dense()
    assert 0 < lookup < 1 and 0 < dense < 1
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert all(0 < t < 1 for t in product_policy._time_lookup_against_dense())
    finally:
        torch.set_default_dtype(default)
    monkeypatch.setenv(product_policy.SPARSE_PRODUCTS_ENV, "fast")
    product_policy.set_sparse_products(None)
    with pytest.raises(BoltzkitError, match="BOLTZKIT_SPARSE_PRODUCTS") as info:
        product_policy.sparse_products()
    assert "'fast'" in str(info.value) and "on, off, auto" in str(info.value)
