"""The ordered transformer (torch only): configs, sublayers, LMs, corpora and training.

Never imports ray or mlflow: ``models.train.fit`` takes a plain ``report`` callable.
"""

from models.accounting import flops_per_token, param_count
from models.blocks import CrossAttention, FeedForward, Residual, SelfAttention, build_sublayer
from models.config import PRESETS, ModelConfig, adaptive_bands, model_preset
from models.decoding import beam_search, greedy_decode
from models.errors import ConfigError
from models.iot import IOTConfig, IOTSeq2Seq
from models.lm import AdaptiveInput, LMOutput, OrderedLM, capture_attention
from models.seq2seq import OrderedSeq2Seq, Seq2SeqConfig, seq2seq_preset

__all__ = [
    "PRESETS", "AdaptiveInput", "ConfigError", "CrossAttention", "FeedForward", "LMOutput",
    "ModelConfig", "OrderedLM", "Residual", "SelfAttention", "adaptive_bands", "build_sublayer",
    "capture_attention", "flops_per_token", "model_preset", "param_count",
    "IOTConfig", "IOTSeq2Seq", "OrderedSeq2Seq", "Seq2SeqConfig", "beam_search", "greedy_decode",
    "seq2seq_preset",
]
