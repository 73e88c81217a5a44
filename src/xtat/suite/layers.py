"""Flax layers shared by several standard suite entries.

The transformer block (and its self-attention) serves ViT, BERT and GPT,
the self-attention also the U-Net's bottleneck; the
two-layer GELU feed-forward serves those and MLP-Mixer; the ReLU MLP is
the `mlp` entry and a part of the GNN and DLRM; the sinusoidal
embedding encodes the diffusion timestep.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


class MLP(nn.Module):
    """ReLU multilayer perceptron with a linear last layer."""

    hidden: tuple[int, ...]
    out: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i, width in enumerate(self.hidden):
            x = nn.relu(nn.Dense(width, name=f"hidden_{i}")(x))
        return nn.Dense(self.out, name="last")(x)


class FeedForward(nn.Module):
    """Dense -> GELU -> Dense back to the input width."""

    hidden: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(x.shape[-1], name="out")(nn.gelu(nn.Dense(self.hidden, name="hidden")(x)))


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention over [batch, length, width].

    One fused query/key/value projection and plain 2-D kernels, so every
    kernel's fan-in is its first dimension (see common.init_variables).
    """

    num_heads: int
    causal: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        batch, length, width = x.shape
        head_dim = width // self.num_heads
        qkv = nn.Dense(3 * width, name="qkv")(x).reshape(batch, length, 3, self.num_heads, head_dim)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [B, L, H, Dh]
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * head_dim**-0.5
        if self.causal:
            scores = jnp.where(jnp.tril(jnp.ones((length, length), bool)), scores, jnp.finfo(scores.dtype).min)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
        return nn.Dense(width, name="out")(out.reshape(batch, length, width))


class TransformerBlock(nn.Module):
    """Multi-head self-attention and a feed-forward, each with a residual.

    norm_first: pre-LayerNorm (GPT-2, ViT) or post-LayerNorm (the original
    transformer and BERT). causal: each position attends only to earlier ones.
    """

    num_heads: int
    mlp_dim: int
    causal: bool = False
    norm_first: bool = True

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        attention = SelfAttention(self.num_heads, self.causal, name="attention")
        feed_forward = FeedForward(self.mlp_dim, name="mlp")
        if self.norm_first:
            x = x + attention(nn.LayerNorm(name="ln_attention")(x))
            return x + feed_forward(nn.LayerNorm(name="ln_mlp")(x))
        x = nn.LayerNorm(name="ln_attention")(x + attention(x))
        return nn.LayerNorm(name="ln_mlp")(x + feed_forward(x))


class Transformer(nn.Module):
    """A stack of `TransformerBlock`s over [batch, length, width] inputs."""

    num_layers: int
    num_heads: int
    mlp_dim: int
    causal: bool = False
    norm_first: bool = True

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i in range(self.num_layers):
            x = TransformerBlock(self.num_heads, self.mlp_dim, self.causal, self.norm_first, name=f"block_{i}")(x)
        # Pre-LN stacks end with a norm of their own (GPT-2, ViT); post-LN
        # blocks have already normalized their output.
        return nn.LayerNorm(name="ln_final")(x) if self.norm_first else x


def sinusoidal_embedding(positions: jax.Array, width: int) -> jax.Array:
    """sin/cos features of integer positions or timesteps (Vaswani et al.): [..., width]."""
    inv_freq = np.exp(-np.log(10000.0) * np.arange(0, width, 2) / width).astype(np.float32)
    angles = positions[..., None].astype(jnp.float32) * inv_freq
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)
