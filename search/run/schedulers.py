"""Trial schedulers: ASHA over the candidates, never over the baseline seeds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray.tune.schedulers import ASHAScheduler, TrialScheduler

__all__ = ["CandidateASHA", "is_baseline"]


def is_baseline(trial: Any) -> bool:
    """Whether a Ray trial trains one of the sweep's baseline seeds."""
    planned = (getattr(trial, "config", None) or {}).get("trial")
    if isinstance(planned, Mapping):  # a recorded curve replayed (``sublayer replay``)
        return bool(planned.get("baseline"))
    return planned is not None and bool(planned.baseline)  # a sweep's Trial


class CandidateASHA(ASHAScheduler):
    """ASHA that stops candidates early but lets every baseline seed train to the end.

    Each candidate is compared with fully trained baselines (Narang et al. 2021: several
    baseline seeds at equal compute), so the baseline never enters ASHA's rungs: it is
    neither stopped nor used to set a rung's cutoff.
    """

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if is_baseline(trial):
            return str(TrialScheduler.CONTINUE)
        return str(super().on_trial_result(tune_controller, trial, result))

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        if is_baseline(trial):
            self._trial_info.pop(trial.trial_id, None)
            return
        super().on_trial_complete(tune_controller, trial, result)
