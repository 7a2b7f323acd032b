"""Candidates of a plan that are another candidate's model: found, dropped and said.

Two spaces can draw the same model: a budgeted draw that is one of the permutations, an
explicit list repeating a sandwich, a space's order that is the baseline's. A model is
its order and its task's identity (:func:`~.variant.variant_key`: side, guidance, IOT
subset), trained once per seed. The first candidate to hold a (model, seed) keeps it,
in the order of the experiment file: the baseline first, then the spaces as listed.

:func:`drop_duplicates` takes a later candidate out of the pool when every seed it would
train is already another's (it adds no trial); one left with seeds of its own stays, and
a candidate that is the baseline's model stays too (the grid merges it into the baseline
trial, an adaptive searcher never proposes the baseline's seeds again). Each is a
:class:`Duplicate` whose :meth:`~Duplicate.note` the dry run prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sublayer_search.search.core.variant import Identity, VariantCandidate, variant_key

__all__ = ["Duplicate", "drop_duplicates"]


@dataclass(frozen=True, kw_only=True)
class Duplicate:
    """``dropped`` would train ``kept``'s model at ``seeds``; ``kept`` trains them."""

    dropped: VariantCandidate
    kept: VariantCandidate
    seeds: tuple[int, ...]
    """The seeds of ``dropped`` that ``kept`` trains."""
    own: tuple[int, ...] = ()
    """The seeds ``dropped`` still trains under its own name (none: out of the plan)."""

    def note(self) -> str:
        """``budgeted candidate budget00 (ffssfsfssffs) duplicates perm17
        (permutations): kept perm17``, with the seeds when only some are shared."""
        d, k = self.dropped, self.kept
        text = (f"{d.space} candidate {d.name} ({d.order}) duplicates {k.name} "
                f"({k.space}): kept {k.name}")
        if self.own:
            text += (f" at seed(s) {_listed(self.seeds)}; {d.name} trains seed(s) "
                     f"{_listed(self.own)}")
        return text


def _listed(seeds: Sequence[int]) -> str:
    return ", ".join(str(s) for s in seeds)


def drop_duplicates(pool: Sequence[VariantCandidate], base: VariantCandidate | None, *,
                    identity: Identity, seeds_of: Callable[[VariantCandidate], Sequence[int]],
                    baseline_seeds: Sequence[int],
                    ) -> tuple[list[VariantCandidate], list[Duplicate]]:
    """``pool`` without the candidates that add no (model, seed) and every duplicate found
    (see the module). ``seeds_of`` gives a candidate's seeds (the grid's per-space seeds,
    else the sweep's); the baseline trains ``baseline_seeds``."""
    owner: dict[tuple[str, int], VariantCandidate] = {}
    if base is not None:
        key = variant_key(base.order, identity(base.variant))
        owner.update({(key, seed): base for seed in baseline_seeds})
    kept: list[VariantCandidate] = []
    found: list[Duplicate] = []
    for cand in pool:
        key = variant_key(cand.order, identity(cand.variant))
        seeds = list(dict.fromkeys(seeds_of(cand)))
        own = tuple(s for s in seeds if (key, s) not in owner)
        by: dict[str, tuple[VariantCandidate, list[int]]] = {}
        for seed in seeds:
            other = owner.get((key, seed))
            if other is not None:
                by.setdefault(other.name, (other, []))[1].append(seed)
        found += [Duplicate(dropped=cand, kept=other, seeds=tuple(shared), own=own)
                  for other, shared in by.values()]
        owner.update({(key, seed): cand for seed in own})
        if own or not by or any(o is base for o, _ in by.values()):
            kept.append(cand)
    return kept, found
