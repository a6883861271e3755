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
    res = ais(base_rate_path(model, device=CUDA), n_chains=200, betas=301, sampler=sampler, seed=4)
    assert res.settings["device"].startswith("cuda")
    assert abs(res.log_z - exact) <= K_SIGMA * res.log_z_stderr
    rev = reverse_ais(base_rate_path(model, device=CUDA), n_chains=200, betas=301, sampler=sampler, seed=5)
    assert rev.log_z >= exact - K_SIGMA * rev.log_z_stderr


def test_ratio_path_on_cuda():
    a, b = random_machine("srbm", (11, 3), seed=6), random_machine("srbm", (11, 5), seed=7)
    truth = exact_log_z(b).log_z - exact_log_z(a).log_z
    res = ais(ratio_path(a, b, device=CUDA), n_chains=200, betas=301, seed=8)
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
