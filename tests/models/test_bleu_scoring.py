"""BLEU as the papers scored it (issue 46): ``translation.bleu_tokenize: none`` scores the
text as it is (multi-bleu.perl on fairseq's tokenised output), 13a is sacrebleu's
default; ``translation.test_bleu`` scores the test split at the final evaluation."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import sacrebleu
import torch

from sublayer_search.models.data.parallel import ParallelDataConfig, load_parallel
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm_workload import TrainConfig
from sublayer_search.models.seq2seq.model import seq2seq_preset
from sublayer_search.models.seq2seq.translation_workload import (
    TranslationConfig,
    TranslationSpec,
    TranslationWorkload,
    bleu,
    evaluate_translation,
)
from sublayer_search.models.training_loop import StepContext

HYPS = ["the cat sat on the mat .", "he said : &quot; no . &quot;"]
REFS = ["the cat sat on the mat.", "he said : &quot; no . &quot;"]


def test_none_scores_the_text_as_it_is_and_13a_tokenises_first() -> None:
    assert bleu(HYPS, REFS, "none") == pytest.approx(
        sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="none").score)
    assert bleu(HYPS, REFS) == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert bleu(HYPS, REFS, "none") < bleu(HYPS, REFS)  # "mat." is one token as it is
    with pytest.raises(ConfigError, match="translation.bleu_tokenize"):
        TranslationConfig(bleu_tokenize="intl")
    with pytest.raises(ConfigError, match="translation.test_bleu"):
        TranslationConfig(test_bleu="yes")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):  # type: ignore[no-untyped-def]
    data = ParallelDataConfig(name="multi30k", vocab_size=2000, max_train_tokens=20,
                              download=False, cache_dir=str(tmp_path_factory.mktemp("m30k")))
    return data, load_parallel(data)


@pytest.mark.slow  # decodes Multi30k's whole test split twice
def test_the_final_evaluation_scores_the_test_split_with_the_chosen_tokeniser(corpus) -> None:
    data, loaded = corpus
    assert len(loaded.test) > 0
    settings = TranslationConfig(beam=1, max_len=8, eval_sentences=8, test_bleu=True,
                                 bleu_tokenize="none")
    spec = TranslationSpec(model=seq2seq_preset("debug", dropout=0.0), data=data,
                           train=TrainConfig(steps=1, batch_size=4, eval_every=1, seed=0),
                           translation=settings)
    family = TranslationWorkload(spec, loaded)
    torch.manual_seed(0)
    model = family.build().eval()
    ctx = StepContext(device=torch.device("cpu"), autocast=nullcontext(),
                      generator=torch.Generator().manual_seed(0), batch_size=4,
                      eval_batch_size=4)
    final = family.evaluate(model, ctx, step=1, final=True)
    hand = evaluate_translation(model, loaded, split="test", batch_size=4, beam=1, max_len=8,
                                tokenize="none")
    assert final["test_bleu"] == pytest.approx(hand["bleu"])
    assert final["test_loss"] == pytest.approx(hand["loss"])
    assert "test_bleu" not in family.evaluate(model, ctx, step=1, final=False)
