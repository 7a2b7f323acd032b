"""Analysis of sublayer-order sweeps: MLflow runs (or the paper's tables) -> tidy pandas
frame -> pure study functions -> matplotlib figures and an HTML report. Never trains."""

from typing import TYPE_CHECKING

from sublayer_search.spaces.lazy import SUBMODULE, lazy_exports

# imported on first use (spaces.lazy): `sublayer sweep --dry-run` and `sublayer --help` do
# not import matplotlib, scipy and pandas through this package
_EXPORTS = {
    "crossformer_paper": SUBMODULE,
    "iot_paper": SUBMODULE,
    "paper": SUBMODULE,
    "plots": SUBMODULE,
    "runs": SUBMODULE,
    "study_export": SUBMODULE,
    "attention_distance": "attention_distances",
    "distance_table": "attention_distances",
    "group_distances": "attention_distances",
    "layer_distances": "attention_distances",
    "synthetic_attention": "attention_distances",
    "DistributionInfo": "distribution_study",
    "distribution": "distribution_study",
    "AnalysisError": "errors",
    "HISTORY_COLUMNS": "frame",
    "TRIAL_COLUMNS": "frame",
    "BaselineStats": "frame",
    "baseline_stats": "frame",
    "lower_is_better": "frame",
    "trials_frame": "frame",
    "validate_trials": "frame",
    "GuidanceInfo": "guidance",
    "guidance_study": "guidance",
    "has_guidance": "guidance_frame",
    "HalvesInfo": "halves",
    "MannWhitney": "halves",
    "Spearman": "halves",
    "halves_study": "halves",
    "position_map": "halves",
    "RoutingMatrixInfo": "iot",
    "RoutingSharesInfo": "iot",
    "SubsetsInfo": "iot",
    "iot_baseline": "iot",
    "is_translation": "iot",
    "routing_matrix": "iot",
    "routing_shares": "iot",
    "subset_study": "iot",
    "translation_seeds": "iot",
    "Report": "report",
    "attach_to_sweep": "report",
    "crossformer_paper_report": "report",
    "experiment_report": "report",
    "iot_paper_report": "report",
    "paper_report": "report",
    "SandwichInfo": "sandwich",
    "sandwich_curve": "sandwich",
    "SeedsInfo": "seeds",
    "seed_comparison": "seeds",
    "seed_comparison_from_stats": "seeds",
    "BUILTIN_EXPORTS": "study_export",
    "StudyExport": "study_export",
    "builtin_export": "study_export",
    "read_export": "study_export",
    "write_export": "study_export",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from . import crossformer_paper, iot_paper, paper, plots, runs, study_export
    from .attention_distances import (
        attention_distance,
        distance_table,
        group_distances,
        layer_distances,
        synthetic_attention,
    )
    from .distribution_study import DistributionInfo, distribution
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
    from .guidance import GuidanceInfo, guidance_study
    from .guidance_frame import has_guidance
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
    from .report import (
        Report,
        attach_to_sweep,
        crossformer_paper_report,
        experiment_report,
        iot_paper_report,
        paper_report,
    )
    from .sandwich import SandwichInfo, sandwich_curve
    from .seeds import SeedsInfo, seed_comparison, seed_comparison_from_stats
    from .study_export import (
        BUILTIN_EXPORTS,
        StudyExport,
        builtin_export,
        read_export,
        write_export,
    )
