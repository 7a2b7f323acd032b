"""Analysis of sublayer-order sweeps: MLflow runs (or the paper's tables) -> tidy pandas
frame -> pure study functions -> matplotlib figures and an HTML report. Never trains."""

from . import iot_paper, paper, plots, runs
from .attention_distance import (
    attention_distance,
    distance_table,
    group_distances,
    layer_distances,
    synthetic_attention,
)
from .distribution import DistributionInfo, distribution
from .errors import AnalysisError
from .frame import (
    HISTORY_COLUMNS,
    TRIAL_COLUMNS,
    BaselineStats,
    baseline_stats,
    lower_is_better,
    trials_frame,
    validate_trials,
)
from .halves import HalvesInfo, MannWhitney, Spearman, halves_study, position_map
from .iot import (
    RoutingMatrixInfo,
    RoutingSharesInfo,
    SubsetsInfo,
    iot_baseline,
    is_translation,
    routing_matrix,
    routing_shares,
    subset_study,
    translation_seeds,
)
from .report import Report, attach_to_sweep, experiment_report, iot_paper_report, paper_report
from .sandwich import SandwichInfo, sandwich_curve
from .seeds import SeedsInfo, seed_comparison, seed_comparison_from_stats

__all__ = [
    "HISTORY_COLUMNS",
    "TRIAL_COLUMNS",
    "AnalysisError",
    "BaselineStats",
    "DistributionInfo",
    "HalvesInfo",
    "MannWhitney",
    "Report",
    "RoutingMatrixInfo",
    "RoutingSharesInfo",
    "SandwichInfo",
    "SeedsInfo",
    "Spearman",
    "SubsetsInfo",
    "attach_to_sweep",
    "attention_distance",
    "baseline_stats",
    "distance_table",
    "distribution",
    "experiment_report",
    "group_distances",
    "halves_study",
    "iot_baseline",
    "iot_paper",
    "iot_paper_report",
    "is_translation",
    "layer_distances",
    "lower_is_better",
    "paper",
    "paper_report",
    "plots",
    "position_map",
    "routing_matrix",
    "routing_shares",
    "runs",
    "sandwich_curve",
    "seed_comparison",
    "seed_comparison_from_stats",
    "subset_study",
    "synthetic_attention",
    "trials_frame",
    "translation_seeds",
    "validate_trials",
]
