"""The mixture-of-experts family: one GLaM-style transformer, four routers.

A decoder-only transformer (pre-LayerNorm, causal self-attention, an MoE
feed-forward layer in every other block) trained with optax adamw. The
variants differ only in the `Router` of their MoE layers (see routing.py):

    moe-glam    top-2 softmax gating, renormalized gates (GLaM / GShard)
    moe-switch  top-1 softmax gating, Switch load-balancing loss
    moe-hash    a fixed hash of the token id, no learned router
    moe-sbase   Sinkhorn-balanced top-1 (S-BASE)

Every MoE layer has a per-expert capacity and reads the user knob
`moe_dispatch` ("einsum", "gather", "sort"): three data movements with equal
results. The program mixes what an XLA autotuner cares about (matmuls,
softmax, layer norms, one-hot einsums or scatters and gathers, top-k, sorts).

Parameters come from a fixed random init and inputs from a seeded numpy
generator, so the workload is reproducible and needs no data or weights.

    train_workload(variant, size)      -> Workload(train_step, (params, opt_state, tokens, targets))
    inference_workload(variant, size)  -> Workload(inference_step, (params, tokens))
    moe_train_step(size), moe_inference_step(size): the moe-glam workloads
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from xtat.capture.dimnames import dims as xtat_dims
from xtat.capture.workload import Workload
from xtat.stages.program.knobs import knob
from xtat.suite import SuiteEntry
from xtat.suite.common import named_like
from xtat.suite.routing import DISPATCH_METHODS, HashRouting, Router, SinkhornRouting, TopKGating, dispatch

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
    router: Router = TopKGating(2, renormalize=True)
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
        return self.router.capacity(self.tokens_per_group, self.num_experts, self.capacity_factor)


SIZES: Mapping[str, MoEConfig] = MappingProxyType({
    # Sized for CPU: the train step compiles in ~3 s and runs in tens of ms on
    # 2 cores; ff_dim is 2x d_model to keep the step there. One routing group
    # spans the whole batch (512 tokens, so expert capacity 320 for top-2
    # routers and 160 for top-1).
    "small": MoEConfig(
        d_model=128, num_heads=4, num_layers=2, ff_dim=256, num_experts=4,
        vocab=256, seq_len=64, batch=8,
    ),
    # Closer to a real accelerator workload; not meant for CPU. Routing groups
    # of 1024 tokens (capacity 320 for top-2) keep the one-hot dispatch tensors linear in
    # batch size (~84 MB) instead of quadratic (~670 MB as one group).
    "large": MoEConfig(
        d_model=1024, num_heads=16, num_layers=8, ff_dim=4096, num_experts=8,
        vocab=256, seq_len=512, batch=16, group_size=1024,
    ),
})


# The router of each suite variant; the sizes above give the other dimensions.
ROUTERS: Mapping[str, Router] = MappingProxyType({
    "moe-glam": TopKGating(2, renormalize=True),
    "moe-switch": TopKGating(1, renormalize=False),
    "moe-hash": HashRouting(),
    "moe-sbase": SinkhornRouting(iterations=3),
})


def config(variant: str, size: str) -> MoEConfig:
    """The dimensions of `size` with the router of `variant` (a key of ROUTERS)."""
    if size not in SIZES:
        raise ValueError(f"unknown MoE workload size {size!r}; valid sizes: {', '.join(SIZES)}")
    if variant not in ROUTERS:
        raise ValueError(f"unknown MoE variant {variant!r}; valid variants: {', '.join(ROUTERS)}")
    return dataclasses.replace(SIZES[size], router=ROUTERS[variant])


# --------------------------------------------------------------------------- model


class MoEFeedForward(nn.Module):
    """A mixture of expert GELU MLPs within routing groups; returns (y, aux loss)."""

    config: MoEConfig

    @nn.compact
    def __call__(self, x: jax.Array, token_ids: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        batch_shape = x.shape
        x = x.reshape(-1, cfg.tokens_per_group, cfg.d_model)  # [G, S, D] routing groups
        token_ids = token_ids.reshape(x.shape[:2])
        # Router without bias, as in GShard/Switch; hash routing has none.
        logits = nn.Dense(cfg.num_experts, use_bias=False, name="router")(x) if cfg.router.learned else None
        routes = cfg.router.route(logits, token_ids, cfg.num_experts)

        # Stacked expert weights: one batched matmul serves every expert.
        init = nn.initializers.variance_scaling(
            1.0, "fan_in", "truncated_normal", in_axis=-2, out_axis=-1, batch_axis=(0,)
        )
        w_in = self.param("w_in", init, (cfg.num_experts, cfg.d_model, cfg.ff_dim))
        w_out = self.param("w_out", init, (cfg.num_experts, cfg.ff_dim, cfg.d_model))

        def experts(buffers: jax.Array) -> jax.Array:  # [G, E, C, D]
            hidden = nn.gelu(jnp.einsum("gecd,edf->gecf", buffers, w_in))
            return jnp.einsum("gecf,efd->gecd", hidden, w_out)

        method = str(knob("moe_dispatch", DISPATCH_METHODS, default="einsum"))
        y = dispatch(method, x, routes, cfg.num_experts, cfg.expert_capacity, experts)
        return y.reshape(batch_shape), routes.aux_loss


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
    def __call__(self, x: jax.Array, token_ids: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        # Bias-free projections and scale-only norms (as in PaLM/T5): fewer tiny
        # parameter tensors, each of which costs XLA optimizer fusions to compile.
        x = x + CausalSelfAttention(cfg, name="attn")(LayerNorm(name="ln_attn")(x))
        h = LayerNorm(name="ln_ffn")(x)
        if self.use_moe:
            y, aux_loss = MoEFeedForward(cfg, name="moe")(h, token_ids)
        else:
            y, aux_loss = DenseFeedForward(cfg, name="mlp")(h)
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
            x, aux = Block(cfg, use_moe, name=f"layer_{i}")(x, tokens)
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
        return ce + cfg.aux_loss_weight * aux_loss  # type: ignore[operator]  # apply returns (logits, aux loss)

    def train_step(
        params: PyTree, opt_state: PyTree, tokens: jax.Array, targets: jax.Array
    ) -> tuple[PyTree, PyTree, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_opt_state, loss

    return train_step


# Each parameter's names by the end of its key path (Mesh-TF's names; the qkv axis and a head's width
# are never split), and the batch's.
DIMENSION_RULES: dict[tuple, tuple[str, ...]] = {
    ("embed",): ("vocab", "d_model"),
    ("scale",): ("d_model",),
    ("qkv", "kernel"): ("d_model", "qkv", "heads", "d_kv"),
    ("out", "kernel"): ("heads", "d_kv", "d_model"),
    ("wi", "kernel"): ("d_model", "d_ff"),
    ("wo", "kernel"): ("d_ff", "d_model"),
    ("router", "kernel"): ("d_model", "experts"),
    ("w_in",): ("experts", "d_model", "d_ff"),
    ("w_out",): ("experts", "d_ff", "d_model"),
}
_TOKENS = xtat_dims("batch", None)


def train_workload(variant: str, size: str = "small") -> Workload:
    """One adamw training step: (params, opt_state, tokens, targets) -> (params, opt_state, loss)."""
    cfg = config(variant, size)
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
        name=f"{variant}/train",
        make_inputs=make_inputs,
        dims=(named_like(params, DIMENSION_RULES), named_like(opt_state, DIMENSION_RULES), _TOKENS, _TOKENS),
    )


def inference_workload(variant: str, size: str = "small") -> Workload:
    """Forward pass: (params, tokens) -> logits [B, S, V]."""
    cfg = config(variant, size)
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
        name=f"{variant}/inference",
        make_inputs=make_inputs,
        dims=(named_like(params, DIMENSION_RULES), _TOKENS),
    )


def moe_train_step(size: str = "small") -> Workload:
    """The moe-glam training step (the CLI's default target)."""
    return train_workload("moe-glam", size)


def moe_inference_step(size: str = "small") -> Workload:
    """The moe-glam forward pass."""
    return inference_workload("moe-glam", size)


_DESCRIPTIONS = {
    "moe-glam": "GLaM-style decoder, top-2 gating with renormalized gates, load-balancing loss",
    "moe-switch": "Switch-style decoder, top-1 gating, load-balancing loss",
    "moe-hash": "hash-routed decoder: a fixed hash of the token id picks the expert, no router",
    "moe-sbase": "S-BASE decoder: 3 Sinkhorn iterations balance the router scores, then top-1",
}
_SMALL = "small: d_model 128, 4 experts, MoE every other of 2 layers, batch 8 x 64 tokens"

ENTRIES = [
    SuiteEntry(variant, "mixture of experts", f"{_DESCRIPTIONS[variant]}; {_SMALL}",
               partial(train_workload, variant), partial(inference_workload, variant),
               knobs=("moe_dispatch",))
    for variant in ROUTERS
]
