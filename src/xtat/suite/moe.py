"""Built-in default workload: a small mixture-of-experts transformer.

A GLaM-style decoder-only transformer (pre-LayerNorm, causal self-attention,
an MoE feed-forward layer in every other block) trained with optax adamw.
The MoE layer follows GShard: top-2 gating, per-expert capacity, and dispatch
through one-hot dispatch/combine tensors contracted with einsum. This mixes
the ops an XLA autotuner cares about (matmuls, softmax, layer norms, large
one-hot einsums, cumulative sums, scatter-free routing) into one program.

Parameters come from a fixed random init and inputs from a seeded numpy
generator, so the workload is reproducible and needs no data or weights.

    moe_train_step(size="small")      -> Workload(train_step, (params, opt_state, tokens, targets))
    moe_inference_step(size="small")  -> Workload(forward, (params, tokens))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

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
    top_k: int = 2  # GShard/GLaM top-2 gating; the router code below assumes 2
    capacity_factor: float = 1.25
    moe_every: int = 2  # GLaM: layer i is MoE when i % moe_every == moe_every - 1
    aux_loss_weight: float = 0.01
    learning_rate: float = 1e-3
    weight_decay: float = 0.01

    @property
    def expert_capacity(self) -> int:
        # Routing groups are single sequences (GShard's "groups"), so `tokens`
        # here is seq_len. Grouping keeps the [G, S, E, C] dispatch tensor
        # linear in batch size rather than quadratic in total tokens.
        return math.ceil(self.capacity_factor * self.seq_len * self.top_k / self.num_experts)


SIZES: dict[str, MoEConfig] = {
    # Tuned to compile in ~1-2 s and step in a few ms on a 2-core CPU.
    "small": MoEConfig(
        d_model=128, num_heads=4, num_layers=2, ff_dim=512, num_experts=4,
        vocab=256, seq_len=64, batch=8,
    ),
    # Closer to a real accelerator workload; not meant for CPU.
    "large": MoEConfig(
        d_model=1024, num_heads=16, num_layers=8, ff_dim=4096, num_experts=8,
        vocab=256, seq_len=512, batch=16,
    ),
}


def _config(size: str) -> MoEConfig:
    if size not in SIZES:
        raise ValueError(f"unknown MoE workload size {size!r}; valid sizes: {', '.join(SIZES)}")
    return SIZES[size]


# --------------------------------------------------------------------------- model


def top2_routing(
    router_logits: jax.Array, capacity: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """GShard top-2 gating for routing groups.

    router_logits: [G, S, E]. Returns (dispatch [G, S, E, C], combine
    [G, S, E, C], aux_loss scalar). Tokens that find their expert full get an
    all-zero row and therefore reach the next layer only through the residual.
    """
    num_experts = router_logits.shape[-1]
    probs = jax.nn.softmax(router_logits, axis=-1)  # [G, S, E]

    # First and second choice; the second excludes the first.
    mask1 = jax.nn.one_hot(jnp.argmax(probs, axis=-1), num_experts, dtype=probs.dtype)
    probs_wo1 = probs * (1.0 - mask1)
    mask2 = jax.nn.one_hot(jnp.argmax(probs_wo1, axis=-1), num_experts, dtype=probs.dtype)

    # Switch-Transformer load-balancing loss on the top-1 assignment, taken
    # before capacity drops: E * sum_e (fraction routed to e) * (mean prob of e).
    density = jnp.mean(mask1, axis=-2)  # [G, E]
    density_proxy = jnp.mean(probs, axis=-2)  # [G, E]
    aux_loss = jnp.mean(jnp.sum(density * density_proxy, axis=-1)) * num_experts

    # Gate values: the router probabilities of the two choices, renormalized
    # to sum to one (GShard). Done before capacity drops, so a token whose
    # other choice overflowed keeps only its partial weight, not a full one.
    gate1 = jnp.sum(probs * mask1, axis=-1)  # [G, S]
    gate2 = jnp.sum(probs * mask2, axis=-1)
    denom = jnp.maximum(gate1 + gate2, jnp.finfo(probs.dtype).eps)
    gate1, gate2 = gate1 / denom, gate2 / denom

    # Slot of each token in its expert's buffer, in sequence order. Second
    # choices queue behind all first choices, so top-1 traffic wins under load.
    pos1 = jnp.cumsum(mask1, axis=-2) - mask1  # [G, S, E]
    mask1 = mask1 * (pos1 < capacity)
    used1 = jnp.sum(mask1, axis=-2, keepdims=True)  # [G, 1, E]
    pos2 = jnp.cumsum(mask2, axis=-2) - mask2 + used1
    mask2 = mask2 * (pos2 < capacity)

    # Collapse the per-expert slot index to [G, S] and one-hot it over capacity.
    slot1 = jax.nn.one_hot(jnp.sum(pos1 * mask1, axis=-1).astype(jnp.int32), capacity, dtype=probs.dtype)
    slot2 = jax.nn.one_hot(jnp.sum(pos2 * mask2, axis=-1).astype(jnp.int32), capacity, dtype=probs.dtype)
    route1 = mask1[..., None] * slot1[..., None, :]  # [G, S, E, C]
    route2 = mask2[..., None] * slot2[..., None, :]

    dispatch = route1 + route2  # 0/1; a token never takes one slot twice
    combine = gate1[..., None, None] * route1 + gate2[..., None, None] * route2
    # Routing decisions are discrete; gradients reach the router via the gates.
    return jax.lax.stop_gradient(dispatch), combine, aux_loss


class MoEFeedForward(nn.Module):
    """Top-2 mixture of expert MLPs, dispatched by einsum over groups."""

    config: MoEConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        # Router without bias, as in GShard/Switch.
        router_logits = nn.Dense(cfg.num_experts, use_bias=False, name="router")(x)
        dispatch, combine, aux_loss = top2_routing(router_logits, cfg.expert_capacity)

        # Stacked expert weights: one batched matmul serves every expert.
        init = nn.initializers.variance_scaling(
            1.0, "fan_in", "truncated_normal", in_axis=-2, out_axis=-1, batch_axis=(0,)
        )
        w_in = self.param("w_in", init, (cfg.num_experts, cfg.d_model, cfg.ff_dim))
        w_out = self.param("w_out", init, (cfg.num_experts, cfg.ff_dim, cfg.d_model))

        expert_in = jnp.einsum("gsec,gsd->egcd", dispatch, x)
        hidden = nn.gelu(jnp.einsum("egcd,edf->egcf", expert_in, w_in))
        expert_out = jnp.einsum("egcf,efd->egcd", hidden, w_out)
        return jnp.einsum("gsec,egcd->gsd", combine, expert_out), aux_loss


class DenseFeedForward(nn.Module):
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
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(head_dim).astype(np.float32)
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
        # Bias-free projections and norms (as in PaLM): same math class, fewer
        # tiny parameter tensors for XLA to fuse and compile separately.
        x = x + CausalSelfAttention(cfg, name="attn")(nn.LayerNorm(use_bias=False, name="ln_attn")(x))
        ffn = MoEFeedForward(cfg, name="moe") if self.use_moe else DenseFeedForward(cfg, name="mlp")
        y, aux_loss = ffn(nn.LayerNorm(use_bias=False, name="ln_ffn")(x))
        return x + y, aux_loss


class MoETransformer(nn.Module):
    """Decoder-only LM; returns (logits [B, S, V], summed MoE aux loss)."""

    config: MoEConfig

    @nn.compact
    def __call__(self, tokens: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        embed = nn.Embed(cfg.vocab, cfg.d_model, name="embed")
        positions = self.param(
            "pos_embed", nn.initializers.normal(0.02), (cfg.seq_len, cfg.d_model)
        )
        x = embed(tokens) + positions[None, : tokens.shape[1]]
        aux_total = jnp.zeros((), x.dtype)
        for i in range(cfg.num_layers):
            use_moe = i % cfg.moe_every == cfg.moe_every - 1
            x, aux = Block(cfg, use_moe, name=f"layer_{i}")(x)
            aux_total = aux_total + aux
        x = nn.LayerNorm(use_bias=False, name="final_norm")(x)
        # Output projection tied to the input embedding (GLaM, T5).
        return embed.attend(x), aux_total


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
    params = model.init(jax.random.key(0), jnp.asarray(tokens))["params"]
    return model, params, tokens, targets


def _make_train_step(
    model: MoETransformer, tx: optax.GradientTransformation, cfg: MoEConfig
) -> Callable[..., tuple[PyTree, PyTree, jax.Array]]:
    def loss_fn(params: PyTree, tokens: jax.Array, targets: jax.Array) -> jax.Array:
        logits, aux_loss = model.apply({"params": params}, tokens)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
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
