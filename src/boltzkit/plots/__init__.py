"""Plots drawn from what boltzkit computes and writes, each as a PNG file.

One function per plot; each takes data or the files boltzkit writes and an output path:

=========================== ============================================================================
:func:`plot_history`        learning curves of a training history (``train --history PATH``): the
                            exact (or AIS) log-likelihoods and the reconstruction error per epoch
:func:`plot_ais_course`     the course of an AIS run (``logz --method ais --trace FILE.npz``): states of
                            a few chains at chosen betas (S&M 2008, Fig. 2), log-weight variance and
                            ESS along beta
:func:`plot_logz_runs`      ``log Z_hat`` against the number of AIS runs with ``±3 sigma`` bars (S&M
                            2008, Fig. 3) from records with raw log-weights (``logz --keep-weights``)
:func:`plot_samples`        a grid of sample images (``sample --out FILE.npy``)
:func:`plot_acf`            energy autocorrelation functions per sampler (``mixing --out FILE.npz``;
                            Brügge et al. 2013, Fig. 4); :mod:`boltzkit.plots.mixing` also draws the
                            study's Fig. 3
=========================== ============================================================================

``boltzkit plot KIND FILE...
--out PNG`` calls these functions. matplotlib is an optional extra (``pip install
"boltzkit[plot]"``), imported only when a plot is drawn. This package sits at the top of the
layers, beside ``cli/``: it reads files and records of ``estimators/``, ``learning/`` and ``io/``;
nothing below imports it.
"""

from boltzkit.plots.ais import plot_ais_course, plot_logz_runs, read_logz_runs
from boltzkit.plots.history import plot_history, read_history
from boltzkit.plots.images import image_grid, image_shape_of, plot_samples
from boltzkit.plots.mixing import plot_acf

#: The kinds of ``boltzkit plot``, by name.
PLOTS = {
    "history": plot_history,
    "ais-course": plot_ais_course,
    "logz-runs": plot_logz_runs,
    "samples": plot_samples,
    "acf": plot_acf,
}

__all__ = [
    "PLOTS",
    "image_grid",
    "image_shape_of",
    "plot_acf",
    "plot_ais_course",
    "plot_history",
    "plot_logz_runs",
    "plot_samples",
    "read_history",
    "read_logz_runs",
]
