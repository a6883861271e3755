"""Seeded transforms: stochastic binarization and random image patches.

Both draw their randomness from an explicit seed or ``torch.Generator`` (never the global RNG),
so the same seed and torch version give the same data.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from boltzkit._numerics import bernoulli, make_generator
from boltzkit.errors import DataError

__all__ = ["binarize", "extract_patches"]


def _as_tensor(images: np.ndarray | Tensor, caller: str) -> Tensor:
    if isinstance(images, Tensor):
        return images
    a = np.asarray(images)
    if a.dtype.kind not in "biuf":
        raise DataError(f"{caller}: images must be numbers", got=f"an array of dtype {a.dtype}")
    return torch.from_numpy(np.ascontiguousarray(a))


def binarize(images: np.ndarray | Tensor, *, seed: int | torch.Generator = 0) -> Tensor:
    """Stochastic binarization: each pixel becomes 1 with probability equal to its intensity.

    This is how binarized MNIST was made (Salakhutdinov & Murray 2008, Sec. 5: "each pixel
    value was stochastically set to 1 in proportion to its pixel intensity").

    Parameters
    ----------
    images
        Grayscale intensities in [0, 1], any shape, e.g. ``(n, 784)`` or ``(n, 28, 28)``
        (divide 8-bit images by 255 first).
    seed
        Seed or ``torch.Generator`` (CPU) for the draws.

    Returns
    -------
    torch.Tensor
        float32 tensor of the same shape with values 0 and 1.

    Raises
    ------
    DataError
        Non-numeric input, or values outside [0, 1] (including NaN).
    """
    x = _as_tensor(images, "binarize")
    if x.dtype.is_complex:
        raise DataError("binarize: images must be real numbers in [0, 1]", got=str(x.dtype))
    p = x.detach().cpu().to(torch.float64)
    bad = ~((p >= 0) & (p <= 1))
    if bool(bad.any()):
        index = tuple(int(i) for i in torch.nonzero(bad)[0])
        raise DataError(
            "binarize: intensities must lie in [0, 1]",
            got=f"{p[index].item()!r} at index {index}",
            expected="values in [0, 1]",
            hint="divide 8-bit images by 255.",
        )
    generator = make_generator(seed)
    return bernoulli(p, generator).to(torch.float32)


def extract_patches(
    images: np.ndarray | Tensor,
    image_shape: tuple[int, int],
    *,
    size: int = 4,
    seed: int | torch.Generator = 0,
) -> Tensor:
    """One ``size`` x ``size`` patch at a uniformly random position of each image.

    The toy data set of Salakhutdinov (2008), Sec. 5: "training patches with 4x4 pixels, which
    were extracted from images of digits simply by placing a square at a random position in each
    of the 28x28 image". The top-left corner is uniform over all positions where the square fits
    entirely inside the image (``height - size + 1`` rows times ``width - size + 1`` columns).

    Parameters
    ----------
    images
        Shape ``(n, height * width)``, rows row-major images (any dtype).
    image_shape
        ``(height, width)``.
    size
        Side of the square patch.
    seed
        Seed or ``torch.Generator`` (CPU) for the positions.

    Returns
    -------
    torch.Tensor
        float32 tensor of shape ``(n, size * size)``, patches row-major, row ``i`` from image ``i``.

    Raises
    ------
    DataError
        When ``images`` is not ``(n, height * width)`` or the patch does not fit.
    """
    x = _as_tensor(images, "extract_patches")
    h, w = image_shape
    if x.dim() != 2 or x.shape[1] != h * w:
        raise DataError(
            "extract_patches: images must be a 2-D array of flattened images",
            got=f"shape {tuple(x.shape)}",
            expected=f"(n, {h * w}) for image_shape {image_shape}",
        )
    if not 1 <= size <= min(h, w):
        raise DataError(
            "extract_patches: patch size does not fit the images", got=size, expected=f"1..{min(h, w)}"
        )
    n = x.shape[0]
    generator = make_generator(seed)
    top = torch.randint(0, h - size + 1, (n,), generator=generator)
    left = torch.randint(0, w - size + 1, (n,), generator=generator)
    offsets = torch.arange(size)
    rows = (top[:, None] + offsets)[:, :, None]  # (n, size, 1)
    cols = (left[:, None] + offsets)[:, None, :]  # (n, 1, size)
    grid = x.reshape(n, h, w)
    patches = grid[torch.arange(n)[:, None, None], rows, cols]  # (n, size, size)
    return patches.reshape(n, size * size).to(torch.float32)
