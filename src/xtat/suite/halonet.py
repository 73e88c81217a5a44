"""HaloNet (Vaswani et al., 2021): blocked local self-attention with halos.

The feature map is split into non-overlapping b x b query blocks; each block
attends to its (b + 2h) x (b + 2h) neighbourhood, the block plus a halo of h
pixels, with keys and values shared by the whole block, relative position
logits (factorized into rows and columns) and several heads. Positions of a
neighbourhood outside the image are masked out, so every query sees exactly
the pixels of its window that exist.

The network is ResNet-shaped: a 3x3 convolution stem, then one bottleneck
block per stage whose 3x3 convolution is halo attention, average pooling
between stages, global pooling and a linear classifier, trained with
softmax cross-entropy on labelled synthetic images.

How the neighbourhoods are formed is the user knob `halo_extraction`, three
implementations with equal results:

    pad_slice     zero-pad by h, then one strided slice per window row and column
    unfold        zero-pad by h, then an im2col-style gather of every window
    masked_dense  attention of every pixel to every pixel with a locality mask
                  (quadratic in the pixels: slow, the correctness reference)
"""

from __future__ import annotations

from dataclasses import dataclass

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtat.stages.program.knobs import knob
from xtat.suite import SuiteEntry
from xtat.suite.common import (
    Task,
    build,
    choose,
    classification_loss,
    inference_workload,
    labelled_patterns,
    train_workload,
)

HALO_EXTRACTIONS = ("pad_slice", "unfold", "masked_dense")


@dataclass(frozen=True)
class HaloConfig:
    image: int  # input images are image x image x 3
    batch: int
    classes: int
    stem_channels: int
    stage_channels: tuple[int, ...]  # one halo bottleneck block per stage; 2x2 pooling between
    bottleneck_ratio: int  # attention width = stage channels / ratio
    heads: int
    block: int  # b: query blocks are b x b
    halo: int  # h: each block attends to its (b + 2h) x (b + 2h) neighbourhood
    stem_stride: int = 1

    def __post_init__(self) -> None:
        side = self.image // self.stem_stride
        for stage in range(len(self.stage_channels)):
            if (side >> stage) % self.block:
                raise ValueError(f"stage {stage} is {side >> stage} pixels wide, "
                                 f"not a multiple of the block {self.block}")
        if 2 * self.halo > self.block:  # pad_slice takes a window's halo from the next block only
            raise ValueError(f"halo {self.halo} is more than half the block {self.block}")


SMALL = HaloConfig(image=32, batch=8, classes=10, stem_channels=64, stage_channels=(64, 128), bottleneck_ratio=2,
                   heads=4, block=8, halo=2)
LARGE = HaloConfig(image=128, batch=32, classes=1000, stem_channels=128, stage_channels=(128, 256, 512),
                   bottleneck_ratio=2, heads=8, block=8, halo=3, stem_stride=2)


# --------------------------------------------------------------------------- geometry (static, numpy)


def relative_index(query: np.ndarray, key: np.ndarray, block: int, halo: int) -> np.ndarray:
    """Row of a relative embedding table (2(b + h) - 1 rows) for every (query, key) pair
    of coordinates along one axis: key - query + b + h - 1, clipped (pairs outside a
    window are masked anyway)."""
    return np.clip(key[None, :] - query[:, None] + block + halo - 1, 0, 2 * (block + halo) - 2)


def window_rows(blocks: int, block: int, halo: int) -> np.ndarray:
    """[blocks, b + 2h]: padded-image coordinate of every window position along one axis."""
    return np.arange(blocks)[:, None] * block + np.arange(block + 2 * halo)[None, :]


def window_valid(size: int, block: int, halo: int) -> np.ndarray:
    """[blocks, b + 2h]: whether each window position along one axis lies inside the image."""
    unpadded = window_rows(size // block, block, halo) - halo
    return (unpadded >= 0) & (unpadded < size)


# --------------------------------------------------------------------------- halo extraction


def _windows_along(x: jax.Array, axis: int, block: int, halo: int) -> jax.Array:
    """Split `axis` (length n) into n/b windows of b + 2h: [..., n, ...] -> [..., n/b, b + 2h, ...].

    Pads h in front and b - h behind, cuts the padded axis into n/b + 1 chunks
    of b, and appends to each chunk the first 2h rows of the next (2h <= b)."""
    blocks = x.shape[axis] // block
    pad = [(0, 0)] * x.ndim
    pad[axis] = (halo, block - halo)
    chunks = jnp.pad(x, pad).reshape(*x.shape[:axis], blocks + 1, block, *x.shape[axis + 1:])
    head = jax.lax.slice_in_dim(chunks, 0, blocks, axis=axis)
    tail = jax.lax.slice_in_dim(jax.lax.slice_in_dim(chunks, 1, blocks + 1, axis=axis), 0, 2 * halo, axis=axis + 1)
    return jnp.concatenate([head, tail], axis=axis + 1)


def halos_pad_slice(x: jax.Array, block: int, halo: int) -> jax.Array:
    """[B, H, W, C] -> [B, H/b, W/b, b + 2h, b + 2h, C] by padding and slicing."""
    rows = _windows_along(x, 1, block, halo)  # [B, nh, w, W, C]
    cols = _windows_along(rows, 3, block, halo)  # [B, nh, w, nw, w, C]
    return jnp.transpose(cols, (0, 1, 3, 2, 4, 5))


def halos_unfold(x: jax.Array, block: int, halo: int) -> jax.Array:
    """[B, H, W, C] -> [B, H/b, W/b, b + 2h, b + 2h, C] by gathering every window (im2col)."""
    _, height, width, _ = x.shape
    padded = jnp.pad(x, ((0, 0), (halo, halo), (halo, halo), (0, 0)))
    rows = jnp.take(padded, window_rows(height // block, block, halo), axis=1)  # [B, nh, w, W+2h, C]
    cols = jnp.take(rows, window_rows(width // block, block, halo), axis=3)  # [B, nh, w, nw, w, C]
    return jnp.transpose(cols, (0, 1, 3, 2, 4, 5))


def _masked(logits: jax.Array, valid: np.ndarray) -> jax.Array:
    return jnp.where(valid, logits, jnp.finfo(logits.dtype).min)


def _relative_logits(q: jax.Array, rel_h: jax.Array, rel_w: jax.Array, index_h: np.ndarray,
                     index_w: np.ndarray) -> jax.Array:
    """q [..., Q, d] -> [..., Q, K]: q . (rel_h[index_h[q, k]] + rel_w[index_w[q, k]]).

    The [Q, K, d] table of pair embeddings is a small gather from the
    parameters; one batched matmul then serves every block and head."""
    return jnp.einsum("...qd,qkd->...qk", q, rel_h[index_h] + rel_w[index_w])


def blocked_attention(q: jax.Array, k: jax.Array, v: jax.Array, rel_h: jax.Array, rel_w: jax.Array, block: int,
                      halo: int, method: str) -> jax.Array:
    """q, k, v: [B, H, W, heads, d] -> [B, H, W, heads, d], each block attending to its window."""
    batch, height, width, heads, dim = q.shape
    nh, nw, window = height // block, width // block, block + 2 * halo
    extract = halos_pad_slice if method == "pad_slice" else halos_unfold
    # Queries grouped by block: [B, nh, nw, heads, b*b, d].
    q_blocks = q.reshape(batch, nh, block, nw, block, heads, dim).transpose(0, 1, 3, 5, 2, 4, 6)
    q_blocks = q_blocks.reshape(batch, nh, nw, heads, block * block, dim)

    def windows(t: jax.Array) -> jax.Array:  # [B, H, W, heads, d] -> [B, nh, nw, heads, w*w, d]
        halos = extract(t.reshape(batch, height, width, heads * dim), block, halo)
        halos = halos.reshape(batch, nh, nw, window * window, heads, dim)
        return halos.transpose(0, 1, 2, 4, 3, 5)

    k_windows, v_windows = windows(k), windows(v)
    in_block = np.arange(block * block)
    in_window = np.arange(window * window)
    # Coordinates relative to the block's corner: a window starts h before it.
    index_h = relative_index(in_block // block, in_window // window - halo, block, halo)
    index_w = relative_index(in_block % block, in_window % window - halo, block, halo)
    logits = jnp.einsum("bijhqd,bijhkd->bijhqk", q_blocks, k_windows) * dim**-0.5
    logits = logits + _relative_logits(q_blocks, rel_h, rel_w, index_h, index_w)
    valid = (window_valid(height, block, halo)[:, None, :, None] & window_valid(width, block, halo)[None, :, None, :])
    valid = valid.reshape(nh, nw, 1, 1, window * window)  # broadcast over heads and queries
    out = jnp.einsum("bijhqk,bijhkd->bijhqd", jax.nn.softmax(_masked(logits, valid), axis=-1), v_windows)
    out = out.reshape(batch, nh, nw, heads, block, block, dim).transpose(0, 1, 4, 2, 5, 3, 6)
    return out.reshape(batch, height, width, heads, dim)


def dense_attention(q: jax.Array, k: jax.Array, v: jax.Array, rel_h: jax.Array, rel_w: jax.Array, block: int,
                    halo: int) -> jax.Array:
    """The same attention as every pixel to every pixel, masked to each block's window."""
    batch, height, width, heads, dim = q.shape
    y, x = np.divmod(np.arange(height * width), width)
    top, left = (y // block) * block - halo, (x // block) * block - halo  # window origin of each query
    window = block + 2 * halo
    in_rows = (y[None, :] >= top[:, None]) & (y[None, :] < top[:, None] + window)
    in_cols = (x[None, :] >= left[:, None]) & (x[None, :] < left[:, None] + window)
    flat = lambda t: t.reshape(batch, height * width, heads, dim).transpose(0, 2, 1, 3)  # noqa: E731
    q_flat, k_flat, v_flat = flat(q), flat(k), flat(v)  # [B, heads, HW, d]
    logits = jnp.einsum("bhqd,bhkd->bhqk", q_flat, k_flat) * dim**-0.5
    logits = logits + _relative_logits(q_flat, rel_h, rel_w, relative_index(y, y, block, halo),
                                       relative_index(x, x, block, halo))
    out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(_masked(logits, in_rows & in_cols), axis=-1), v_flat)
    return out.transpose(0, 2, 1, 3).reshape(batch, height, width, heads, dim)


# --------------------------------------------------------------------------- model


class HaloAttention(nn.Module):
    """Multi-head halo attention over a [B, H, W, C] feature map, C channels out."""

    heads: int
    block: int
    halo: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels = x.shape[-1]
        dim = channels // self.heads
        qkv = nn.DenseGeneral((3, self.heads, dim), use_bias=False, name="qkv")(x)  # [B, H, W, 3, heads, d]
        q, k, v = qkv[..., 0, :, :], qkv[..., 1, :, :], qkv[..., 2, :, :]
        span = 2 * (self.block + self.halo) - 1  # relative offsets along one axis
        rel_h = self.param("rel_h", nn.initializers.normal(dim**-0.5), (span, dim))
        rel_w = self.param("rel_w", nn.initializers.normal(dim**-0.5), (span, dim))
        method = str(knob("halo_extraction", HALO_EXTRACTIONS, default="pad_slice"))
        if method == "masked_dense":
            out = dense_attention(q, k, v, rel_h, rel_w, self.block, self.halo)
        else:
            out = blocked_attention(q, k, v, rel_h, rel_w, self.block, self.halo, method)
        return nn.DenseGeneral(channels, axis=(-2, -1), use_bias=False, name="out")(out)


class HaloBottleneck(nn.Module):
    """ResNet bottleneck with its 3x3 convolution replaced by halo attention."""

    channels: int
    width: int  # channels of the attention between the two 1x1 projections
    heads: int
    block: int
    halo: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        # GroupNorm rather than BatchNorm: no running statistics to carry.
        norm = lambda name: nn.GroupNorm(num_groups=8, name=name)  # noqa: E731
        shortcut = x if x.shape[-1] == self.channels else nn.Dense(self.channels, use_bias=False, name="proj")(x)
        h = nn.relu(norm("norm_in")(nn.Dense(self.width, use_bias=False, name="reduce")(x)))
        h = nn.relu(norm("norm_attn")(HaloAttention(self.heads, self.block, self.halo, name="attn")(h)))
        h = norm("norm_out")(nn.Dense(self.channels, use_bias=False, name="expand")(h))
        return nn.relu(shortcut + h)


class HaloNet(nn.Module):
    """Images [B, S, S, 3] -> class logits [B, classes]."""

    config: HaloConfig

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        cfg = self.config
        x = nn.Conv(cfg.stem_channels, (3, 3), strides=cfg.stem_stride, use_bias=False, name="stem")(images)
        x = nn.relu(nn.GroupNorm(num_groups=8, name="stem_norm")(x))
        for i, channels in enumerate(cfg.stage_channels):
            if i:
                x = nn.avg_pool(x, (2, 2), strides=(2, 2))
            x = HaloBottleneck(channels, channels // cfg.bottleneck_ratio, cfg.heads, cfg.block, cfg.halo,
                               name=f"stage_{i}")(x)
        return nn.Dense(cfg.classes, name="head")(jnp.mean(x, axis=(1, 2)))


def task(size: str) -> Task:
    cfg = choose(size, SMALL, LARGE)
    return Task(
        model=HaloNet(cfg),
        make_batch=lambda seed: labelled_patterns(seed, cfg.batch, (cfg.image, cfg.image, 3), cfg.classes),
        loss=classification_loss,
    )


ENTRIES = [
    SuiteEntry(
        "halonet", "local self-attention",
        "HaloNet: 3x3 conv stem, halo-attention bottlenecks (8x8 blocks, halo 2, 4 heads, relative "
        "positions); small: batch 8 of 32x32x3, stages 32x32x64 and 16x16x128 (attention width 32, 64)",
        train=lambda size: train_workload(build(task(size)), "halonet/train"),
        inference=lambda size: inference_workload(build(task(size)), "halonet/inference"),
        knobs=("halo_extraction",),
    ),
]
