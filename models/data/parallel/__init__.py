"""Parallel corpora for translation: registry, file lookup, BPE vocabulary, batching.

Registered corpora (``PARALLEL_CORPORA``)::

    multi30k        German–English raw text: train / val / test2016 .{de,en}
                    (downloadable: the multi30k/dataset repository's data/task1/raw *.gz)
    iwslt14-de-en   fairseq's prepare-iwslt14.sh output: {train,valid,test}.{de,en}
    wmt14-en-de     fairseq's prepare-wmt14en2de.sh output: {train,valid,test}.{en,de}
    parallel-files  your own files: train_src/train_tgt/valid_src/valid_tgt(/test_*)

Lookup per split mirrors :mod:`models.data.download`: explicit ``*_src``/``*_tgt``
paths -> ``path`` (a folder; exclusive when set) -> ``data_dir`` (else
``$SUBLAYER_DATA_DIR``) ``/<name>/`` -> the cache ``/<name>/`` -> download (multi30k only).
No published checksums are known for the multi30k ``.gz`` files: downloads are
unverified (like enwik8/text8).

Text handling:

* Lines are split on ``\\n`` only (``\\r`` stripped), so both sides of a pair stay
  aligned even when a line holds exotic Unicode separators. Files of one split with
  different line counts raise :class:`DataError` naming both files and counts.
* Pairs whose two sides are both blank are dropped (Multi30k's files end in a blank
  line); training pairs with one blank side are dropped too; validation/test pairs are
  kept as they are.
* fairseq-prepared corpora (iwslt14-de-en, wmt14-en-de) are already Moses-tokenised and
  BPE-split with ``@@`` continuation markers. We *undo* that BPE (``"@@ "`` removed,
  ``strip_bpe``), which gives fairseq's tokenised text, and learn our own BPE on it. The
  BLEU references are then that Moses-tokenised text, so BLEU on these corpora is
  "tokenised BLEU" (sacrebleu's 13a tokenisation on top), not comparable to
  detokenised sacreBLEU of raw text.

Vocabulary: byte-pair encoding learned with HF ``tokenizers`` on the training split
(joint over both languages when ``shared_vocab``, else one per language), pre-tokenised
with Metaspace (``▁`` marks a preceding space) + punctuation splitting, so
:meth:`ParallelCorpus.decode` returns detokenised text (whitespace normalised to single
spaces). Special ids: ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2, ``<unk>`` 3. The trainer is
deterministic for a given input and vocabulary size.

Caching: ``<cache>/bpe/<name>-<key16>/{joint|src|tgt}.json`` keyed by the sha256 of the
training files, languages, vocabulary settings and ``PARALLEL_VERSION``; beside it
``<cache>/tokens/<name>-<src>-<tgt>-<key16>/`` with the id arrays of every split
(``<split>.<side>.npy`` flat ids + ``<split>.<side>.off.npy`` offsets) and ``meta.json``
(written last, atomically).

Modules: :mod:`.config` (registry, :class:`ParallelDataConfig`, torch-free), :mod:`.files`
(reading, finding, downloading), :mod:`.bpe` (the vocabulary), :mod:`.corpus` (splits,
loading, the token cache) and :mod:`.batching`; this package is their public face, its
names imported on first use (``spaces.lazy``) so that the config needs no torch.
"""

from typing import TYPE_CHECKING

from sublayer_search.spaces.lazy import lazy_exports

_EXPORTS = {
    "PairBatch": "batching",
    "collate_pairs": "batching",
    "eval_pair_batches": "batching",
    "random_pairs": "batching",
    "token_batches": "batching",
    "train_bpe": "bpe",
    "BOS": "config",
    "EOS": "config",
    "PAD": "config",
    "PARALLEL_CORPORA": "config",
    "PARALLEL_VERSION": "config",
    "SPECIALS": "config",
    "SPLITS": "config",
    "UNK": "config",
    "ParallelDataConfig": "config",
    "ParallelSpec": "config",
    "parallel_info": "config",
    "ParallelCorpus": "corpus",
    "ParallelSplit": "corpus",
    "built_vocab_sizes": "corpus",
    "load_parallel": "corpus",
    "fetch_parallel": "files",
    "read_lines": "files",
    "read_pairs": "files",
    "resolve_parallel_files": "files",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:

    from sublayer_search.models.data.parallel.batching import (
        PairBatch,
        collate_pairs,
        eval_pair_batches,
        random_pairs,
        token_batches,
    )
    from sublayer_search.models.data.parallel.bpe import train_bpe
    from sublayer_search.models.data.parallel.config import (
        BOS,
        EOS,
        PAD,
        PARALLEL_CORPORA,
        PARALLEL_VERSION,
        SPECIALS,
        SPLITS,
        UNK,
        ParallelDataConfig,
        ParallelSpec,
        parallel_info,
    )
    from sublayer_search.models.data.parallel.corpus import (
        ParallelCorpus,
        ParallelSplit,
        built_vocab_sizes,
        load_parallel,
    )
    from sublayer_search.models.data.parallel.files import (
        fetch_parallel,
        read_lines,
        read_pairs,
        resolve_parallel_files,
    )
