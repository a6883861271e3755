"""``boltzkit sample MODEL``: run Markov chains on a model and save their final visible states.

``--out FILE.npy`` writes a ``uint8`` array of shape ``(chains, n_visible)`` (for an Ising model
an ``int8`` array of spins -1 and +1; for Gaussian visible units ``float32`` values, for categorical
ones ``int16`` categories); ``--out FILE.fasta`` writes categorical samples as sequences in the
model's alphabet (or ``--alphabet``); ``--out FILE.png`` draws the states as a grid of images (needs
matplotlib, the ``plot`` extra). The image shape comes from the model file's metadata, else from a
square ``n_visible``; categorical states without one are drawn as coloured sequences. Samplers
work on every unit type: Gibbs, flip-the-state where the units have a rule (Metropolized Gibbs for
categorical units; none for Gaussian units), blends and parallel tempering. A DBN runs its chains in the top
RBM and then draws one directed pass down; a mixture draws ancestral samples (``--steps`` unused).
Parallel tempering (``--sampler pt:20``, ``--pt-steps K`` sweeps between swap rounds, ``--ladder``)
keeps the chains at ``beta = 1`` and reports the swap rates and round trips of the replicas.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from boltzkit._numerics import make_generator
from boltzkit.atomic import atomic_open
from boltzkit.cli.common import (
    AlphabetOpt,
    DeviceOpt,
    ForceOpt,
    JsonFlag,
    ModelArg,
    ProgressFlag,
    SeedOpt,
    check_alphabet,
    check_output,
    device_from,
    emit,
    fmt,
    image_shape_of,
    option_given,
    show_progress,
    unit_visible,
    warn,
)
from boltzkit.cli.stack import draw_visible
from boltzkit.data.fasta import alphabet_letters, is_fasta, write_fasta
from boltzkit.errors import BoltzkitError
from boltzkit.io import load_model
from boltzkit.models.dbn import DBN
from boltzkit.models.ising import IsingModel
from boltzkit.models.mixture import MixtureOfBernoullis
from boltzkit.plots._backend import png_writer
from boltzkit.plots.images import unit_grid
from boltzkit.samplers import make_operator, run_chains
from boltzkit.samplers.tempering import LADDERS, ParallelTempering, SwapMonitor, tune_ladder
from boltzkit.units import unit_type


def command(
    ctx: typer.Context,
    model: ModelArg,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Output: FILE.npy (states), FILE.png (image grid) or FILE.fasta (sequences of a categorical "
            "model with an alphabet).",
        ),
    ],
    sampler: Annotated[
        str,
        typer.Option(
            "--sampler",
            help="Transition operator: gibbs, flip, blend:A[,B], a cycle A+B, a repeat A*N, or parallel "
            "tempering pt:T over T temperatures.",
        ),
    ] = "gibbs",
    chains: Annotated[int, typer.Option("--chains", min=1, help="Number of independent chains.")] = 100,
    steps: Annotated[
        int,
        typer.Option(
            "--steps",
            min=0,
            help="Sweeps per chain from a uniform start (with pt:T, swap rounds of --pt-steps sweeps each).",
        ),
    ] = 1000,
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    max_images: Annotated[
        int, typer.Option("--max-images", min=1, help="Most samples drawn in a PNG.")
    ] = 100,
    pt_steps: Annotated[
        int | None,
        typer.Option(
            "--pt-steps", min=1, help="Parallel tempering (--sampler pt:T): sweeps between swap rounds."
        ),
    ] = None,
    ladder: Annotated[
        str,
        typer.Option(
            "--ladder", help="Parallel tempering: uniform, geometric or adaptive (tuned by pilot runs)."
        ),
    ] = "uniform",
    alphabet: AlphabetOpt = None,
    force: ForceOpt = False,
    as_json: JsonFlag = False,
    progress: ProgressFlag = None,
) -> None:
    """Sample from MODEL with Gibbs, flip-the-state, a blend or parallel tempering, and save the
    final visible states."""
    check_output(out, "--out", force=force)
    kind = out.suffix.lower()
    if kind not in (".npy", ".png") and not is_fasta(out):
        raise BoltzkitError(
            "unknown output type", got=str(out), expected="a file ending in .npy, .png or .fasta"
        )
    if ladder not in LADDERS:
        raise BoltzkitError("unknown temperature ladder", got=repr(ladder), expected=", ".join(LADDERS))
    operator = make_operator(sampler)
    tempering = isinstance(operator, ParallelTempering)
    if not tempering and (pt_steps is not None or ladder != "uniform"):
        raise BoltzkitError(
            "--pt-steps and --ladder apply to parallel tempering only"
            + (" (a pt:T sampler itself, not a composition of one)" if operator.keeps_replicas else ""),
            got=f"--sampler {sampler}",
            hint="use e.g. --sampler pt:20 --pt-steps 1 (pt:T@K sweeps K times between swaps)",
        )
    if tempering:
        operator = ParallelTempering(
            operator.n_temperatures, operator.operator, k=pt_steps or operator.k, kind=ladder
        )
    write_png = png_writer("or save the samples to a .npy file.") if kind == ".png" else None
    dev = device_from(device)
    rbm, metadata = load_model(model, device=dev)
    units_of = unit_visible(rbm)  # a UnitRBM, or the bottom of a DBN over real or categorical data
    units = "binary" if units_of is None else units_of.visible_units.name
    if alphabet is not None:  # the model's own letters, on categorical units of as many states
        check_alphabet(units_of if units_of is not None else rbm, alphabet)
    letters = alphabet_letters(alphabet) if alphabet else getattr(units_of, "alphabet", None)
    if is_fasta(out) and (not units.startswith("categorical") or letters is None):
        raise BoltzkitError(
            "sequences are written for categorical models with an alphabet",
            got=f"{units} units" + ("" if letters is None else f", alphabet {letters!r}"),
            hint="train on FASTA with --alphabet (it is recorded in the model), give --alphabet here, "
            "or save to .npy.",
        )
    if letters is not None and is_fasta(out) and len(letters) != units_of.visible_units.n_states:
        raise BoltzkitError(
            "the alphabet does not fit the model",
            got=f"{len(letters)} letters for {units} units",
            expected=f"{units_of.visible_units.n_states} letters",
        )
    # without a known image shape (not a square, none in the file) each sample is drawn as a row of
    # units, as `boltzkit plot samples` draws it
    shape = image_shape_of(metadata, rbm.n_visible) if kind == ".png" else None
    t0 = time.perf_counter()
    generator = make_generator(seed, dev)
    monitor: SwapMonitor | None = None
    if tempering and not isinstance(rbm, MixtureOfBernoullis):
        # chains of every replica (a DBN's in its top RBM); the swap monitor counts acceptances
        # and round trips
        chain_model = rbm.top if isinstance(rbm, DBN) else rbm
        state = operator.extend(chain_model.random_state(chains, generator))
        if operator.adaptive:
            _, state = tune_ladder(
                chain_model, operator, state=state, n_rounds=max(10, steps // 10), generator=generator
            )
        monitor = SwapMonitor(operator.n_temperatures, chains, device=dev)
        state = run_chains(
            chain_model,
            operator,
            state,
            steps,
            generator=generator,
            observers=[monitor],
            progress=show_progress(progress),
        )
        state = operator.project(state)  # the beta = 1 chains only
        if isinstance(rbm, DBN):  # then the directed pass down (S1 Sec. 4.2)
            visible = rbm.generate_down(state.visible, generator=generator, top_hidden=state.hidden)[0]
        else:
            visible = state.visible
    else:
        # a DBN: chains in its top RBM, then a directed pass down; a mixture: ancestral samples
        visible = draw_visible(
            rbm, operator, chains=chains, steps=steps, generator=generator, progress=show_progress(progress)
        )
    seconds = time.perf_counter() - t0
    if units_of is not None:  # real values (float32), or category indices (int16)
        real = not unit_type(units).discrete
        states = visible.detach().cpu().numpy().astype(np.float32 if real else np.int16)
    else:
        states = visible.detach().cpu().numpy().astype(np.uint8)
    if isinstance(rbm, IsingModel):  # spins: a signed type, so that 2x - 1 cannot wrap around
        states = (2 * states.astype(np.int8) - 1).astype(np.int8)
    if write_png is not None:
        drawn = (states + 1) // 2 if isinstance(rbm, IsingModel) else states  # spins as {0, 1}
        write_png(out, unit_grid(drawn, units, shape, max_images))
    elif is_fasta(out):
        write_fasta(out, states, letters)
    else:
        with atomic_open(out, "wb") as f:
            np.save(f, states)
    independent = isinstance(rbm, MixtureOfBernoullis)  # ancestral samples: no chain, no sampler
    unused = [flag for flag in ("sampler", "steps", "pt_steps", "ladder") if option_given(ctx, flag)]
    if independent and unused:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in unused)
        warn(f"a mixture of Bernoullis draws independent samples, no chains: {flags} unused")
    record: dict[str, Any] = {
        "model": str(model),
        "out": str(out),
        "sampler": None if independent else sampler,
        "n_chains": chains,
        "n_steps": None if independent else steps,
        "n_visible": rbm.n_visible,
        "seed": seed,
        "device": str(dev),
        "mean_activation": float(states.mean()),
        "seconds": seconds,
    }
    if monitor is not None:
        record.update(
            pt_steps=operator.k,
            ladder=ladder,
            betas=[round(float(b), 6) for b in operator.betas],
            swap_rates=[float(r) for r in monitor.swap_rates],
            round_trips=monitor.round_trips,
        )

    what = "spin (magnetisation per spin)" if isinstance(rbm, IsingModel) else "visible activation"
    if units_of is not None:
        what = "visible value"

    def human() -> str:
        text = (
            f"{chains} independent samples of the mixture"
            if metadata.get("kind") == "mixture"
            else f"{chains} chains x {steps} sweeps of {sampler}"
        ) + f" in {fmt(seconds, 2)} s -> {out} (mean {what} {fmt(record['mean_activation'], 3)})"
        if monitor is not None:
            rates = ", ".join(f"{r:.2f}" for r in record["swap_rates"])
            text += f"\nswap rates (hot to cold): {rates}; round trips: {record['round_trips']}"
        return text

    emit(record, as_json=as_json, human=human)
