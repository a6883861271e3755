"""S3's values: its data sets, Tables 1-6 as transcribed from Brügge, Fischer & Igel (2013), and
the constants of its experiments (Sec. 4)."""

from __future__ import annotations

import math
from dataclasses import dataclass

BAS = "bars-and-stripes"
MNIST = "mnist"
AM1 = "artificial-modes:0.1"
AM01 = "artificial-modes:0.01"
#: S3's data sets, as ``--datasets`` names them.
DATASETS = (BAS, MNIST, AM1, AM01)
#: Best mean log-likelihood on the 32 Bars and Stripes patterns (two duplicates; Shark's list).
BAS_OPTIMUM = (28 * math.log(1 / 32) + 4 * math.log(2 / 32)) / 32
#: Names in the report.
NAMES = {
    BAS: "Bars and Stripes",
    MNIST: "MNIST, n = 10",
    AM1: "Artificial Modes, p_mut = 0.1",
    AM01: "Artificial Modes, p_mut = 0.01",
    "mnist500": "MNIST, n = 500",
}
#: Per data set: hidden units and minibatch (``None``: batch learning), S3 Sec. 4.2.
SHAPES = {BAS: (16, None), MNIST: (10, 100), AM1: (16, 100), AM01: (16, 100)}


@dataclass(frozen=True)
class PaperRow:
    """One row of S3 Tables 1, 5, 6: median maximum log-likelihood with G and with T; ``star``
    is ``"a"`` (G) or ``"b"`` (T) where S3 marks a significant difference."""

    algorithm: str
    lr: float
    gibbs: float
    flip: float
    star: str | None = None


def _rows(text: str) -> tuple[PaperRow, ...]:
    """Rows ``ALG LR G T`` with a trailing ``*`` on the starred value (transcribed from S3)."""
    out = []
    for line in text.strip().splitlines():
        alg, lr, g, t = line.split()
        star = "a" if g.endswith("*") else "b" if t.endswith("*") else None
        out.append(PaperRow(alg, float(lr), float(g.rstrip("*")), float(t.rstrip("*")), star))
    return tuple(out)


#: S3 Tables 1, 5 and 6, by (table, data set).
PAPER_LL: dict[tuple[str, str], tuple[PaperRow, ...]] = {
    ("table1", BAS): _rows("""
cd:5 0.01 -4.070406 -3.986813*
cd:5 0.05 -3.832875 -3.727781*
cd:5 0.1 -3.838406 -3.732438*
cd:10 0.01 -3.963563 -3.930687*
cd:10 0.05 -3.640219 -3.57625*
cd:10 0.1 -3.635781 -3.589219*
pt:5:1 0.01 -4.011406 -4.0095
pt:5:1 0.05 -3.675312 -3.636125*
pt:5:1 0.1 -3.8255 -3.77825
pt:5:5 0.01 -3.928125 -3.918781
pt:5:5 0.05 -3.515719 -3.500844*
pt:5:5 0.1 -3.565281 -3.540625*
pt:20:1 0.01 -3.974219 -3.977562
pt:20:1 0.05 -3.548969 -3.524406*
pt:20:1 0.1 -3.577812 -3.549812*
pt:20:5 0.01 -3.917969 -3.923781
pt:20:5 0.05 -3.470094 -3.466188*
pt:20:5 0.1 -3.478844 -3.472594*
"""),
    ("table1", MNIST): _rows("""
cd:5 0.01 -178.716 -177.958*
cd:5 0.05 -179.345 -178.873
cd:5 0.1 -179.007 -178.446*
cd:10 0.01 -176.495 -175.638*
cd:10 0.05 -176.844 -176.476
cd:10 0.1 -177.925 -176.586
pt:10:2 0.01 -182.283 -180.272*
pt:10:2 0.05 -182.303 -181.379*
pt:10:2 0.1 -181.727 -180.164
pt:10:5 0.01 -178.71 -178.215*
pt:10:5 0.05 -179.625 -178.708*
pt:10:5 0.1 -179.051 -178.504*
"""),
    ("table5", BAS): _rows("""
pcd:1 0.01 -4.944813* -5.131875
pcd:1 0.05 -4.917219 -4.754625*
pcd:1 0.1 -5.285469 -5.176563*
pcd:5 0.01 -4.067437 -4.000844*
pcd:5 0.05 -4.050906 -3.915938*
pcd:5 0.1 -4.209375 -4.124625*
pcd:10 0.01 -3.972812 -3.945219*
pcd:10 0.05 -3.8425 -3.769938*
pcd:10 0.1 -4.02 -3.917937*
"""),
    ("table5", MNIST): _rows("""
pcd:1 0.01 -185.536 -185.378*
pcd:1 0.05 -181.382 -180.905
pcd:1 0.1 -179.572 -180.502
pcd:5 0.01 -179.061 -177.939*
pcd:5 0.05 -178.195 -177.675
pcd:5 0.1 -176.897 -175.946
pcd:10 0.01 -175.799 -174.919*
pcd:10 0.05 -176.301 -175.446*
pcd:10 0.1 -176.208 -174.94
"""),
    ("table6", AM1): _rows("""
cd:5 0.01 -6.79103 -6.78603*
cd:5 0.05 -6.80241 -6.79473*
cd:10 0.01 -6.78564 -6.7833*
cd:10 0.05 -6.79646 -6.79682*
pcd:5 0.01 -6.79176 -6.78537*
pcd:5 0.05 -6.80292 -6.79679*
pcd:10 0.01 -6.78512 -6.78329*
pcd:10 0.05 -6.79575 -6.79372*
pt:10:2 0.01 -6.78282 -6.78325
pt:10:2 0.05 -6.79839 -6.79575
pt:10:5 0.01 -6.78206 -6.78213
pt:10:5 0.05 -6.7929 -6.79351
pt:10:10 0.01 -6.7827 -6.78203
pt:10:10 0.05 -6.79101 -6.79196
"""),
    ("table6", AM01): _rows("""
cd:5 0.01 -4.01644 -3.64562*
cd:5 0.05 -4.00452 -3.68796*
cd:10 0.01 -3.48928 -3.23056*
cd:10 0.05 -3.51262 -3.27728*
pcd:5 0.01 -3.9956 -3.6295*
pcd:5 0.05 -3.94864 -3.61392*
pcd:10 0.01 -3.46321 -3.21007*
pcd:10 0.05 -3.37534 -3.11163*
pt:10:2 0.01 -2.40041 -2.40195
pt:10:2 0.05 -2.40682 -2.40798
pt:10:5 0.01 -2.39929 -2.3992
pt:10:5 0.05 -2.40648 -2.40072*
pt:10:10 0.01 -2.39973 -2.40012
pt:10:10 0.05 -2.40188 -2.40078
"""),
}

#: S3 Table 2: mean autocorrelation times (G, T) and the gain 1 - tau_T / tau_G in %.
PAPER_TAU = {
    BAS: (22.46, 20.06, 10.67),
    AM1: (3.16, 2.19, 30.73),
    AM01: (6.00, 5.94, 1.06),
    MNIST: (488.26, 445.84, 8.69),
    "mnist500": (522.39, 432.12, 17.28),
}
#: S3 Table 3 (class changes in 10,000 samples) and Table 4 (samples before the first change):
#: 25 %, 50 %, 75 % quantiles by (data set, operator).
PAPER_CLASS_CHANGES = {
    (AM1, "gibbs"): (615, 637, 655),
    (AM1, "flip"): (919, 944, 958),
    (AM01, "gibbs"): (134, 148, 162),
    (AM01, "flip"): (175, 186, 199),
}
PAPER_FIRST_CHANGE = {
    (AM1, "gibbs"): (6, 13, 25),
    (AM1, "flip"): (3, 7, 14),
    (AM01, "gibbs"): (16, 41, 96),
    (AM01, "flip"): (10, 27, 63),
}
OPERATORS = ("gibbs", "flip")
