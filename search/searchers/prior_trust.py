"""How much the surrogate trusts its prior (``search.prior``) after each result: the
prior becomes the GP's mean function scaled by ``beta``, and ``beta`` is estimated from
this sweep's own results.

Model (Rasmussen & Williams 2006, §2.7, a GP with an explicit basis function; the basis
here is the prior's prediction ``p``): a standardised result is ``y = beta * p(x) + f(x)
+ noise``. Before any result ``beta ~ N(1, TRUST_VAR)``: the prior as fitted. Each result
updates ``beta`` by Bayesian linear regression of the observed standardised ranks on the
prior's (centred) predictions, with the noise variance the prior itself leaves
unexplained (``1 - weight**2``, at least ``MIN_NOISE``). A prior whose ordering the results
confirm keeps ``beta`` near (or above) 1 and keeps steering; one they contradict drives
``beta`` to 0 or below, and the search becomes the plain GP over order features (a
negative ``beta`` even reads the prior backwards, as the evidence says). The residual
``y - beta * p`` is what the GP models; the surrogate draws ``beta`` from this posterior
for each suggestion (Thompson sampling), so its uncertainty spreads the search where the
prior's claim is least tested.

The same idea as piBO (Hvarfner et al., ICLR 2022: the prior's influence decays as data
arrive) and PriorBand (Mallik et al., NeurIPS 2023: the prior's share shrinks when the
incumbent beats it), but the decay is the evidence, not the count: agreeing results do
not erode the prior. Every constant is fixed a priori, never chosen on a judged table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MIN_NOISE", "TRUST_VAR", "Trust", "trust"]

TRUST_VAR = 1.0
"""Prior variance of ``beta`` around 1 (sd 1: "no use" is one sd away, fixed a priori)."""
MIN_NOISE = 0.1
"""The least noise variance a result has about the prior's line (standardised ranks)."""


@dataclass(frozen=True)
class Trust:
    """The posterior of the prior's scale ``beta``: its mean and variance."""

    beta: float
    var: float


def trust(seen_prior: np.ndarray, y: np.ndarray, *, weight: float) -> Trust:
    """Posterior of ``beta`` given the prior's predictions ``seen_prior`` of the results
    ``y`` (standardised ranks, lower better) and the prior's held-out ``weight``."""
    noise = max(MIN_NOISE, 1.0 - weight**2)
    p = np.asarray(seen_prior, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(p) == 0:
        return Trust(1.0, TRUST_VAR)
    pc, yc = p - p.mean(), y - y.mean()
    precision = 1.0 / TRUST_VAR + float(pc @ pc) / noise
    beta = (1.0 / TRUST_VAR + float(pc @ yc) / noise) / precision
    return Trust(beta, 1.0 / precision)
