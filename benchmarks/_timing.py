"""Timing helpers shared by the benchmarks: interleaved repetitions, medians, machine description.

Every benchmark times the library next to the bare cost of the work it cannot avoid (the matrix
products and random numbers of the same shapes and dtype), in the same process and with the
repetitions interleaved (library, bare, library, bare, ...), so that load from other processes hits
both alike. Times are the median of the repetitions; a ratio to the bare cost is the median of the
per-round ratios (:func:`paired_ratio`), which cancels most of the slow drifts of a shared machine.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock seconds of one call of ``fn`` (device synchronised)."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def median_seconds(fn: Callable[[], object], *, repeats: int, device: torch.device, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    return statistics.median(timed(fn, device) for _ in range(repeats))


def interleaved(
    fns: dict[str, Callable[[], object]],
    *,
    repeats: int,
    device: torch.device,
    warmup: int = 1,
    samples: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """Median seconds of each function, run in alternation so that machine noise hits all alike.

    ``warmup`` untimed rounds come first. When ``samples`` is given, every timing is appended to
    ``samples[name]``.
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn, device))
    if samples is not None:
        for k, v in times.items():
            samples.setdefault(k, []).extend(v)
    return {k: statistics.median(v) for k, v in times.items()}


def load_average() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None


class ForeignLoad:
    """Average number of cores busy with *other* processes between ``start()`` and ``stop()``.

    The load average counts this benchmark's own threads; this does not: it is the machine's busy
    time (``/proc/stat``) minus this process's CPU time, divided by the wall time. Near 0 means the
    numbers were taken on an otherwise idle machine. ``None`` where ``/proc/stat`` is missing.
    """

    def __init__(self) -> None:
        self._t0 = self._busy0 = self._own0 = None

    @staticmethod
    def _busy_seconds() -> float | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own_seconds() -> float:
        t = os.times()
        return t.user + t.system

    def start(self) -> ForeignLoad:
        self._t0, self._busy0, self._own0 = time.perf_counter(), self._busy_seconds(), self._own_seconds()
        return self

    def stop(self) -> float | None:
        busy = self._busy_seconds()
        if busy is None or self._busy0 is None:
            return None
        wall = time.perf_counter() - self._t0
        other = (busy - self._busy0) - (self._own_seconds() - self._own0)
        return max(0.0, other / wall) if wall > 0 else None


def reference_product_us(device: torch.device | str = "cpu", n: int = 200) -> float:
    """Median microseconds of one float32 ``(100,784) x (784,500)`` product (5 runs of ``n``).

    A speed probe of the machine at this moment: on a shared host it rises when neighbours are busy,
    which the load average inside this machine does not show. Compare it between runs.
    """
    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.rand(100, 784, generator=g, device=dev)
    b = torch.rand(784, 500, generator=g, device=dev)
    out = torch.empty(100, 500, device=dev)
    torch.mm(a, b, out=out)

    def burst() -> None:
        for _ in range(n):
            torch.mm(a, b, out=out)

    return statistics.median(timed(burst, dev) for _ in range(5)) / n * 1e6


def set_threads(n: int | None) -> None:
    """Use ``n`` threads in torch and in numpy's BLAS (scikit-learn); ``None`` leaves the defaults."""
    if n is None:
        return
    torch.set_num_threads(int(n))
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(n))
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        pass


def cpu_model() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def machine_info(device: torch.device) -> dict[str, Any]:
    """What the numbers depend on: CPU, cores, threads, library versions, GPU, load, date."""
    info: dict[str, Any] = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "device": str(device),
        "load_average": load_average(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    if device.type == "cpu":  # the lookup for sparse states, as this host chose it (or was told)
        from boltzkit._numerics import sparse_products

        info["sparse_products"] = "lookup" if sparse_products() else "dense"
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:  # pragma: no cover
        pass
    try:
        import sklearn

        info["sklearn"] = sklearn.__version__
    except ImportError:
        pass
    try:
        from threadpoolctl import threadpool_info

        info["numpy_blas"] = sorted(
            {f"{p['internal_api']} ({p['num_threads']} threads)" for p in threadpool_info()}
        )
    except ImportError:  # pragma: no cover
        pass
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def machine() -> str:
    """One line: CPU, torch version, threads, python."""
    return (
        f"{cpu_model()}; torch {torch.__version__}; {torch.get_num_threads()} threads; "
        f"python {platform.python_version()}; sparse states: {_products()}"
    )


def _products() -> str:
    from boltzkit._numerics import SPARSE_PRODUCTS_ENV, sparse_products

    told = os.environ.get(SPARSE_PRODUCTS_ENV, "auto")
    return f"{'lookup' if sparse_products() else 'dense product'} ({SPARSE_PRODUCTS_ENV}={told})"


# ---------------------------------------------------------------------------------- reporting
def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of ``a[i] / b[i]``: timings taken next to each other share the machine's
    state at that moment, so their ratio is steadier than the ratio of two medians."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def row(
    benchmark: str,
    what: str,
    seconds: float,
    *,
    bare_s: float | None = None,
    vs_bare: float | None = None,
    device: torch.device | str = "cpu",
    note: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """One result line. ``vs_bare`` defaults to ``seconds / bare_s`` when a bare cost is given; pass
    the :func:`paired_ratio` of the interleaved samples instead where there are any."""
    out: dict[str, Any] = {"benchmark": benchmark, "what": what, "seconds": seconds, "device": str(device)}
    if bare_s is not None:
        out["bare_s"] = bare_s
        out["vs_bare"] = seconds / bare_s if vs_bare is None else vs_bare
        out["ratio_of_medians"] = seconds / bare_s
    out["note"] = note
    out.update(extra)
    return out


def fmt_seconds(s: float) -> str:
    if s >= 100:
        return f"{s:.0f} s"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| benchmark | what | time (median) | × bare | note |", "|---|---|---:|---:|---|"]
    for r in rows:
        ratio = f"{r['vs_bare']:.2f}" if r.get("vs_bare") is not None else ""
        lines.append(
            f"| {r['benchmark']} | {r['what']} | {fmt_seconds(r['seconds'])} | {ratio} | {r['note']} |"
        )
    return "\n".join(lines)


def common_arguments(parser) -> None:
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (smoke test)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repetitions (median)")
    parser.add_argument("--threads", type=int, default=None, help="torch and BLAS threads (default: as set)")
    parser.add_argument("--json", default=None, help="also write the rows and machine info to this file")


def finish(rows: list[dict[str, Any]], device: torch.device, json_path: str | None, extra=None) -> None:
    import json

    info = machine_info(device)
    print(markdown_table(rows))
    print(
        f"\n{info['cpu']}; {info['cores']} cores; torch {info['torch']} ({info['torch_threads']} threads); "
        f"load average {info['load_average']}; {info['date']}"
    )
    if json_path:
        payload = {"machine": info, "rows": rows}
        if extra:
            payload.update(extra)
        with open(json_path, "w") as f:
            json.dump(payload, f, indent=2, default=str)
        print(f"wrote {json_path}")
