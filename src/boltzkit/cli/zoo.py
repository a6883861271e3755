"""``boltzkit zoo``: the trained models published with boltzkit.

``boltzkit zoo`` (or ``zoo list``) lists them with their measured test log-probabilities;
``zoo show NAME`` prints a card; ``zoo verify [NAME ...]`` checks each card against its file
(sha256, kind, layer sizes) and recomputes the card's check log-probability from the file;
``zoo add NAME MODEL`` measures a trained model and publishes it with its card; ``zoo rename OLD
NEW`` publishes one under another name. Every other command takes ``zoo:NAME`` where it takes a
model file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from boltzkit.cli.common import (
    BetasOpt,
    BoltzkitCommand,
    BoltzkitGroup,
    DataDirOpt,
    DeviceOpt,
    JsonFlag,
    ProgressFlag,
    SeedOpt,
    band_text,
    describe_error,
    device_from,
    emit,
    fmt,
    show_progress,
    unit_visible,
    warn,
)
from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError, ModelFileError
from boltzkit.experiments.report import recipe_label
from boltzkit.io import load_model
from boltzkit.io.zoo import file_sha256, missing_text, model_path, names, read_card, unpaired, zoo_dir
from boltzkit.learning.recipes import RECIPES, recipe_differences
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.dbn import DBN
from boltzkit.zoo import verify_file

app = typer.Typer(
    name="zoo",
    cls=BoltzkitGroup,
    help="The trained models published with boltzkit: list, show, verify, add, rename.",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _test_cell(card: dict[str, Any]) -> str:
    test = card.get("test") or {}
    value = fmt(test.get("mean_log_prob"), 2)
    lo, hi = test.get("mean_log_prob_minus_3sigma"), test.get("mean_log_prob_plus_3sigma")
    log_z = card.get("log_z") or {}
    if log_z.get("reliable") is False:
        value += " (unreliable log Z)"
    elif log_z.get("method") != "exact" and lo is not None and hi is not None:
        value += f" [{fmt(lo, 2)}, {fmt(hi, 2)}]"
    if test.get("bound") == "lower":
        value += " (lower bound)"
    return value


def _rows() -> list[dict[str, Any]]:
    """One row per zoo model; a card that cannot be read is a row with its ``problem`` (and a
    warning), so that one bad card does not hide the others."""
    rows = []
    for name in names():
        try:
            card = read_card(name)
        except ModelFileError as exc:
            warn(f"zoo model {name} skipped: {describe_error(exc)}")
            rows.append({"name": name, "problem": describe_error(exc)})
            continue
        paper = card.get("paper") or {}
        # a file changed or replaced under its card: the card's figures are not its own, and the
        # listing gives none (text and JSON alike)
        matches = file_sha256(model_path(name)) == card.get("sha256")
        rows.append(
            {
                "name": name,
                "file_matches_card": matches,
                "kind": card.get("kind"),
                "layer_sizes": card.get("layer_sizes"),
                "test_log_prob": (card.get("test") or {}).get("mean_log_prob") if matches else None,
                "test_bound": (card.get("test") or {}).get("bound"),
                "log_z": (card.get("log_z") or {}).get("log_z") if matches else None,
                "log_z_method": (card.get("log_z") or {}).get("method"),
                "reliable": (card.get("log_z") or {}).get("reliable"),
                "paper_test": paper.get("test"),
                "paper": paper.get("source"),
                "cell": _test_cell(card) if matches else None,
            }
        )
    for name, missing in unpaired().items():  # half a pair: no model of the zoo, and said so
        warn(f"zoo file {name} skipped: {missing}")
        rows.append({"name": name, "problem": missing})
    return rows


def _json_wanted(ctx: typer.Context, as_json: bool) -> bool:
    """``--json`` given to the subcommand or to ``zoo`` itself."""
    return as_json or bool((ctx.obj or {}).get("json"))


def _table(rows: list[dict[str, Any]], header: bool = True) -> str:
    if not rows:
        why = missing_text()
        return f"the zoo is empty: {why}" if why else f"the zoo is empty ({zoo_dir()})"
    lines = [f"{len(rows)} models in {zoo_dir()} (load one as zoo:NAME):"] if header else []
    width = max(28, *(len(r["name"]) for r in rows))
    for r in rows:
        if r.get("problem"):
            what = "half a pair" if "has no" in r["problem"] else "unreadable card"
            lines.append(f"  {r['name']:<{width}} ({what}: see the warning)")
            continue
        shape = "x".join(str(n) for n in r["layer_sizes"] or [])
        paper = f"; paper {fmt(r['paper_test'], 2)} ({r['paper']})" if r["paper_test"] is not None else ""
        kind = str(r["kind"]).upper()
        changed = f"? (the file is not its card's: zoo verify {r['name']})"
        cell = r["cell"] if r["file_matches_card"] else changed
        lines.append(f"  {r['name']:<{width}} {kind:<4} {shape:<14} test {cell}{paper}")
    return "\n".join(lines)


@app.callback()
def _root(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The trained models published with boltzkit: list (default), show, verify, add, rename."""
    ctx.obj = {"json": as_json}  # `zoo --json show NAME` as `zoo show NAME --json`
    if ctx.invoked_subcommand is None:
        rows = _rows()
        emit({"zoo": str(zoo_dir()), "models": rows}, as_json=as_json, human=lambda: _table(rows))


@app.command("list", cls=BoltzkitCommand)
def list_command(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List the zoo's models with their measured test log-probabilities."""
    rows = _rows()
    emit(
        {"zoo": str(zoo_dir()), "models": rows},
        as_json=_json_wanted(ctx, as_json),
        human=lambda: _table(rows),
    )


def _recipe_text(card: dict[str, Any]) -> str:
    """A card's recipe, with the settings in which its model departs from it (flags given over the
    recipe in its command), e.g. ``sm2008-cd3 (lr 0.05, epochs 100)``."""
    name, used = card.get("recipe"), card.get("training")
    if not isinstance(name, str) or name.lower() not in RECIPES or not isinstance(used, dict):
        return str(name)
    return recipe_label(name, {"recipe_differences": recipe_differences(RECIPES[name.lower()], used)})


@app.command("show", cls=BoltzkitCommand)
def show_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="A zoo model's name.")],
    as_json: JsonFlag = False,
) -> None:
    """Print a model's card: recipe, command, seed, seconds, machine, log Z and log-probabilities."""
    name = _published_name(name)
    card = read_card(name)
    matches = file_sha256(model_path(name)) == card.get("sha256")
    if not matches:
        warn(
            f"the model file of {card['name']} is not the one its card describes (another sha256): the "
            f"card's figures do not hold for it; `boltzkit zoo verify {card['name']}` says what differs"
        )
    card = {**card, "file_matches_card": matches}

    def human() -> str:
        log_z = card.get("log_z") or {}
        changed = [] if matches else ["  FILE CHANGED: the figures below are the card's, not the file's"]
        lines = [
            f"{card['name']}: {str(card.get('kind')).upper()} {card.get('layer_sizes')}",
            *changed,
            f"  trained by: {card.get('command')}",
            f"  recipe: {_recipe_text(card)}; seed {card.get('seed')}; "
            f"{fmt(card.get('training_seconds'), 0)} s on {card.get('machine')}",
            f"  log Z ({log_z.get('method')}): {fmt(log_z.get('log_z'))}"
            + ("" if log_z.get("method") == "exact" else f" {band_text(log_z, 'log_z')}"),
        ]
        if log_z.get("reliable") is False:
            lines.append(f"  UNRELIABLE: {log_z.get('reliability_reason')} (advice: {log_z.get('advice')})")
        if log_z.get("upper"):
            lines.append(
                f"    ends: forward AIS {fmt((log_z.get('lower') or {}).get('log_z'))}, reverse AIS "
                f"{fmt(log_z['upper'].get('log_z'))} ({log_z['upper'].get('bound')})"
            )
        for split in ("train", "test"):
            rec = card.get(split) or {}
            what = "lower bound on mean log p(v)" if rec.get("bound") == "lower" else "mean log p(v)"
            shaky = " (from the unreliable log Z)" if log_z.get("reliable") is False else ""
            lines.append(f"  {split}: {what} {fmt(rec.get('mean_log_prob'), 2)} (n = {rec.get('n')}){shaky}")
        paper = card.get("paper")
        if paper:
            lines.append(
                f"  paper ({paper.get('source')}): test {paper.get('test')}, train {paper.get('train')}"
            )
        return "\n".join(lines)

    emit(card, as_json=_json_wanted(ctx, as_json), human=human)


def _published_name(name: str) -> str:
    """``name`` as the zoo publishes it (``ZOO:``/``zoo:`` prefix and letter case as typed); a name
    not in the zoo unchanged (its check then names the problem)."""
    try:
        return model_path(name).stem
    except ModelFileError:
        return name.strip().removeprefix("zoo:")


@app.command("verify", cls=BoltzkitCommand)
def verify_command(
    ctx: typer.Context,
    names_: Annotated[
        list[str] | None, typer.Argument(metavar="[NAME]...", help="Models (default: all).")
    ] = None,
    data_dir: DataDirOpt = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Only compare files (no log-probabilities).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Check each card against its file (sha256, kind, sizes) and recompute its check log-probability."""
    from boltzkit.experiments.zoo_cards import recompute_check

    chosen = [_published_name(n) for n in names_] if names_ else names()
    halves = unpaired() if not names_ else {}
    results = [{"name": n, "ok": False, "problems": [why], "check": None} for n, why in halves.items()]
    for name in chosen:
        try:
            problems = verify_file(name)
        except ModelFileError as exc:  # an unreadable card or file: this model fails, the rest go on
            results.append({"name": name, "ok": False, "problems": [describe_error(exc)], "check": None})
            continue
        try:
            check = None if quick else recompute_check(name, data_dir=data_dir)
        except BoltzkitError as exc:  # its check images missing, say: not verified, the rest go on
            problems.append(f"check log-probability not recomputed: {describe_error(exc)}")
            results.append({"name": name, "ok": False, "problems": problems, "check": None})
            continue
        if check is not None and not check["within"]:
            problems.append(
                f"check log-probability {check['mean_log_prob']:.4f} outside the card's "
                f"[{check['lower']:.4f}, {check['upper']:.4f}]"
            )
        results.append({"name": name, "ok": not problems, "problems": problems, "check": check})
    record = {"zoo": str(zoo_dir()), "models": results, "ok": all(r["ok"] for r in results)}

    def human() -> str:
        lines = []
        for r in results:
            status = "ok" if r["ok"] else "FAILED: " + "; ".join(r["problems"])
            extra = "" if r["check"] is None else f" (check {r['check']['mean_log_prob']:.3f})"
            lines.append(f"{r['name']}: {status}{extra}")
        return "\n".join(lines) or "the zoo is empty"

    emit(record, as_json=_json_wanted(ctx, as_json), human=human)
    if not record["ok"]:
        raise typer.Exit(1)


@app.command("add", cls=BoltzkitCommand)
def add_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The zoo name, e.g. sm2008-cd1-500.")],
    model: Annotated[Path, typer.Argument(metavar="MODEL", help="The trained model file.")],
    data: Annotated[str, typer.Option("--data", help="The training data (and the base-rate model's).")],
    test_data: Annotated[
        str, typer.Option("--test-data", help="The test data's spec (its test split).")
    ] = "mnist",
    command: Annotated[
        str | None,
        typer.Option("--command", help="The command that trained MODEL [default: from its metadata]."),
    ] = None,
    chains: Annotated[int, typer.Option("--chains", min=1, help="AIS runs in each direction.")] = 100,
    betas: BetasOpt = None,
    seed: SeedOpt = 0,
    reverse: Annotated[
        bool, typer.Option("--reverse/--no-reverse", help="Confirm AIS by reverse AIS (the sandwich).")
    ] = True,
    samples: Annotated[int, typer.Option("--samples", min=1, help="DBN: samples of q per image.")] = 5,
    exact_max_bits: Annotated[
        int,
        typer.Option("--exact-max-bits", min=0, max=30, help="Exact log Z up to this many enumerated units."),
    ] = 25,
    paper_source: Annotated[str | None, typer.Option("--paper-source", help="E.g. 'S1 Table 1'.")] = None,
    paper_test: Annotated[float | None, typer.Option("--paper-test", help="The paper's test value.")] = None,
    paper_train: Annotated[
        float | None, typer.Option("--paper-train", help="The paper's train value.")
    ] = None,
    notes: Annotated[str | None, typer.Option("--notes", help="Free text for the card.")] = None,
    data_dir: DataDirOpt = None,
    device: DeviceOpt = "cpu",
    force: Annotated[
        bool, typer.Option("--force", help="Replace a zoo model of the same name (file and card).")
    ] = False,
    as_json: JsonFlag = False,
    progress: ProgressFlag = None,
) -> None:
    """Measure a trained model (log Z, train/test log-probabilities) and publish it to the zoo."""
    from boltzkit.experiments.zoo_cards import check_name, measure, publish

    check_name(name)  # before minutes of measuring
    if not force and name in names():
        raise BoltzkitError(
            "the zoo already has a model of this name",
            got=f"{name!r} in {zoo_dir()}",
            hint=f"pass --force to replace it (`boltzkit zoo show {name}` shows what it holds), or "
            "choose another name.",
        )
    trained, metadata = load_model(model, device=device_from(device))
    units_of = unit_visible(trained)
    if units_of is not None:
        raise BoltzkitError(
            "the zoo holds models of binary units: its cards are measured on 0/1 data",
            got=f"{units_of.visible_units.name} visible units",
            hint="share the model file itself; evaluate and logz measure it.",
        )
    if not isinstance(trained, (BoltzmannMachine, DBN)):
        raise BoltzkitError(
            "the zoo holds Boltzmann machines and DBNs: its cards record log Z and log-probabilities",
            got=f"a {metadata.get('kind', type(trained).__name__)} model",
            hint="share the model file itself; evaluate measures it.",
        )
    train_x = load_dataset(data, split="train", data_dir=data_dir, n_visible=trained.n_visible).x
    test_x = load_dataset(test_data, split="test", data_dir=data_dir, n_visible=trained.n_visible).x
    measured = measure(
        trained, train_x=train_x, test_x=test_x, n_chains=chains, betas=betas or "paper", seed=seed,
        exact_max_bits=exact_max_bits, reverse=reverse, dbn_samples=samples, progress=show_progress(progress),
    )  # fmt: skip
    if measured["log_z"].get("reliable") is False:
        warn(f"log Z of {name} is unreliable: {measured['log_z'].get('reliability_reason')}")
    paper = None
    if paper_source or paper_test is not None:
        paper = {"source": paper_source, "test": paper_test, "train": paper_train}
    command = command or (metadata.get("training") or {}).get("command") or "(not recorded)"
    target = publish(
        model,
        name,
        measured=measured,
        command=command,
        data=data,
        test_data=test_data,
        paper=paper,
        notes=notes,
    )
    card = read_card(name)
    emit(
        card,
        as_json=_json_wanted(ctx, as_json),
        human=lambda: (
            f"added {name} -> {target}\n" + _table([r for r in _rows() if r["name"] == name], header=False)
        ),
    )


__all__ = ["app"]


@app.command("rename", cls=BoltzkitCommand)
def rename_command(
    ctx: typer.Context,
    old: Annotated[str, typer.Argument(metavar="OLD", help="The zoo model's name now.")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="Its new name.")],
    as_json: JsonFlag = False,
) -> None:
    """Publish a zoo model under another name: its file and card again, measurements unchanged."""
    from boltzkit.experiments.zoo_cards import rename

    target = rename(old.strip().removeprefix("zoo:"), new.strip().removeprefix("zoo:"))
    card = read_card(target.stem)
    emit(card, as_json=_json_wanted(ctx, as_json), human=lambda: f"renamed {old} -> {new} ({target})")
