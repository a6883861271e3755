"""Requests too big for the machine: refused with the memory they need, warned with the time."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import boltzkit.resources as resources
from boltzkit.estimators import estimate_log_z
from boltzkit.estimators.ais import anneal
from boltzkit.estimators.paths import base_rate_path
from boltzkit.models.rbm import RBM
from boltzkit.resources import (
    Forecast,
    ResourceError,
    SlowRequestWarning,
    describe_allocation_failure,
    format_bytes,
    format_seconds,
    require_memory,
)


def test_require_memory_names_the_size_and_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "available_bytes", lambda device=None: 1_000_000)
    require_memory(999_999, what="a small thing", hint="none needed")
    with pytest.raises(
        ResourceError, match=r"a big thing needs about 2\.0 MB of memory.*1\.0 MB on this machine.*smaller"
    ):
        require_memory(2_000_000, what="a big thing", hint="ask for a smaller one.")


def test_torch_allocator_text_becomes_a_sentence() -> None:
    text = (
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 3136000000000 bytes. Error code 12 (Cannot allocate memory)"
    )
    sentence = describe_allocation_failure(text)
    assert sentence is not None and "3.1 TB" in sentence and "fewer hidden units" in sentence
    assert "20.0 GiB" not in (
        describe_allocation_failure("CUDA out of memory. Tried to allocate 20.00 GiB") or ""
    )
    assert "21.5 GB" in (describe_allocation_failure("CUDA out of memory. Tried to allocate 20.00 GiB") or "")
    assert describe_allocation_failure("mat1 and mat2 shapes cannot be multiplied") is None


def test_formats() -> None:
    assert format_bytes(512) == "512 bytes" and format_bytes(2.5e9) == "2.5 GB"
    assert format_seconds(30) == "about 30 seconds" and format_seconds(5400) == "about 90.0 minutes"
    assert format_seconds(3 * 86400) == "about 3.0 days" and "years" in format_seconds(1e12)


def test_forecast_warns_once_with_the_extrapolated_time() -> None:
    forecast = Forecast(1000, what="a loop of 1,000 steps", hint="shorten it.", limit_s=0.0, after_s=0.0)
    with pytest.warns(
        SlowRequestWarning, match=r"a loop of 1,000 steps will take about .* \(10 of 1,000 done"
    ):
        forecast.update(10)
    assert forecast.forecast_s is not None and forecast.forecast_s > 0
    quiet = Forecast(1000, what="a short loop", hint="", limit_s=math.inf, after_s=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowRequestWarning)
        forecast.update(20)  # once only
        quiet.update(10)


def _rbm() -> RBM:
    gen = torch.Generator().manual_seed(0)
    return RBM.random(6, 4, scale=0.5, generator=gen)


def test_ais_refuses_a_schedule_beyond_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "available_bytes", lambda device=None: 10_000)
    path = base_rate_path(_rbm())
    betas = torch.linspace(0, 1, 1001, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ResourceError, match="an AIS schedule of 1,001 betas needs about 40.0 kB"):
        anneal(path, betas, init=path.sample_start(4, gen), operator="gibbs", generator=gen)


def test_long_ais_and_enumeration_warn_with_their_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "SLOW_SECONDS", 0.0)
    monkeypatch.setattr(resources, "FORECAST_AFTER_S", 0.0)
    model = _rbm()
    with pytest.warns(SlowRequestWarning, match=r"AIS with 10 chains and 99 steps will take"):
        estimate_log_z(model, "ais", n_chains=10, betas=100, check=False, base_rate_data=torch.zeros(3, 6))
    with pytest.warns(SlowRequestWarning, match=r"exact log Z over 2\^4 states will take"):
        estimate_log_z(model, "exact")
