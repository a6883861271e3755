"""``python -m boltzkit``: the same as the ``boltzkit`` command."""

from boltzkit.cli.main import main

main()
