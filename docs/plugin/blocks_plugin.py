"""A plugin of three strategies, each a few lines: the ``blocks`` space, the ``reverse``
searcher and the ``patience`` stopping rule (docs/plugins.md). Importing it registers them:
name it in an experiment (``plugins: [blocks_plugin]``) or install it with entry points."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher
from sublayer_search.search.stopping.registry import register_rule
from sublayer_search.search.stopping.rule import StoppingRule, StoppingSettings
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.registry import SpaceInfo, register_space

if TYPE_CHECKING:
    from ray.tune.schedulers import TrialScheduler

    from sublayer_search.models.train_config import TrainConfig
    from sublayer_search.search.searchers.base import Stateful
    from sublayer_search.search.searchers.search_input import SearchInput


# -- a space: all attention first, then all feedforward, and the reverse -----------------
def _check_blocks(*, kind: str, n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 64:
        raise SpaceError("n", n, "an integer in 1..64")


def _build_blocks(*, kind: str, n: int) -> list[Candidate]:
    orders = ["s" * n + "f" * n, "f" * n + "s" * n]
    return [Candidate(order=o, space="blocks", name=f"blocks{n}_{i}", params={"n": n})
            for i, o in enumerate(orders)]


def _blocks_size(args: Any) -> tuple[str, int, int]:
    n = args.get("n")
    return "n", 2, 2 * n if isinstance(n, int) else 0


register_space(SpaceInfo(name="blocks", build=_build_blocks, check=_check_blocks,
                         kinds=("lm",), size=_blocks_size,
                         summary="s^n f^n and f^n s^n: the sublayers in two blocks"))


# -- a searcher: the plan's trials, the baseline's first, the rest last-planned first -----
@register_searcher("reverse")
class Reverse(SearchAlgorithm):
    """Every planned trial once, the baseline seeds first, the others in reverse."""

    needs_budget = False
    plans_every_trial = True
    takes_warm_start = False

    @classmethod
    def make(cls, plan: SearchInput) -> Stateful:
        from sublayer_search.search.searchers.grid_searcher import GridSearcher

        first = [t for t in plan.trials if t.baseline]
        rest = [t for t in plan.trials if not t.baseline]
        return GridSearcher(first + rest[::-1], metric=plan.metric, mode=plan.mode)


# -- a stopping rule: every trial to the end, said in its own words ----------------------
class PatienceSettings(StoppingSettings):
    type: Literal["patience"] = "patience"


@register_rule("patience")
class Patience(StoppingRule):
    """No trial is stopped: patience with every order."""

    settings = PatienceSettings

    @classmethod
    def describe(cls, settings: StoppingSettings, train: TrainConfig) -> str:
        return "patience (every trial trains all its steps)"

    @classmethod
    def make(cls, settings: StoppingSettings, train: TrainConfig) -> TrialScheduler:
        from ray.tune.schedulers import FIFOScheduler

        return FIFOScheduler()
