"""Run every boltzkit benchmark in one process and print one Markdown table (and write JSON).

Each benchmark times the library next to the bare cost of the same work (the matrix products and
random numbers it needs, same shapes and dtype) with interleaved repetitions and reports medians;
see bench_cd.py, bench_exact.py, bench_ais.py, bench_sequential.py, bench_dbn.py,
bench_tempering.py and bench_trace.py, each of which also runs alone.

Run: python benchmarks/run.py [--quick] [--device cpu|cuda] [--threads N] [--json FILE]
     [--only cd,exact,ais,sequential,dbn,variational,tempering,trace] [--repeats N]

Set BOLTZKIT_DATA_DIR to the folder with binarized MNIST for the CD-1 benchmark (else random data).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_ais  # noqa: E402
import bench_cd  # noqa: E402
import bench_dbn  # noqa: E402
import bench_exact  # noqa: E402
import bench_sequential  # noqa: E402
import bench_tempering  # noqa: E402
import bench_trace  # noqa: E402
import bench_variational  # noqa: E402
from _timing import (  # noqa: E402
    ForeignLoad,
    common_arguments,
    finish,
    load_average,
    reference_product_us,
    set_threads,
)

BENCHMARKS = {
    "cd": bench_cd,
    "exact": bench_exact,
    "ais": bench_ais,
    "sequential": bench_sequential,
    "dbn": bench_dbn,
    "variational": bench_variational,
    "tempering": bench_tempering,
    "trace": bench_trace,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(p)
    p.add_argument(
        "--only",
        default="cd,exact,ais,sequential,dbn,variational,tempering,trace",
        help="comma-separated subset of cd, exact, ais, sequential, dbn, variational, tempering, trace",
    )
    p.set_defaults(json=str(Path(__file__).resolve().parent / "results.json"))
    a = p.parse_args(argv)
    set_threads(a.threads)
    dev = torch.device(a.device)
    names = [n.strip() for n in a.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {unknown}; choose from {sorted(BENCHMARKS)}")
    rows: list[dict] = []
    aims: list[str] = []
    loads = {"start": load_average()}
    seconds = {}
    foreign = {}
    probe = {}
    for name in names:
        mod = BENCHMARKS[name]
        t0 = time.perf_counter()
        print(f"[{name}] running (load average {load_average()}) ...", file=sys.stderr, flush=True)
        probe[f"before_{name}"] = reference_product_us(dev)
        meter = ForeignLoad().start()
        got = mod.run(device=a.device, quick=a.quick, repeats=a.repeats)
        foreign[name] = meter.stop()
        probe[f"after_{name}"] = reference_product_us(dev)
        seconds[name] = time.perf_counter() - t0
        rows.extend(got)
        if hasattr(mod, "aims"):
            aims.extend(mod.aims(got))
        loads[f"after_{name}"] = load_average()
    extra = {
        "aims": aims,
        "load_averages": loads,
        "other_processes_cores": foreign,
        "reference_product_us": probe,
        "wall_seconds": seconds,
        "quick": a.quick,
        "argv": sys.argv[1:],
    }
    finish(rows, dev, a.json, extra=extra)
    print("\nload averages (1, 5, 15 min; they include this run's own threads):", loads)
    shown = {k: (None if v is None else round(v, 2)) for k, v in foreign.items()}
    print("cores busy with other processes during each benchmark (0 = quiet machine):", shown)
    print(
        "speed probe, one float32 (100,784)x(784,500) product in µs (lower = quieter host):",
        {k: round(v) for k, v in probe.items()},
    )
    if aims:
        print("\n" + "\n".join(f"- {s}" for s in aims))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
