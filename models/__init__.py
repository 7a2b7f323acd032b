"""The ordered transformer (torch only): configs, sublayers, LMs, corpora and training.

Never imports ray or mlflow: ``models.lm_workload.fit`` takes a plain ``report`` callable.
The names below are imported on first use (:mod:`spaces.lazy`), so that the config
modules (``models.config``, ``models.train_config``, …) can be used without torch.
"""

from typing import TYPE_CHECKING

from sublayer_search.spaces.lazy import lazy_exports

_EXPORTS = {
    "flops_per_token": "accounting",
    "param_count": "accounting",
    "CrossAttention": "blocks",
    "FeedForward": "blocks",
    "Residual": "blocks",
    "SelfAttention": "blocks",
    "build_sublayer": "blocks",
    "PRESETS": "config",
    "ModelConfig": "config",
    "adaptive_bands": "config",
    "model_preset": "config",
    "beam_search": "seq2seq.decoding",
    "greedy_decode": "seq2seq.decoding",
    "ConfigError": "errors",
    "IOTConfig": "seq2seq.iot_config",
    "IOTSeq2Seq": "seq2seq.iot_model",
    "AdaptiveInput": "lm",
    "LMOutput": "lm",
    "OrderedLM": "lm",
    "capture_attention": "lm",
    "OrderedSeq2Seq": "seq2seq.model",
    "Seq2SeqConfig": "seq2seq.config",
    "seq2seq_preset": "seq2seq.config",
    "Supernet": "supernet.model",
    "SupernetConfig": "supernet.config",
    "rank_orders": "supernet.rank",
    "train_supernet": "supernet.train",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from sublayer_search.models.accounting import flops_per_token, param_count
    from sublayer_search.models.blocks import (
        CrossAttention,
        FeedForward,
        Residual,
        SelfAttention,
        build_sublayer,
    )
    from sublayer_search.models.config import PRESETS, ModelConfig, adaptive_bands, model_preset
    from sublayer_search.models.errors import ConfigError
    from sublayer_search.models.lm import AdaptiveInput, LMOutput, OrderedLM, capture_attention
    from sublayer_search.models.seq2seq.config import Seq2SeqConfig, seq2seq_preset
    from sublayer_search.models.seq2seq.decoding import beam_search, greedy_decode
    from sublayer_search.models.seq2seq.iot_config import IOTConfig
    from sublayer_search.models.seq2seq.iot_model import IOTSeq2Seq
    from sublayer_search.models.seq2seq.model import OrderedSeq2Seq
    from sublayer_search.models.supernet.config import SupernetConfig
    from sublayer_search.models.supernet.model import Supernet
    from sublayer_search.models.supernet.rank import rank_orders
    from sublayer_search.models.supernet.train import train_supernet
