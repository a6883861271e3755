"""Binarized MNIST with the fixed binarization of Salakhutdinov & Murray (2008).

The data are the MNIST digits with each pixel set to 1 with probability equal to its intensity,
sampled once and then fixed (Salakhutdinov & Murray 2008, Sec. 5; distributed by Larochelle &
Murray 2011). Splits: 50,000 ``train``, 10,000 ``valid``, 10,000 ``test`` images of 28 x 28 =
784 pixels, row-major.

Where the files are looked for
------------------------------
1. the directory given explicitly (``data_dir=`` / the CLI's ``--data-dir``), then
2. the directory in the environment variable ``BOLTZKIT_DATA_DIR``, then
3. the per-user cache, ``$XDG_CACHE_HOME/boltzkit`` (``~/.cache/boltzkit`` when unset);

each is searched once, in this order. In each directory the names are
``binarized_mnist_{split}.mat`` (MATLAB copy, variable ``X``, uint8 ``(n, 784)``) and then
``binarized_mnist_{split}.amat`` (the canonical text file, one image a line). When neither is
found, the canonical ``.amat`` is downloaded into the cache (unless ``download=False`` or the
environment variable ``BOLTZKIT_OFFLINE`` is set to anything but ``0``), checked, and used.

Every load checks the shape and the content checksum (sha256 of ``numpy.packbits(X, axis=1)``,
the values in ``data/README.md``), which takes a few milliseconds and is independent of the file
format.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from boltzkit._host import default_cache_dir
from boltzkit.data.dataset import as_uint8, check_binary
from boltzkit.data.files import content_sha256, read_matrix, read_text_matrix
from boltzkit.errors import DataError

__all__ = [
    "MNIST_CONTENT_SHA256",
    "MNIST_IMAGE_SHAPE",
    "MNIST_SIZES",
    "MNIST_SPLITS",
    "MNIST_URL",
    "default_cache_dir",
    "download_mnist",
    "find_mnist_file",
    "load_mnist",
    "mnist_available",
    "mnist_filenames",
    "mnist_search_dirs",
]

_log = logging.getLogger(__name__)

#: The splits, in their usual order.
MNIST_SPLITS = ("train", "valid", "test")
#: Number of images in each split.
MNIST_SIZES = {"train": 50_000, "valid": 10_000, "test": 10_000}
#: Height and width of an image; rows are row-major.
MNIST_IMAGE_SHAPE = (28, 28)
#: sha256 of ``numpy.packbits(X, axis=1).tobytes()`` for the uint8 array ``X`` of each split.
MNIST_CONTENT_SHA256 = {
    "train": "727146c35424b019f3e350e1e69faa05644a0abaf787e3f4e1a9632220a13906",
    "valid": "a256ac44ae26be720fad8616a05ed6ecfd1619930d9a208379bb2a4405df5b6d",
    "test": "9fcd8da6f0fdf09b2ba30fe63a0bb784042a0de82563172530229b983e294ff2",
}
#: Canonical public copies of the ``.amat`` files (Larochelle's NADE distribution).
MNIST_URL = "http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/binarized_mnist_{split}.amat"

_DOWNLOAD_TIMEOUT_S = 15.0


def _check_split(split: str) -> None:
    if split not in MNIST_SPLITS:
        raise DataError(
            "unknown binarized MNIST split",
            got=repr(split),
            expected=" or ".join(repr(s) for s in MNIST_SPLITS),
        )


def mnist_filenames(split: str) -> tuple[str, str]:
    """File names looked for, in order: ``("binarized_mnist_{split}.mat", "...amat")``."""
    _check_split(split)
    stem = f"binarized_mnist_{split}"
    return f"{stem}.mat", f"{stem}.amat"


def mnist_search_dirs(data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Directories searched for the MNIST files, in order (see the module docstring).

    Parameters
    ----------
    data_dir
        Explicit directory; ``None`` uses ``BOLTZKIT_DATA_DIR`` when set.

    Returns
    -------
    list of Path
        ``data_dir``, then ``BOLTZKIT_DATA_DIR``, then the cache, each once.
    """
    env = os.environ.get("BOLTZKIT_DATA_DIR")
    candidates = [data_dir, env if env else None, default_cache_dir()]
    dirs: list[Path] = []
    for candidate in candidates:
        if candidate is None:
            continue
        path = Path(candidate).expanduser()
        if all(path.resolve() != d.resolve() for d in dirs):
            dirs.append(path)
    return dirs


def find_mnist_file(split: str, data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The first existing MNIST file for ``split`` in :func:`mnist_search_dirs`, else ``None``."""
    names = mnist_filenames(split)
    for directory in mnist_search_dirs(data_dir):
        for name in names:
            candidate = directory / name
            if candidate.is_file():
                return candidate
    return None


def mnist_available(data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Whether a file for each of the three splits exists where :func:`load_mnist` looks.

    Checks existence only (no download, no checksum), so it is cheap.
    """
    return all(find_mnist_file(split, data_dir) is not None for split in MNIST_SPLITS)


def _verify(x: np.ndarray, split: str, source: str) -> None:
    """Raise :class:`DataError` unless ``x`` is exactly the canonical ``split``."""
    expected_shape = (MNIST_SIZES[split], 784)
    hint = (
        f"the file is not the canonical binarized MNIST {split} split (corrupt, truncated or a "
        "different binarization); delete it and copy or download it again, or load it as a plain "
        "file path to skip the check."
    )
    if x.shape != expected_shape:
        raise DataError(
            f"{source}: wrong shape for binarized MNIST {split!r}",
            got=x.shape,
            expected=expected_shape,
            hint=hint,
        )
    digest = content_sha256(x)
    if digest != MNIST_CONTENT_SHA256[split]:
        raise DataError(
            f"{source}: content checksum mismatch for binarized MNIST {split!r}",
            got=digest,
            expected=MNIST_CONTENT_SHA256[split],
            hint=hint,
        )


def _downloads_allowed() -> bool:
    return os.environ.get("BOLTZKIT_OFFLINE", "0") in ("", "0")


def download_mnist(
    split: str,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    timeout: float = _DOWNLOAD_TIMEOUT_S,
) -> Path:
    """Download the canonical ``binarized_mnist_{split}.amat`` and check it.

    The file is written under a temporary name, parsed, checked against
    :data:`MNIST_CONTENT_SHA256` and only then renamed into place, so that an interrupted or
    corrupt download never leaves a file that looks complete.

    Parameters
    ----------
    split
        ``"train"``, ``"valid"`` or ``"test"``.
    cache_dir
        Target directory; :func:`default_cache_dir` when ``None``.
    timeout
        Seconds to wait on the connection (per network operation).

    Returns
    -------
    Path
        The downloaded file.

    Raises
    ------
    DataError
        Network failure, or content that is not the canonical split.
    """
    _check_split(split)
    target_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    url = MNIST_URL.format(split=split)
    dest = target_dir / mnist_filenames(split)[1]
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=target_dir)
    except OSError as err:
        raise DataError(
            "cannot create the cache directory for binarized MNIST",
            got=f"{target_dir}: {err}",
            hint="set BOLTZKIT_DATA_DIR to a writable directory holding the files.",
        ) from err
    tmp = Path(tmp_name)
    try:
        _log.info("downloading %s to %s", url, dest)
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
                shutil.copyfileobj(response, out, length=1 << 20)
        except (OSError, urllib.error.URLError) as err:
            raise DataError(
                f"download of binarized MNIST {split!r} failed",
                got=f"{url}: {err}",
            ) from err
        x = as_uint8(check_binary(read_text_matrix(tmp, sep=" "), source=url, n_visible=784))
        _verify(x, split, source=url)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def load_mnist(
    split: str = "train",
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool = True,
    verify: bool = True,
) -> np.ndarray:
    """Load one split of binarized MNIST.

    Parameters
    ----------
    split
        ``"train"`` (50,000 images), ``"valid"`` (10,000) or ``"test"`` (10,000).
    data_dir
        Directory holding the files; see the module docstring for the search order.
    download
        Try to download the canonical ``.amat`` into the cache when no file is found (also
        disabled by the environment variable ``BOLTZKIT_OFFLINE``).
    verify
        Check the shape and the content checksum (a few milliseconds).

    Returns
    -------
    numpy.ndarray
        ``uint8`` array of shape ``(n_images, 784)``, values 0 and 1, images row-major 28 x 28.

    Raises
    ------
    DataError
        Unknown split; files missing (the message names the directory and file names to use);
        content that is not binary or does not match the checksum.
    """
    _check_split(split)
    path = find_mnist_file(split, data_dir)
    if path is None:
        dirs = mnist_search_dirs(data_dir)
        reason = "downloads are disabled"
        if download and _downloads_allowed():
            try:
                path = download_mnist(split, dirs[-1])
            except DataError as err:
                detail = f"{err.what.rstrip('.')}: {err.got}" if err.got is not None else err.what
                reason = f"the download failed ({detail})"
        if path is None:
            mat_name, amat_name = mnist_filenames(split)
            raise DataError(
                f"binarized MNIST {split!r} split not found",
                got=f"no {mat_name} or {amat_name} in {', '.join(str(d) for d in dirs)}; {reason}",
                expected=f"the file {amat_name} (or {mat_name}) in {dirs[0]}",
                hint=(
                    f"put binarized_mnist_{{train,valid,test}}.amat (or the .mat copies) in {dirs[0]}, "
                    "or point --data-dir (data_dir) or the environment variable BOLTZKIT_DATA_DIR "
                    f"to the folder holding them. Canonical copies: {MNIST_URL.format(split=split)}"
                ),
            )
    x = as_uint8(check_binary(read_matrix(path), source=str(path), n_visible=784))
    if verify:
        _verify(x, split, source=str(path))
    return x
