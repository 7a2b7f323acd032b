"""The orchestrator: experiment files, Ray Tune trials, searchers, MLflow tracking, the CLI.

Ray and MLflow are imported only by the modules that need them (``sweep``,
``trainable``, ``searchers``, ``tracking``): validating an experiment file or
``sublayer train`` never starts Ray nor touches MLflow.
"""

from sublayer_search.search.core.problems import ExperimentError, Problem
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.plan.experiment import Experiment, load_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import SweepPlan, trial_table

__all__ = ["Experiment", "ExperimentError", "Problem", "SweepPlan", "Trial", "load_experiment",
           "plan_sweep", "trial_table"]
