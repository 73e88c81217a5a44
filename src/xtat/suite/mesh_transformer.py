"""Mesh-TensorFlow transformer (Shazeer et al., 2018): an encoder-decoder with named dimensions.

Every tensor dimension has a name. `DIMENSIONS` maps the names to einsum
letters; `named_einsum` builds every contraction's spec from the operands'
dimension names, and every parameter is declared with its names (Flax
logical partitioning metadata), so a sharding stage can later map names to
mesh axes (e.g. batch -> rows, d_ff and heads -> cols) without reading the
model code. `parameter_dimensions(size)` lists the names of every parameter.

The model is the Mesh-TF / T5 layout: shared token embedding (one-hot
matmul) tied to the output projection, pre-LayerNorm (scale only), ReLU
feed-forward, bidirectional encoder self-attention, causal decoder
self-attention and encoder-decoder attention. The synthetic task is to
reverse a random-walk token sequence, trained with softmax cross-entropy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from xtat.suite import SuiteEntry
from xtat.suite.common import (
    Batch,
    Built,
    Task,
    as_device_batch,
    choose,
    inference_workload,
    random_walk_tokens,
    train_workload,
)

PyTree = Any
Names = tuple[str, ...]

# Dimension name -> einsum letter. memory_length is the key/value length of
# attention, which a layout may map differently from the query length.
DIMENSIONS: Mapping[str, str] = MappingProxyType({
    "batch": "b", "length": "l", "memory_length": "m", "d_model": "d", "d_ff": "f",
    "heads": "h", "d_kv": "k", "vocab": "v",
})

ACTIVATIONS: Names = ("batch", "length", "d_model")


def einsum_spec(inputs: tuple[Names, ...], output: Names) -> str:
    """("batch", "length", "d_model"), ("d_model", "d_ff") -> ("batch", "length", "d_ff") is 'bld,df->blf'."""
    letters = lambda names: "".join(DIMENSIONS[n] for n in names)  # noqa: E731
    return f"{','.join(letters(names) for names in inputs)}->{letters(output)}"


def named_einsum(output: Names, *operands: tuple[jax.Array, Names]) -> jax.Array:
    """Contract arrays given with their dimension names; the result has the `output` names."""
    for array, names in operands:
        if array.ndim != len(names):
            raise ValueError(f"an array of shape {array.shape} cannot have the {len(names)} dimensions {names}")
    spec = einsum_spec(tuple(names for _, names in operands), output)
    return jnp.einsum(spec, *(array for array, _ in operands))


@dataclass(frozen=True)
class MeshConfig:
    batch: int
    length: int
    d_model: int
    d_ff: int
    heads: int
    d_kv: int
    vocab: int
    encoder_layers: int
    decoder_layers: int

    def sizes(self, names: Names) -> tuple[int, ...]:
        size = {"memory_length": self.length, **{n: getattr(self, n) for n in DIMENSIONS if n != "memory_length"}}
        return tuple(size[n] for n in names)


SMALL = MeshConfig(batch=8, length=64, d_model=128, d_ff=512, heads=4, d_kv=32, vocab=256,
                   encoder_layers=2, decoder_layers=2)
LARGE = MeshConfig(batch=16, length=512, d_model=1024, d_ff=4096, heads=16, d_kv=64, vocab=8192,
                   encoder_layers=6, decoder_layers=6)


class NamedModule(nn.Module):
    """A module whose parameters are declared with dimension names."""

    config: MeshConfig

    def weight(self, name: str, names: Names, fan_in: Names) -> jax.Array:
        """A parameter of dimensions `names`, normal with variance 1 / (product of the `fan_in` sizes)."""
        scale = float(np.prod(self.config.sizes(fan_in))) ** -0.5
        init = nn.with_logical_partitioning(nn.initializers.normal(scale), names)
        return self.param(name, init, self.config.sizes(names))  # type: ignore[return-value]  # unboxed by flax


class LayerNorm(NamedModule):
    """Scale-only LayerNorm over d_model (Mesh-TF / T5)."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        init = nn.with_logical_partitioning(nn.initializers.ones, ("d_model",))
        scale: jax.Array = self.param("scale", init, self.config.sizes(("d_model",)))  # type: ignore[assignment]
        centered = x - jnp.mean(x, axis=-1, keepdims=True)
        return centered * jax.lax.rsqrt(jnp.mean(centered**2, axis=-1, keepdims=True) + 1e-6) * scale


class Attention(NamedModule):
    """Multi-head attention of x [batch, length, d_model] over memory [batch, memory_length, d_model]."""

    causal: bool = False

    @nn.compact
    def __call__(self, x: jax.Array, memory: jax.Array) -> jax.Array:
        memory_names: Names = ("batch", "memory_length", "d_model")
        projection: Names = ("d_model", "heads", "d_kv")
        q = named_einsum(("batch", "length", "heads", "d_kv"), (x, ACTIVATIONS),
                         (self.weight("q", projection, ("d_model",)), projection))
        k, v = (named_einsum(("batch", "memory_length", "heads", "d_kv"), (memory, memory_names),
                             (self.weight(name, projection, ("d_model",)), projection)) for name in ("k", "v"))
        logits = named_einsum(("batch", "heads", "length", "memory_length"),
                              (q, ("batch", "length", "heads", "d_kv")),
                              (k, ("batch", "memory_length", "heads", "d_kv"))) * self.config.d_kv**-0.5
        if self.causal:
            later = np.triu(np.ones((x.shape[1], memory.shape[1]), bool), 1)
            logits = jnp.where(later, jnp.finfo(logits.dtype).min, logits)
        context = named_einsum(("batch", "length", "heads", "d_kv"),
                               (jax.nn.softmax(logits, axis=-1), ("batch", "heads", "length", "memory_length")),
                               (v, ("batch", "memory_length", "heads", "d_kv")))
        output: Names = ("heads", "d_kv", "d_model")
        return named_einsum(ACTIVATIONS, (context, ("batch", "length", "heads", "d_kv")),
                            (self.weight("o", output, ("heads", "d_kv")), output))


class FeedForward(NamedModule):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = nn.relu(named_einsum(("batch", "length", "d_ff"), (x, ACTIVATIONS),
                                      (self.weight("wi", ("d_model", "d_ff"), ("d_model",)), ("d_model", "d_ff"))))
        return named_einsum(ACTIVATIONS, (hidden, ("batch", "length", "d_ff")),
                            (self.weight("wo", ("d_ff", "d_model"), ("d_ff",)), ("d_ff", "d_model")))


class EncoderLayer(NamedModule):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.config
        h = LayerNorm(cfg, name="ln_attn")(x)
        x = x + Attention(cfg, name="self_attn")(h, h)
        return x + FeedForward(cfg, name="ffn")(LayerNorm(cfg, name="ln_ffn")(x))


class DecoderLayer(NamedModule):
    @nn.compact
    def __call__(self, x: jax.Array, encoded: jax.Array) -> jax.Array:
        cfg = self.config
        h = LayerNorm(cfg, name="ln_self")(x)
        x = x + Attention(cfg, causal=True, name="self_attn")(h, h)
        x = x + Attention(cfg, name="cross_attn")(LayerNorm(cfg, name="ln_cross")(x), encoded)
        return x + FeedForward(cfg, name="ffn")(LayerNorm(cfg, name="ln_ffn")(x))


class MeshTransformer(NamedModule):
    """(inputs [batch, length], decoder inputs [batch, length]) -> logits [batch, length, vocab]."""

    @nn.compact
    def __call__(self, inputs: jax.Array, decoder_inputs: jax.Array) -> jax.Array:
        cfg = self.config
        embed = self.weight("embed", ("vocab", "d_model"), ())  # unit variance, as in Mesh-TF

        def embedded(tokens: jax.Array) -> jax.Array:
            one_hot = jax.nn.one_hot(tokens, cfg.vocab, dtype=embed.dtype)
            return named_einsum(ACTIVATIONS, (one_hot, ("batch", "length", "vocab")), (embed, ("vocab", "d_model")))

        x = embedded(inputs)
        for i in range(cfg.encoder_layers):
            x = EncoderLayer(cfg, name=f"encoder_{i}")(x)
        encoded = LayerNorm(cfg, name="encoder_norm")(x)
        y = embedded(decoder_inputs)
        for i in range(cfg.decoder_layers):
            y = DecoderLayer(cfg, name=f"decoder_{i}")(y, encoded)
        y = LayerNorm(cfg, name="decoder_norm")(y)
        # Tied output projection, scaled by 1/sqrt(d_model) so initial logits are O(1).
        return named_einsum(("batch", "length", "vocab"), (y, ACTIVATIONS),
                            (embed, ("vocab", "d_model"))) * cfg.d_model**-0.5


# --------------------------------------------------------------------------- task


def reversal_batch(cfg: MeshConfig, seed: int) -> dict[str, np.ndarray]:
    """Random-walk sequences and their reversal; the decoder sees the target shifted right (0 = start)."""
    inputs = random_walk_tokens(seed, cfg.batch, cfg.length, cfg.vocab)
    targets = inputs[:, ::-1].copy()
    decoder_inputs = np.concatenate([np.zeros((cfg.batch, 1), np.int32), targets[:, :-1]], axis=1)
    return {"inputs": inputs, "decoder_inputs": decoder_inputs, "targets": targets}


def _sequence_loss(logits: jax.Array, batch: Batch) -> jax.Array:
    labels = jax.nn.one_hot(batch["targets"], logits.shape[-1], dtype=logits.dtype)
    return optax.softmax_cross_entropy(logits, labels).mean()


def task(size: str) -> Task:
    cfg = choose(size, SMALL, LARGE)
    return Task(model=MeshTransformer(cfg), make_batch=lambda seed: reversal_batch(cfg, seed), loss=_sequence_loss,
                model_inputs=lambda batch: (batch["inputs"], batch["decoder_inputs"]))


def _init(size: str, init_fn: Callable = jax.jit) -> tuple[Task, PyTree, Batch]:
    """The task, its variables boxed with their dimension names (shapes only under
    `jax.eval_shape`) and batch 0. As in common.build, the "rbg" generator compiles faster."""
    built_task = task(size)
    batch = as_device_batch(built_task.make_batch(0))
    key = jax.random.key(0, impl="rbg")
    return built_task, init_fn(built_task.model.init)(key, *built_task.model_inputs(batch)), batch


def built(size: str) -> Built:
    """The task with plain-array variables: the workloads carry no naming metadata."""
    built_task, boxed, batch = _init(size)
    return Built(built_task, dict(nn.unbox(boxed)), batch)


def parameter_dimensions(size: str = "small") -> PyTree:
    """The params tree with each parameter's dimension names in place of its value."""
    _, shapes, _ = _init(size, lambda init: lambda *args: jax.eval_shape(init, *args))
    return jax.tree.map(tuple, nn.get_partition_spec(shapes)["params"],
                        is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))


def dimension_rules(size: str = "small") -> dict[tuple, Names]:
    """Each parameter's key path and names, and the batch's: the workloads' declared dimensions."""
    rules: dict[tuple, Names] = {}
    for path, names in jax.tree_util.tree_flatten_with_path(parameter_dimensions(size),
                                                            is_leaf=lambda x: isinstance(x, tuple))[0]:
        rules[tuple(getattr(k, "key", k) for k in path)] = names
    for name in ("inputs", "decoder_inputs", "targets"):
        rules[(name,)] = ("batch", "length")
    return rules


ENTRIES = [
    SuiteEntry(
        "mesh-transformer", "transformer (named dimensions)",
        "Mesh-TensorFlow encoder-decoder written with named dimensions (einsum specs from names); "
        "small: 2+2 layers, d_model 128, d_ff 512, 4 heads x 32, batch 8 x 64 tokens",
        train=lambda size: train_workload(built(size), "mesh-transformer/train", dimension_rules(size)),
        inference=lambda size: inference_workload(built(size), "mesh-transformer/inference", dimension_rules(size)),
    ),
]
