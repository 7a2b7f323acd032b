"""Analytic parameter and FLOP counts of an :class:`models.lm.OrderedLM` configuration.

``param_count(cfg)`` equals ``sum(p.numel() for p in OrderedLM(cfg).parameters())``
(shared parameters counted once) for every valid config; tests check this. Hard
cross-layer guidance (:mod:`models.guidance.config`) shares one weight matrix per guided
pair: the count drops by it; it leaves the FLOPs unchanged (every sublayer still runs its
matmuls), and so does soft guidance (its regulariser costs O(weights) per *step*, not per
token).
"""

from __future__ import annotations

from sublayer_search.models.config import ModelConfig, adaptive_bands
from sublayer_search.models.guidance.config import saved_params
from sublayer_search.spaces.cost import half_width, sublayer_costs
from sublayer_search.spaces.kinds import CLASSIC, kind_of
from sublayer_search.spaces.order import counts

__all__ = ["active_param_count", "embedding_params", "flops_per_token", "head_params",
           "param_count"]


def embedding_params(cfg: ModelConfig) -> int:
    """Token embedding (plain V·d, or adaptive bands Σ |band|·dᵢ + dᵢ·d) plus learned positions."""
    d = cfg.d_model
    if cfg.adaptive_input:
        tokens = sum((stop - start) * w + w * d for start, stop, w in adaptive_bands(cfg))
    else:
        tokens = cfg.require_vocab() * d
    positions = cfg.context * d if cfg.positions == "learned" else 0
    return tokens + positions


def _tails(cfg: ModelConfig) -> list[tuple[int, int]]:
    """(width, size) of each adaptive-softmax tail: Linear(d, width) → Linear(width, size)."""
    return [(w, stop - start) for start, stop, w in adaptive_bands(cfg)[1:]]


def head_params(cfg: ModelConfig) -> int:
    """Parameters of the output layer that the input embedding does not already hold."""
    vocab, d = cfg.require_vocab(), cfg.d_model
    if not cfg.adaptive_softmax:
        return 0 if cfg.tie_embeddings else vocab * d
    n_clusters = len(cfg.cutoffs)
    tails = sum(d * w + w * size for w, size in _tails(cfg))
    if not cfg.tie_embeddings:
        return (cfg.cutoffs[0] + n_clusters) * d + tails
    if cfg.adaptive_input:
        return n_clusters * d  # shortlist rows and both tail matrices are shared
    return n_clusters * d + tails  # only the shortlist rows are shared


def param_count(cfg: ModelConfig) -> int:
    """Exact number of trainable parameters of ``OrderedLM(cfg)``.

    embeddings (+ learned positions) + Σ per-sublayer exact costs
    (:func:`spaces.cost.sublayer_costs` with ``exact=True``: weights, biases and the
    sublayer's LayerNorm) + final LayerNorm (pre-norm only) + untied head parts − the
    matrices hard guidance shares.
    """
    costs = sublayer_costs(d_model=cfg.d_model, d_ff=cfg.d_ff, exact=True,
                           n_heads=cfg.n_heads, settings=cfg.sublayers)
    n = counts(cfg.order)
    sublayers = sum(k * costs[kind] for kind, k in n.items())
    sublayers -= saved_params(n, cfg.guidance, d_model=cfg.d_model, d_ff=cfg.d_ff)
    final_norm = 2 * cfg.d_model if cfg.norm == "pre" else 0
    return embedding_params(cfg) + sublayers + final_norm + head_params(cfg)


def active_param_count(cfg: ModelConfig) -> int:
    """:func:`param_count` less the weights a token never passes through: the experts of
    a mixture-of-experts sublayer (``e``) that are not among its ``top_k``."""
    dims = cfg.dims
    idle = sum(k * (kind_of(kind).params(dims, exact=True)
                    - kind_of(kind).active_params(dims, exact=True))
               for kind, k in counts(cfg.order).items())
    return param_count(cfg) - idle


def flops_per_token(cfg: ModelConfig) -> int:
    """Forward FLOPs per token (multiply-add = 2 FLOPs), full-context convention.

    ``2 · N`` where N counts the weights of every matmul a token passes through outside
    the input embedding: per ``s``/``c`` 4d², per ``f`` 2·d·d_ff, per ``h`` d·d_ff (half
    width), and the output layer
    (V·d for a plain softmax, whether tied or not; Σ dᵢ·d + dᵢ·|bandᵢ| for the tied
    adaptive-input softmax; for the adaptive softmax the head plus *every* tail, i.e.
    the cost of full log-probabilities — training evaluates a tail only for the targets
    in its cluster, so this is an upper bound there). Biases, norms, activations,
    softmaxes and the adaptive-input projections are ignored.

    Plus, per self-attention sublayer, ``2 · 2 · context · d``: the scores QKᵀ and the
    weighted sum of values, each ``context · d`` multiply-adds per token, counted at the
    full context (not halved for the causal mask), as in the PaLM / Chinchilla appendix.
    Cross-attention sublayers add ``2 · 2 · context · d`` too (memory length taken as
    the context). A hybrid kind adds its own (:meth:`spaces.kinds.SublayerKind.flops`):
    ``w`` its window instead of the context, ``r`` its state update and read-out
    (2 · 2 · d · d/H), ``e`` the weights of its ``top_k`` experts and router only.
    """
    vocab, d, ctx = cfg.require_vocab(), cfg.d_model, cfg.context
    n = counts(cfg.order)
    matmul = (n["s"] + n["c"]) * 4 * d * d + n["f"] * 2 * d * cfg.d_ff
    matmul += n.get("h", 0) * 2 * d * half_width(cfg.d_ff)
    if cfg.adaptive_softmax:
        head = (cfg.cutoffs[0] + len(cfg.cutoffs)) * d
        head += sum(d * w + w * size for w, size in _tails(cfg))
    elif cfg.adaptive_input and cfg.tie_embeddings:
        head = sum(d * w + w * (stop - start) for start, stop, w in adaptive_bands(cfg))
    else:
        head = vocab * d
    attention = (n["s"] + n["c"]) * 2 * 2 * ctx * d
    hybrid = sum(k * kind_of(kind).flops(cfg.dims) for kind, k in n.items() if kind not in CLASSIC)
    return 2 * (matmul + head) + attention + hybrid
