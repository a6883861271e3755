"""Training recipes: named, documented sets of every choice that decides how good a trained model is.

Hyperparameters alone do not make a recipe. Training a 784-500 RBM by CD-1 for 10 epochs with a
learning rate of 0.05 gives a test log-probability of about -165 nats (boltzkit's runs before
recipes existed); the same CD-1 with the reconstruction, initialisation, momentum schedule,
weight decay and learning-rate decay of the recipe ``sm2008-cd1`` gives -121.3 after 100 epochs
(docs/results.md), where S&M 2008 report -125.53. A :class:`Recipe` fixes all of it:

* the learning rate and its schedule by update (:class:`~boltzkit.learning.schedules.LRSchedule`);
* the momentum schedule by epoch (:class:`~boltzkit.learning.schedules.MomentumSchedule`);
* weight decay (on the couplings only);
* initialisation: the scale of the random couplings and the visible biases (zero, or the log-odds
  of the data means);
* batch size, the learning method (CD-k, PCD/SAP, PT), ``k`` and its schedule over epochs, the
  transition operator and the number of persistent chains;
* what CD's negative phase uses for the last visible update (a sample, or its mean);
* optional centering (Melchior, Fischer & Wiskott 2016);
* optional iterate averaging of the parameters (Polyak & Juditsky 1992; [SCMF10]);
* for a DBN, what the next layer is trained on (samples or probabilities of q).

Every field says where its value comes from (:attr:`Recipe.sources`). Recipes are frozen;
``recipe.replace(epochs=10)`` gives a variant, and a trained model's metadata records the
recipe's name, the settings it trained by (:func:`recipe_settings`) and, from the command line,
those in which they depart from the named recipe (``recipe_overrides``,
:func:`recipe_differences`). ``boltzkit train --recipe NAME``, :func:`boltzkit.learning.train_model`
(``recipe=``) and the paper reproductions all read recipes from :data:`RECIPES`; ``boltzkit train
--list-recipes`` prints them.

References
----------
- [HS06] G. Hinton and R. Salakhutdinov, "Reducing the dimensionality of data with neural
  networks", Science 2006, and its published MATLAB code (``rbm.m``), which S1 and S2 trained with.
- [H10] G. Hinton, "A practical guide to training restricted Boltzmann machines", UTML TR
  2010-003.
- [S1] R. Salakhutdinov and I. Murray, "On the quantitative analysis of deep belief networks",
  ICML 2008.
- [S2] R. Salakhutdinov, "Learning and evaluating Boltzmann machines", UTML TR 2008-002.
- [RS08] R. Salakhutdinov's published MATLAB code for RBMs and DBMs (``rbm.m``), in which the
  number of CD steps grows as ``CD = ceil(epoch/20)`` and the learning rates are divided by it.
- [T08] T. Tieleman, "Training restricted Boltzmann machines using approximations to the
  likelihood gradient", ICML 2008.
- [M16] J. Melchior, A. Fischer and L. Wiskott, "How to center deep Boltzmann machines", JMLR 2016.
- [SCMF10] K. Swersky, B. Chen, B. Marlin and N. de Freitas, "A tutorial on stochastic
  approximation algorithms for training restricted Boltzmann machines and deep belief nets",
  ITA 2010.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from boltzkit.errors import BoltzkitError, positive_int
from boltzkit.learning.averaging import parse_average
from boltzkit.learning.centering import parse_centering
from boltzkit.learning.phases import RECONSTRUCTIONS
from boltzkit.learning.schedules import (
    method_lr_schedule,
    parse_k_schedule,
    parse_lr_schedule,
    parse_momentum,
)

#: How a recipe initialises the visible biases.
VBIAS_INITS = ("data", "zero")
#: What a DBN's upper layers are trained on.
LAYER_DATA = ("samples", "probs")
#: What a recipe is meant for: any training, a DBN's layers above a trained bottom (from the
#: transposed layer below), or training further a model already trained (``init``).
RECIPE_USES = ("any", "upper-layers", "fine-tuning")
#: What a recipe says of itself rather than of the training: its name, texts and use. A run records
#: its settings without them (:func:`recipe_settings`) and resumes under the same settings by any name.
RECIPE_TEXTS = ("name", "summary", "meant_for", "sources")


@dataclass(frozen=True)
class Recipe:
    """Everything :func:`~boltzkit.learning.api.train_model` needs besides the data and the
    model's size.

    Attributes
    ----------
    name, summary
        The registry name and a one-line description.
    method
        ``"cd"``, ``"pcd"``, ``"sap"`` or ``"pt"``.
    k, k_schedule
        Sweeps per update, fixed or by epoch (``"linear:1:25"``).
    epochs, batch_size
        Passes over the data and examples per update.
    lr, lr_schedule
        Learning rate and its schedule by update (``"constant"``, ``"linear"``,
        ``"linear-after:E"``, ``"inverse:E"``; ``None``: linear for persistent chains, constant
        for CD).
    momentum
        Momentum or its schedule by epoch (``"0.5,0.9@5"``).
    weight_decay
        L2 penalty on the couplings.
    init_scale
        Standard deviation of the initial couplings.
    init_vbias
        ``"data"``: the log-odds of the data means ([H10] Sec. 8); ``"zero"``.
    reconstruction
        CD's last visible update: ``"sample"`` or ``"mean"`` ([HS06]; [H10] Sec. 3.2).
    sampler, n_chains, temperatures
        Transition operator; persistent chains (per replica for PT); PT replicas.
    centering
        ``None``, or a centering spec ``"average"``, ``"data"`` or ``"model"`` with an optional
        ``":RATE"`` ([M16]).
    average
        ``None``, or an iterate average ``"ema:DECAY[@E]"`` or ``"polyak:E"``
        (:mod:`boltzkit.learning.averaging`; [SCMF10]): the trained model holds the average.
    layer_data
        What a DBN's upper layers are trained on: ``"samples"`` (S1 Sec. 4.1) or ``"probs"``.
    meant_for
        What the recipe is made for (:data:`RECIPE_USES`): ``"any"``; ``"upper-layers"``, a DBN's
        layers above a trained bottom, each started as the transposed layer below; or
        ``"fine-tuning"``, a model already trained (``train_model(init=...)``, ``--init``). Not a
        training setting: :func:`recipe_settings` leaves it out, a resume does not compare it, and
        a recipe used otherwise trains as told, with a warning (:func:`recipe_misuse`).
    sources
        For each setting the source its value follows.
    """

    name: str
    summary: str
    method: str = "cd"
    k: int = 1
    k_schedule: str | None = None
    epochs: int = 1
    batch_size: int = 100
    lr: float = 0.05
    lr_schedule: str | None = "constant"
    momentum: str = "0"
    weight_decay: float = 0.0
    init_scale: float = 0.01
    init_vbias: str = "data"
    reconstruction: str = "sample"
    sampler: str = "gibbs"
    n_chains: int = 100
    temperatures: int = 10
    centering: str | None = None
    average: str | None = None
    layer_data: str = "samples"
    meant_for: str = "any"
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        parse_k_schedule(self.k_schedule if self.k_schedule is not None else self.k)
        parse_lr_schedule(self.lr_schedule)
        parse_momentum(self.momentum)
        parse_centering(self.centering)
        if self.average is not None and not isinstance(self.average, str):
            raise BoltzkitError(
                f"recipe {self.name!r}: average must be a spec string",
                got=repr(self.average),
                expected="None, 'none', 'ema:DECAY[@E]' or 'polyak:E'",
            )
        parse_average(self.average)
        checks = (
            (self.init_vbias in VBIAS_INITS, "init_vbias", VBIAS_INITS),
            (self.reconstruction in RECONSTRUCTIONS, "reconstruction", RECONSTRUCTIONS),
            (self.layer_data in LAYER_DATA, "layer_data", LAYER_DATA),
            (self.meant_for in RECIPE_USES, "meant_for", RECIPE_USES),
            (self.method in ("cd", "pcd", "sap", "pt"), "method", ("cd", "pcd", "sap", "pt")),
        )
        for ok, what, allowed in checks:
            if not ok:
                raise BoltzkitError(
                    f"recipe {self.name!r}: unknown {what}",
                    got=repr(getattr(self, what)),
                    expected=", ".join(allowed),
                )
        for what in ("epochs", "batch_size", "k", "n_chains", "temperatures"):
            positive_int(getattr(self, what), f"recipe {self.name!r}: {what}")
        for what in ("lr", "init_scale"):
            if not float(getattr(self, what)) > 0:
                raise BoltzkitError(f"recipe {self.name!r}: {what} must be > 0", got=getattr(self, what))
        if float(self.weight_decay) < 0:
            raise BoltzkitError(f"recipe {self.name!r}: weight_decay must be >= 0", got=self.weight_decay)

    # ------------------------------------------------------------------------------ views
    def replace(self, **changes: Any) -> Recipe:
        """A variant with some settings changed (its name gains a ``+`` when a setting changes).

        A ``k`` given without a ``k_schedule`` is a fixed k: it replaces the recipe's schedule
        (which would otherwise decide k and leave the given one unused). A ``method`` other than CD
        given without a ``reconstruction`` drops the recipe's mean reconstruction, which only CD
        has (persistent chains stay binary)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise BoltzkitError(
                "unknown recipe settings", got=", ".join(sorted(unknown)), expected=", ".join(SETTINGS)
            )
        if "k" in changes and "k_schedule" not in changes:
            changes = {**changes, "k_schedule": None}
        if changes.get("method", "cd") != "cd" and "reconstruction" not in changes:
            changes = {**changes, "reconstruction": "sample"}
        changed = {k: v for k, v in changes.items() if getattr(self, k) != v}
        if changed and "name" not in changes and not self.name.endswith("+"):
            changed["name"] = self.name + "+"
        return dataclasses.replace(self, **changed)

    def train_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`~boltzkit.learning.api.train`."""
        return {
            "method": self.method,
            "k": self.k,
            "k_schedule": self.k_schedule,
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "lr_schedule": self.lr_schedule,
            "momentum": self.momentum,
            "weight_decay": self.weight_decay,
            "reconstruction": self.reconstruction,
            "sampler": self.sampler,
            "n_chains": self.n_chains,
            "temperatures": self.temperatures,
            "centering": self.centering,
            "average": self.average,
        }

    def init_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`~boltzkit.learning.api.train_model` for initialisation."""
        return {"init_scale": self.init_scale, "init_vbias_from_data": self.init_vbias == "data"}

    def to_dict(self) -> dict[str, Any]:
        """Every setting (and the sources), JSON-able: what a model's metadata records."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["sources"] = dict(self.sources)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """Inverse of :meth:`to_dict` (unknown keys are refused)."""
        unknown = set(data) - set(SETTINGS)
        if unknown:
            raise BoltzkitError(
                "unknown recipe settings", got=", ".join(sorted(unknown)), expected=", ".join(SETTINGS)
            )
        return cls(**data)

    def describe(self) -> str:
        """Several lines: summary, then each setting with its source."""
        lines = [f"{self.name}: {self.summary}"]
        for f in dataclasses.fields(self):
            if f.name in ("name", "summary", "sources") or f.name == "meant_for" and self.meant_for == "any":
                continue
            source = self.sources.get(f.name)
            lines.append(f"  {f.name} = {getattr(self, f.name)!r}" + (f"  ({source})" if source else ""))
        return "\n".join(lines)


#: The names of a recipe's settings.
SETTINGS = tuple(f.name for f in dataclasses.fields(Recipe))

_HS06_SOURCES = {
    "lr": "[HS06] rbm.m: epsilonw = 0.05",
    "momentum": "[HS06] rbm.m: 0.5 for the first 5 epochs, then 0.9; [H10] Sec. 9",
    "weight_decay": "[HS06] Salakhutdinov's rbm.m: weightcost = 0.001",
    "batch_size": "[S1] Sec. 5, [S2] Sec. 5: mini-batches of 100",
    "reconstruction": "[HS06] rbm.m: negdata = p(v | h) probabilities; [H10] Sec. 3.2",
    "init_vbias": "[H10] Sec. 8: log(p / (1 - p)) of the data means (measured: +7 nats over 0 at 10 epochs)",
    "init_scale": "[H10] Sec. 8: N(0, 0.01^2)",
    "lr_schedule": "ours: linear decay to 0 (measured: +3.8 nats at 50 epochs of CD-1); as [S2] Sec. 5",
    "layer_data": "[S1] Sec. 4.1: samples of Q(h1 | v) as the data",
}


_EPOCHS_SOURCE = (
    "ours (S1 gives no number): CD-1 on 50,000 images reached -125.9 test nats after 50 epochs and "
    "-121.3 after 100; CD-3 -109.5 after 50"
)


def _sm2008(
    k_name: str,
    k: int,
    k_schedule: str | None,
    epochs: int,
    epoch_source: str,
    lr: float = 0.05,
    lr_source: str = "",
) -> Recipe:
    return Recipe(
        name=f"sm2008-{k_name}",
        summary=f"S&M 2008's {k_name.upper()} training of RBMs on MNIST: CD with Hinton & Salakhutdinov's "
        "reconstruction, momentum and weight decay, the learning rate decaying to 0",
        method="cd",
        k=k,
        k_schedule=k_schedule,
        epochs=epochs,
        lr=lr,
        lr_schedule="linear",
        momentum="0.5,0.9@5",
        weight_decay=0.001,
        init_scale=0.01,
        init_vbias="data",
        reconstruction="mean",
        layer_data="samples",
        sources={
            **_HS06_SOURCES,
            "k": f"[S1] Sec. 5.1: {k_name.upper()}",
            "k_schedule": "[S1] Sec. 5.1: 'starting with T=1, and gradually increasing T to 25'"
            if k_schedule
            else "",
            "epochs": epoch_source,
            **({"lr": lr_source} if lr_source else {}),
        },
    )


#: S&M 2008's CD25 with ``rbm.m``'s mean reconstruction, as S1 trained it: the base of the
#: CD25 recipes below. At k = 25 that reconstruction leaves spurious modes (log Z 680-785, long
#: chains ending in blank images, -92.98 test nats at 500 units), so ``sm2008-cd25`` samples it.
_SM2008_CD25_MEAN = _sm2008("cd25", 25, "linear:1:25", 100, _EPOCHS_SOURCE).replace(
    name="sm2008-cd25-mean",
    summary="S&M 2008's CD25 as S1 trained it, with rbm.m's mean reconstruction, which at k = 25 "
    "leaves spurious modes (-92.98 test nats on MNIST at 500 units; sm2008-cd25 removes them)",
)

#: S&M 2008's CD25 as boltzkit trains it: the sampled reconstruction, the table's CD25(500).
_SM2008_CD25 = _SM2008_CD25_MEAN.replace(
    name="sm2008-cd25",
    summary="S&M 2008's CD25 with the chain's last visible state as the reconstruction (not "
    "rbm.m's conditional mean, which leaves spurious modes at k = 25), learning rate 0.1, weight "
    "decay 0.0002: -85.26 test nats on MNIST at 500 units (S1: -86.34)",
    lr=0.1,
    weight_decay=0.0002,
    reconstruction="sample",
    sources={
        **_SM2008_CD25_MEAN.sources,
        "lr": "[HS06] Science-paper rbm.m: epsilonw = 0.1; measured with the mean reconstruction: "
        "-90.84 test nats at 0.1 against -92.98 at 0.05",
        "reconstruction": "ours, measured (docs/results.md): at k = 25 the mean reconstruction's "
        "negative statistics, hidden means given the mean image, leave spurious modes (log Z 680, "
        "-90.84 test nats); the sampled state removes them (log Z 207, -85.69); [H10] Sec. 3.2 "
        "allows either",
        "weight_decay": "[HS06] Science-paper rbm.m: weightcost = 0.0002; measured with the sampled "
        "reconstruction: -85.26 and -85.16 test nats (two seeds) against -85.69 at 0.001, -88.36 at "
        "0.003 and -86.42 at 0 (over-fitting)",
    },
)

#: Recipes renamed, by their old name: a run given one is told the new name.
RENAMED = {"sm2008-cd25-sampled": "sm2008-cd25"}
#: Recipes whose settings changed, by name: the name the old settings go by now (a checkpoint of
#: such a run resumes under it, and its refusal says so).
RENAMED_SETTINGS = {"sm2008-cd25": "sm2008-cd25-mean"}

#: The named recipes.
RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            name="default",
            summary="boltzkit's plain defaults: CD-1, learning rate 0.05, no momentum or weight decay",
            lr_schedule=None,  # train()'s own: constant for CD, linear decay for persistent chains
            sources={"init_vbias": "[H10] Sec. 8", "init_scale": "[H10] Sec. 8"},
        ),
        _sm2008("cd1", 1, None, 100, _EPOCHS_SOURCE),
        _sm2008(
            "cd3",
            3,
            None,
            50,
            "ours (S1 gives no number): CD-3 on 60,000 images at lr 0.1: -107.2 test nats after 50 epochs",
            lr=0.1,
            lr_source="[HS06] Science-paper rbm.m: epsilonw = 0.1; measured: CD-3 at 0.05 reached -111.4 "
            "after 100 epochs, at 0.1 -107.2 after 50",
        ),  # fmt: skip
        _SM2008_CD25,
        _SM2008_CD25_MEAN,
        _SM2008_CD25_MEAN.replace(
            name="sm2008-cd25-step",
            summary="S&M 2008's CD25 by the schedules of Salakhutdinov's published RBM code: k = "
            "ceil(epoch / 20), the learning rate 0.05 / k, 500 epochs to reach CD25 (rbm.m's mean "
            "reconstruction, as sm2008-cd25-mean)",
            k_schedule="step:20:25",
            epochs=500,
            lr_schedule="step:20",
            sources={
                **_HS06_SOURCES,
                "k": "[S1] Sec. 5.1: CD25",
                "k_schedule": "[RS08] rbm.m: CD = ceil(epoch/20); [S1] Sec. 5.1: 'starting with T=1, and "
                "gradually increasing T to 25'",
                "lr_schedule": "[RS08] rbm.m: epsilonw = epsilonw_0 / CD",
                "epochs": "ours: the epochs at which k = ceil(epoch / 20) reaches 25 ([S1] Sec. 5.1: "
                "'computationally much more demanding'); measured: -96.87 test nats after 329 epochs, "
                "below sm2008-cd25-mean's -92.98 after 100 (the rate falls as 1/k before k reaches 25)",
            },
        ),
        Recipe(
            name="s2008-sap",
            summary="Salakhutdinov 2008's stochastic approximation: 100 persistent chains, 5 Gibbs sweeps, "
            "learning rate 0.005 decaying to 0 over 500 epochs",
            method="sap",
            k=5,
            epochs=500,
            lr=0.005,
            lr_schedule="linear",
            momentum="0",
            n_chains=100,
            sources={
                "method": "[S2] Sec. 4.1.1",
                "k": "[S2] Sec. 5: 'For SAP, we always used 5 Gibbs updates'",
                "n_chains": "[S2] Sec. 5: 'The number of negative samples was also set to 100'",
                "epochs": "[S2] Sec. 5: 500 passes",
                "lr": "[S2] Sec. 5: 'initial learning rate was set 0.005'",
                "lr_schedule": "[S2] Sec. 5: 'gradually decreased to 0'",
                "batch_size": "[S2] Sec. 5: 600 mini-batches of 100",
                "init_vbias": "[H10] Sec. 8",
            },
        ),
        Recipe(
            name="dbn-top-pcd",
            summary=(
                "a DBN's upper layer by persistent chains at a small learning rate, meant to start as "
                "the transposed layer below (train_dbn(init_transpose=True), --init-transpose): the "
                "bound starts at the lower RBM's log-probability and the top does not grow CD's "
                "spurious modes"
            ),
            method="pcd",
            k=1,
            epochs=10,
            lr=0.001,
            lr_schedule="linear",
            momentum="0.5,0.9@5",
            weight_decay=0.001,
            n_chains=100,
            layer_data="samples",
            meant_for="upper-layers",
            sources={
                "method": (
                    "[T08]; ours: 2,000-unit tops trained by CD-1 from the transposed start fall 23 "
                    "nats below their start in 10 epochs (spurious modes), by PCD at lr 0.001 they "
                    "rise 23 nats above it (docs/results.md)"
                ),
                "lr": "ours: PCD at lr 0.01 from random couplings gave a top that AIS could not estimate",
                "epochs": "ours: 10 passes, about 5 minutes per 2,000-unit top on one CPU core",
                "n_chains": (
                    "ours: 100 chains follow a CD-trained bottom; on a sharp, SAP-trained bottom they lower "
                    "the bound by 1.2 nats, where --chains 1000 (lr 0.0005) raises it by 0.26 "
                    "(docs/results.md)"
                ),
                "momentum": "[HS06] rbm.m",
                "weight_decay": "[HS06] rbm.m",
                "layer_data": "[S1] Sec. 4.1: samples of Q(h1 | v) as the data",
                "init_vbias": "[H10] Sec. 8",
            },
        ),
        Recipe(
            name="sap-finetune",
            summary="persistent-chain fine-tuning of a CD-trained RBM (train --init MODEL): the model's "
            "own chains in the negative phase remove the modes CD leaves, the learning rate decaying to 0",
            method="sap",
            k=5,
            epochs=20,
            lr=0.002,
            lr_schedule="linear",
            momentum="0",
            weight_decay=0.0,
            n_chains=100,
            meant_for="fine-tuning",
            sources={
                "method": "[S2] Sec. 4.1.1; [T08]",
                "k": "[S2] Sec. 5: 'For SAP, we always used 5 Gibbs updates'",
                "n_chains": "[S2] Sec. 5: 100 negative samples",
                "lr": "ours: below S2's 0.005, as it starts from a trained model",
                "lr_schedule": "[S2] Sec. 5: 'gradually decreased to 0'",
                "epochs": "ours: 20 passes",
                "init_vbias": "[H10] Sec. 8",
            },
        ),
    )
}


def recipe_settings(recipe: Recipe) -> dict[str, Any]:
    """The settings a run records: the recipe's training settings without its name, summary and
    sources, and without those its method does not use (chains for CD, replicas but for PT,
    reconstruction but for CD)."""
    out = {k: v for k, v in recipe.to_dict().items() if k not in RECIPE_TEXTS}
    if recipe.method == "cd":
        out["n_chains"] = None
    else:
        out["reconstruction"] = None
    if recipe.method != "pt":
        out["temperatures"] = None
    return out


#: Settings :func:`recipe_settings` records only for some methods (chains, replicas, reconstruction).
_BY_METHOD = ("n_chains", "reconstruction", "temperatures")


def recipe_differences(recipe: Recipe, used: dict[str, Any]) -> dict[str, Any]:
    """The settings in which a run's recorded ``used`` (as :func:`recipe_settings` writes them)
    departs from ``recipe``'s: ``{setting: the run's value}``, empty where it was trained by
    ``recipe``'s settings, whatever name its command gave them.

    Where the run's method differs from the recipe's, a setting only one of the two methods uses
    (chains, replicas, reconstruction) is no difference of its own: the run's value is compared
    with the recipe's own (its 100 chains, say), and a setting the run's method does not use is
    left out (a CD recipe run with ``--method pcd`` departs in its method, not in its chains)."""
    raw = recipe.to_dict()
    out = {}
    for k, v in recipe_settings(recipe).items():
        if k not in used:
            continue
        value = used[k]
        if isinstance(value, list) and value and all(x == value[0] for x in value):
            value = value[0]  # a DBN's per-layer list of one value is that value
        if k in _BY_METHOD and (v is None) != (value is None):
            if value is None or value == raw.get(k):
                continue
        if k == "lr_schedule" and (v is None) != (value is None):  # None: train()'s choice by method
            v = method_lr_schedule(recipe.method, v)
            value = method_lr_schedule(used.get("method", recipe.method), value)
        if value != v:
            out[k] = used[k]
    return out


def recipe_misuse(recipe: Recipe, *, role: str, start: str, layers: Sequence[int] = ()) -> str | None:
    """Why ``recipe`` is not meant for this training, or ``None`` when it is.

    Parameters
    ----------
    recipe
        The recipe (its :attr:`Recipe.meant_for`).
    role
        What is trained: ``"model"`` (a model of its own, :func:`~boltzkit.learning.api.train_model`),
        ``"dbn-bottom"`` (a DBN's lowest layer) or ``"dbn-upper"`` (a layer above it).
    start
        Where it starts: ``"random"`` couplings, a ``"given"`` trained model, or the
        ``"transposed"`` layer below (S1 Sec. 5.2).
    layers
        For a DBN, the layers concerned (0 the bottom), named in the text.

    An upper-layer recipe is meant for a DBN layer above the bottom started transposed, and is
    left to the caller for a model started from a given one (which may be such a layer, stacked by
    hand); a fine-tuning recipe for any model that does not start at random couplings. The
    training runs as told either way: the callers warn with this text.
    """
    name = recipe.name.rstrip("+")
    numbers = [str(int(l) + 1) for l in layers]
    which = (
        "this layer starts"
        if not numbers
        else f"layer {numbers[0]} starts"
        if len(numbers) == 1
        else f"layers {', '.join(numbers[:-1])} and {numbers[-1]} start"
    )
    if recipe.meant_for == "upper-layers":
        if role == "dbn-upper" and start == "transposed" or role == "model" and start == "given":
            return None
        if role == "dbn-upper":
            return (
                f"the recipe {name!r} is meant for a DBN layer started as the transposed layer below "
                f"(init_transpose=True, --init-transpose), but {which} at random couplings"
            )
        if role == "dbn-bottom":
            return (
                f"the recipe {name!r} is meant for a DBN's layers above a trained bottom, but the DBN's "
                "bottom layer is trained by it too: pass the trained lowest layers as bottom= "
                "(--bottom MODEL) to train only the layers above"
            )
        return (
            f"the recipe {name!r} is meant for a DBN's layers above a trained bottom, but this model "
            "starts at random couplings: train a DBN with it (train_dbn, --model dbn --bottom MODEL "
            "--init-transpose)"
        )
    if recipe.meant_for == "fine-tuning" and start == "random":
        if role == "model":
            return (
                f"the recipe {name!r} is meant to train a trained model further (init=MODEL, "
                "--init MODEL), but this one starts at random couplings"
            )
        return (
            f"the recipe {name!r} is meant to train a trained RBM, SRBM, BM or DBM further "
            f"(init=MODEL, --init MODEL), but the DBN's {which.removeprefix('this ')} at random couplings"
        )
    return None


def get_recipe(recipe: str | Recipe) -> Recipe:
    """A recipe by name (or the recipe itself); a clear error naming the known ones otherwise."""
    if isinstance(recipe, Recipe):
        return recipe
    name = str(recipe).strip().lower()
    if name in RENAMED:
        raise BoltzkitError(
            f"the recipe {name!r} is now called {RENAMED[name]!r}",
            got=repr(recipe),
            hint=f"use --recipe {RENAMED[name]} (the same settings); train --list-recipes shows them.",
        )
    if name not in RECIPES:
        raise BoltzkitError(
            "unknown training recipe",
            got=repr(recipe),
            expected=", ".join(RECIPES),
            hint="boltzkit train --list-recipes shows each with its settings.",
        )
    return RECIPES[name]


__all__ = [
    "LAYER_DATA",
    "RECIPES",
    "RENAMED",
    "RENAMED_SETTINGS",
    "SETTINGS",
    "VBIAS_INITS",
    "Recipe",
    "RECIPE_TEXTS",
    "RECIPE_USES",
    "get_recipe",
    "recipe_differences",
    "recipe_misuse",
    "recipe_settings",
]
