"""Paper reproductions as declarative experiment specs, run by ``boltzkit reproduce NAME``."""

from boltzkit.experiments.registry import EXPERIMENTS, run_experiment

__all__ = ["EXPERIMENTS", "run_experiment"]
