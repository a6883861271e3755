"""Synthetic toy data: Bars and Stripes, Artificial Modes.

Both are the small benchmarks of Brügge, Fischer & Igel (2013), Sec. 4 (4 x 4 images, 16 visible
units), small enough for exact log-likelihoods.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzkit._numerics import make_generator
from boltzkit.errors import DataError

__all__ = [
    "ARTIFICIAL_MODES_DEFAULT_N",
    "ARTIFICIAL_MODES_DEFAULT_P",
    "artificial_modes",
    "artificial_modes_prototypes",
    "artificial_modes_with_labels",
    "bars_and_stripes",
]

#: Default number of Artificial Modes samples (pylearn ``neal94_AC``: 2,500 per mode).
ARTIFICIAL_MODES_DEFAULT_N = 10_000
#: Default flip probability ``p_mut`` (pylearn's default; one of the two values in Brügge et al. 2013).
ARTIFICIAL_MODES_DEFAULT_P = 0.01


def bars_and_stripes(size: int = 4, *, distinct: bool = False) -> Tensor:
    """All Bars and Stripes patterns of a ``size`` x ``size`` image (MacKay 2003).

    A pattern picks a ``size``-bit vector ``b`` (bit ``l`` of the integer ``k`` is
    ``(k >> l) & 1``) and repeats it either along every row (``pixel[i, j] = b[j]``, vertical
    stripes) or down every column (``pixel[i, j] = b[i]``, horizontal bars): ``2 * 2**size``
    patterns, 32 for 4 x 4. The all-0 and all-1 images occur in both families.

    Convention: by default (``distinct=False``) all ``2 * 2**size`` patterns are returned, the two
    duplicates included, as in Shark's ``BarsAndStripes`` problem used by Brügge et al. (2013):
    first the ``2**size`` stripe patterns for ``k = 0, 1, ...``, then the ``2**size`` bar patterns.
    The data distribution then weights all-0 and all-1 by 2/32, and the best achievable average
    log-likelihood is ``(28 log(1/32) + 4 log(2/32)) / 32 = -3.3791`` per pattern (4 x 4).
    With ``distinct=True`` the second copies of all-0 and all-1 are dropped: ``2 * 2**size - 2``
    distinct patterns (30 for 4 x 4), best average log-likelihood ``log(1/30) = -3.4012``.

    Parameters
    ----------
    size
        Side of the square image, 1..12.
    distinct
        Drop the two duplicates (see above).

    Returns
    -------
    torch.Tensor
        float32 tensor of shape ``(2 * 2**size, size * size)`` (or two rows fewer), images
        row-major.
    """
    if not isinstance(size, int) or not 1 <= size <= 12:
        raise DataError("bars_and_stripes: size must be an integer in 1..12", got=size, expected="1..12")
    k = torch.arange(2**size)
    bits = ((k[:, None] >> torch.arange(size)) & 1).to(torch.float32)  # (2**size, size), b[j]
    stripes = bits[:, None, :].expand(-1, size, -1)  # pixel[i, j] = b[j]
    bars = bits[:, :, None].expand(-1, -1, size)  # pixel[i, j] = b[i]
    if distinct:
        bars = bars[1:-1]  # k = 0 (all 0) and k = 2**size - 1 (all 1) already occur as stripes
    return torch.cat([stripes, bars]).reshape(-1, size * size).contiguous()


def artificial_modes_prototypes() -> Tensor:
    """The four 4 x 4 modes of Artificial Modes (Desjardins et al. 2010).

    Row 0: all 0; row 1: all 1; row 2: left two columns 0, right two columns 1; row 3: its
    complement (left two 1, right two 0). Images row-major.

    Returns
    -------
    torch.Tensor
        float32 tensor of shape ``(4, 16)``.
    """
    right = torch.zeros(4, 4)
    right[:, 2:] = 1.0
    modes = torch.stack([torch.zeros(4, 4), torch.ones(4, 4), right, 1.0 - right])
    return modes.reshape(4, 16)


def artificial_modes_with_labels(
    n: int = ARTIFICIAL_MODES_DEFAULT_N,
    p_mut: float = ARTIFICIAL_MODES_DEFAULT_P,
    *,
    seed: int | torch.Generator = 0,
    shuffle: bool = True,
) -> tuple[Tensor, Tensor]:
    """Artificial Modes samples together with the mode each came from.

    Each sample is a copy of one of the four prototypes (:func:`artificial_modes_prototypes`)
    with every pixel flipped independently with probability ``p_mut`` (Desjardins et al. 2010;
    Brügge et al. 2013, Sec. 4, use ``p_mut`` = 0.01 and 0.1). The modes are used equally often:
    ``n // 4`` samples each, the first ``n % 4`` modes one more.

    Parameters
    ----------
    n
        Number of samples (at least 1).
    p_mut
        Flip probability per pixel, in [0, 1].
    seed
        Seed or ``torch.Generator`` (CPU).
    shuffle
        Return the samples in random order (default); otherwise grouped by mode 0, 1, 2, 3.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        Samples, float32 of shape ``(n, 16)``, and their modes, int64 of shape ``(n,)``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DataError("artificial modes: n must be a positive integer", got=n, expected="n >= 1")
    p = float(p_mut)
    if not 0.0 <= p <= 1.0:
        raise DataError(
            "artificial modes: p_mut must be a probability", got=p_mut, expected="0 <= p_mut <= 1"
        )
    generator = make_generator(seed)
    counts = [n // 4 + (1 if m < n % 4 else 0) for m in range(4)]
    labels = torch.repeat_interleave(torch.arange(4), torch.tensor(counts))
    if shuffle:
        labels = labels[torch.randperm(n, generator=generator)]
    prototypes = artificial_modes_prototypes()[labels]
    flips = (torch.rand((n, 16), generator=generator) < p).to(torch.float32)
    x = (prototypes + flips).remainder(2.0)  # XOR on 0/1 floats
    return x, labels


def artificial_modes(
    n: int = ARTIFICIAL_MODES_DEFAULT_N,
    p_mut: float = ARTIFICIAL_MODES_DEFAULT_P,
    *,
    seed: int | torch.Generator = 0,
    shuffle: bool = True,
) -> Tensor:
    """Artificial Modes samples, float32 of shape ``(n, 16)``.

    See :func:`artificial_modes_with_labels` for the parameters; this drops the mode labels.
    """
    return artificial_modes_with_labels(n, p_mut, seed=seed, shuffle=shuffle)[0]
