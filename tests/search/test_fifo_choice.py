"""The schedulers pick the next trial as Ray's FIFO does, from the trials not yet ended."""

from __future__ import annotations

import pickle
import random
from types import SimpleNamespace

from ray.tune.experiment import Trial as RayTrial
from ray.tune.schedulers import FIFOScheduler

from sublayer_search.search.stopping.schedulers import CandidateASHA, Fifo

STATUSES = (RayTrial.PENDING, RayTrial.RUNNING, RayTrial.PAUSED, RayTrial.TERMINATED,
            RayTrial.ERROR)


class Controller:
    def __init__(self) -> None:
        self.trials: list[SimpleNamespace] = []

    def get_trials(self) -> list[SimpleNamespace]:
        return list(self.trials)


def test_the_choice_is_rays_fifo_choice_through_random_status_changes():
    rng = random.Random(0)
    ours, ray_fifo, ctrl = Fifo(), FIFOScheduler(), Controller()
    for step in range(2000):
        if rng.random() < 0.3:
            trial = SimpleNamespace(trial_id=f"t{len(ctrl.trials)}", status=RayTrial.PENDING,
                                    config={})
            ctrl.trials.append(trial)
            ours.on_trial_add(ctrl, trial)
        elif ctrl.trials:
            trial = rng.choice(ctrl.trials)
            if trial.status != RayTrial.TERMINATED:  # ended for good, as in Tune
                trial.status = rng.choice(STATUSES)
        assert ours.choose_trial_to_run(ctrl) is ray_fifo.choose_trial_to_run(ctrl), step
    ended = sum(t.status == RayTrial.TERMINATED for t in ctrl.trials)
    assert ended > 100 and len(ours._waiting_trials()) == len(ctrl.trials) - ended


def test_asha_uses_the_same_choice_and_pickles_without_its_trials():
    asha, ctrl = CandidateASHA(time_attr="step", metric="val_loss", mode="min", max_t=10), Controller()
    for i in range(3):
        trial = SimpleNamespace(trial_id=f"t{i}", status=RayTrial.PENDING, config={})
        ctrl.trials.append(trial)
        asha.on_trial_add(ctrl, trial)
    ctrl.trials[0].status = RayTrial.TERMINATED
    ctrl.trials[1].status = RayTrial.PAUSED
    assert asha.choose_trial_to_run(ctrl) is ctrl.trials[2]
    ctrl.trials[2].status = RayTrial.RUNNING
    assert asha.choose_trial_to_run(ctrl) is ctrl.trials[1]
    restored = pickle.loads(pickle.dumps(asha))
    assert restored._waiting_trials() == {}  # a restored sweep adds its trials again
