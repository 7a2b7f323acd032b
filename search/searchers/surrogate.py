"""Order-aware search (``search.algorithm: surrogate``): a Gaussian process over order
features ranks the candidates of the space by expected improvement.

Why a surrogate over features, not a TPE parametrisation of orders: a space's
candidates are an explicit, finite pool (``plan.candidates``: permutations, budgeted
draws, sandwiches, several spaces at once), so ranking that pool keeps every budget by
construction and can express exactly the orders of the space, of any length. A TPE
parametrisation would need one variable per position (with the counts or the budget as
a constraint TPE's independent marginals cannot keep: most samples would be invalid
and repaired arbitrarily) or a flat categorical, which learns nothing about one order
from another — on permutations or budgeted draws it behaves like random search. The
features (:mod:`spaces.features`: ``s`` share per quarter of the budget, counts per
half, depth, cost) are what the paper found to matter (attention low, feedforward high)
and are defined for any order, so results carry over between orders, spaces and
sweeps (warm start). With ``model.guidance`` as a sweep axis each guidance label of the
pool adds an indicator feature: a guided variant is a point of its own. An IOT subset
(``iot_subsets``) is a set of orders: its features are their mean, one indicator per
block code of the pool and the subset's size (the order features of the short IOT
blocks take only two values). With tens of trials a GP (isotropic Matérn 5/2 on standardised
features, length scale and noise by marginal likelihood, :func:`gp_predict`, numpy) is
cheap and gives the uncertainty that expected improvement needs; a random forest's
variance is poor at that size.

Protocol: the first ``n_initial`` suggestions are drawn at random from the pool; then
each suggestion is the untried candidate with the largest expected improvement over the
best result so far (ties broken at random). With a prior from earlier studies
(``search.prior``, :mod:`.prior`) the model of a standardised result is ``beta`` times
the prior's prediction plus a GP residual over order features, ``beta`` estimated from
this sweep's results (:mod:`.prior_trust`), and each suggestion is a Thompson draw
(Thompson 1933; Russo et al. 2018): ``beta`` from its posterior, the residual at each
open candidate from the GP's (independently per candidate; before any result from the
variance the prior leaves unexplained, ``1 - weight**2``), and the candidate whose draw
is best. A prior the results confirm keeps steering, one they contradict stops (or is
read backwards); and while the evidence is thin the draws spread over the candidates as
much as the prior's own held-out weight says they should, so a prior that is wrong costs
little (PriorBand's promise, Mallik et al. 2023). Each candidate is proposed once per seed of
``seeds`` (the next seed for a replicate), so no (order, seed) is trained twice.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from ray.tune.search import Searcher
from scipy.stats import norm, rankdata

from sublayer_search.search.core.observation import Observation
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import Identity, plain_identity, variant_key, variant_of
from sublayer_search.search.searchers.base import Stateful, score
from sublayer_search.search.searchers.prior import OrderPrior
from sublayer_search.search.searchers.prior_trust import MIN_NOISE, TRUST_VAR, trust
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.features import feature_matrix

__all__ = ["SurrogateSearcher", "expected_improvement", "gp_predict"]


LENGTH_SCALES = tuple(float(v) for v in np.geomspace(0.5, 30.0, 12))
"""Matérn length scales the GP chooses among (standardised features: typical distances 1-10)."""
NOISE_RATIOS = (1e-3, 1e-2, 1e-1, 0.5)
"""Noise variance over signal variance the GP chooses among (seeds make results noisy)."""


def _matern52(a: np.ndarray, b: np.ndarray, length: float) -> np.ndarray:
    r = np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1), 0.0)) / length
    return np.asarray((1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r))


def gp_predict(x: np.ndarray, y: np.ndarray, query: np.ndarray,
               min_var: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd (of the latent function) at ``query`` of a GP fitted to (``x``, ``y``).

    Isotropic Matérn 5/2 on the rows (standardised features), a constant mean; the length
    scale and noise ratio maximise the marginal likelihood over a grid with the signal
    variance profiled out (closed form), so a fit is a few small Cholesky solves and
    fully deterministic. ``min_var`` floors the signal variance (a prior's residual
    variance: two or three results alone would call it zero).
    """
    n = len(y)
    centre = float(y.mean())
    yc = y - centre
    best: tuple[float, float, float, np.ndarray, np.ndarray] | None = None
    for length in LENGTH_SCALES:
        corr = _matern52(x, x, length)
        for ratio in NOISE_RATIOS:
            chol = np.linalg.cholesky(corr + (ratio + 1e-9) * np.eye(n))
            alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, yc))
            var = max(float(yc @ alpha) / n, 1e-12)
            loglik = -0.5 * n * np.log(var) - float(np.log(np.diag(chol)).sum())
            if best is None or loglik > best[0]:
                best = (loglik, length, var, chol, alpha)
    assert best is not None
    _, length, var, chol, alpha = best
    var = max(var, min_var)
    cross = _matern52(query, x, length)
    mean = centre + cross @ alpha
    v = np.linalg.solve(chol, cross.T)
    sd = np.sqrt(np.maximum(var * (1.0 - (v**2).sum(axis=0)), 0.0))
    return mean, sd


def expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """Expected amount by which a loss below ``best`` is reached (lower losses are better)."""
    sd = np.maximum(sd, 1e-12)
    z = (best - mean) / sd
    return np.asarray((best - mean) * norm.cdf(z) + sd * norm.pdf(z))


def _orders(cand: Candidate) -> list[str]:
    """The orders one model of the pool trains: an IOT subset's all, else its one."""
    subset = variant_of(cand).subset
    return list(subset.orders) if subset is not None and subset.orders else [cand.order]


def _codes(cand: Candidate) -> tuple[int, ...]:
    """The block codes of an IOT subset (none for other models)."""
    subset = variant_of(cand).subset
    return subset.codes if subset is not None else ()


class SurrogateSearcher(Stateful):
    """Expected improvement of a GP over order features, over the space's candidates."""

    def __init__(
        self,
        candidates: Sequence[Candidate],
        *,
        num_samples: int,
        seeds: Sequence[int],
        metric: str | None = None,
        mode: str | None = "min",
        seed: int = 0,
        n_initial: int = 3,
        f_units: float = 2.0,
        c_units: float = 1.0,
        identity: Identity = plain_identity,
        prior: OrderPrior | None = None,
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self.prior = prior if prior is not None and prior.weight > 0 else None
        """Prior mean from earlier studies (``search.prior``); ``None``: none, or no evidence."""
        self.candidates = list(candidates)
        self.keys = [variant_key(c.order, identity(variant_of(c))) for c in self.candidates]
        """Each candidate's variant key (:mod:`.variant`): what one seed trains once."""
        self.num_samples = num_samples
        self.seeds = list(seeds) or [0]
        self.n_initial = n_initial
        self.units = (f_units, c_units)
        self.rng = random.Random(seed)
        self.seed = seed
        self.labels = sorted({variant_of(c).label for c in self.candidates} - {"none"})
        """Guidance labels of the pool (``model.guidance`` as an axis): one indicator
        feature each, so the GP tells a guided variant from its order unguided."""
        self.codes = sorted({code for c in self.candidates for code in _codes(c)})
        """Block codes of the pool's IOT subsets: one indicator feature each, and the
        subset's size (order features alone are too coarse to tell the blocks apart)."""
        raw = np.array(
            [self._raw(_orders(c), variant_of(c).label, _codes(c))
             for c in self.candidates], dtype=float
        ).reshape(len(self.candidates), -1)
        self._mean = raw.mean(axis=0) if len(raw) else np.zeros(raw.shape[1])
        sd = raw.std(axis=0) if len(raw) else np.ones(raw.shape[1])
        self._sd = np.where(sd > 0, sd, 1.0)
        self.x = (raw - self._mean) / self._sd
        self.prior_c = np.array([self._prior_of(_orders(c)) for c in self.candidates])
        """The prior mean of each candidate (an IOT subset's: its orders' mean; 0: none)."""
        self.seen_prior: list[float] = []
        """The prior mean of each entry of ``seen``."""
        self._live_prior: dict[str, float] = {}
        self.taken: set[tuple[str, int]] = set()
        self.seen: list[tuple[list[float], float]] = []
        """(standardised features, loss) of every finished trial (warm ones first)."""
        self.live: dict[str, tuple[str, list[float]]] = {}
        self.suggested = 0

    def _raw(self, orders: Sequence[str], label: str, codes: Sequence[int] = ()) -> list[float]:
        """The orders' mean features; in a pool of IOT subsets one indicator per block
        code and the number of orders; one indicator per guidance label of the pool."""
        rows = np.array(feature_matrix(list(orders), f_units=self.units[0],
                                       c_units=self.units[1]), dtype=float)
        held = {int(c) for c in codes}
        sets = [*(float(c in held) for c in self.codes), float(len(orders))] if self.codes else []
        labels = [float(label == other) for other in self.labels]
        return [*rows.mean(axis=0), *sets, *labels]

    def _features(self, order: str, label: str = "none") -> list[float]:
        raw = np.array(self._raw([order], label))
        return list((raw - self._mean) / self._sd)

    def _prior_of(self, orders: Sequence[str]) -> float:
        if self.prior is None:
            return 0.0
        got = self.prior.predict(list(orders), f_units=self.units[0], c_units=self.units[1])
        return float(np.mean(got))

    def mark_taken(self, order: str, seed: int) -> None:
        """Another searcher trains (order, seed): never propose it."""
        self.taken.add((order, seed))

    def warm_start(self, observations: Sequence[Observation]) -> None:
        """Results of earlier sweeps: in the model before the first suggestion, never retrained."""
        index = {key: i for i, key in reversed(list(enumerate(self.keys)))}
        for obs in observations:
            key = variant_key(obs.order, obs.identity)
            self.mark_taken(key, obs.seed)
            loss = score({"v": obs.value}, "v", self.mode)
            if loss is None:
                continue
            at = index.get(key)  # a model of the pool: its own features (an IOT subset's)
            if at is not None:
                self.seen.append((list(self.x[at]), loss))
                self.seen_prior.append(float(self.prior_c[at]))
            elif not self.codes:  # a subset outside the pool has no place
                self.seen.append((self._features(obs.order, obs.guidance), loss))
                self.seen_prior.append(self._prior_of([obs.order]))

    def _free_seed(self, key: str) -> int | None:
        return next((s for s in self.seeds if (key, s) not in self.taken), None)

    def _pick_with_prior(self, open_: list[int]) -> int:
        """A Thompson draw of ``beta * prior + residual`` at each open candidate; its best."""
        assert self.prior is not None
        prior = self.prior_c[open_]
        floor = max(MIN_NOISE, 1.0 - self.prior.weight**2)  # what the prior leaves unexplained
        draw = np.random.default_rng(self.rng.getrandbits(64))
        if not self.seen:
            beta = draw.normal(1.0, np.sqrt(TRUST_VAR))  # the prior as fitted, give or take
            residual = draw.normal(0.0, np.sqrt(floor), len(open_))
        else:
            x = np.array([f for f, _ in self.seen])
            ranks = rankdata([loss for _, loss in self.seen])
            y = (ranks - ranks.mean()) / (ranks.std() if ranks.std() > 0 else 1.0)
            assert len(self.seen_prior) == len(self.seen)
            seen_prior = np.array(self.seen_prior)
            got = trust(seen_prior, y, weight=self.prior.weight)  # the prior's scale, so far
            beta = draw.normal(got.beta, np.sqrt(got.var))
            mean, sd = gp_predict(x, y - beta * seen_prior, self.x[open_], min_var=floor)
            residual = mean + sd * draw.standard_normal(len(open_))
        return open_[int(np.argmin(beta * prior + residual))]

    def _pick(self, open_: list[int]) -> int:
        if self.prior is not None:
            return self._pick_with_prior(open_)
        if len(self.seen) < self.n_initial:
            return self.rng.choice(open_)
        x = np.array([f for f, _ in self.seen])
        y = np.array([loss for _, loss in self.seen])
        mean, sd = gp_predict(x, y, self.x[open_])
        ei = expected_improvement(mean, sd, float(y.min()))
        top = float(ei.max())
        best = [i for i, e in zip(open_, ei, strict=True) if e >= top - 1e-12 * max(1.0, abs(top))]
        return self.rng.choice(best)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if self.suggested >= self.num_samples:
            return Searcher.FINISHED
        open_ = [i for i, key in enumerate(self.keys) if self._free_seed(key) is not None]
        if not open_:
            return Searcher.FINISHED
        index = self._pick(open_)
        cand = self.candidates[index]
        seed = self._free_seed(self.keys[index])
        assert seed is not None
        self.mark_taken(self.keys[index], seed)
        self.suggested += 1
        self._live_prior[trial_id] = float(self.prior_c[index])
        self.live[trial_id] = (cand.order, list(self.x[index]))
        return {"trial": Trial.of(cand, seed)}

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        got = self.live.pop(trial_id, None)
        prior = self._live_prior.pop(trial_id, 0.0)
        loss = None if error else score(result, self.metric, self.mode)
        if got is not None and loss is not None:
            self.seen.append((got[1], loss))
            self.seen_prior.append(prior)
