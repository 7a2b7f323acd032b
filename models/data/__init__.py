"""Corpora for language modelling: registry, download/caching, tokenisation, batching.

Public API (see each module for details)::

    cfg = DataConfig(name="tinyshakespeare")
    corpus = load_corpus(cfg)            # .train/.valid/.test memmaps, .vocab_size, .itos
    x, y = random_batch(corpus.train, context=64, batch_size=8, generator=g)
    for x, y in eval_batches(corpus.valid, context=64, batch_size=8): ...
    metrics_from_loss(loss, corpus.level)
"""

from sublayer_search.models.data.batching import eval_batches, random_batch
from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.data.corpus import Corpus, load_corpus, split_sizes
from sublayer_search.models.data.download import (
    ENV_CACHE_DIR,
    ENV_DATA_DIR,
    ENV_DOWNLOAD_BASE,
    default_cache_dir,
    download_url,
    fetch,
)
from sublayer_search.models.data.errors import DataError
from sublayer_search.models.data.metrics import metrics_from_loss
from sublayer_search.models.data.parallel import (
    PARALLEL_CORPORA,
    ParallelCorpus,
    ParallelDataConfig,
    load_parallel,
    parallel_info,
)
from sublayer_search.models.data.registry import (
    CORPORA,
    LEVELS,
    CorpusInfo,
    corpus_info,
    metric_for_level,
)
from sublayer_search.models.data.tokenize import (
    EOS,
    UNK,
    read_wikitext_tokens,
    tokenize_wikitext_lines,
)

__all__ = [
    "CORPORA",
    "PARALLEL_CORPORA",
    "ParallelCorpus",
    "ParallelDataConfig",
    "load_parallel",
    "parallel_info",
    "ENV_CACHE_DIR",
    "ENV_DATA_DIR",
    "ENV_DOWNLOAD_BASE",
    "EOS",
    "LEVELS",
    "UNK",
    "Corpus",
    "CorpusInfo",
    "DataConfig",
    "DataError",
    "corpus_info",
    "default_cache_dir",
    "download_url",
    "eval_batches",
    "fetch",
    "load_corpus",
    "metric_for_level",
    "metrics_from_loss",
    "random_batch",
    "read_wikitext_tokens",
    "split_sizes",
    "tokenize_wikitext_lines",
]
