"""Hand-made learning curves for the stopping-rule tests (8 evaluations, 100 steps apart)."""

from __future__ import annotations

from sublayer_search.search.replay.engine import Curve, Point

EVERY, STEPS = 100, 800


def curve(name: str, values: list[float], *, start: float, baseline: bool = False) -> Curve:
    """A recorded curve: one evaluation every ``EVERY`` steps, 10 ms apart from ``start``."""
    points = tuple(Point(step=EVERY * (i + 1), value=v, time=start + 10.0 * (i + 1))
                   for i, v in enumerate(values))
    return Curve(name=name, order=name, points=points, final=values[-1], baseline=baseline,
                 start=start)


def shape(first: float, final: float, bend: float = 1.0) -> list[float]:
    """A decreasing curve from ``first`` to ``final`` over 8 evaluations; ``bend`` > 1
    keeps it high for longer (a slow starter)."""
    return [final + (first - final) * (1 - (i / 7)) ** bend for i in range(8)]
