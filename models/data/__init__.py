"""Corpora for language modelling: registry, download/caching, tokenisation, batching.

Public API (see each module for details)::

    cfg = DataConfig(name="tinyshakespeare")
    corpus = load_corpus(cfg)            # .train/.valid/.test memmaps, .vocab_size, .itos
    x, y = random_batch(corpus.train, context=64, batch_size=8, generator=g)
    for x, y in eval_batches(corpus.valid, context=64, batch_size=8): ...
    metrics_from_loss(loss, corpus.level)
"""

from typing import TYPE_CHECKING

from sublayer_search.spaces.lazy import lazy_exports

# imported on first use (spaces.lazy): DataConfig and the registry without torch
_EXPORTS = {
    "eval_batches": "batching",
    "random_batch": "batching",
    "DataConfig": "config",
    "Corpus": "corpus",
    "load_corpus": "corpus",
    "split_sizes": "corpus",
    "ENV_CACHE_DIR": "download",
    "ENV_DATA_DIR": "download",
    "ENV_DOWNLOAD_BASE": "download",
    "default_cache_dir": "download",
    "download_url": "download",
    "fetch": "download",
    "DataError": "errors",
    "metrics_from_loss": "metrics",
    "PARALLEL_CORPORA": "parallel",
    "ParallelCorpus": "parallel",
    "ParallelDataConfig": "parallel",
    "load_parallel": "parallel",
    "parallel_info": "parallel",
    "CORPORA": "registry",
    "LEVELS": "registry",
    "CorpusInfo": "registry",
    "corpus_info": "registry",
    "metric_for_level": "registry",
    "EOS": "tokenize",
    "UNK": "tokenize",
    "read_wikitext_tokens": "tokenize",
    "tokenize_wikitext_lines": "tokenize",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
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
