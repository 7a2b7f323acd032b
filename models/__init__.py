"""The ordered transformer (torch only): configs, sublayers, LMs, corpora and training.

Never imports ray or mlflow: ``models.train.fit`` takes a plain ``report`` callable.
"""

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
from sublayer_search.models.iot import IOTConfig, IOTSeq2Seq
from sublayer_search.models.lm import AdaptiveInput, LMOutput, OrderedLM, capture_attention
from sublayer_search.models.seq2seq import OrderedSeq2Seq, Seq2SeqConfig, seq2seq_preset

__all__ = [
    "PRESETS", "AdaptiveInput", "ConfigError", "CrossAttention", "FeedForward", "LMOutput",
    "ModelConfig", "OrderedLM", "Residual", "SelfAttention", "adaptive_bands", "build_sublayer",
    "capture_attention", "flops_per_token", "model_preset", "param_count",
    "IOTConfig", "IOTSeq2Seq", "OrderedSeq2Seq", "Seq2SeqConfig", "beam_search", "greedy_decode",
    "seq2seq_preset",
]
