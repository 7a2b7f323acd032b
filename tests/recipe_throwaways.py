"""A throwaway strategy of each kind, written into a copy of the tree by exactly the files
CONTRIBUTING's recipe names (``tests/test_recipes.py``): the space ``mirror``, the
searcher ``lastfirst``, the stopping rule ``never`` and the task ``lmcopy``.

Each file is a whole new file or text inserted after an anchor of an existing one, with
the test (``guard``) that fails when that file is left untouched."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["THROWAWAYS", "Edit"]


@dataclass(frozen=True)
class Edit:
    path: str
    text: str
    guard: str
    """pytest's arguments (a node, a file and ``-k``) that select a test failing without
    this file's edits."""
    after: str | None = None
    """Insert ``text`` after this line of the existing file; ``None``: a new file."""


_SPACE_MODULE = '''"""A throwaway space (tests/test_recipes.py): the interleaved order and its mirror."""

from __future__ import annotations

from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import SpaceError


def check_mirror(*, kind: str, n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise SpaceError("n", n, "an integer >= 1")


def build_mirror(*, kind: str, n: int) -> list[Candidate]:
    check_mirror(kind=kind, n=n)
    return [Candidate(order="sf" * n, space="mirror", name=f"mirror{n}_sf", params={}),
            Candidate(order="fs" * n, space="mirror", name=f"mirror{n}_fs", params={})]
'''

_SEARCHER_MODULE = '''"""A throwaway searcher (tests/test_recipes.py): every planned trial, last first."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from ray.tune.search import Searcher

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.searchers.base import Stateful


class ReverseSearcher(Stateful):
    def __init__(self, trials: Sequence[Trial], *, metric: str | None = None,
                 mode: str | None = "min") -> None:
        super().__init__(metric=metric, mode=mode)
        rest = [t for t in trials if not t.baseline]
        self._pending = deque([t for t in trials if t.baseline] + rest[::-1])

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]
        if not self._pending:
            return Searcher.FINISHED
        return {"trial": self._pending.popleft()}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass
'''

_ALGORITHM_MODULE = '''"""``search.algorithm: lastfirst``, a throwaway (tests/test_recipes.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher

if TYPE_CHECKING:
    from sublayer_search.search.searchers.base import Stateful
    from sublayer_search.search.searchers.search_input import SearchInput


@register_searcher("lastfirst")
class LastFirst(SearchAlgorithm):
    """Every candidate with every seed, the baseline's first, the rest last first."""

    needs_budget = False
    plans_every_trial = True
    takes_prior = False
    takes_warm_start = False
    guided_candidates = False
    iot_subsets = False

    @classmethod
    def make(cls, plan: SearchInput) -> Stateful:
        from sublayer_search.search.searchers.lastfirst_searcher import ReverseSearcher

        return ReverseSearcher(plan.trials, metric=plan.metric, mode=plan.mode)
'''

_RULE_MODULE = '''"""``scheduler.type: never``, a throwaway (tests/test_recipes.py): no trial stops."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.stopping.registry import register_rule
from sublayer_search.search.stopping.rule import StoppingRule, StoppingSettings

if TYPE_CHECKING:
    from ray.tune.schedulers import TrialScheduler


class NeverSettings(StoppingSettings):
    type: Literal["never"] = "never"
    reason: str = "a throwaway"


@register_rule("never")
class Never(StoppingRule):
    settings = NeverSettings

    @classmethod
    def describe(cls, settings: StoppingSettings, train: TrainConfig) -> str:
        return "never (no trial is stopped)"

    @classmethod
    def make(cls, settings: StoppingSettings, train: TrainConfig) -> TrialScheduler:
        from sublayer_search.search.stopping.schedulers import Fifo

        return Fifo()
'''

_TASK_MODULE = '''"""``task: lmcopy``, a throwaway (tests/test_recipes.py): the LM task under another name."""

from __future__ import annotations

from sublayer_search.search.tasks.lm import LMTask
from sublayer_search.search.tasks.registry import register


@register
class LMCopyTask(LMTask):
    name = "lmcopy"
'''

_STALE_SAMPLE = "tests/spaces/test_space_contract.py::test_every_sample_is_of_a_registered_space"
_DOCS = "tests/test_user_docs.py::test_every_built_in_strategy_is_in_the_docs"

THROWAWAYS: dict[str, tuple[str, list[Edit]]] = {
    "space": ("mirror", [
        Edit("spaces/generators/mirror.py", _SPACE_MODULE,
             guard="tests/spaces/test_space_contract.py -k mirror"),
        Edit("spaces/registry.py",
             '        SpaceInfo(name="mirror", build=build_mirror, check=check_mirror,\n'
             '                  kinds=("lm",), size=None,\n'
             '                  summary="the interleaved order and its mirror"),\n',
             after='                          "code_base=0: the authors\' 0-based codes)"),',
             guard=_STALE_SAMPLE),
        Edit("spaces/registry.py",
             "from sublayer_search.spaces.generators.mirror import build_mirror, check_mirror\n",
             after="from sublayer_search.spaces.generators.sandwich import SANDWICH, sandwich, "
                   "validate_sandwich",
             guard=_STALE_SAMPLE),
        Edit("tests/spaces/test_space_contract.py",
             '    "mirror": ({"n": 2}, "lm"),\n', after='    "macaron": ({"n": 2}, "lm"),',
             guard="tests/spaces/test_space_contract.py -k mirror"),
        Edit("docs/experiments.md",
             "`mirror` (`n`: `(sf)^n` and `(fs)^n`).\n",
             after="`sublayer spaces sample --help` lists every space with its arguments.",
             guard=_DOCS),
    ]),
    "searcher": ("lastfirst", [
        Edit("search/searchers/lastfirst_searcher.py", _SEARCHER_MODULE,
             guard="tests/search/test_searchers.py -k lastfirst"),
        Edit("search/searchers/algorithms/lastfirst.py", _ALGORITHM_MODULE,
             guard="tests/search/test_searchers.py::test_every_case_is_of_a_registered_searcher"),
        Edit("tests/search/test_searchers.py",
             '    "lastfirst": [Case("lastfirst", lambda: make_searcher(_plan(\n'
             '        SANDWICH, algorithm="lastfirst", seeds=2, baseline={"seeds": 2})),\n'
             '        budget=len(_plan(SANDWICH, seeds=2, baseline={"seeds": 2}).trials), '
             'baseline_first=2)],\n',
             after='CASES: dict[str, list[Case]] = {  # by registered searcher: every one '
                   'needs a case',
             guard="tests/search/test_searchers.py -k lastfirst"),
        Edit("docs/search.md",
             "| `lastfirst` | every candidate with every seed, last first | never: it is "
             "a throwaway | none |\n",
             after="| `oneshot` | one weight-sharing supernet ranks every order, the best "
                   "`top_k` train alone | a first look at a large LM space for a few trials "
                   "of compute | `supernet`, `top_k` (5), `prior` |",
             guard=_DOCS),
    ]),
    "stopping rule": ("never", [
        Edit("search/stopping/rules/never.py", _RULE_MODULE,
             guard=_DOCS),
        Edit("docs/search.md",
             "| `never` | no trial stops | never: it is a throwaway | `reason` |\n",
             after="| `fifo` (default) | every trial trains all its steps | a study of every "
                   "order | none |",
             guard=_DOCS),
    ]),
    "task": ("lmcopy", [
        Edit("search/tasks/lmcopy.py", _TASK_MODULE,
             guard=_DOCS),
        Edit("search/tasks/__init__.py",
             "from sublayer_search.search.tasks.lmcopy import LMCopyTask  # noqa: F401\n",
             after="from sublayer_search.search.tasks.lm import LMTask",
             guard=_DOCS),
        Edit("docs/experiments.md",
             "A throwaway `task: lmcopy` trains like `task: lm`.\n",
             after="`sublayer spaces sample --help` lists every space with its arguments.",
             guard=_DOCS),
    ]),
}
"""By kind: the throwaway's name and its edits."""
