"""What every ``boltzkit`` subcommand shares: error handling, JSON output, devices, options.

Errors
    :class:`BoltzkitCommand` runs a subcommand and turns any exception into one line
    ``error: ...`` on stderr and exit status 1, without a traceback (``boltzkit --debug ...`` or
    ``BOLTZKIT_DEBUG=1`` re-raises it). Usage errors (unknown option, value out of range) are
    typer's own and exit 2.
Output
    Progress bars go to stderr. With ``--json`` the last line on stdout is one JSON object with
    non-finite numbers written as ``null`` (:func:`emit`).
Options
    Options used by more than one subcommand (log Z estimation, device, data) are declared once
    here as ``Annotated`` types, and :class:`LogZOptions` carries the log Z settings to
    :func:`estimate`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import signal
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import torch
import typer
from typer.core import TyperCommand, TyperGroup

from boltzkit._numerics import resolve_device
from boltzkit.data import Dataset, alphabet_letters, load_dataset, load_values, shared_rows
from boltzkit.errors import BoltzkitError, UnreliableEstimateWarning, terminate_as_interrupt
from boltzkit.estimators import METHODS, LogZResult, estimate_log_ratio, estimate_log_z
from boltzkit.jsonio import to_jsonable as jsonable  # the one JSON encoder; the CLI's name for it
from boltzkit.jsonio import withhold_bands
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.plots.images import image_shape_of  # noqa: F401 (the CLI's name for it)
from boltzkit.resources import describe_allocation_failure
from boltzkit.units import Categorical
from boltzkit.variational import METHODS as VARIATIONAL_METHODS
from boltzkit.variational import RHO_CHOICES, variational_log_z

# ------------------------------------------------------------------------------------- errors


def describe_error(exc: BaseException) -> str:
    """A one-line, human-readable account of ``exc`` for the command line."""
    if isinstance(exc, BoltzkitError):
        return " ".join(str(exc).split())
    if isinstance(exc, FileNotFoundError):
        return (
            f"file not found: {exc.filename or exc}. Hint: check the path (a relative path is taken "
            "from the current folder)."
        )
    if isinstance(exc, IsADirectoryError):
        return f"expected a file but got a directory: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        return f"{reason}: {exc.filename}" if exc.filename else reason
    if isinstance(exc, MemoryError):
        return "out of memory; try fewer chains, a smaller batch or a smaller model"
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return "out of GPU memory; try fewer chains, a smaller batch, or --device cpu"
    text = " ".join(str(exc).split()) or "(no message)"
    if isinstance(exc, OverflowError) or "Overflow when unpacking" in text:
        # a count past what the machine's integers hold (torch's message carries its C++ stack)
        reason = "Overflow when unpacking long long" if "Overflow when unpacking" in text else text
        return (
            f"a number given is too large to count with ({reason}); give counts (--steps, --chains, "
            "--hidden, --betas, ...) below 2^63, and far below for work that is to finish"
        )
    if isinstance(exc, RuntimeError) and (allocation := describe_allocation_failure(text)):
        return allocation
    return f"unexpected {type(exc).__name__}: {text} (rerun with --debug for the traceback)"


def debug_enabled(ctx: typer.Context | None = None) -> bool:
    """Whether ``--debug`` was given to ``boltzkit`` or ``BOLTZKIT_DEBUG`` is set."""
    if os.environ.get("BOLTZKIT_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    return bool(ctx is not None and ctx.find_root().params.get("debug"))


def option_given(ctx: typer.Context, key: str) -> bool:
    """Whether the option of parameter ``key`` was given on the command line (not left at its
    default)."""
    source = ctx.get_parameter_source(key)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def warn(message: str) -> None:
    """One line ``warning: ...`` on stderr (the one way the command line warns)."""
    typer.echo(f"warning: {' '.join(str(message).split())}", err=True)


#: Held-out data of at least this many units whose rows are nearly all training rows are the
#: training data, not a chance overlap (in 16 units, independent draws of a peaked distribution
#: share most of their rows; in 64 or more the chance of a shared row is negligible).
SEEN_MIN_UNITS = 64


def warn_if_training_rows(held: Any, train: Any, what: str) -> None:
    """Warn where the held-out rows ``held`` (``(n, d)``) are the training rows ``train``, or
    (``d >= SEEN_MIN_UNITS``) nearly all among them: a log-likelihood of them is a training figure,
    not a held-out one (``--test-data`` naming the training file, ``--valid-data mnist`` beside
    ``--data mnist:train+valid``)."""
    held_x, train_x = torch.as_tensor(held), torch.as_tensor(train)
    if held_x.dim() != 2 or train_x.dim() != 2 or held_x.shape[1] != train_x.shape[1] or not len(held_x):
        return
    if held_x.shape == train_x.shape and torch.equal(held_x.to(train_x.dtype), train_x):
        seen = len(held_x)
    elif held_x.shape[1] >= SEEN_MIN_UNITS:
        seen = shared_rows(held_x, train_x)
        if seen < 0.99 * len(held_x):
            return
    else:
        return
    warn(
        f"{seen:,} of the {len(held_x):,} rows of {what} are training rows: its log-likelihood is "
        "a training figure, not a held-out one; give data the model was not trained on"
    )


def warn_ignored(by: str, flags: Sequence[str], why: str | None = None) -> None:
    """The one warning about options given but not used: ``warning: BY does not use --A, --B:
    ignored`` (``by`` e.g. ``"--method mean-field"``), with ``why`` in parentheses where the reason
    is not obvious from ``by`` alone."""
    warn(f"{by} does not use {', '.join(flags)}: ignored" + (f" ({why})" if why else ""))


def deterministic_log_z(record: Mapping[str, Any]) -> bool:
    """Whether a log-probability record's ``log Z`` (its ``"logz"`` record) is a deterministic
    approximation, which has no sampling band (mean-field, Bethe, TRW, TAP)."""
    logz = record.get("logz") or {}
    return "log_z_stderr" in logz and logz["log_z_stderr"] is None and logz.get("method") != "exact"


def log_prob_what(record: Mapping[str, Any]) -> str:
    """What a log-probability record's ``mean_log_prob`` is, from its ``bound``, with the reason
    (``bound_note``) where ``log Z`` decided it."""
    bound = record.get("bound")
    what = {
        "lower": "lower bound on mean log p(v)",
        "upper": "upper bound on mean log p(v)",
        "none": "approximate mean log p(v)",
    }.get(str(bound), "mean log p(v)")
    if bound == "lower" and record.get("mean_field_iterations") is not None and not record.get("bound_note"):
        what = "mean-field " + what
    note = record.get("bound_note")
    return what + (f" ({note})" if note else "")


def warn_if_unreliable(record: Mapping[str, Any]) -> None:
    """A ``warning:`` line when an estimate's verdict (``reliable``) is false, saying what is wrong
    and what to do (not for a variational value: its own warning, raised as it was computed, said it)."""
    method = record.get("method", record.get("log_z_method"))  # (an evaluate record names its log Z's)
    if record.get("reliable") is False and method not in VARIATIONAL_METHODS:
        advice = record.get("advice")
        warn(f"{record.get('reliability_reason')}." + (f" Try: {advice}." if advice else ""))


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    warn(str(message))


class _OneLineErrors:
    """Errors end in one line on stderr and exit status 1, and warnings (Python's included) are
    one ``warning: ...`` line each. Ctrl-C (and SIGTERM) ends in one line ``error: interrupted`` (with what a
    command put in ``ctx.meta["on_interrupt"]``, a text or a function giving it when interrupted,
    such as the checkpoint to resume from) and exit status 128 + the signal (130 for Ctrl-C, 143 for
    SIGTERM)."""

    def invoke(self, ctx: typer.Context) -> Any:
        """Run the command; report an exception as ``error: ...`` and exit 1 (unless debugging)."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                # the command prints an estimate's verdict itself, once (warn_if_unreliable)
                warnings.simplefilter("ignore", UnreliableEstimateWarning)
                if not debug_enabled(ctx):
                    warnings.showwarning = _one_line_warning
                with terminate_as_interrupt():  # kill, a time limit: said as Ctrl-C is
                    return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # click's own usage errors (a group parses its subcommand's arguments in here)
        except KeyboardInterrupt as interrupt:
            if debug_enabled(ctx):
                raise
            hint = ctx.meta.get("on_interrupt")
            hint = hint() if callable(hint) else hint  # said as things stand when interrupted
            typer.echo("error: interrupted" + (f"; {hint}" if hint else ""), err=True)
            raise typer.Exit(128 + getattr(interrupt, "signum", signal.SIGINT)) from None  # 130; 143: SIGTERM
        except Exception as exc:
            if debug_enabled(ctx):
                raise
            typer.echo(f"error: {describe_error(exc)}", err=True)
            raise typer.Exit(1) from None


class BoltzkitCommand(_OneLineErrors, TyperCommand):
    """A typer command with boltzkit's one-line errors and warnings (:class:`_OneLineErrors`)."""


class BoltzkitGroup(_OneLineErrors, TyperGroup):
    """A typer group (``boltzkit zoo``) whose own callback has the commands' one-line errors; its
    subcommands are :class:`BoltzkitCommand` and report their errors themselves."""


# ------------------------------------------------------------------------------------- output


def json_line(record: Mapping[str, Any]) -> str:
    """One line of strict JSON (``allow_nan=False``) for ``record``."""
    return json.dumps(jsonable(record), allow_nan=False)


def emit(record: Mapping[str, Any], *, as_json: bool, human: Callable[[], str]) -> None:
    """Print ``record`` as one JSON line (``--json``; the bands of unreliable estimates withheld,
    :func:`withhold_bands`) or the human summary ``human()``."""
    if as_json:
        typer.echo(json_line(withhold_bands(record)))
    else:
        typer.echo(human())


#: The fields of a log Z record that hold an estimate of the model's log Z (:func:`in_ising_convention`)
LOG_Z_FIELDS = tuple(
    f"log_z{end}"
    for end in (
        "", "_minus_sigma", "_plus_sigma", "_minus_3sigma", "_plus_3sigma", "_lower", "_upper",
        "_lower_per_chain", "_upper_per_chain", "_b", "_ceiling",
    )
) + ("exact_log_z", "primal_value", "mean_field_bound", "trw_bound")  # fmt: skip
#: ... and the lists of them (a mean-field run's starts, TRW's bound after each Frank-Wolfe step)
_LOG_Z_LISTS = ("start_bounds", "fw_history")
#: ... and those of log Z_B / Z_A (``--relative-to``)
LOG_RATIO_FIELDS = tuple(
    f"log_ratio{end}"
    for end in (
        "", "_minus_sigma", "_plus_sigma", "_minus_3sigma", "_plus_3sigma", "_lower", "_upper",
        "_lower_per_chain", "_upper_per_chain",
    )
)  # fmt: skip


#: Sub-records that hold estimates of the same quantities: an evaluation's log Z record, a
#: sandwich's two ends.
_NESTED_RECORDS = ("logz", "lower", "upper", "forward", "reverse")


def _shifted(record: dict[str, Any], constant: float, reference_constant: float) -> dict[str, Any]:
    out = dict(record)
    shifts = dict.fromkeys((*LOG_Z_FIELDS, "mean_neg_free_energy"), constant)  # log p*(v), too
    shifts["log_z_a"] = reference_constant
    shifts.update((key, constant - reference_constant) for key in LOG_RATIO_FIELDS)
    for key, shift in shifts.items():
        if out.get(key) is not None:
            out[key] = float(out[key]) + shift
    for key in _LOG_Z_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [v if v is None else float(v) + constant for v in out[key]]
    ratio = record.get("log_ratio") is not None  # then a control run's estimate is of the ratio too
    if record.get("checks"):
        out["checks"] = [dict(check) for check in record["checks"]]
        for check in out["checks"]:
            if check.get("log_z") is not None:
                check["log_z"] = float(check["log_z"]) + constant - (reference_constant if ratio else 0.0)
    for key in _NESTED_RECORDS:
        if isinstance(out.get(key), dict):
            out[key] = _shifted(out[key], constant, reference_constant)
    choice = out.get("base_choice")
    if isinstance(choice, dict) and isinstance(choice.get("pilot"), dict):  # the pilot runs' log Z
        pilot = {name: v if v is None else float(v) + constant for name, v in choice["pilot"].items()}
        out["base_choice"] = {**choice, "pilot": pilot}
    return out


def in_ising_convention(
    record: dict[str, Any], constant: float, reference_constant: float = 0.0
) -> dict[str, Any]:
    """A log Z record, computed in {0, 1} units, in the +-1 convention of the Ising models among
    the model and its ``--relative-to`` reference.

    Every estimate of the model's log Z (:data:`LOG_Z_FIELDS`) and an evaluation's mean
    ``log p*(v)`` (``mean_neg_free_energy``) gain ``constant`` (the model's
    ``log Z_ising - log Z_binary``; 0 for a model of {0, 1} units), ``log_z_a`` (the reference's)
    gains ``reference_constant``, and every estimate of the ratio (:data:`LOG_RATIO_FIELDS`) gains
    their difference, in the sub-records too (an evaluation's ``logz``, a sandwich's ends). The
    {0, 1} values are kept as ``log_z_binary`` and ``log_ratio_binary``."""
    out = _shifted(record, constant, reference_constant)
    ratio = record.get("log_ratio") is not None
    out["log_z_binary"] = record.get("log_z")
    out["log_z_constant"] = constant
    if ratio:
        out["log_ratio_binary"] = record["log_ratio"]
        out["log_z_constant_a"] = reference_constant
    out["convention"] = "ising: log Z of exp(sum_{i<j} J_ij s_i s_j + h's) over spins s in {-1, +1}"
    if ratio:
        out["convention"] += " for each Ising model; the ratio is of those log Z"
    return out


def command_line(ctx: typer.Context) -> str:
    """The command being run, as ``boltzkit COMMAND`` with the options and arguments given on the
    command line (not those left at their defaults), quoted: what a model's metadata records."""
    parts = ["boltzkit", ctx.info_name or ""]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name != "COMMANDLINE":
            continue
        value = ctx.params.get(param.name)
        value = value.value if isinstance(value, Enum) else value
        if param.param_type_name == "argument":
            parts += [shlex.quote(str(v)) for v in (value if isinstance(value, (list, tuple)) else [value])]
        elif getattr(param, "is_flag", False):
            names = param.opts if value else (param.secondary_opts or param.opts)
            parts.append(names[0])
        else:
            parts += [param.opts[0], shlex.quote(str(value))]
    return " ".join(parts)


def fmt(value: float | None, digits: int = 4) -> str:
    """A number for the human summaries (``n/a`` for ``None``/non-finite)."""
    if value is None or not math.isfinite(float(value)):
        return "n/a"
    return f"{float(value):.{digits}f}"


def log_z_lines(label: str, method: str, log_z: float | None, verdict: Mapping[str, Any]) -> list[str]:
    """The text lines of the log Z behind a log-probability: ``LABEL (METHOD): VALUE``, marked
    ``(unreliable)`` where ``verdict`` (a record's ``reliable`` and ``reliability_reason``) says so,
    and for a sampled log Z the verdict line ``reliable: yes`` or ``reliable: NO: reason``."""
    unreliable = "  (unreliable)" if verdict.get("reliable") is False else ""
    lines = [f"{label} ({method}): {fmt(log_z)}{unreliable}"]
    if method != "exact" and verdict.get("reliable") is not None:
        lines.append(
            "reliable: " + ("yes" if verdict["reliable"] else f"NO: {verdict.get('reliability_reason')}")
        )
    return lines


def band_text(
    record: Mapping[str, Any],
    key: str,
    *,
    verdict: Mapping[str, Any] | None = None,
    digits: int = 4,
    note: str = "±3σ",
) -> str:
    """``[lo, hi] (note)``: the band ``KEY_minus_3sigma, KEY_plus_3sigma`` of ``record`` for the
    human summaries, or why there is none where the estimate behind it (``verdict``, else the
    record itself) says ``reliable: false``: an unreliable estimate supports no band."""
    if (record if verdict is None else verdict).get("reliable") is False:
        return "(no band: the estimate of log Z is unreliable)"
    lo, hi = record.get(f"{key}_minus_3sigma"), record.get(f"{key}_plus_3sigma")
    return f"[{fmt(lo, digits)}, {fmt(hi, digits)}] ({note})"


def check_output(path: Path | None, option: str, *, force: bool) -> None:
    """The one check of an output file before the work that fills it: not a folder, in a folder
    that exists, and not a file already there unless ``force`` (``--force``) says to replace it
    (each command writes it atomically, so a file replaced is whole, old or new)."""
    if path is None:
        return
    if path.is_dir():
        raise BoltzkitError(
            f"{option} names a folder; it takes a file",
            got=str(path),
            hint=f"name a file in it: {path}/FILE.",
        )
    if not path.parent.is_dir():
        raise BoltzkitError(
            f"the directory of {option} does not exist",
            got=str(path),
            hint=f"create it first (mkdir -p {path.parent}), or choose another {option}.",
        )
    if path.exists() and not force:
        raise BoltzkitError(
            "the output file exists",
            got=str(path),
            hint=f"pass --force to overwrite it, or choose another {option}.",
        )


def refuse_zoo_output(out: Path | str, option: str = "--out") -> None:
    """Refuse an output model path written ``zoo:NAME``: a zoo name is read, not written (it
    would make a file of that literal name here)."""
    if str(out).lower().startswith("zoo:"):
        name = str(out)[len("zoo:") :]
        raise BoltzkitError(
            f"{option} names a zoo model; the zoo is written by `boltzkit zoo add`, not by a model path",
            got=str(out),
            hint=f"write a file ({Path(name).stem}.safetensors), then publish it: "
            f"boltzkit zoo add {Path(name).stem} {Path(name).stem}.safetensors --data DATA",
        )


def show_progress(flag: bool | None) -> bool:
    """``--progress/--no-progress``; by default, progress bars only when stderr is a terminal."""
    if flag is not None:
        return flag
    return sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("1", "true")


# ------------------------------------------------------------------------------- shared options


def _positive_float(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value} is not a positive number")
    return value


def _non_negative_float(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"{value} is not a non-negative number")
    return value


def positive_float_option(*names: str, help: str) -> Any:
    """A float option that must be finite and > 0."""
    return typer.Option(*names, help=help, callback=_positive_float)


def non_negative_float_option(*names: str, help: str) -> Any:
    """A float option that must be finite and >= 0."""
    return typer.Option(*names, help=help, callback=_non_negative_float)


def _unit_interval(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and 0 <= value < 1):
        raise typer.BadParameter(f"{value} is not in [0, 1)")
    return value


def unit_interval_option(*names: str, help: str) -> Any:
    """A float option that must lie in [0, 1) (momentum, damping): a usage error otherwise."""
    return typer.Option(*names, help=help, callback=_unit_interval)


#: Estimators of ``log Z`` (``--method`` of ``logz``, ``--logz`` of ``evaluate``), as the library names them.
LogZMethod = Enum("LogZMethod", {name: name for name in (*METHODS, *VARIATIONAL_METHODS)}, type=str)

#: ``--rho`` of the tree-reweighted bound: the uniform spanning-tree measure, or optimised by Frank-Wolfe.
RhoChoice = Enum("RhoChoice", {name: name for name in RHO_CHOICES}, type=str)


ModelArg = Annotated[
    Path,
    typer.Argument(
        metavar="MODEL",
        help="Model file: boltzkit .safetensors, or .npz with arrays W, vbias, hbias (optional L, J; "
        "sigma for Gaussian visible units; a 3-D W for categorical ones), a DBN's W_0, vbias_0, hbias_0, "
        "W_1, ... or a DBM's W_0, W_1, ..., bias_0, bias_1, ...; or zoo:NAME (boltzkit zoo lists them)",
    ),
]
DataOpt = Annotated[
    str,
    typer.Option("--data", help="Data: mnist, mnist-patches, bars-and-stripes, artificial-modes or a file."),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object as the last stdout line.")]
ProgressFlag = Annotated[
    bool | None,
    typer.Option("--progress/--no-progress", help="Progress bars on stderr [default: when a terminal]."),
]
DeviceOpt = Annotated[
    str, typer.Option("--device", help="'auto' (CUDA when available), 'cpu', 'cuda' or 'cuda:N'.")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite output files that exist.")]
SeedOpt = Annotated[
    int,
    typer.Option("--seed", min=0, max=2**63 - 1, help="Seed of every random number used (0 to 2^63 - 1)."),
]
AlphabetOpt = Annotated[
    str | None,
    typer.Option(
        "--alphabet",
        help="Aligned sequences (FASTA): protein (20 amino acids and the gap, Q = 21), dna, rna, or the "
        "letters themselves, the last the gap [default: the model's own].",
    ),
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Folder with the binarized MNIST files [default: $BOLTZKIT_DATA_DIR].",
        file_okay=False,
    ),
]
ChainsOpt = Annotated[
    int, typer.Option("--chains", min=1, help="AIS chains (runs), or samples of SIS and bridge sampling.")
]
BetasOpt = Annotated[
    str | None,
    typer.Option(
        "--betas",
        help="AIS schedule (ais, reverse-ais, sandwich; not used by exact, sis and bridge): 'paper' (14,500 "
        "steps, S&M 2008), 's2' (10,000, Salakhutdinov 2008), N (N points from 0 to 1: N - 1 steps), "
        "'adaptive[:N]' or a file of betas [default: paper; 10001 points with --relative-to].",
    ),
]
SweepsOpt = Annotated[int, typer.Option("--sweeps", min=1, help="Sampler sweeps per intermediate beta.")]
SamplerOpt = Annotated[
    str,
    typer.Option(
        "--sampler", help="Transition operator: gibbs, flip, blend:A[,B], a cycle A+B or a repeat A*N."
    ),
]
BaseRateOpt = Annotated[
    str | None,
    typer.Option(
        "--base-rate-data",
        help="Data (name or file) whose pixel means set the AIS base-rate model; not used by exact "
        "[default: the training data recorded in the model file when it can be loaded, else the model's "
        "own visible biases].",
    ),
]
StartChainStepsOpt = Annotated[
    int | None,
    typer.Option(
        "--start-chain-steps",
        min=0,
        help="Transitions of the model's own chains where it has no exact samples: the reverse runs' "
        "starts (reverse-ais, sandwich; from the forward run's end states) and bridge sampling's "
        "chains; the sandwich's probe chains take as many, and longer while they still relax "
        "[default: 1000; 10,000 for --relative-to].",
    ),
]
MaxBitsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-bits",
        min=1,
        max=62,
        help="Exact log Z refuses beyond 2^N states; exact samples (reverse AIS, bridge) up to 2^min(N, 22); "
        "a sampled log Z gets the exact one beside it up to 2^min(N, 20) [default: 30].",
    ),
]


@dataclasses.dataclass(frozen=True)
class LogZOptions:
    """Settings of a log Z estimate as given on the command line."""

    method: LogZMethod
    chains: int
    betas: str | None
    sweeps: int
    sampler: str
    base_rate_data: str | None
    seed: int
    max_bits: int | None
    damping: float | None = None
    max_iter: int | None = None
    tol: float | None = None
    rho: str = "optimized"
    fw_steps: int | None = None
    start_chain_steps: int | None = None


def device_from(spec: str) -> torch.device:
    """Resolve ``--device`` (``auto`` means CUDA when available, else CPU; an unknown name is
    refused by :func:`~boltzkit._numerics.resolve_device`)."""
    return resolve_device(spec)


# ------------------------------------------------------------------------------------- images


# image_shape_of (the model file's image_shape, else a square n_visible) lives with the image grid
# in boltzkit.plots.images and is imported above.


# ------------------------------------------------------------------------------------ log Z


def unit_visible(model: object) -> UnitRBM | UnitDBM | None:
    """The model that holds a model's Gaussian or categorical visible units: the model itself (an
    RBM or DBM), or a DBN's bottom; ``None`` for binary visible units."""
    if isinstance(model, (UnitRBM, UnitDBM)):
        return model
    return getattr(model, "unit_bottom", None)


def check_alphabet(model: object, letters: str | None, *, what: str = "the model") -> None:
    """Refuse ``--alphabet`` letters other than those recorded in ``model`` (which it was trained
    on: other letters would map the sequences to other states) or on a model without sequences."""
    if letters is None:
        return
    recorded = getattr(model, "alphabet", None)
    if recorded is not None and alphabet_letters(letters) != recorded:
        raise BoltzkitError(
            f"{what} reads sequences with another alphabet",
            got=f"--alphabet {letters}",
            expected=f"its own letters, {recorded!r} (recorded when it was trained)",
            hint="drop --alphabet: the model's own letters are used.",
        )
    units = getattr(model, "visible_units", None)
    if recorded is None and (units is None or units != Categorical(len(alphabet_letters(letters)))):
        raise BoltzkitError(
            f"--alphabet reads sequences as categories, and {what} has no categorical visible units "
            "of that many states",
            got=f"--alphabet {letters} ({len(alphabet_letters(letters))} letters) with "
            f"{units.name if units is not None else 'binary'} visible units",
            hint="drop --alphabet.",
        )


def unit_values(
    rbm: UnitRBM,
    spec: str,
    *,
    split: str,
    data_dir: Path | None,
    seed: int,
    alphabet: str | None = None,
    role: str | None = None,
    named_split: bool = False,
) -> tuple[str, torch.Tensor]:
    """A data set for a model with real-valued or categorical visible units: its name and its values
    checked by the unit type, on the model's device. Aligned sequences (FASTA) are read with
    ``alphabet``, else the model's own (recorded when it was trained on sequences); an
    ``alphabet`` other than the recorded one is refused (:func:`check_alphabet`). ``role`` names
    the data in errors (default: ``"<split> data"``, e.g. ``"base-rate data"`` instead).
    ``named_split``: the split was asked for by name (data without it warns, ``load_values``)."""
    check_alphabet(rbm, alphabet)
    name, values = load_values(
        spec,
        split=split,
        data_dir=data_dir,
        seed=seed,
        alphabet=alphabet or rbm.alphabet,
        named_split=named_split,
    )
    return name, rbm.check_data(values, f"the {role or split + ' data'} {name}")


def unit_dataset(
    rbm: UnitRBM,
    spec: str,
    *,
    split: str,
    data_dir: Path | None,
    seed: int,
    alphabet: str | None = None,
    named_split: bool = False,
) -> Dataset:
    """:func:`unit_values` as a :class:`~boltzkit.data.Dataset` on the CPU (no image shape)."""
    name, values = unit_values(
        rbm, spec, split=split, data_dir=data_dir, seed=seed, alphabet=alphabet, named_split=named_split
    )
    return Dataset(name=name, x=values.cpu(), image_shape=None, split=split)


def training_values(
    model: Any, spec: str, *, data_dir: Path | None, seed: int, role: str | None = None
) -> torch.Tensor:
    """The training split of the data set ``spec`` as ``model`` reads it: real values or category
    indices checked by the unit type (of the model's visible units, a DBN's bottom's too), else 0/1
    data of the model's width."""
    units_of = unit_visible(model)
    if units_of is not None:
        return unit_values(units_of, spec, split="train", data_dir=data_dir, seed=seed, role=role)[1]
    return load_dataset(spec, split="train", data_dir=data_dir, seed=seed, n_visible=model.n_visible).x


def recorded_data_seed(metadata: Mapping[str, Any]) -> int | None:
    """The seed a model's generated training data was drawn from, as its file records it (the
    grid records its data's own seed, ``data_seed``; ``train`` its ``seed``)."""
    training = metadata.get("training") or {}
    recorded = training.get("data_seed", training.get("seed"))
    return int(recorded) if isinstance(recorded, int) and not isinstance(recorded, bool) else None


def recorded_training_values(
    model: Any, metadata: Mapping[str, Any] | None, *, data_dir: Path | None, seed: int, role: str
) -> tuple[str, torch.Tensor] | None:
    """The training data a model file records (``metadata["data"]``) and its training split as the
    model read it (:func:`training_values`, generated data drawn from the seed the file records,
    :func:`recorded_data_seed`; ``seed`` where it records none). ``None`` where the file records
    no training data; a :class:`BoltzkitError` where it cannot be read here."""
    recorded = (metadata or {}).get("data")
    if not isinstance(recorded, str) or not recorded:
        return None
    data_seed = recorded_data_seed(metadata or {})
    x = training_values(
        model, recorded, data_dir=data_dir, seed=seed if data_seed is None else data_seed, role=role
    )
    return recorded, x


def training_fingerprint(x: torch.Tensor) -> str:
    """The fingerprint of a training set that a model file records (its values as float32 on the
    CPU, :func:`~boltzkit.learning.data_fingerprint`), so that a later look at "the recorded
    training data" knows whether it is still that data."""
    from boltzkit.learning import data_fingerprint

    return data_fingerprint(x.detach().cpu().to(torch.float32).contiguous())


def training_overlap(
    model: Any, metadata: Mapping[str, Any], dataset: Dataset, *, data_dir: Path | None, seed: int
) -> dict[str, Any] | None:
    """How much of ``dataset`` is the model's own training data: ``{"data", "shared_examples",
    "n_examples", "n_units", "identical", "discrete"}`` with the rows compared exactly
    (:func:`~boltzkit.data.shared_rows`; ``identical``: the very training set, row for row). Rows
    of binary or category values (``discrete``) in fewer than :data:`SEEN_MIN_UNITS` units recur by
    chance, and the text says so.

    The training data is ``metadata["data"]``'s training split, drawn from the seed the file
    records (:func:`recorded_data_seed`; ``seed`` where it records none). Where the file records the
    data's fingerprint (``training.train_data_fingerprint``, from 2026-12-04) or its size
    (``n_train``) and the data found under that name now differs (a relative path read from
    another folder, a file changed since), or the data cannot be read here (a file gone),
    ``shared_examples`` is ``None`` and ``note`` says why. ``None`` where the file records no
    training data: nothing is claimed either way."""
    recorded = metadata.get("data")
    if not isinstance(recorded, str) or not recorded:
        return None
    training = metadata.get("training") or {}
    out: dict[str, Any] = {"data": recorded, "n_examples": len(dataset.x), "n_units": int(dataset.x.shape[1])}
    try:
        _, train = recorded_training_values(
            model, metadata, data_dir=data_dir, seed=seed, role="training data"
        )
    except BoltzkitError as err:
        note = f"the recorded training data {recorded} cannot be read here ({err.what})"
        return {**out, "shared_examples": None, "note": note}
    fingerprint, n_train = training.get("train_data_fingerprint"), training.get("n_train")
    why = None
    if isinstance(fingerprint, str) and fingerprint != training_fingerprint(train):
        why = "its values differ from those the model was trained on (their fingerprint)"
    elif fingerprint is None and isinstance(n_train, int) and n_train != len(train):
        why = f"it holds {len(train):,} rows, and the model was trained on {n_train:,}"
    if why is not None:
        note = f"the data found as {recorded} is not the training data: {why}"
        return {**out, "shared_examples": None, "note": note}
    x, train = dataset.x.cpu(), train.cpu()
    identical = x.shape == train.shape and torch.equal(x.to(train.dtype), train)
    return {
        **out,
        "shared_examples": len(x) if identical else shared_rows(x, train),
        "identical": identical,
        # binary or category values, which recur by chance in few units (real values do not)
        "discrete": bool((x == x.round()).all()),
    }


def training_overlap_text(record: Mapping[str, Any]) -> str | None:
    """The line of an evaluation's text that says how much of its data the model was trained on."""
    overlap = record.get("training_data")
    if not overlap:
        return None
    shared, n, data = overlap["shared_examples"], overlap["n_examples"], overlap["data"]
    if shared is None:
        return f"  not compared with the model's training data: {overlap['note']}"
    if overlap.get("identical"):
        return (
            f"  these {n:,} examples are the model's training data ({data}): a training-set figure, "
            "not a test one"
        )
    if shared == 0:
        return f"  none of the {n:,} examples is in the model's training data ({data}): held out"
    if overlap.get("discrete") and overlap.get("n_units", SEEN_MIN_UNITS) < SEEN_MIN_UNITS:
        return (
            f"  {shared:,} of the {n:,} examples equal rows of the model's training data ({data}); in "
            f"{overlap['n_units']} units rows recur by chance, so that alone does not make it a "
            "training figure"
        )
    if shared == n:
        return (
            f"  all {n:,} examples are in the model's training data ({data}): a training-set figure, "
            "not a test one"
        )
    return (
        f"  {shared:,} of the {n:,} examples are also in the model's training data ({data}): not a "
        "clean held-out figure"
    )


def base_rate_data(
    model: Any,
    opts: LogZOptions,
    *,
    data_dir: Path | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> tuple[torch.Tensor | None, str | None]:
    """The data whose base rates start an AIS-type path, and where they came from: ``--base-rate-data``
    when given (generated data drawn from ``opts.seed``), else the training data recorded in the
    model file's ``metadata`` when it can still be loaded (drawn from the seed it records, as in
    :func:`training_overlap`), else ``(None, None)`` (the model's own visible biases).

    ``model`` is a Boltzmann machine or a DBN; the rows are its visible data (a DBN's caller passes
    them up to its top)."""

    if opts.base_rate_data is not None:
        given = training_values(
            model, opts.base_rate_data, data_dir=data_dir, seed=opts.seed, role="base-rate data"
        )
        return given, opts.base_rate_data
    try:
        found = recorded_training_values(
            model, metadata, data_dir=data_dir, seed=opts.seed, role="base-rate data"
        )
    except BoltzkitError:
        return None, None  # the recorded data is gone: fall back to the model's own biases
    if found is None:
        return None, None
    return found[1], f"{found[0]} (recorded in the model file)"


def variational_estimate(
    model: BoltzmannMachine, opts: LogZOptions, *, relative_to: BoltzmannMachine | None = None
) -> LogZResult:
    """A variational ``log Z`` (mean-field, Bethe, TRW, TAP; :mod:`boltzkit.variational`) as a
    deterministic :class:`LogZResult` (no band; ``bound``, ``converged``, ``iterations`` and
    ``residual`` in its settings)."""
    if relative_to is not None:
        raise BoltzkitError(
            f"--relative-to does not apply to --method {opts.method.value}",
            hint="a variational method approximates log Z of one model; run it on each model.",
        )
    r = variational_log_z(
        model, opts.method.value, damping=opts.damping, max_iter=opts.max_iter, tol=opts.tol, rho=opts.rho,
        seed=opts.seed, fw_steps=opts.fw_steps if opts.method.value == "trw" else None,
    )  # fmt: skip
    return LogZResult.from_variational(r)


def sampling_kwargs(opts: LogZOptions, *, device: torch.device, progress: bool) -> dict[str, Any]:
    """The keywords of :func:`~boltzkit.estimators.estimate_log_z` (and ``estimate_log_ratio``)
    that ``opts`` sets; unset options keep the library's defaults, which differ between the two."""
    kwargs: dict[str, Any] = {
        "n_chains": opts.chains,
        "sweeps": opts.sweeps,
        "sampler": opts.sampler,
        "seed": opts.seed,
        "device": device,
        "progress": progress,
    }
    for name in ("betas", "max_bits", "start_chain_steps"):
        if getattr(opts, name) is not None:
            kwargs[name] = getattr(opts, name)
    return kwargs


def estimate(
    rbm: BoltzmannMachine,
    opts: LogZOptions,
    *,
    device: torch.device,
    progress: bool,
    data_dir: Path | None = None,
    relative_to: BoltzmannMachine | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> LogZResult:
    """Run the ``log Z`` estimator of ``opts`` (``log Z_B - log Z_A`` with ``relative_to=A``).

    The base-rate model of AIS-type estimators is fitted to ``--base-rate-data`` when given, else
    to the training data recorded in the model file's ``metadata`` when it can still be loaded,
    else it takes the model's own visible biases; the result's settings say which.
    """
    if opts.method.value in VARIATIONAL_METHODS:
        return variational_estimate(rbm, opts, relative_to=relative_to)
    kwargs = sampling_kwargs(opts, device=device, progress=progress)
    if relative_to is not None:
        if opts.base_rate_data is not None:
            raise BoltzkitError(
                "--base-rate-data does not apply to --relative-to",
                hint="a log-ratio estimate anneals from the reference model, not from a base-rate model.",
            )
        return estimate_log_ratio(rbm, relative_to, opts.method.value, **kwargs)
    base_rate, base_source = (None, None)
    if opts.method.value != "exact":
        base_rate, base_source = base_rate_data(rbm, opts, data_dir=data_dir, metadata=metadata)
    result = estimate_log_z(rbm, opts.method.value, base_rate_data=base_rate, **kwargs)
    return result.with_settings(base_data=base_source) if base_source else result
