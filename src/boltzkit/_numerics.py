"""Small numerically stable helpers shared by every layer.

All reductions that feed a partition function are done in float64 (see DESIGN.md, Numerics).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

LOG2 = math.log(2.0)


def softplus(x: Tensor) -> Tensor:
    """Stable ``log(1 + exp(x))`` that never overflows.

    torch's kernel returns ``x`` itself above its threshold; at 40 the omitted ``log1p(exp(-x))``
    (< 4.3e-18) is below float64 resolution of the result, and ``exp(40)`` cannot overflow even
    in float32, so this is exact to working precision at the speed of the fused kernel.
    """
    return torch.nn.functional.softplus(x, beta=1.0, threshold=40.0)


def bernoulli(p: Tensor, generator: torch.Generator) -> Tensor:
    """Draw {0, 1} with probabilities ``p`` (same dtype as ``p``) from ``generator``."""
    u = torch.rand(p.shape, generator=generator, device=p.device, dtype=p.dtype)
    # the comparison written into the uniforms' own buffer: no bool tensor and no cast (the
    # draw costs 1.0-1.1x the bare torch.rand, where (u < p).to(dtype) cost 1.2-1.4x)
    return torch.lt(u, p, out=u)


#: A batch of {0, 1} states whose fraction of ones is below this gets its product with a weight
#: matrix as a sum of the weight rows of its ones (:func:`add_product`), where the host runs the
#: lookup faster (:func:`sparse_products`); measured on an AMD EPYC: at 13% ones (binarized MNIST)
#: the lookup takes 0.4x the dense product's time, at 50% 2.3x.
SPARSE_DENSITY = 0.2
#: ... and ``w`` has at least this many columns. Finding the ones costs a scan of ``x`` whatever the
#: width, so narrow products stay dense: at 13% ones, 100 x 784 states, one CPU thread, the lookup
#: takes 2.2-2.6x the dense product's time at 64 columns, 1.0-1.2x at 192, 0.8-0.9x at 256 and
#: 0.6-0.7x at 500 (float32 and float64); for a 16 x 16 RBM (S3's Bars and Stripes) 7-11x.
SPARSE_MIN_COLUMNS = 256


#: Environment variable that fixes whether :func:`add_product` may take the lookup on this CPU:
#: ``on``, ``off``, ``auto`` (the default: measured once per host and remembered,
#: :func:`sparse_products`) or ``measure`` (measure again now, and remember the new figures).
SPARSE_PRODUCTS_ENV = "BOLTZKIT_SPARSE_PRODUCTS"
SPARSE_PRODUCTS_SETTINGS = {
    "on": True,
    "1": True,
    "off": False,
    "0": False,
    "auto": None,
    "": None,
    "measure": None,
}
#: ``auto`` takes the lookup only where it beats the dense product by this factor at MNIST's
#: density: the hosts measured so far lie at 0.4x (an AMD EPYC), 0.6-0.85x (another AMD EPYC, whose
#: epochs ran no faster with it) and 1.5-2.1x (an Intel Xeon).
SPARSE_MARGIN = 0.8
_sparse_products: bool | None = None


def _time_lookup_against_dense() -> tuple[float, float]:
    """Seconds of the lookup and of the dense product, each the median of 7 alternating rounds,
    on the reference work: 100 x 784 states at 13% ones (binarized MNIST) times a float32
    784 x 500 matrix on the CPU, at the current number of torch threads (about 10 ms in all)."""
    kw = {"dtype": torch.float32, "device": "cpu"}
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(100, 784, generator=g, **kw) < 0.13).to(torch.float32)
    w = torch.randn(784, 500, generator=g, **kw)
    bias = torch.zeros(500, **kw)
    lookup, dense = [], []
    for _ in range(8):
        t0 = time.perf_counter()
        _lookup_product(bias, x, w, None)
        t1 = time.perf_counter()
        torch.addmm(bias, x, w)
        t2 = time.perf_counter()
        lookup.append(t1 - t0)
        dense.append(t2 - t1)
    return sorted(lookup[1:])[3], sorted(dense[1:])[3]


def _measured_on_this_host(again: bool) -> bool:
    """The lookup's and the dense product's times on this host (:func:`_time_lookup_against_dense`),
    measured once per host and remembered (:func:`boltzkit._host.remembered`); the lookup where it
    is faster by :data:`SPARSE_MARGIN`."""
    from boltzkit._host import remembered

    def measure() -> dict:
        lookup, dense = _time_lookup_against_dense()
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return {"lookup_s": lookup, "dense_s": dense, "measured": when}

    def faster(record: dict) -> bool:
        return float(record["lookup_s"]) < SPARSE_MARGIN * float(record["dense_s"])

    try:
        return faster(remembered("sparse_products", measure, again=again))
    except (KeyError, TypeError, ValueError):  # a record edited by hand: measure afresh
        return faster(remembered("sparse_products", measure, again=True))


def sparse_products() -> bool:
    """Whether :func:`add_product` takes the lookup for sparse binary states on the CPU.

    Which one is faster depends on the host, not on the work: at 13% ones, the lookup took 0.4x the
    dense product's time on an AMD EPYC (2026-11-26) and 1.5-2.1x on an Intel Xeon whose matrix
    products are fast and whose ``nonzero`` and gathers are slow (2026-12-02, BENCHMARKS.md). So
    the choice is read from :data:`SPARSE_PRODUCTS_ENV` (``on`` / ``off``) or, by default, measured
    at the first product (:data:`SPARSE_MARGIN`). The measurement is made once per host (CPU,
    torch version and threads) and remembered in the per-user cache (:mod:`boltzkit._host`), so
    that every process on the host chooses alike: measured in each process, a host near the margin
    or busy while it measured chose differently from one process to the next (0.8-34x here, beside
    other work). ``measure`` measures again and keeps the new figures. The two paths agree to the
    rounding of float sums, and chains that are sampled from them drift apart from there on: a
    training checkpoint records the choice and a resumed run takes it again
    (:func:`sparse_products_as`), so that it ends with an uninterrupted run's parameters, and a
    trained model's metadata records it too.
    """
    global _sparse_products
    if _sparse_products is None:
        setting = sparse_products_setting()
        told = SPARSE_PRODUCTS_SETTINGS[setting]
        if told is None:
            try:
                told = _measured_on_this_host(again=setting == "measure")
            except RuntimeError:  # a build without the lookup's kernels: the dense product serves
                told = False
        _sparse_products = told
    return _sparse_products


def sparse_products_setting() -> str:
    """:data:`SPARSE_PRODUCTS_ENV` as read (``"auto"`` when unset; :data:`SPARSE_PRODUCTS_SETTINGS`
    says which fix a choice: ``on``/``1`` and ``off``/``0``), or a clear error."""
    setting = os.environ.get(SPARSE_PRODUCTS_ENV, "auto").strip().lower()
    if setting not in SPARSE_PRODUCTS_SETTINGS:
        from boltzkit.errors import BoltzkitError

        raise BoltzkitError(
            f"cannot read ${SPARSE_PRODUCTS_ENV}",
            got=repr(setting),
            expected="on, off, auto (the default: measured on this machine once) or measure (again)",
            hint=f"unset {SPARSE_PRODUCTS_ENV}, or set it to on or off.",
        )
    return setting


def set_sparse_products(value: bool | None) -> None:
    """Fix :func:`sparse_products` for this process (``None``: decide again at the next product)."""
    global _sparse_products
    _sparse_products = None if value is None else bool(value)


@contextmanager
def sparse_products_as(value: bool | None) -> Iterator[None]:
    """Within the block :func:`add_product` takes the lookup (``True``) or not (``False``), as a
    resumed run's checkpoint says; ``None`` leaves this process's choice. The choice before the
    block comes back after it."""
    global _sparse_products
    kept = _sparse_products
    if value is not None:
        _sparse_products = bool(value)
    try:
        yield
    finally:
        _sparse_products = kept


def _lookup_product(bias: Tensor, x: Tensor, w: Tensor, out: Tensor | None) -> Tensor | None:
    """``bias + x w`` (or ``out + x w``) as sums of the rows of ``w`` at the ones of ``x``, or
    ``None`` where ``x`` is not sparse or not binary."""
    n_ones = int(torch.count_nonzero(x))
    if n_ones < SPARSE_DENSITY * x.numel():
        rows, cols = x.nonzero(as_tuple=True)
        if bool((x[rows, cols] == 1).all()):  # binary states, not probabilities
            counts = torch.bincount(rows, minlength=x.shape[0])
            offsets = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
            torch.cumsum(counts[:-1], 0, out=offsets[1:])
            summed = torch.nn.functional.embedding_bag(cols, w, offsets, mode="sum")
            if out is not None:
                return out.add_(summed)
            return summed.add_(bias)
    return None


def add_product(bias: Tensor, x: Tensor, w: Tensor, out: Tensor | None = None) -> Tensor:
    """``bias + x @ w`` (``out`` given: ``out + x @ w``, in place), shape ``(n, w.shape[1])``.

    Where ``x`` holds {0, 1} states that are mostly 0 (on the CPU, ``w`` contiguous and at least
    :data:`SPARSE_MIN_COLUMNS` wide), each row of the product is the sum of the rows of ``w`` at the
    row's ones: ``embedding_bag`` over the indices of the ones, a fraction of the dense product's
    work (MNIST's states are 13% ones), taken where this host runs it faster
    (:func:`sparse_products`). The two agree to the rounding of the float sums. Anything else
    (probabilities, dense states, a narrow ``w``, a GPU) is the dense ``addmm``.
    """
    wide = w.dim() == 2 and w.shape[1] >= SPARSE_MIN_COLUMNS
    if (
        x.device.type == "cpu"
        and x.dim() == 2
        and wide
        and w.is_contiguous()
        and x.shape[0] > 0
        and sparse_products()
    ):
        summed = _lookup_product(bias, x, w, out)
        if summed is not None:
            return summed
    return torch.addmm(bias, x, w) if out is None else out.addmm_(x, w)


def log_mean_exp(x: Tensor, dim: int = -1) -> Tensor:
    """``log(mean(exp(x)))`` along ``dim``, shifted by the maximum, in float64."""
    x = x.to(torch.float64)
    return torch.logsumexp(x, dim=dim) - math.log(x.shape[dim])


def log_sub_exp(a: float, b: float) -> float | None:
    """``log(exp(a) - exp(b))`` for ``a >= b``; ``None`` when the difference is not positive."""
    if not b < a:
        return None
    return a + math.log(-math.expm1(b - a))


def log_add_exp(a: float, b: float) -> float:
    """``log(exp(a) + exp(b))`` without overflow."""
    m = max(a, b)
    if m == -math.inf:
        return -math.inf
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def tensors_digest(tensors: dict[str, Tensor], *, prefix: str = "") -> str:
    """SHA-256 (hex) of ``prefix`` and named tensors: each one's name, dtype, shape and bytes, in
    the order of their names. A checkpoint keeps the digest of its arrays (a flipped bit is then
    refused, not resumed from); a model's :meth:`~boltzkit.models.base.EnergyModel.fingerprint`
    is the digest of its parameters."""
    digest = hashlib.sha256(prefix.encode())
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def make_generator(seed: int | torch.Generator | None, device: torch.device | str = "cpu") -> torch.Generator:
    """Return a ``torch.Generator`` on ``device`` seeded with ``seed``.

    A generator passed in is returned unchanged. ``None`` draws a fresh seed from the operating
    system (never from torch's global RNG), so that unseeded runs differ but the global state is
    untouched.
    """
    if isinstance(seed, torch.Generator):
        return seed
    device = torch.device(device)
    gen = torch.Generator(device=device)
    if seed is None:
        import secrets

        seed = secrets.randbits(63)
    from boltzkit.errors import BoltzkitError, whole_number

    seed = whole_number(seed, "a seed", hint="give an integer from 0 to 2^63 - 1, or a torch.Generator")
    if not 0 <= seed < 2**63:  # as the command line's --seed (torch would wrap a negative one)
        raise BoltzkitError(
            "a seed is out of range", got=repr(seed), expected="an integer from 0 to 2^63 - 1"
        )
    gen.manual_seed(seed)
    return gen


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """The one check of a device: ``"auto"`` (or ``None``) means CUDA when present, else CPU;
    otherwise ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (or the same as a ``torch.device``), with N
    an existing CUDA device. Any other name, including device types that torch knows but
    boltzkit does not run on (``mps``, ``meta``, ``xpu`` ...) or an indexed CPU, is refused."""
    from boltzkit.errors import BoltzkitError

    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    expected = "'auto', 'cpu', 'cuda' or 'cuda:N'"
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str) and re.fullmatch(r"cpu|cuda(:\d+)?", device.strip()):
        dev = torch.device(device.strip())
    else:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda") or (dev.type == "cpu" and dev.index not in (None, 0)):
        raise BoltzkitError(
            "unknown device",
            got=repr(str(device)) if isinstance(device, torch.device) else repr(device),
            expected=expected,
            hint="boltzkit runs on the CPU or on CUDA GPUs only.",
        )
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BoltzkitError(
            "CUDA was asked for but no CUDA device is available",
            got=str(device),
            expected="'cpu' or 'auto'",
            hint="use --device cpu, or install a CUDA build of PyTorch on a machine with a GPU.",
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise BoltzkitError(
            "no such CUDA device",
            got=str(device),
            expected="'cuda:0'" if count == 1 else f"'cuda:0' to 'cuda:{count - 1}' ({count} devices)",
            hint="use --device cuda for the first GPU, or check nvidia-smi / CUDA_VISIBLE_DEVICES.",
        )
    return dev


def as_beta(beta: float | Tensor, like: Tensor) -> float | Tensor:
    """Broadcastable inverse temperature: a float stays a float; a per-chain tensor of shape
    ``(n_chains,)`` becomes ``(n_chains, 1)`` with ``like``'s dtype and device."""
    if isinstance(beta, Tensor):
        if beta.dim() == 0:
            return float(beta)
        return beta.to(dtype=like.dtype, device=like.device).reshape(-1, 1)
    return float(beta)
