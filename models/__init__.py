"""The ordered transformer (torch only): configs, sublayers, LMs, corpora and training.

Never imports ray or mlflow: ``models.train.fit`` takes a plain ``report`` callable.
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
    "beam_search": "decoding",
    "greedy_decode": "decoding",
    "ConfigError": "errors",
    "IOTConfig": "iot_config",
    "IOTSeq2Seq": "iot",
    "AdaptiveInput": "lm",
    "LMOutput": "lm",
    "OrderedLM": "lm",
    "capture_attention": "lm",
    "OrderedSeq2Seq": "seq2seq",
    "Seq2SeqConfig": "seq2seq_config",
    "seq2seq_preset": "seq2seq_config",
    "Supernet": "supernet_model",
    "SupernetConfig": "supernet_config",
    "rank_orders": "supernet_rank",
    "train_supernet": "supernet",
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
    from sublayer_search.models.decoding import beam_search, greedy_decode
    from sublayer_search.models.errors import ConfigError
    from sublayer_search.models.iot import IOTSeq2Seq
    from sublayer_search.models.iot_config import IOTConfig
    from sublayer_search.models.lm import AdaptiveInput, LMOutput, OrderedLM, capture_attention
    from sublayer_search.models.seq2seq import OrderedSeq2Seq
    from sublayer_search.models.seq2seq_config import Seq2SeqConfig, seq2seq_preset
    from sublayer_search.models.supernet import train_supernet
    from sublayer_search.models.supernet_config import SupernetConfig
    from sublayer_search.models.supernet_model import Supernet
    from sublayer_search.models.supernet_rank import rank_orders
