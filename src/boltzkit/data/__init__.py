"""Data sets as binary torch tensors.

Everything a learner or the command line needs goes through :func:`load_dataset`, which takes a
spec string (a built-in name such as ``"mnist"``, ``"mnist-patches"``, ``"bars-and-stripes"``,
``"artificial-modes:0.1"``, or a file path) and returns a frozen :class:`Dataset` whose ``x`` is a
float32 ``(n_samples, n_visible)`` tensor of 0/1 values.

Modules: :mod:`~boltzkit.data.dataset` (the record and the binary check),
:mod:`~boltzkit.data.files` (reading ``.npy .npz .mat .amat .txt .csv``),
:mod:`~boltzkit.data.fasta` (aligned sequences as category indices, for categorical units),
:mod:`~boltzkit.data.mnist` (binarized MNIST: search path, download, checksums),
:mod:`~boltzkit.data.transforms` (stochastic binarization, random patches),
:mod:`~boltzkit.data.synthetic` (Bars and Stripes, Artificial Modes),
:mod:`~boltzkit.data.registry` (spec parsing and :func:`load_dataset`).
"""

from boltzkit.data.dataset import Dataset, check_binary, shared_rows
from boltzkit.data.fasta import ALPHABETS, alphabet_letters, read_fasta, write_fasta
from boltzkit.data.files import FILE_EXTENSIONS, content_sha256, load_binary_file
from boltzkit.data.mnist import (
    MNIST_CONTENT_SHA256,
    MNIST_SIZES,
    MNIST_SPLITS,
    default_cache_dir,
    download_mnist,
    load_mnist,
    mnist_available,
)
from boltzkit.data.registry import (
    DATASET_NAMES,
    DATASET_SPLITS,
    derive_seed,
    load_dataset,
    load_values,
    parse_spec,
)
from boltzkit.data.synthetic import (
    artificial_modes,
    artificial_modes_prototypes,
    artificial_modes_with_labels,
    bars_and_stripes,
)
from boltzkit.data.transforms import binarize, extract_patches

__all__ = [
    "shared_rows",
    "ALPHABETS",
    "DATASET_NAMES",
    "DATASET_SPLITS",
    "FILE_EXTENSIONS",
    "MNIST_CONTENT_SHA256",
    "MNIST_SIZES",
    "MNIST_SPLITS",
    "Dataset",
    "alphabet_letters",
    "artificial_modes",
    "artificial_modes_prototypes",
    "artificial_modes_with_labels",
    "bars_and_stripes",
    "binarize",
    "check_binary",
    "content_sha256",
    "default_cache_dir",
    "derive_seed",
    "download_mnist",
    "extract_patches",
    "load_binary_file",
    "load_dataset",
    "load_values",
    "load_mnist",
    "mnist_available",
    "parse_spec",
    "read_fasta",
    "write_fasta",
]
