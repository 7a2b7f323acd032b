"""Cross-layer guidance (Crossformer): settings, the guided pairs of an order, parameter savings.

Pure Python (no torch): the model side is :mod:`models.guidance.apply`.

A higher sublayer guides the one below it, in one of three *blocks*:

* ``key_query``: a self-attention's key projection ↔ the query projection of the
  self-attention above (``pairing`` picks the roles: Table 6's ablation);
* ``value``: the value and fusion (output) projections of self-attention, alternating
  (as the FFN pairs: fusion between the 1st and 2nd, value between the 2nd and 3rd, …);
* ``ffn``: a feedforward's W2 ↔ the W2 of the feedforward above, then W1 ↔ W1 between the
  next two, alternating (the paper's Eq. 5; each matrix serves exactly two sublayers).

**The layer above** is the next sublayer *of the same kind* in the order string: in
``ssfsff`` the ``s`` at position 1 is guided by the ``s`` at 3, the ``f`` at 2 by the
``f`` at 4. Half-width feedforwards ``h`` form a chain of their own; cross-attention ``c``
is left as is (as the paper's Eq. 5) unless ``cross_attention``: then ``key_query`` and
``value`` also guide the decoder's ``c`` sublayers, a chain of their own (T − 1 pairs; the
reading under which the paper's 6+6 Key-Query and Value counts match). An encoder and a
decoder have one chain each; an IOT model chains its shared per-layer modules by layer.

``mode``:

* ``soft``: the loss gains ``alpha · Σ_t N(A(t) − sg(B(t+1)))`` over the pairs' weight
  matrices (sg = stop gradient: only the lower matrix is pulled), ``N`` by ``norm``:
  ``squared_frobenius`` (default) ``‖·‖²_F``, the sum of squared entries; ``l2`` the
  paper's "L2 norm" ``‖·‖_F`` (entrywise, not squared), for which it tuned alpha = 0.01.
  The default stays the squared norm because every soft-guidance run before used it
  (changing it would change their results and meaning); its pull 2(A − B) fades as a
  pair converges, while the L2 norm's (A − B)/‖A − B‖ has norm 1 at any distance (a
  key-query pair at d 512 and init std 0.02: 2‖A − B‖ ≈ 29, so the squared norm pulls
  ~29x harder at the same alpha);
* ``hard``: the pair *is* one ``nn.Parameter`` (weights; biases stay per sublayer). Hard
  guidance needs a pair: a guided kind that occurs once is a configuration error.

``pairing``: a name or a list of names, one per block family; the others keep the
paper's choice. Attention (``key_query`` block): ``key_query`` (paper: K(t) ↔ Q(t+1)),
``query_key``, ``query_query``, ``key_key``. Feedforward (``ffn``; also the phase of
``value``, whose fusion matrix plays W2 and value W1): ``w2_w1`` (paper: W2 first) or
``w1_w2``. A same-role pairing (``query_query``) chains: with hard guidance every
self-attention of the chain then holds one query matrix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from sublayer_search.models.errors import ConfigError, check, is_number
from sublayer_search.spaces.guidance_params import GUIDANCE_TAG, read_guidance

__all__ = [
    "ATTENTION_PAIRINGS",
    "BLOCKS",
    "BLOCK_KINDS",
    "CROSS_BLOCKS",
    "FFN_PAIRINGS",
    "GUIDANCE_TAG",
    "MODES",
    "NORMS",
    "GuidanceConfig",
    "Pair",
    "chain_pairs",
    "guidance_from",
    "order_pairs",
    "saved_params",
]

MODES = ("none", "soft", "hard")
BLOCKS = ("key_query", "value", "ffn")
"""In this order in labels and params."""
ATTENTION_PAIRINGS = {"key_query": ("k", "q"), "query_key": ("q", "k"),
                      "query_query": ("q", "q"), "key_key": ("k", "k")}
"""Attention pairing name → (role of the lower sublayer, role of the one above)."""
FFN_PAIRINGS = ("w2_w1", "w1_w2")
"""Which matrix the first pair shares (then they alternate)."""

_SHORT = {"key_query": "kq", "value": "v", "ffn": "ffn"}
_PAIR_SHORT = {"key_query": "kq", "query_key": "qk", "query_query": "qq", "key_key": "kk",
               "w2_w1": "w2w1", "w1_w2": "w1w2"}
_DEFAULT_PAIRING = ("key_query", "w2_w1")
_DEFAULT_ALPHA = 0.01
BLOCK_KINDS = {"key_query": "s", "value": "s", "ffn": "fh"}
"""Sublayer kinds whose chains each block guides (``c`` only with ``cross_attention``:
:meth:`GuidanceConfig.kinds`)."""
CROSS_BLOCKS = ("key_query", "value")
"""Blocks that guide the decoder's cross-attention too when ``cross_attention``."""
NORMS = ("squared_frobenius", "l2")
"""Norms of the soft regulariser: ``‖·‖²_F`` (default) and the paper's ``‖·‖_F``."""
_DEFAULT_NORM = "squared_frobenius"


def _field(name: str) -> str:
    return f"model.guidance.{name}"


@dataclass(frozen=True, kw_only=True)
class GuidanceConfig:
    """Cross-layer guidance of a model (``model.guidance`` in an experiment file).

    ``mode`` none (default) | soft | hard; ``blocks`` among key_query, value, ffn (kept
    in that order; empty with mode none); ``alpha`` >= 0, the weight of the soft
    regulariser (the paper's 0.01); ``pairing`` one name or a list (see the module
    docstring), stored as ``(attention pairing, ffn pairing)``; ``cross_attention``
    (default false) guides the decoder's ``c`` chain too (needs key_query or value);
    ``norm`` of the soft regulariser, ``squared_frobenius`` (default) or ``l2``. The
    two new fields at their defaults add nothing to labels, params or dicts, so the
    settings of runs before keep their keys.
    """

    mode: str = "none"
    blocks: tuple[str, ...] = ()
    alpha: float = _DEFAULT_ALPHA
    pairing: tuple[str, ...] = _DEFAULT_PAIRING
    cross_attention: bool = False
    norm: str = _DEFAULT_NORM

    def __post_init__(self) -> None:
        check(self.mode in MODES, _field("mode"), self.mode, "one of " + ", ".join(MODES))
        blocks = self.blocks
        if isinstance(blocks, str):
            blocks = (blocks,)
        if not isinstance(blocks, tuple | list):
            raise ConfigError(_field("blocks"), blocks, "a list of " + ", ".join(BLOCKS))
        for i, b in enumerate(blocks):
            check(b in BLOCKS, f"{_field('blocks')}[{i}]", b, "one of " + ", ".join(BLOCKS))
        check(len(set(blocks)) == len(blocks), _field("blocks"), list(blocks), "distinct blocks")
        if self.mode == "none":
            blocks = ()
        else:
            check(bool(blocks), _field("blocks"), list(blocks),
                  f"at least one of {', '.join(BLOCKS)} with mode {self.mode}")
        object.__setattr__(self, "blocks", tuple(b for b in BLOCKS if b in blocks))
        check(is_number(self.alpha, finite=True) and self.alpha >= 0, _field("alpha"),
              self.alpha, "a finite number >= 0")
        object.__setattr__(self, "alpha", float(self.alpha))
        object.__setattr__(self, "pairing", _pairing(self.pairing))
        check(isinstance(self.cross_attention, bool), _field("cross_attention"),
              self.cross_attention, "true or false")
        check(self.norm in NORMS, _field("norm"), self.norm, "one of " + ", ".join(NORMS))
        if not self.active:  # as blocks: nothing to guide
            object.__setattr__(self, "cross_attention", False)
            object.__setattr__(self, "norm", _DEFAULT_NORM)
        elif self.cross_attention:
            check(bool(set(CROSS_BLOCKS) & set(self.blocks)), _field("cross_attention"), True,
                  "false unless blocks include key_query or value (ffn never guides c)")

    @classmethod
    def from_dict(cls, data: object) -> GuidanceConfig:
        if isinstance(data, GuidanceConfig):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError("model.guidance", data,
                              "a mapping {mode, blocks, alpha, pairing} (or a list of them)")
        names = tuple(f.name for f in dataclasses.fields(cls))
        for key, value in data.items():
            check(key in names, _field(str(key)), value, "one of " + ", ".join(names))
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        out = {"mode": self.mode, "blocks": list(self.blocks), "alpha": self.alpha,
               "pairing": list(self.pairing)}
        return out | self._extras()

    def _extras(self) -> dict[str, Any]:
        """The fields added later, only where not at their defaults (stable keys)."""
        out: dict[str, Any] = {}
        if self.cross_attention:
            out["cross_attention"] = True
        if self.norm != _DEFAULT_NORM:
            out["norm"] = self.norm
        return out

    def kinds(self, block: str) -> str:
        """Sublayer kinds whose chains ``block`` guides: :data:`BLOCK_KINDS`, plus ``c``
        for key_query and value with ``cross_attention``."""
        cross = self.cross_attention and block in CROSS_BLOCKS
        return BLOCK_KINDS[block] + ("c" if cross else "")

    @property
    def active(self) -> bool:
        return self.mode != "none"

    @property
    def attention_roles(self) -> tuple[str, str]:
        return ATTENTION_PAIRINGS[self.pairing[0]]

    @property
    def touches_attention(self) -> bool:
        """Guidance on self-attention projections (they are then kept unfused)."""
        return self.active and bool({"key_query", "value"} & set(self.blocks))

    @property
    def label(self) -> str:
        """``none``, ``sg-kq``, ``hg-kq+ffn``; a pairing other than the paper's adds
        ``.qk`` / ``.w1w2``, a soft alpha other than 0.01 ``.alpha0.1``. For display:
        names trials (``sandwich16_6+hg-kq@seed0``), the trial table and MLflow tags;
        invertible (:meth:`from_label`, for benchmarks and tests), but a sweep never reads
        a setting back from it (:meth:`from_params` does, from a run's params)."""
        if not self.active:
            return "none"
        out = ("sg-" if self.mode == "soft" else "hg-") + "+".join(_SHORT[b] for b in self.blocks)
        for name, default in zip(self.pairing, _DEFAULT_PAIRING, strict=True):
            if name != default:
                out += "." + _PAIR_SHORT[name]
        if self.cross_attention:
            out += ".cross"
        if self.mode == "soft" and self.norm != _DEFAULT_NORM:
            out += "." + self.norm
        if self.mode == "soft" and self.alpha != _DEFAULT_ALPHA:
            out += f".alpha{self.alpha!r}"
        return out

    @classmethod
    def from_label(cls, label: str) -> GuidanceConfig:
        if label == "none":
            return cls()
        head, *quals = label.split(".", 1)[0], *_qualifiers(label)
        mode = {"sg": "soft", "hg": "hard"}.get(head[:2], head)
        blocks = [next((b for b, s in _SHORT.items() if s == part), part)
                  for part in head[3:].split("+")]
        pairing, alpha, extras = [], _DEFAULT_ALPHA, dict[str, Any]()
        for q in quals:
            if q.startswith("alpha"):
                alpha = float(q[5:])
            elif q == "cross":
                extras["cross_attention"] = True
            elif q in NORMS:
                extras["norm"] = q
            else:
                pairing.append(next((n for n, s in _PAIR_SHORT.items() if s == q), q))
        return cls(mode=mode, blocks=tuple(blocks), alpha=alpha, pairing=tuple(pairing),
                   **extras)

    def flat(self) -> dict[str, Any]:
        """MLflow params: ``model.guidance.mode``, ``.blocks`` (``key_query+ffn``),
        ``.alpha``, ``.pairing`` (``key_query+w2_w1``); an unguided model has mode
        ``none`` and the other three empty (its alpha and pairing mean nothing)."""
        if not self.active:
            return {_field("mode"): self.mode, _field("blocks"): "", _field("alpha"): "",
                    _field("pairing"): ""}
        return {_field("mode"): self.mode, _field("blocks"): "+".join(self.blocks),
                _field("alpha"): self.alpha, _field("pairing"): "+".join(self.pairing),
                **{_field(k): v for k, v in self._extras().items()}}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> GuidanceConfig:
        """The setting a run's MLflow params record (:meth:`flat`, read back by
        :func:`spaces.guidance_params.read_guidance`, the one reader); a run that
        recorded none is unguided. Bad values raise a ValueError naming the param."""
        fields = read_guidance(params)
        return cls() if fields is None else cls(**fields)

    def check_chains(self, chains: Mapping[str, int], where: str) -> None:
        """ConfigError for hard guidance of a block without a pair in ``chains`` (kind →
        how many sublayers of that kind the stack has); ``where`` names the stack."""
        if self.mode != "hard":
            return
        for block in self.blocks:
            present = {k: chains.get(k, 0) for k in self.kinds(block) if chains.get(k, 0)}
            alone = [k for k, n in present.items() if n == 1]
            if alone or not present:
                kind = alone[0] if alone else BLOCK_KINDS[block][0]
                have = "one" if alone else "no"
                raise ConfigError(_field("mode"), "hard",
                                  f"soft or none for block {block}: {where} has {have} {kind} "
                                  "sublayer, so no pair to share a matrix (hard guidance needs "
                                  f"at least two {kind})")


def _qualifiers(label: str) -> list[str]:
    """``hg-kq.qk.alpha0.1`` → ``["qk", "alpha0.1"]`` (alpha's dot kept)."""
    rest = label.split(".", 1)[1] if "." in label else ""
    out: list[str] = []
    while rest:
        if rest.startswith("alpha"):
            out.append(rest)
            break
        part, _, rest = rest.partition(".")
        out.append(part)
    return out


def _pairing(value: Any) -> tuple[str, str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, tuple | list):
        raise ConfigError(_field("pairing"), value,
                          "a pairing name or a list of them (one attention, one ffn)")
    attention, ffn = _DEFAULT_PAIRING
    seen: set[str] = set()
    for i, name in enumerate(names):
        where = _field("pairing") if isinstance(value, str) else f"{_field('pairing')}[{i}]"
        if name in ATTENTION_PAIRINGS:
            family, attention = "attention", name
        elif name in FFN_PAIRINGS:
            family, ffn = "ffn", name
        else:
            raise ConfigError(where, name, "one of " + ", ".join([*ATTENTION_PAIRINGS,
                                                                   *FFN_PAIRINGS]))
        check(family not in seen, where, name, f"one {family} pairing only")
        seen.add(family)
    return attention, ffn


def guidance_from(value: Any) -> GuidanceConfig:
    """A :class:`GuidanceConfig` from itself, a mapping or None (= none)."""
    if value is None:
        return GuidanceConfig()
    return GuidanceConfig.from_dict(value)


class Pair(NamedTuple):
    """One guided pair in a chain: position and role of the lower matrix and of the upper
    one (roles: ``q``, ``k``, ``v``, ``out`` of attention; ``w1``, ``w2`` of a feedforward)."""

    lower: int
    lower_role: str
    upper: int
    upper_role: str


def chain_pairs(n: int, block: str, guidance: GuidanceConfig) -> list[Pair]:
    """The pairs of ``block`` along a chain of ``n`` sublayers of one kind (bottom first)."""
    if block == "key_query":
        a, b = guidance.attention_roles
        return [Pair(t, a, t + 1, b) for t in range(n - 1)]
    phase = FFN_PAIRINGS.index(guidance.pairing[1])
    first, second = ("out", "v") if block == "value" else ("w2", "w1")
    return [Pair(t, first if (t + phase) % 2 == 0 else second, t + 1,
                 first if (t + phase) % 2 == 0 else second) for t in range(n - 1)]


def order_pairs(order: str, guidance: GuidanceConfig) -> list[tuple[str, Pair]]:
    """(block, pair) of every guided pair of ``order``, positions in the order string."""
    out: list[tuple[str, Pair]] = []
    for block in guidance.blocks:
        for kind in guidance.kinds(block):
            chain = [i for i, ch in enumerate(order) if ch == kind]
            out += [(block, Pair(chain[p.lower], p.lower_role, chain[p.upper], p.upper_role))
                    for p in chain_pairs(len(chain), block, guidance)]
    return out


def saved_params(chains: Mapping[str, int], guidance: GuidanceConfig, *, d_model: int,
                 d_ff: int) -> int:
    """Parameters hard guidance saves in a stack with ``chains`` (kind → count): one
    weight matrix per pair (d² for attention, d·width for a feedforward)."""
    if guidance.mode != "hard":
        return 0
    widths = {"s": d_model, "c": d_model, "f": d_ff, "h": d_ff // 2}
    total = 0
    for block in guidance.blocks:
        for kind in guidance.kinds(block):
            pairs = max(chains.get(kind, 0) - 1, 0)
            total += pairs * d_model * widths[kind]
    return total

