"""Analysis of sublayer-order sweeps: MLflow runs (or the paper's tables) -> tidy pandas
frame -> pure study functions -> matplotlib figures and an HTML report. Never trains."""

from typing import TYPE_CHECKING

from sublayer_search.spaces.lazy import SUBMODULE, lazy_exports

# imported on first use (spaces.lazy): `sublayer sweep --dry-run` and `sublayer --help` do
# not import matplotlib, scipy and pandas through this package
_EXPORTS = {
    # modules under their short names (the folders: store/, papers/, studies/, figures/, report/)
    "crossformer_paper": SUBMODULE + ":papers.crossformer_paper",
    "iot_paper": SUBMODULE + ":papers.iot_paper",
    "paper": SUBMODULE + ":papers.press_paper",
    "plots": SUBMODULE + ":figures.plots",
    "runs": SUBMODULE + ":store.runs",
    "study_export": SUBMODULE + ":store.study_export",
    "attention_distance": "studies.attention_distances",
    "distance_table": "studies.attention_distances",
    "group_distances": "studies.attention_distances",
    "layer_distances": "studies.attention_distances",
    "synthetic_attention": "studies.attention_distances",
    "DistributionInfo": "studies.distribution",
    "distribution": "studies.distribution",
    "AnalysisError": "errors",
    "HISTORY_COLUMNS": "store.frame",
    "TRIAL_COLUMNS": "store.frame",
    "BaselineStats": "store.frame",
    "baseline_stats": "store.frame",
    "lower_is_better": "store.frame",
    "trials_frame": "store.frame",
    "validate_trials": "store.frame",
    "GuidanceInfo": "studies.guidance",
    "guidance_study": "studies.guidance",
    "has_guidance": "store.guidance_frame",
    "HalvesInfo": "studies.halves",
    "MannWhitney": "studies.halves",
    "Spearman": "studies.halves",
    "halves_study": "studies.halves",
    "position_map": "studies.halves",
    "RoutingMatrixInfo": "studies.iot_routing",
    "RoutingSharesInfo": "studies.iot_routing",
    "SubsetsInfo": "studies.iot_subsets",
    "iot_baseline": "store.iot_frame",
    "is_translation": "store.iot_frame",
    "routing_matrix": "studies.iot_routing",
    "routing_shares": "studies.iot_routing",
    "subset_study": "studies.iot_subsets",
    "translation_seeds": "studies.iot_seeds",
    "Report": "report.build",
    "attach_to_sweep": "report.build",
    "crossformer_paper_report": "report.build",
    "experiment_report": "report.build",
    "iot_paper_report": "report.build",
    "paper_report": "report.build",
    "SandwichInfo": "studies.sandwich",
    "headline": "studies.sandwich",
    "leaders": "studies.sandwich",
    "sandwich_curve": "studies.sandwich",
    "SeedsInfo": "studies.seeds",
    "seed_comparison": "studies.seeds",
    "seed_comparison_from_stats": "studies.seeds",
    "BUILTIN_EXPORTS": "store.study_export",
    "StudyExport": "store.study_export",
    "builtin_export": "store.study_export",
    "read_export": "store.study_export",
    "write_export": "store.study_export",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from sublayer_search.analysis.errors import AnalysisError
    from sublayer_search.analysis.figures import plots as plots
    from sublayer_search.analysis.papers import crossformer_paper, iot_paper
    from sublayer_search.analysis.papers import press_paper as paper
    from sublayer_search.analysis.report.build import (
        Report,
        attach_to_sweep,
        crossformer_paper_report,
        experiment_report,
        iot_paper_report,
        paper_report,
    )
    from sublayer_search.analysis.store import runs, study_export
    from sublayer_search.analysis.store.frame import (
        HISTORY_COLUMNS,
        TRIAL_COLUMNS,
        BaselineStats,
        baseline_stats,
        lower_is_better,
        trials_frame,
        validate_trials,
    )
    from sublayer_search.analysis.store.guidance_frame import has_guidance
    from sublayer_search.analysis.store.iot_frame import iot_baseline, is_translation
    from sublayer_search.analysis.store.study_export import (
        BUILTIN_EXPORTS,
        StudyExport,
        builtin_export,
        read_export,
        write_export,
    )
    from sublayer_search.analysis.studies.attention_distances import (
        attention_distance,
        distance_table,
        group_distances,
        layer_distances,
        synthetic_attention,
    )
    from sublayer_search.analysis.studies.distribution import DistributionInfo, distribution
    from sublayer_search.analysis.studies.guidance import GuidanceInfo, guidance_study
    from sublayer_search.analysis.studies.halves import (
        HalvesInfo,
        MannWhitney,
        Spearman,
        halves_study,
        position_map,
    )
    from sublayer_search.analysis.studies.iot_routing import (
        RoutingMatrixInfo,
        RoutingSharesInfo,
        routing_matrix,
        routing_shares,
    )
    from sublayer_search.analysis.studies.iot_seeds import translation_seeds
    from sublayer_search.analysis.studies.iot_subsets import SubsetsInfo, subset_study
    from sublayer_search.analysis.studies.sandwich import (
        SandwichInfo,
        headline,
        leaders,
        sandwich_curve,
    )
    from sublayer_search.analysis.studies.seeds import (
        SeedsInfo,
        seed_comparison,
        seed_comparison_from_stats,
    )
