"""The README's commands work as written.

The README opens with the two set-up commands (install, run the tests), then the main job in one
command. The ``boltzkit`` commands and the Python example are run here, in a temporary folder;
the MNIST ones only when the data are available (``BOLTZKIT_DATA_DIR``, as in CI).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from boltzkit.cli.main import app

README = Path(__file__).resolve().parents[1] / "README.md"
needs_mnist = pytest.mark.skipif(
    not os.environ.get("BOLTZKIT_DATA_DIR"),
    reason="binarized MNIST not configured: set BOLTZKIT_DATA_DIR (README, 'Where the data is')",
)


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


def shell_commands() -> list[str]:
    commands = []
    for block in code_blocks("bash"):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands.extend(part.strip() for part in line.split("&&"))
    return commands


def data_blocks() -> list[str]:
    """Python blocks that only write data files for the commands (numpy, no boltzkit)."""
    return [b for b in code_blocks("python") if "np.save" in b and "boltzkit" not in b]


def test_readme_opens_with_install_then_test_command():
    """Install, run the tests (pointing them at the data), then the main job."""
    commands = shell_commands()
    assert commands[0].startswith("pip install -e"), commands[0]
    assert commands[1].startswith("BOLTZKIT_DATA_DIR=") and commands[1].endswith("python -m pytest -q")
    assert commands[2].startswith("export BOLTZKIT_DATA_DIR="), commands[2]  # the main job's data
    ci = (README.parent / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]"' in ci and "-m pytest -q" in ci  # CI runs the README's commands


#: A command whose README comment states a time of at least this many seconds, e.g. ``(27 s)``,
#: writes nothing later commands read and runs only in the slow run (its feature is tested elsewhere).
LONG_SECONDS = 15


def stated_seconds(command: str) -> int:
    """The time a README command's comment states, ``(N s)``, or 0."""
    found = re.search(r"#.*\((\d+) s\)", command)
    return int(found.group(1)) if found else 0


def run_readme_commands(tmp_path, monkeypatch, *, long: bool) -> None:
    """The README's ``boltzkit ...`` lines, in order, in one folder (the later ones use the model the
    main job saved); those stated to take ``LONG_SECONDS`` or more only when ``long``."""
    monkeypatch.chdir(tmp_path)
    for block in data_blocks():  # the files the commands read (the Ising lattice, the spin glass)
        exec(compile(block, str(README), "exec"), {})  # noqa: S102 - the README's own example
    runner = CliRunner()
    commands = [c for c in shell_commands() if c.startswith("boltzkit ")]
    assert commands and commands[0].startswith("boltzkit train"), commands
    for command in commands:
        if not long and stated_seconds(command) >= LONG_SECONDS:
            continue
        args = shlex.split(command, comments=True)[1:]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (command, result.output)
        if "--json" in args:
            json.loads(result.stdout.strip().splitlines()[-1])
    main_job = runner.invoke(app, ["logz", "rbm.safetensors", "--method", "exact", "--json"])
    assert json.loads(main_job.stdout.strip().splitlines()[-1])["log_z"] > 0


@needs_mnist
@pytest.mark.mnist
def test_readme_boltzkit_commands_run(tmp_path, monkeypatch):
    """Every ``boltzkit ...`` line of the README but the few stated to take long."""
    run_readme_commands(tmp_path, monkeypatch, long=False)


@needs_mnist
@pytest.mark.mnist
@pytest.mark.slow
def test_readme_boltzkit_commands_run_all(tmp_path, monkeypatch):
    """Every ``boltzkit ...`` line of the README, the long ones included (``-m slow``)."""
    run_readme_commands(tmp_path, monkeypatch, long=True)


def test_the_long_readme_commands_are_few_and_stated():
    """The default run leaves out only commands whose README comment states their time."""
    long = [c for c in shell_commands() if stated_seconds(c) >= LONG_SECONDS]
    assert len(long) <= 2, long
    assert all(c.startswith("boltzkit logz") for c in long), long


def test_readme_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # the scikit-learn example is run by tests/test_sklearn.py
    (example,) = [b for b in code_blocks("python") if "boltzkit.sklearn" not in b and b not in data_blocks()]
    namespace: dict = {}
    exec(compile(example, str(README), "exec"), namespace)  # noqa: S102 - the README's own example
    assert namespace["ais"].log_z == pytest.approx(
        namespace["exact"].log_z, abs=5 * namespace["ais"].log_z_stderr + 1e-9
    )
    assert (tmp_path / "bas.safetensors").is_file()
