"""Small numerically stable helpers shared by every layer.

All reductions that feed a partition function are done in float64 (see DESIGN.md, Numerics).
"""

from __future__ import annotations

import math

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
#: matrix as a sum of the weight rows of its ones (:func:`add_product`); measured on the CPU: at
#: 13% ones (binarized MNIST) the lookup takes 0.4x the dense product's time, at 50% 2.3x.
SPARSE_DENSITY = 0.2
#: ... and ``w`` has at least this many columns. Finding the ones costs a scan of ``x`` whatever the
#: width, so narrow products stay dense: at 13% ones, 100 x 784 states, one CPU thread, the lookup
#: takes 2.2-2.6x the dense product's time at 64 columns, 1.0-1.2x at 192, 0.8-0.9x at 256 and
#: 0.6-0.7x at 500 (float32 and float64); for a 16 x 16 RBM (S3's Bars and Stripes) 7-11x.
SPARSE_MIN_COLUMNS = 256


def add_product(bias: Tensor, x: Tensor, w: Tensor, out: Tensor | None = None) -> Tensor:
    """``bias + x @ w`` (``out`` given: ``out + x @ w``, in place), shape ``(n, w.shape[1])``.

    Where ``x`` holds {0, 1} states that are mostly 0 (on the CPU, ``w`` contiguous and at least
    :data:`SPARSE_MIN_COLUMNS` wide), each row of the product is the sum of the rows of ``w`` at the
    row's ones: ``embedding_bag`` over the indices of the ones, a fraction of the dense product's
    work (MNIST's states are 13% ones). The two agree to the rounding of the float sums. Anything
    else (probabilities, dense states, a narrow ``w``, a GPU) is the dense ``addmm``.
    """
    wide = w.dim() == 2 and w.shape[1] >= SPARSE_MIN_COLUMNS
    if x.device.type == "cpu" and x.dim() == 2 and wide and w.is_contiguous() and x.shape[0] > 0:
        n_ones = int(torch.count_nonzero(x))
        if n_ones < SPARSE_DENSITY * x.numel():
            rows, cols = x.nonzero(as_tuple=True)
            if bool((x[rows, cols] == 1).all()):  # binary states, not probabilities
                counts = torch.bincount(rows, minlength=x.shape[0])
                offsets = torch.zeros(x.shape[0], dtype=torch.long)
                torch.cumsum(counts[:-1], 0, out=offsets[1:])
                summed = torch.nn.functional.embedding_bag(cols, w, offsets, mode="sum")
                if out is not None:
                    return out.add_(summed)
                return summed.add_(bias)
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
    gen.manual_seed(int(seed))
    return gen


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` (or ``None``) means CUDA when present, else CPU."""
    from boltzkit.errors import BoltzkitError

    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):  # torch's own parse error, e.g. "tpu" or "gpu"
        raise BoltzkitError(
            "unknown device", got=repr(device), expected="'auto', 'cpu', 'cuda' or 'cuda:N'"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BoltzkitError(
            "CUDA was asked for but no CUDA device is available",
            got=str(device),
            expected="'cpu' or 'auto'",
            hint="use --device cpu, or install a CUDA build of PyTorch on a machine with a GPU.",
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
