"""The orchestrator: experiment files, Ray Tune trials, searchers, MLflow tracking, the CLI.

Ray and MLflow are imported only by the modules that need them (``sweep``,
``trainable``, ``searchers``, ``tracking``): validating an experiment file or
``sublayer train`` never starts Ray nor touches MLflow.
"""

from search.config import Experiment, load_experiment
from search.plan import SweepPlan, Trial, plan_sweep, trial_table
from search.problems import ExperimentError, Problem

__all__ = ["Experiment", "ExperimentError", "Problem", "SweepPlan", "Trial", "load_experiment",
           "plan_sweep", "trial_table"]
