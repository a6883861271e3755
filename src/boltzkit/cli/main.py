"""The ``boltzkit`` command: a typer app with one module per subcommand.

Every subcommand runs in this process. Progress goes to stderr; ``--json`` makes the last stdout
line one JSON object. Errors end in one line ``error: ...`` on stderr and a non-zero exit status
(``--debug`` shows the traceback instead); see :mod:`boltzkit.cli.common`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from boltzkit import __version__
from boltzkit.cli import convert, evaluate, logz, mixing, plot, reproduce, sample, train, zoo
from boltzkit.cli.common import BoltzkitCommand

app = typer.Typer(
    name="boltzkit",
    help="Train Boltzmann machines and measure them: exact and AIS log Z, test log-likelihoods, samples.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"boltzkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback of an error.")] = False,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads",
            min=1,
            help="CPU threads of torch [default: torch's, one per core]. Give each of several boltzkit "
            "processes sharing a machine cores / processes threads: two default-threaded processes on "
            "two cores each run many times slower.",
        ),
    ] = None,
) -> None:
    """Train Boltzmann machines and measure them: exact and AIS log Z, test log-likelihoods, samples."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


for _name, _module in (
    ("train", train),
    ("logz", logz),
    ("evaluate", evaluate),
    ("sample", sample),
    ("mixing", mixing),
    ("plot", plot),
    ("reproduce", reproduce),
    ("convert", convert),
):
    app.command(_name, cls=BoltzkitCommand)(_module.command)
app.add_typer(zoo.app, name="zoo")


def main() -> None:
    """Entry point of the ``boltzkit`` console script."""
    app(prog_name="boltzkit")


if __name__ == "__main__":
    main()
