"""OrderedLM and its sublayers: causality, gradients, learning, attention capture."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from sublayer_search.models.blocks import CrossAttention, SelfAttention, build_sublayer
from sublayer_search.models.config import model_preset
from sublayer_search.models.lm import OrderedLM, capture_attention

V = 50
ADAPTIVE_BOTH = {"adaptive_input": True, "adaptive_softmax": True, "cutoffs": (10, 30)}


def make(order: str = "sfsf", **overrides) -> OrderedLM:
    torch.manual_seed(0)
    cfg = model_preset("debug", order=order, vocab_size=V, dropout=0.0, **overrides)
    return OrderedLM(cfg).eval()


def tokens(b: int = 2, t: int = 16, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


def test_shapes_and_loss_is_mean_nll() -> None:
    model = make()
    x, y = tokens(), tokens(seed=2)
    out = model(x, y)
    assert out.logits is None  # training: the fused head computes no (B, T, V) logits
    assert model(x).logits.shape == (2, 16, V)
    nll = -model.log_probs(x).gather(-1, y[..., None]).mean()
    torch.testing.assert_close(out.loss, nll)
    with torch.no_grad():
        plain = model(x, y)
    assert plain.logits.shape == (2, 16, V)
    torch.testing.assert_close(plain.loss, nll)
    assert model(x).loss is None


def test_adaptive_softmax_loss_is_mean_nll_and_logits_are_none() -> None:
    model = make(**ADAPTIVE_BOTH)
    x, y = tokens(), tokens(seed=2)
    out = model(x, y)
    assert out.logits is None
    logp = model.log_probs(x)
    assert logp.shape == (2, 16, V)
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(2, 16))
    torch.testing.assert_close(out.loss, -logp.gather(-1, y[..., None]).mean())


def test_tied_weights_are_shared() -> None:
    plain = make()
    assert plain.head.weight is plain.embed.weight
    both = make(**ADAPTIVE_BOTH)
    asm, emb = both.adaptive_softmax, both.embed
    assert asm.head.embedding is emb.embeddings[0].weight
    for i, tail in enumerate(asm.tail):
        assert tail[0].weight is emb.projections[i + 1]
        assert tail[1].weight is emb.embeddings[i + 1].weight
    assert make(adaptive_input=True, cutoffs=(10,)).head is None  # logits via the bands


CAUSAL_CASES = [
    ("sfsf", {}),
    ("ssff", {}),
    ("ffss", {"norm": "post", "positions": "sinusoidal"}),
    ("sssf", {"adaptive_softmax": True, "cutoffs": (10, 30)}),
    ("ssff", ADAPTIVE_BOTH),
    ("fsfs", {"adaptive_input": True, "cutoffs": (20,)}),
]


@pytest.mark.parametrize(("order", "extra"), CAUSAL_CASES)
def test_causality(order: str, extra: dict) -> None:
    model = make(order, **extra)
    x = tokens()
    with torch.no_grad():
        base = model.log_probs(x)
        for t in (0, 7, 14):
            changed = x.clone()
            changed[:, t + 1] = (changed[:, t + 1] + 1 + t) % V
            out = model.log_probs(changed)
            torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=1e-5, rtol=0)
            assert not torch.allclose(out[:, t + 1], base[:, t + 1])


@pytest.mark.parametrize(
    "extra",
    [{}, {"norm": "post", "tie_embeddings": False, "activation": "gelu"}, ADAPTIVE_BOTH],
    ids=["pre-tied", "post-untied", "adaptive"],
)
def test_every_parameter_gets_a_gradient(extra: dict) -> None:
    model = make("ssff", **extra).train()
    x = torch.arange(2 * 32).view(2, 32) % V  # every token id and every position
    model(x, x.roll(-1, dims=1)).loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    assert not missing


def test_loss_falls_on_tinyshakespeare(shared_data: Path) -> None:
    text = (shared_data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")[:200_000]
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text[:50_000]], dtype=torch.long)
    torch.manual_seed(0)
    cfg = model_preset("debug", vocab_size=len(chars), dropout=0.0)
    model = OrderedLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(data) - cfg.context - 1, (16,), generator=gen)
        x = torch.stack([data[s : s + cfg.context] for s in starts])
        y = torch.stack([data[s + 1 : s + cfg.context + 1] for s in starts])
        return x, y

    losses = []
    for _ in range(40):
        x, y = batch()
        loss = model(x, y).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    initial, final = losses[0], sum(losses[-5:]) / 5
    assert final < 0.8 * initial, (initial, final)


def test_capture_attention() -> None:
    model = make("ssfsf")
    x = tokens(t=12)
    with torch.no_grad():
        plain = model(x).logits
        with capture_attention(model) as probs:
            captured = model(x).logits
    assert len(probs) == 3
    for p in probs:
        assert p.shape == (2, 2, 12, 12) and not p.requires_grad
        torch.testing.assert_close(p.sum(-1), torch.ones(2, 2, 12))
        assert (p.triu(diagonal=1) == 0).all()
        assert (p[..., torch.ones(12, 12, dtype=torch.bool).tril()] > 0).all()
    torch.testing.assert_close(captured, plain, atol=1e-5, rtol=1e-5)
    model(x)
    assert len(probs) == 3  # nothing is stored outside the context
    assert all(m.capture is None for m in model.modules() if isinstance(m, SelfAttention))


def test_sinusoidal_positions_have_no_parameters() -> None:
    learned = make()
    model = make(positions="sinusoidal")
    assert model.pos is None and "pos_table" not in model.state_dict()
    n = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for p in learned.parameters()) - n == 32 * 32


def test_sequence_longer_than_context_is_refused() -> None:
    with pytest.raises(ValueError, match="exceeds the context"):
        make()(tokens(t=33))


def test_self_attention_padding_mask_non_causal() -> None:
    torch.manual_seed(0)
    attn = SelfAttention(16, 4, causal=False).eval()
    x = torch.randn(2, 6, 16)
    pad = torch.tensor([[False] * 4 + [True] * 2, [False] * 6])
    y = attn(x, key_padding_mask=pad)
    x2 = x.clone()
    x2[0, 4:] = torch.randn(2, 16)  # change only padded keys of sequence 0
    y2 = attn(x2, key_padding_mask=pad)
    torch.testing.assert_close(y2[0, :4], y[0, :4])
    # non-causal: position 0 sees later tokens
    x3 = x.clone()
    x3[1, 5] += 1.0
    assert not torch.allclose(attn(x3, key_padding_mask=pad)[1, 0], y[1, 0])
    with capture_attention(attn) as probs:
        attn(x, key_padding_mask=pad)
    assert (probs[0][0, :, :, 4:] == 0).all()


def test_cross_attention_masks_memory_and_costs_like_self_attention() -> None:
    torch.manual_seed(0)
    d = 16
    layer = build_sublayer("c", d_model=d, n_heads=4, d_ff=32)
    assert isinstance(layer.sublayer, CrossAttention)
    assert sum(p.numel() for p in layer.parameters()) == 4 * d * d + 4 * d + 2 * d
    x, memory = torch.randn(2, 5, d), torch.randn(2, 7, d)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[:, 5:] = True
    y = layer(x, memory, pad)
    memory2 = memory.clone()
    memory2[:, 5:] = torch.randn(2, 2, d)
    torch.testing.assert_close(layer(x, memory2, pad), y)
    assert not torch.allclose(layer(x, memory2), layer(x, memory))
    ref = F.layer_norm(x, (d,))  # pre-norm: the sublayer sees norm(x)
    assert y.shape == ref.shape
