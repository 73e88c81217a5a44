"""Standard vision families: MLP, ResNet, ViT, MLP-Mixer, and a U-Net diffusion step.

Each is the published architecture at a `small` size for 2 CPU cores and a
`large` size for one accelerator; common.py builds the train and inference
steps. Classifiers learn synthetic class patterns (common.labelled_patterns).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtat.suite.common import Batch, Task, choose, classification_loss, labelled_patterns, suite_entry
from xtat.suite.layers import MLP, FeedForward, SelfAttention, Transformer, sinusoidal_embedding

ModuleDef = Any


# --------------------------------------------------------------------------- MLP


def mlp_task(size: str) -> Task:
    features, hidden, classes, batch = choose(size, small=(784, (512, 512), 10, 64),
                                              large=(3072, (4096,) * 4, 1000, 1024))
    return Task(MLP(hidden, classes), partial(labelled_patterns, batch=batch, shape=(features,), classes=classes),
                classification_loss)


# --------------------------------------------------------------------------- ResNet


class BasicBlock(nn.Module):
    """Two 3x3 convolutions (ResNet-18/34)."""

    filters: int
    norm: ModuleDef
    strides: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.relu(self.norm()(_conv(self.filters, 3, self.strides)(x)))
        y = self.norm()(_conv(self.filters, 3)(y))
        return nn.relu(_shortcut(x, y, self.strides, self.norm) + y)


class BottleneckBlock(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand by 4 (ResNet-50 and deeper)."""

    filters: int
    norm: ModuleDef
    strides: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.relu(self.norm()(_conv(self.filters, 1)(x)))
        y = nn.relu(self.norm()(_conv(self.filters, 3, self.strides)(y)))
        y = self.norm()(_conv(4 * self.filters, 1)(y))
        return nn.relu(_shortcut(x, y, self.strides, self.norm) + y)


def _conv(filters: int, kernel: int, strides: int = 1) -> nn.Conv:
    return nn.Conv(filters, (kernel, kernel), (strides, strides), use_bias=False)


def _shortcut(x: jax.Array, y: jax.Array, strides: int, norm: ModuleDef) -> jax.Array:
    """Identity, or a strided 1x1 projection where the block changes the shape."""
    if x.shape == y.shape:
        return x
    return norm(name="shortcut_norm")(_conv(y.shape[-1], 1, strides)(x))


class ResNet(nn.Module):
    """ResNet v1.5 (stride in the 3x3 convolution) with the ImageNet stem."""

    stage_sizes: tuple[int, ...]
    block: ModuleDef
    num_classes: int

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        # Train mode normalizes by batch statistics and updates the running
        # averages (the `batch_stats` collection); inference mode uses them.
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5)
        x = nn.Conv(64, (7, 7), (2, 2), padding=[(3, 3), (3, 3)], use_bias=False, name="stem")(x)
        x = nn.relu(norm(name="stem_norm")(x))
        x = nn.max_pool(x, (3, 3), (2, 2), padding="SAME")
        for stage, blocks in enumerate(self.stage_sizes):
            for i in range(blocks):
                strides = 2 if stage > 0 and i == 0 else 1
                x = self.block(64 * 2**stage, norm, strides, name=f"stage{stage}_block{i}")(x)
        return nn.Dense(self.num_classes, name="head")(jnp.mean(x, axis=(1, 2)))


def resnet_task(size: str) -> Task:
    model, image, classes, batch = choose(
        size,
        small=(ResNet((2, 2, 2, 2), BasicBlock, 10), 32, 10, 8),  # ResNet-18 at 32 x 32
        large=(ResNet((3, 4, 6, 3), BottleneckBlock, 1000), 224, 1000, 64),  # ResNet-50 at 224 x 224
    )
    return Task(model, partial(labelled_patterns, batch=batch, shape=(image, image, 3), classes=classes),
                classification_loss)


# --------------------------------------------------------------------------- ViT


class PatchEmbedding(nn.Module):
    """Non-overlapping patches, linearly projected: [B, H, W, C] -> [B, tokens, width]."""

    patch: int
    width: int

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        x = nn.Conv(self.width, (self.patch, self.patch), (self.patch, self.patch), name="projection")(images)
        return x.reshape(x.shape[0], -1, self.width)


class ViT(nn.Module):
    """Vision transformer: patch tokens plus a class token, learned positions, pre-LN encoder."""

    patch: int
    width: int
    num_layers: int
    num_heads: int
    mlp_dim: int
    num_classes: int

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        x = PatchEmbedding(self.patch, self.width, name="embedding")(images)
        cls = self.param("cls", nn.initializers.normal(0.02), (1, 1, self.width))
        x = jnp.concatenate([jnp.broadcast_to(cls, (x.shape[0], 1, self.width)), x], axis=1)
        x = x + self.param("positions", nn.initializers.normal(0.02), x.shape[1:])
        x = Transformer(self.num_layers, self.num_heads, self.mlp_dim, name="encoder")(x)
        return nn.Dense(self.num_classes, name="head")(x[:, 0])


def vit_task(size: str) -> Task:
    model, image, batch = choose(
        size,
        small=(ViT(patch=4, width=128, num_layers=2, num_heads=4, mlp_dim=256, num_classes=10), 32, 8),
        large=(ViT(patch=16, width=768, num_layers=12, num_heads=12, mlp_dim=3072, num_classes=1000), 224, 64),
    )
    return Task(model, partial(labelled_patterns, batch=batch, shape=(image, image, 3), classes=model.num_classes),
                classification_loss)


# --------------------------------------------------------------------------- MLP-Mixer


class MixerBlock(nn.Module):
    """Token mixing (an MLP across patches) then channel mixing (an MLP across features)."""

    tokens_mlp_dim: int
    channels_mlp_dim: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = jnp.swapaxes(nn.LayerNorm(name="ln_tokens")(x), 1, 2)
        x = x + jnp.swapaxes(FeedForward(self.tokens_mlp_dim, name="token_mixing")(y), 1, 2)
        return x + FeedForward(self.channels_mlp_dim, name="channel_mixing")(nn.LayerNorm(name="ln_channels")(x))


class MlpMixer(nn.Module):
    patch: int
    width: int
    num_layers: int
    tokens_mlp_dim: int
    channels_mlp_dim: int
    num_classes: int

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        x = PatchEmbedding(self.patch, self.width, name="stem")(images)
        for i in range(self.num_layers):
            x = MixerBlock(self.tokens_mlp_dim, self.channels_mlp_dim, name=f"block_{i}")(x)
        x = jnp.mean(nn.LayerNorm(name="ln_final")(x), axis=1)
        return nn.Dense(self.num_classes, name="head")(x)


def mlp_mixer_task(size: str) -> Task:
    model, image, batch = choose(
        size,
        small=(MlpMixer(patch=4, width=128, num_layers=2, tokens_mlp_dim=64, channels_mlp_dim=256,
                        num_classes=10), 32, 8),
        large=(MlpMixer(patch=16, width=768, num_layers=12, tokens_mlp_dim=384, channels_mlp_dim=3072,
                        num_classes=1000), 224, 64),  # Mixer-B/16
    )
    return Task(model, partial(labelled_patterns, batch=batch, shape=(image, image, 3), classes=model.num_classes),
                classification_loss)


# --------------------------------------------------------------------------- U-Net diffusion

DIFFUSION_STEPS = 1000
SAMPLING_STRIDE = 20  # DDIM with 50 of the 1000 training timesteps
# DDPM's linear schedule (Ho et al., 2020): cumulative signal fraction per timestep.
ALPHA_BAR = np.cumprod(1.0 - np.linspace(1e-4, 0.02, DIFFUSION_STEPS)).astype(np.float32)


class ResidualBlock(nn.Module):
    """GroupNorm-swish-conv twice, with the timestep embedding added in between (DDPM)."""

    channels: int
    groups: int

    @nn.compact
    def __call__(self, x: jax.Array, time: jax.Array) -> jax.Array:
        h = nn.Conv(self.channels, (3, 3), name="conv_1")(nn.swish(nn.GroupNorm(self.groups, name="norm_1")(x)))
        h = h + nn.Dense(self.channels, name="time")(time)[:, None, None, :]
        h = nn.Conv(self.channels, (3, 3), name="conv_2")(nn.swish(nn.GroupNorm(self.groups, name="norm_2")(h)))
        if x.shape[-1] != self.channels:
            x = nn.Conv(self.channels, (1, 1), name="skip")(x)
        return x + h


class SpatialSelfAttention(nn.Module):
    """Self-attention over the pixels of a feature map, with a residual."""

    num_heads: int
    groups: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        batch, height, width, channels = x.shape
        tokens = nn.GroupNorm(self.groups, name="norm")(x).reshape(batch, height * width, channels)
        attended = SelfAttention(self.num_heads, name="attention")(tokens)
        return x + attended.reshape(x.shape)


class UNet(nn.Module):
    """DDPM-style noise predictor: one residual block per level, attention at the bottleneck."""

    channels: tuple[int, ...]
    groups: int = 8
    num_heads: int = 4

    @nn.compact
    def __call__(self, x: jax.Array, timesteps: jax.Array) -> jax.Array:
        base = self.channels[0]
        time = sinusoidal_embedding(timesteps, base)
        time = nn.Dense(4 * base, name="time_2")(nn.swish(nn.Dense(4 * base, name="time_1")(time)))
        h = nn.Conv(base, (3, 3), name="conv_in")(x)
        skips = []
        for level, channels in enumerate(self.channels):
            h = ResidualBlock(channels, self.groups, name=f"down_{level}")(h, time)
            skips.append(h)
            if level < len(self.channels) - 1:
                h = nn.Conv(channels, (3, 3), (2, 2), name=f"downsample_{level}")(h)
        h = ResidualBlock(self.channels[-1], self.groups, name="middle_1")(h, time)
        h = SpatialSelfAttention(self.num_heads, self.groups, name="middle_attention")(h)
        h = ResidualBlock(self.channels[-1], self.groups, name="middle_2")(h, time)
        for level in reversed(range(len(self.channels))):
            h = ResidualBlock(self.channels[level], self.groups, name=f"up_{level}")(
                jnp.concatenate([h, skips.pop()], axis=-1), time)
            if level > 0:
                batch, height, width, features = h.shape
                h = jax.image.resize(h, (batch, 2 * height, 2 * width, features), "nearest")
                h = nn.Conv(features, (3, 3), name=f"upsample_{level}")(h)
        h = nn.swish(nn.GroupNorm(self.groups, name="norm_out")(h))
        return nn.Conv(x.shape[-1], (3, 3), name="conv_out")(h)


def _diffusion_batch(seed: int, batch: int, image: int) -> dict[str, np.ndarray]:
    """Clean images, the Gaussian noise to add, and a timestep per image."""
    rng = np.random.default_rng([seed, 1])  # a stream apart from the images' own
    images = np.tanh(labelled_patterns(seed, batch, (image, image, 3), classes=10)["inputs"])
    return {
        "images": images,
        "noise": rng.standard_normal(images.shape).astype(np.float32),
        # From 1: the inference step moves each image to an earlier timestep.
        "timesteps": rng.integers(1, DIFFUSION_STEPS, size=batch).astype(np.int32),
    }


def _noised(batch: Batch) -> tuple[jax.Array, jax.Array]:
    """The forward process: x_t = sqrt(a_t) x_0 + sqrt(1 - a_t) noise, and t."""
    alpha_bar = jnp.asarray(ALPHA_BAR)[batch["timesteps"]][:, None, None, None]
    noisy = jnp.sqrt(alpha_bar) * batch["images"] + jnp.sqrt(1.0 - alpha_bar) * batch["noise"]
    return noisy, batch["timesteps"]


def _noise_prediction_loss(predicted_noise: jax.Array, batch: Batch) -> jax.Array:
    return jnp.mean((predicted_noise - batch["noise"]) ** 2)


def _ddim_step(predicted_noise: jax.Array, batch: Batch) -> jax.Array:
    """One deterministic DDIM step (eta = 0) from x_t to x_{t - stride}."""
    noisy, timesteps = _noised(batch)
    alpha_bar = jnp.asarray(ALPHA_BAR)
    now = alpha_bar[timesteps][:, None, None, None]
    before = alpha_bar[jnp.maximum(timesteps - SAMPLING_STRIDE, 0)][:, None, None, None]
    clean = (noisy - jnp.sqrt(1.0 - now) * predicted_noise) / jnp.sqrt(now)
    return jnp.sqrt(before) * clean + jnp.sqrt(1.0 - before) * predicted_noise


def unet_diffusion_task(size: str) -> Task:
    channels, image, batch = choose(size, small=((32, 64), 16, 8), large=((128, 256, 256, 512), 64, 64))
    return Task(UNet(channels), partial(_diffusion_batch, batch=batch, image=image), _noise_prediction_loss,
                model_inputs=_noised, predict=_ddim_step)


ENTRIES = [
    suite_entry("mlp", "standard vision", "ReLU MLP classifier; small: 784 -> 512 -> 512 -> 10, batch 64", mlp_task),
    suite_entry("resnet", "standard vision",
                "ResNet v1.5 with BatchNorm; small: ResNet-18 at 32 x 32, batch 8; large: ResNet-50 at 224 x 224",
                resnet_task),
    suite_entry("vit", "standard vision", "Vision transformer; small: 32 x 32, patch 4, width 128, 2 layers, batch 8; "
                "large: ViT-B/16", vit_task),
    suite_entry("mlp-mixer", "standard vision", "MLP-Mixer; small: 32 x 32, patch 4, width 128, 2 layers, batch 8; "
                "large: Mixer-B/16", mlp_mixer_task),
    suite_entry("unet-diffusion", "standard vision",
                "DDPM U-Net noise prediction (train) and one DDIM step (inference); small: 16 x 16, "
                "channels 32/64, batch 8", unet_diffusion_task),
]
