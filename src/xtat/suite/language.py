"""Standard sequence families: a BERT encoder, a GPT decoder, and an LSTM over a scan.

Text is synthetic: random walks over the vocabulary (common.random_walk_tokens),
whose local structure a language model can learn. BERT trains on masked
tokens, GPT and the LSTM on next tokens.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from xtat.suite.common import Batch, Task, choose, random_walk_tokens, suite_entry
from xtat.suite.layers import Transformer


def next_token_batch(seed: int, batch: int, length: int, vocab: int) -> dict[str, np.ndarray]:
    """Sequences and the same sequences shifted by one token."""
    tokens = random_walk_tokens(seed, batch, length + 1, vocab)
    return {"inputs": tokens[:, :-1], "targets": tokens[:, 1:]}


def next_token_loss(logits: jax.Array, batch: Batch) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()


# --------------------------------------------------------------------------- BERT

MASK_FRACTION = 0.15


def masked_batch(seed: int, batch: int, length: int, vocab: int) -> dict[str, np.ndarray]:
    """BERT's masking: 15% of positions are predicted; of those 80% become [MASK],
    10% a random token, 10% stay. The last vocabulary id is [MASK] and never text."""
    text = random_walk_tokens(seed, batch, length, vocab - 1)
    rng = np.random.default_rng([seed, 1])  # a stream apart from the text's own
    predicted = rng.random(text.shape) < MASK_FRACTION
    choice = rng.random(text.shape)
    inputs = np.where(predicted & (choice < 0.8), vocab - 1, text)
    inputs = np.where(predicted & (choice >= 0.8) & (choice < 0.9), rng.integers(0, vocab - 1, text.shape), inputs)
    return {"inputs": inputs.astype(np.int32), "targets": text, "weights": predicted.astype(np.float32)}


def masked_lm_loss(logits: jax.Array, batch: Batch) -> jax.Array:
    """Cross-entropy over the predicted positions only."""
    per_token = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
    return jnp.sum(per_token * batch["weights"]) / jnp.maximum(jnp.sum(batch["weights"]), 1.0)


class Bert(nn.Module):
    """Post-LN transformer encoder with a masked-LM head tied to the token embedding."""

    vocab: int
    width: int
    num_layers: int
    num_heads: int
    mlp_dim: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        embed = nn.Embed(self.vocab, self.width, name="token_embedding")
        positions = self.param("positions", nn.initializers.normal(0.02), (tokens.shape[1], self.width))
        x = nn.LayerNorm(name="ln_embedding")(embed(tokens) + positions)
        x = Transformer(self.num_layers, self.num_heads, self.mlp_dim, norm_first=False, name="encoder")(x)
        h = nn.LayerNorm(name="ln_head")(nn.gelu(nn.Dense(self.width, name="head_transform")(x)))
        return embed.attend(h) + self.param("output_bias", nn.initializers.zeros, (self.vocab,))


def bert_task(size: str) -> Task:
    model, length, batch = choose(
        size,
        small=(Bert(vocab=512, width=128, num_layers=2, num_heads=4, mlp_dim=256), 64, 8),
        large=(Bert(vocab=30522, width=768, num_layers=12, num_heads=12, mlp_dim=3072), 512, 32),  # BERT-base
    )
    return Task(model, partial(masked_batch, batch=batch, length=length, vocab=model.vocab), masked_lm_loss)


# --------------------------------------------------------------------------- GPT


class Gpt(nn.Module):
    """Pre-LN causal transformer decoder with the output tied to the token embedding (GPT-2)."""

    vocab: int
    width: int
    num_layers: int
    num_heads: int
    mlp_dim: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        embed = nn.Embed(self.vocab, self.width, name="token_embedding")
        positions = self.param("positions", nn.initializers.normal(0.02), (tokens.shape[1], self.width))
        x = Transformer(self.num_layers, self.num_heads, self.mlp_dim, causal=True, name="decoder")(
            embed(tokens) + positions)
        return embed.attend(x)


def gpt_task(size: str) -> Task:
    model, length, batch = choose(
        size,
        small=(Gpt(vocab=512, width=128, num_layers=2, num_heads=4, mlp_dim=512), 64, 8),
        large=(Gpt(vocab=50257, width=768, num_layers=12, num_heads=12, mlp_dim=3072), 1024, 8),  # GPT-2 small
    )
    return Task(model, partial(next_token_batch, batch=batch, length=length, vocab=model.vocab), next_token_loss)


# --------------------------------------------------------------------------- LSTM


class LSTMLayer(nn.Module):
    """An LSTM (Hochreiter & Schmidhuber) over [batch, time, features], as a `lax.scan` over time.

    The input projections of every step are one matmul before the loop; the
    scan carries (h, c) and does only the recurrent matmul and the gates, so
    the loop body is what scan unrolling can speed up.
    """

    hidden: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        gates_from_input = nn.Dense(4 * self.hidden, name="input")(x)  # [B, T, 4H]
        recurrent_kernel = self.param("recurrent_kernel", nn.initializers.lecun_normal(),
                                      (self.hidden, 4 * self.hidden))

        def step(carry: tuple[jax.Array, jax.Array], gates_in: jax.Array) -> Any:
            h, c = carry
            i, f, g, o = jnp.split(gates_in + h @ recurrent_kernel, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((x.shape[0], self.hidden), x.dtype)
        _, hs = jax.lax.scan(step, (zeros, zeros), jnp.swapaxes(gates_from_input, 0, 1))
        return jnp.swapaxes(hs, 0, 1)


class LstmLanguageModel(nn.Module):
    vocab: int
    embed_dim: int
    hidden: int
    num_layers: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.embed_dim, name="token_embedding")(tokens)
        for i in range(self.num_layers):
            x = LSTMLayer(self.hidden, name=f"lstm_{i}")(x)
        return nn.Dense(self.vocab, name="head")(x)


def lstm_task(size: str) -> Task:
    model, length, batch = choose(
        size,
        small=(LstmLanguageModel(vocab=256, embed_dim=64, hidden=128, num_layers=1), 32, 16),
        large=(LstmLanguageModel(vocab=10000, embed_dim=512, hidden=1024, num_layers=2), 128, 64),
    )
    return Task(model, partial(next_token_batch, batch=batch, length=length, vocab=model.vocab), next_token_loss)


ENTRIES = [
    suite_entry("bert", "standard language", "BERT encoder (post-LN), masked-LM loss; small: width 128, 2 layers, "
                "vocab 512, batch 8 x 64; large: BERT-base", bert_task),
    suite_entry("gpt", "standard language", "GPT-2 style decoder (pre-LN, causal), next-token loss; small: width 128, "
                "2 layers, vocab 512, batch 8 x 64; large: GPT-2 small", gpt_task),
    suite_entry("lstm", "standard language", "LSTM language model as a lax.scan over time; small: hidden 128, "
                "1 layer, batch 16 x 32 steps", lstm_task),
]
