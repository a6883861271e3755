"""The CUDA paths: the same computations on a GPU agree with the CPU and with exact values.

Marked ``cuda`` and skipped where no CUDA device is available (run with ``-m cuda`` on a GPU).
"""

from __future__ import annotations

import pytest
import torch
from conftest import F64, bars_and_stripes, random_machine, random_rbm

from boltzkit.estimators import ais, base_rate_path, exact_log_z, exact_sample, ratio_path, reverse_ais
from boltzkit.estimators.exact import exact_log_unnormalized_visible
from boltzkit.learning import train_model
from boltzkit.samplers import make_operator
from boltzkit.samplers.sequential import sequential_update, sequential_update_reference

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
CUDA = torch.device("cuda")
K_SIGMA = 5.0


@pytest.mark.parametrize(
    ("kind", "sizes"), [("rbm", (11, 7)), ("srbm", (9, 5)), ("bm", (7, 4)), ("dbm", (6, 4, 5))]
)
def test_exact_log_z_and_log_p_on_cuda_equal_the_cpu(kind, sizes):
    model = random_rbm(*sizes, seed=1) if kind == "rbm" else random_machine(kind, sizes, seed=1)
    on_gpu = model.detached_copy(device=CUDA)
    assert exact_log_z(on_gpu).log_z == pytest.approx(exact_log_z(model).log_z, abs=1e-10)
    v = (torch.rand(13, sizes[0], generator=torch.Generator().manual_seed(2)) < 0.5).to(F64)
    torch.testing.assert_close(
        exact_log_unnormalized_visible(on_gpu, v.to(CUDA)).cpu(), exact_log_unnormalized_visible(model, v)
    )


@pytest.mark.parametrize(
    ("kind", "sizes"), [("rbm", (16, 10)), ("srbm", (16, 10)), ("bm", (16, 5)), ("dbm", (16, 6, 4))]
)
@pytest.mark.parametrize("sampler", ["gibbs", "flip"])
def test_ais_on_cuda_is_within_5_se_of_exact(kind, sizes, sampler):
    model = random_rbm(*sizes, seed=3) if kind == "rbm" else random_machine(kind, sizes, seed=3)
    exact = exact_log_z(model).log_z
    res = ais(
        base_rate_path(model, device=CUDA), n_chains=200, betas=301, sampler=sampler, seed=4, check=False
    )
    assert res.settings["device"].startswith("cuda")
    assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr
    rev = reverse_ais(base_rate_path(model, device=CUDA), n_chains=200, betas=301, sampler=sampler, seed=5)
    assert rev.log_z >= exact - K_SIGMA * rev.log_z_stderr


def test_ratio_path_on_cuda():
    a, b = random_machine("srbm", (11, 3), seed=6), random_machine("srbm", (11, 5), seed=7)
    truth = exact_log_z(b).log_z - exact_log_z(a).log_z
    res = ais(ratio_path(a, b, device=CUDA), n_chains=200, betas=301, seed=8, check=False)
    assert abs(res.log_ratio - truth) <= K_SIGMA * res.log_z_stderr


@pytest.mark.parametrize("operator", ["gibbs", "flip", "blend:0.4"])
def test_fused_sequential_sweep_on_cuda_equals_the_unit_by_unit_sweep(operator):
    model = random_machine("bm", (37, 5), seed=9, scale=0.8).to(CUDA)
    state = model.random_state(11, torch.Generator(device=CUDA).manual_seed(1))
    op = make_operator(operator)
    fused = sequential_update(
        model, state, 0, op, generator=torch.Generator(device=CUDA).manual_seed(7), chunk=7
    )
    ref = sequential_update_reference(
        model, state, 0, op, generator=torch.Generator(device=CUDA).manual_seed(7)
    )
    assert torch.equal(fused, ref)


def test_exact_samples_on_cuda_have_the_right_layers():
    model = random_machine("dbm", (5, 3, 4), seed=10).to(CUDA)
    x = exact_sample(model, 7, generator=torch.Generator(device=CUDA).manual_seed(0))
    assert [t.device.type for t in x.layers] == ["cuda"] * 3 and [t.shape[1] for t in x.layers] == [5, 3, 4]


@pytest.mark.parametrize(("kind", "method"), [("rbm", "cd"), ("srbm", "sap"), ("bm", "sap")])
def test_training_on_cuda_runs_and_is_reproducible(kind, method):
    x = bars_and_stripes()
    kw = dict(kind=kind, hidden=5, method=method, k=2, epochs=3, lr=0.1, batch_size=8, n_chains=16,
              seed=1, progress=False, device="cuda")  # fmt: skip
    a, hist = train_model(x, **kw)
    b, _ = train_model(x, **kw)
    assert all(p.device.type == "cuda" for p in a.parameters())
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(p, q), name
    assert len(hist) == 3


# -------------------------------------------------------------- Gaussian and categorical units
@pytest.mark.parametrize("units", ["gaussian", "categorical:3"])
def test_unit_rbms_on_cuda_give_the_cpu_exact_values_and_ais_within_its_band(units):
    from conftest import exact_visible_samples, unit_rbm

    from boltzkit.estimators import estimate_log_z

    model = unit_rbm(units, 5, 6, seed=21, scale=0.5)
    on_gpu = unit_rbm(units, 5, 6, seed=21, scale=0.5).to(CUDA)
    truth = exact_log_z(model).log_z
    assert exact_log_z(on_gpu).log_z == pytest.approx(truth, abs=1e-9)
    data = exact_visible_samples(model, 2000, seed=22)
    res = estimate_log_z(on_gpu, "ais", betas=2000, n_chains=100, base_rate_data=data.to(CUDA), seed=23)
    assert res.settings["device"].startswith("cuda")
    assert res.band.minus_3sigma <= truth <= res.band.plus_3sigma and abs(res.log_z - truth) < 0.1


@pytest.mark.parametrize("units", ["gaussian", "categorical:3"])
@pytest.mark.parametrize("spec", ["gibbs", "pt:3"])
def test_unit_rbm_chains_on_cuda_sample_the_exact_visible_means(units, spec):
    from conftest import exact_visible_samples, unit_rbm

    from boltzkit.samplers import sample

    model = unit_rbm(units, 4, 3, seed=24, scale=0.7)
    exact = exact_visible_samples(model, 20_000, seed=25)
    n = 20_000
    g = torch.Generator(device=CUDA).manual_seed(26)
    v = sample(model.to(CUDA), spec, n_chains=n, n_steps=40, generator=g).visible.cpu().to(F64)
    assert v.device.type == "cpu" and v.shape == exact.shape
    se = torch.sqrt(exact.var(0) / exact.shape[0] + v.var(0) / n)
    assert bool(((v.mean(0) - exact.mean(0)).abs() <= K_SIGMA * se).all())


@pytest.mark.parametrize("units", ["gaussian", "categorical:3"])
def test_unit_rbm_training_on_cuda_learns_and_is_reproducible(units):
    from conftest import exact_visible_samples, unit_rbm

    from boltzkit.estimators.likelihood import dataset_log_prob
    from boltzkit.learning import train_unit_rbm

    # the teacher and criterion of test_unit_types.py::test_cd_and_pcd_raise_the_held_out_log_likelihood
    teacher = unit_rbm(units, 6, 4, seed=11, scale=2.0)
    train, test = exact_visible_samples(teacher, 2000, seed=28), exact_visible_samples(teacher, 2000, seed=29)
    kw = dict(epochs=15, lr=0.05, batch_size=20, seed=0, momentum=0.5, init_scale=0.1, device="cuda")
    a, history = train_unit_rbm(train, teacher.visible_units, 4, **kw)
    b, _ = train_unit_rbm(train, teacher.visible_units, 4, **kw)
    assert all(p.device.type == "cuda" for p in a.parameters()) and len(history) == 15
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)

    def test_log_prob(model) -> float:
        model = model.to("cpu")
        return dataset_log_prob(model, test, exact_log_z(model)).mean_log_prob

    start, _ = train_unit_rbm(train, teacher.visible_units, 4, **{**kw, "epochs": 1, "lr": 1e-12})
    before, after, best = test_log_prob(start), test_log_prob(a), test_log_prob(teacher)
    assert after - before > 0.7 * (best - before) and after < best + 0.1


@pytest.mark.parametrize("units", ["gaussian", "categorical:3"])
def test_unit_dbms_on_cuda_give_the_cpu_exact_values_and_ais_within_its_band(units):
    from test_unit_dbm import unit_dbm

    from boltzkit.estimators import estimate_log_z
    from boltzkit.estimators.unit_dbm import exact_log_unnormalized, exact_sample_unit_dbm

    model = unit_dbm(units, (6, 5, 4), seed=31, scale=0.5)
    on_gpu = unit_dbm(units, (6, 5, 4), seed=31, scale=0.5).to(CUDA)
    truth = exact_log_z(model).log_z
    assert exact_log_z(on_gpu).log_z == pytest.approx(truth, abs=1e-9)
    data = exact_sample_unit_dbm(model, 500, torch.Generator().manual_seed(32)).layers[0]
    torch.testing.assert_close(
        exact_log_unnormalized(on_gpu, data.to(CUDA)).cpu(), exact_log_unnormalized(model, data)
    )
    res = estimate_log_z(on_gpu, "sandwich", betas=2000, n_chains=100, base_rate_data=data.to(CUDA), seed=33)
    assert res.band.minus_3sigma <= truth <= res.band.plus_3sigma and abs(res.log_z - truth) < 0.1


@pytest.mark.parametrize("units", ["gaussian", "categorical:3"])
def test_unit_dbm_training_on_cuda_learns_and_is_reproducible(units):
    from test_unit_dbm import mixture_data

    from boltzkit.estimators.unit_dbm import exact_log_unnormalized
    from boltzkit.learning import train_unit_dbm
    from boltzkit.learning.unit_dbm import init_unit_dbm

    x, held_out = mixture_data(units, 2000, 34), mixture_data(units, 2000, 35)
    # the settings of test_unit_dbm.py::test_training_learns_data_that_no_independent_model_fits
    kw = dict(epochs=15, lr=0.01 if units == "gaussian" else 0.05, batch_size=50, seed=1, device="cuda")
    a, history = train_unit_dbm(x, units, [4, 3], **kw)
    b, _ = train_unit_dbm(x, units, [4, 3], **kw)
    assert all(p.device.type == "cuda" for p in a.parameters()) and len(history) == 15
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)

    def score(model) -> float:
        model = model.to("cpu").double()
        return float(exact_log_unnormalized(model, held_out.double()).mean()) - exact_log_z(model).log_z

    start = init_unit_dbm(x, units, [4, 3], generator=torch.Generator().manual_seed(1))
    assert score(a) > score(start) + 1.0
