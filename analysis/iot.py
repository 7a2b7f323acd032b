"""Translation / IOT studies (Zhu et al. 2021): BLEU per block-order subset and per
subset size, routing shares, the per-split x per-order BLEU matrix, and seeds.

Input is the trial frame of :func:`analysis.runs.load` for a translation sweep: IOT
trials carry ``subset`` (canonical id, e.g. ``"1246"``), ``subset_size``, and the final
``route_share_<code>`` values; the routing matrix comes from
:func:`analysis.runs.load_routing`. BLEU is higher-is-better everywhere.

The reference ("baseline") is the set of finished trials flagged ``baseline`` (family
``baseline``: the standard ``scf`` Transformer over several seeds); when there are none,
the trials of subset ``{1}`` (the plain Transformer) stand in, and ``baseline_source``
says so. Neither → AnalysisError.

One module per study: :mod:`analysis.iot_frame` (subset ids, the baseline),
:mod:`analysis.iot_subsets`, :mod:`analysis.iot_routing`, :mod:`analysis.iot_seeds`;
this module gathers their public names.
"""

from __future__ import annotations

from .iot_frame import BASELINE_TRIALS as BASELINE_TRIALS
from .iot_frame import SUBSET_ONE as SUBSET_ONE
from .iot_frame import iot_baseline, is_translation
from .iot_routing import RoutingMatrixInfo, RoutingSharesInfo, routing_matrix, routing_shares
from .iot_seeds import translation_seeds
from .iot_subsets import SubsetsInfo, subset_study

__all__ = [
    "RoutingMatrixInfo",
    "RoutingSharesInfo",
    "SubsetsInfo",
    "is_translation",
    "iot_baseline",
    "routing_matrix",
    "routing_shares",
    "subset_study",
    "translation_seeds",
]
