"""Built-in default workload: a small mixture-of-experts transformer.

A GLaM-style decoder-only transformer (pre-LayerNorm, causal self-attention,
an MoE feed-forward layer in every other block) trained with optax adamw.
The MoE layer follows GShard: top-2 gating, per-expert capacity, and dispatch
through one-hot dispatch/combine tensors contracted with einsum. This mixes
the ops an XLA autotuner cares about (matmuls, softmax, layer norms, large
one-hot einsums, top-k, a matmul-based cumulative sum) into one program.

Parameters come from a fixed random init and inputs from a seeded numpy
generator, so the workload is reproducible and needs no data or weights.

    moe_train_step(size="small")      -> Workload(train_step, (params, opt_state, tokens, targets))
    moe_inference_step(size="small")  -> Workload(inference_step, (params, tokens))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from xtat.suite import SuiteEntry
from xtat.workload import Workload

PyTree = Any


@dataclass(frozen=True)
class MoEConfig:
    """Model, data and optimizer dimensions of one workload size."""

    d_model: int
    num_heads: int
    num_layers: int
    ff_dim: int
    num_experts: int
    vocab: int
    seq_len: int
    batch: int
    top_k: int = 2  # GShard/GLaM top-2 gating
    capacity_factor: float = 1.25
    moe_every: int = 2  # GLaM: layer i is MoE when i % moe_every == moe_every - 1
    group_size: int | None = None  # tokens per routing group; None: the whole batch
    aux_loss_weight: float = 0.01
    learning_rate: float = 1e-3
    weight_decay: float = 0.01

    @property
    def tokens_per_group(self) -> int:
        # GShard routes within groups of tokens; capacity is per group. Large
        # batches need several groups, or the [G, S, E, C] one-hot tensors grow
        # quadratically in the number of tokens.
        return self.group_size or self.batch * self.seq_len

    @property
    def expert_capacity(self) -> int:
        return math.ceil(self.capacity_factor * self.tokens_per_group * self.top_k / self.num_experts)


SIZES: Mapping[str, MoEConfig] = MappingProxyType({
    # Sized for CPU: the train step compiles in ~3 s and runs in tens of ms on
    # 2 cores; ff_dim is 2x d_model to keep the step there. One routing group
    # spans the whole batch (512 tokens, so expert capacity 320).
    "small": MoEConfig(
        d_model=128, num_heads=4, num_layers=2, ff_dim=256, num_experts=4,
        vocab=256, seq_len=64, batch=8,
    ),
    # Closer to a real accelerator workload; not meant for CPU. Routing groups
    # of 1024 tokens (capacity 320) keep the one-hot dispatch tensors linear in
    # batch size (~84 MB) instead of quadratic (~670 MB as one group).
    "large": MoEConfig(
        d_model=1024, num_heads=16, num_layers=8, ff_dim=4096, num_experts=8,
        vocab=256, seq_len=512, batch=16, group_size=1024,
    ),
})


def _config(size: str) -> MoEConfig:
    if size not in SIZES:
        raise ValueError(f"unknown MoE workload size {size!r}; valid sizes: {', '.join(SIZES)}")
    return SIZES[size]


# --------------------------------------------------------------------------- model


def top_k_routing(
    router_logits: jax.Array, k: int, capacity: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """GShard-style top-k gating within routing groups.

    router_logits: [G, S, E]. Returns (dispatch [G, S, E, C], combine
    [G, S, E, C], aux_loss scalar). A choice that finds its expert full gets an
    all-zero dispatch row; a token with every choice dropped reaches the next
    layer only through the residual connection.
    """
    groups, seq, num_experts = router_logits.shape
    probs = jax.nn.softmax(router_logits, axis=-1)  # [G, S, E]

    # Expert choices in order of preference. The selection is discrete, so it
    # sees no gradient; the router learns through the gate values below.
    _, expert_index = jax.lax.top_k(jax.lax.stop_gradient(probs), k)  # [G, S, K]
    # [G, S, E, K], with k last because the einsums below contract over it.
    expert_mask = jax.nn.one_hot(expert_index, num_experts, dtype=probs.dtype, axis=-2)

    # Gate-probability weighting: each choice is weighted by its router
    # probability, renormalized over the k choices (GShard top-2).
    gates = jnp.einsum("gse,gsek->gsk", probs, expert_mask)
    gates = gates / jnp.maximum(jnp.sum(gates, axis=-1, keepdims=True), jnp.finfo(probs.dtype).eps)

    # Switch-Transformer load-balancing loss on the top-1 choice, before
    # capacity drops: E * sum_e (fraction of tokens to e) * (mean prob of e).
    density = jnp.mean(expert_mask[..., 0], axis=1)  # [G, E]
    density_proxy = jnp.mean(probs, axis=1)  # [G, E]
    aux_loss = jnp.mean(jnp.sum(density * density_proxy, axis=-1)) * num_experts

    # Slot of each choice in its expert's buffer. Ordering choices k-major
    # queues every token's first choice ahead of any second choice, so top-1
    # traffic wins when an expert overflows. The exclusive cumulative sum is a
    # matmul with a strictly lower-triangular matrix (the usual TPU trick),
    # which keeps it on the matmul path instead of a sequential scan.
    by_priority = jnp.moveaxis(expert_mask, -1, 1).reshape(groups, k * seq, num_experts)
    earlier = jnp.tril(jnp.ones((k * seq, k * seq), probs.dtype), -1)
    position = jnp.einsum("ts,gse->gte", earlier, by_priority)  # choices queued before
    position = jnp.moveaxis(position.reshape(groups, k, seq, num_experts), 1, -1)  # [G, S, E, K]
    slot = jnp.sum(position * expert_mask, axis=-2).astype(jnp.int32)  # [G, S, K]

    # Choices past capacity are dropped: their slot one-hot is masked to zero.
    slot_mask = jax.nn.one_hot(slot, capacity, dtype=probs.dtype) * (slot < capacity)[..., None]
    dispatch = jnp.einsum("gsek,gskc->gsec", expert_mask, slot_mask)  # 0/1
    combine = jnp.einsum("gsek,gskc->gsec", expert_mask * gates[..., None, :], slot_mask)
    return dispatch, combine, aux_loss


class MoEFeedForward(nn.Module):
    """Top-k mixture of expert GELU MLPs, dispatched by einsum within routing groups."""

    config: MoEConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        batch_shape = x.shape
        x = x.reshape(-1, cfg.tokens_per_group, cfg.d_model)  # [G, S, D] routing groups
        # Router without bias, as in GShard/Switch.
        router_logits = nn.Dense(cfg.num_experts, use_bias=False, name="router")(x)
        dispatch, combine, aux_loss = top_k_routing(router_logits, cfg.top_k, cfg.expert_capacity)

        # Stacked expert weights: one batched matmul serves every expert.
        init = nn.initializers.variance_scaling(
            1.0, "fan_in", "truncated_normal", in_axis=-2, out_axis=-1, batch_axis=(0,)
        )
        w_in = self.param("w_in", init, (cfg.num_experts, cfg.d_model, cfg.ff_dim))
        w_out = self.param("w_out", init, (cfg.num_experts, cfg.ff_dim, cfg.d_model))

        # Gather tokens into per-expert buffers [E, G, C, D], run every expert
        # as one batched matmul, and scatter back weighted by the gates.
        expert_in = jnp.einsum("gsec,gsd->egcd", dispatch, x)
        hidden = nn.gelu(jnp.einsum("egcd,edf->egcf", expert_in, w_in))
        expert_out = jnp.einsum("egcf,efd->egcd", hidden, w_out)
        y = jnp.einsum("gsec,egcd->gsd", combine, expert_out)
        return y.reshape(batch_shape), aux_loss


class LayerNorm(nn.Module):
    """Scale-only LayerNorm (no bias), written out in two passes."""

    eps: float = 1e-6

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        scale = self.param("scale", nn.initializers.ones, (x.shape[-1],))
        centered = x - jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(centered * centered, axis=-1, keepdims=True)
        return centered * jax.lax.rsqrt(var + self.eps) * scale


class DenseFeedForward(nn.Module):
    """Position-wise GELU MLP; returns a zero aux loss to match MoEFeedForward."""

    config: MoEConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        h = nn.gelu(nn.Dense(cfg.ff_dim, use_bias=False, name="wi")(x))
        return nn.Dense(cfg.d_model, use_bias=False, name="wo")(h), jnp.zeros((), x.dtype)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with one fused QKV projection."""

    config: MoEConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.config
        head_dim = cfg.d_model // cfg.num_heads
        # One [D, 3, H, Dh] kernel rather than three: fewer parameter leaves
        # means fewer optimizer fusions and a faster XLA compile.
        qkv = nn.DenseGeneral((3, cfg.num_heads, head_dim), use_bias=False, name="qkv")(x)
        q, k, v = qkv[..., 0, :, :], qkv[..., 1, :, :], qkv[..., 2, :, :]  # [B, S, H, Dh]
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * head_dim**-0.5
        seq = x.shape[-2]
        causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
        scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
        attn = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", attn, v)
        return nn.DenseGeneral(cfg.d_model, axis=(-2, -1), use_bias=False, name="out")(out)


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + ffn(ln(x))."""

    config: MoEConfig
    use_moe: bool

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        # Bias-free projections and scale-only norms (as in PaLM/T5): fewer tiny
        # parameter tensors, each of which costs XLA optimizer fusions to compile.
        x = x + CausalSelfAttention(cfg, name="attn")(LayerNorm(name="ln_attn")(x))
        ffn = MoEFeedForward(cfg, name="moe") if self.use_moe else DenseFeedForward(cfg, name="mlp")
        y, aux_loss = ffn(LayerNorm(name="ln_ffn")(x))
        return x + y, aux_loss


def sinusoidal_positions(seq_len: int, d_model: int) -> np.ndarray:
    """Fixed sin/cos position table (Vaswani et al.), a compile-time constant."""
    position = np.arange(seq_len, dtype=np.float64)[:, None]
    inv_freq = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    angles = position * inv_freq[None, :]
    table = np.zeros((seq_len, d_model))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table.astype(np.float32)


class MoETransformer(nn.Module):
    """Decoder-only LM; returns (logits [B, S, V], summed MoE aux loss)."""

    config: MoEConfig

    @nn.compact
    def __call__(self, tokens: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        # Unit-variance embeddings, on the scale of the sinusoidal positions.
        embed = self.param("embed", nn.initializers.normal(1.0), (cfg.vocab, cfg.d_model))
        # Lookup as a one-hot matmul (the TPU-friendly form, as in T5X): its
        # gradient is another matmul rather than a scatter-add.
        one_hot = jax.nn.one_hot(tokens, cfg.vocab, dtype=embed.dtype)
        x = one_hot @ embed + sinusoidal_positions(tokens.shape[1], cfg.d_model)
        aux_total = jnp.zeros((), x.dtype)
        for i in range(cfg.num_layers):
            use_moe = i % cfg.moe_every == cfg.moe_every - 1
            x, aux = Block(cfg, use_moe, name=f"layer_{i}")(x)
            aux_total = aux_total + aux
        x = LayerNorm(name="final_norm")(x)
        # Output projection tied to the input embedding (GLaM, T5), scaled by
        # 1/sqrt(d) as in Mesh TensorFlow so initial logits are O(1).
        return (x @ embed.T) * cfg.d_model**-0.5, aux_total


# --------------------------------------------------------------------------- data


def synthetic_batch(cfg: MoEConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Next-token pairs from a random walk over the vocabulary.

    A walk (small steps mod vocab) gives the LM learnable structure, so the
    loss visibly falls within a few steps, unlike uniform noise.
    """
    rng = np.random.default_rng(seed)
    start = rng.integers(0, cfg.vocab, size=(cfg.batch, 1))
    steps = rng.integers(-2, 3, size=(cfg.batch, cfg.seq_len))
    walk = np.concatenate([start, start + np.cumsum(steps, axis=1)], axis=1) % cfg.vocab
    walk = walk.astype(np.int32)
    return walk[:, :-1], walk[:, 1:]


# --------------------------------------------------------------------------- steps


def _build(cfg: MoEConfig) -> tuple[MoETransformer, PyTree, np.ndarray, np.ndarray]:
    model = MoETransformer(cfg)
    tokens, targets = synthetic_batch(cfg, seed=0)
    # The PRNG key is used only here, at build time; the steps take no keys.
    # Init is jitted because eager init compiles op by op (~10 s on CPU), and
    # uses the "rbg" generator, whose program compiles in about half the time
    # of threefry's; the weights are fixed per seed on a given backend.
    key = jax.random.key(0, impl="rbg")
    params = jax.jit(model.init)(key, jnp.asarray(tokens))["params"]
    return model, params, tokens, targets


def _make_train_step(
    model: MoETransformer, tx: optax.GradientTransformation, cfg: MoEConfig
) -> Callable[..., tuple[PyTree, PyTree, jax.Array]]:
    def loss_fn(params: PyTree, tokens: jax.Array, targets: jax.Array) -> jax.Array:
        logits, aux_loss = model.apply({"params": params}, tokens)
        # Cross-entropy against one-hot labels: gathering the target logit
        # instead would differentiate into a scatter.
        labels = jax.nn.one_hot(targets, cfg.vocab, dtype=logits.dtype)
        ce = optax.softmax_cross_entropy(logits, labels).mean()
        return ce + cfg.aux_loss_weight * aux_loss

    def train_step(
        params: PyTree, opt_state: PyTree, tokens: jax.Array, targets: jax.Array
    ) -> tuple[PyTree, PyTree, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_opt_state, loss

    return train_step


def moe_train_step(size: str = "small") -> Workload:
    """One adamw training step of the MoE transformer: (params, opt_state, tokens, targets)."""
    cfg = _config(size)
    model, params, tokens, targets = _build(cfg)
    tx = optax.adamw(cfg.learning_rate, weight_decay=cfg.weight_decay)
    opt_state = tx.init(params)
    train_step = _make_train_step(model, tx, cfg)

    def make_inputs(seed: int) -> tuple:
        # Same weights and optimizer state; only the batch changes.
        new_tokens, new_targets = synthetic_batch(cfg, seed)
        return (params, opt_state, jnp.asarray(new_tokens), jnp.asarray(new_targets))

    return Workload(
        fn=train_step,
        args=(params, opt_state, jnp.asarray(tokens), jnp.asarray(targets)),
        name="moe_train_step",
        make_inputs=make_inputs,
    )


def moe_inference_step(size: str = "small") -> Workload:
    """Forward pass of the MoE transformer: (params, tokens) -> logits [B, S, V]."""
    cfg = _config(size)
    model, params, tokens, _ = _build(cfg)

    def inference_step(params: PyTree, tokens: jax.Array) -> jax.Array:
        logits, _ = model.apply({"params": params}, tokens)
        return logits

    def make_inputs(seed: int) -> tuple:
        new_tokens, _ = synthetic_batch(cfg, seed)
        return (params, jnp.asarray(new_tokens))

    return Workload(
        fn=inference_step,
        args=(params, jnp.asarray(tokens)),
        name="moe_inference_step",
        make_inputs=make_inputs,
    )


ENTRIES = [
    SuiteEntry("moe-glam", "mixture of experts",
               "GLaM-style decoder, top-2 gating, MoE every other layer, one-hot einsum dispatch; "
               "small: d_model 128, 4 experts, 2 layers, batch 8 x 64 tokens",
               moe_train_step, moe_inference_step),
]
