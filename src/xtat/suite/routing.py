"""Token-to-expert routing and dispatch for the mixture-of-experts workloads.

Routing and dispatch are separate roles. A `Router` decides, for every token
of a routing group, its experts in order of preference and the weight of
each choice (`Routes`). `dispatch` then moves the tokens into per-expert
buffers of fixed capacity, runs the experts, and moves the outputs back.
Every router goes with every dispatch method:

    routers   TopKGating(2, renormalize=True)   GLaM / GShard top-2
              TopKGating(1, renormalize=False)  Switch top-1
              HashRouting()                     Roller et al.: hash of the token id
              SinkhornRouting(iterations)       S-BASE: Sinkhorn-balanced top-1
    dispatch  "einsum"  one-hot dispatch/combine tensors (Mesh-TF / GShard)
              "gather"  scatter-add into the buffers, gather back, by index
              "sort"    sort the choices by expert, slice contiguous segments

The three dispatch methods compute the same result: a choice's slot in its
expert's buffer is its place in one queue (every token's first choice, in
token order, then every second choice), and choices past the capacity are
dropped, reaching the next layer only through the residual connection.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

DISPATCH_METHODS = ("einsum", "gather", "sort")

# [G, E, C, D] expert buffers -> [G, E, C, D] expert outputs.
ExpertFn = Callable[[jax.Array], jax.Array]


@dataclass(frozen=True)
class Routes:
    """Where each token of each routing group goes."""

    expert_index: jax.Array  # [G, S, K] int32, choices in order of preference
    gates: jax.Array  # [G, S, K] weight of each choice in the combined output
    aux_loss: jax.Array  # scalar auxiliary loss; zero for routers that need none


@dataclass(frozen=True)
class Router(ABC):
    """A routing rule. `learned` routers read the logits of a bias-free router layer."""

    top_k: int
    learned: bool

    @abstractmethod
    def route(self, logits: jax.Array | None, token_ids: jax.Array, num_experts: int) -> Routes:
        """logits: [G, S, E] (None unless learned); token_ids: [G, S] int32."""

    def capacity(self, tokens_per_group: int, num_experts: int, capacity_factor: float) -> int:
        """Slots per expert per group: capacity factor x the choices an expert gets on average."""
        return math.ceil(capacity_factor * tokens_per_group * self.top_k / num_experts)


def load_balancing_loss(probs: jax.Array, top1: jax.Array) -> jax.Array:
    """Switch Transformer auxiliary loss: E * sum_e (fraction of tokens whose first
    choice is e) * (mean router probability of e), averaged over groups; 1 when balanced."""
    num_experts = probs.shape[-1]
    density = jnp.mean(jax.nn.one_hot(top1, num_experts, dtype=probs.dtype), axis=1)  # [G, E]
    density_proxy = jnp.mean(probs, axis=1)  # [G, E]
    return jnp.mean(jnp.sum(density * density_proxy, axis=-1)) * num_experts


@dataclass(frozen=True)
class TopKGating(Router):
    """Softmax router, top-k experts per token, with the load-balancing loss.

    GLaM/GShard top-2 renormalize the k gate values to sum to one. Switch (k=1)
    must not: a renormalized single gate is always 1 and the router would get
    no gradient, so its gate is the raw router probability."""

    renormalize: bool = True
    learned: bool = True

    def route(self, logits: jax.Array | None, token_ids: jax.Array, num_experts: int) -> Routes:
        assert logits is not None, "a learned router has logits"
        probs = jax.nn.softmax(logits, axis=-1)  # [G, S, E]
        # The choice is discrete and sees no gradient; the router learns through the gates.
        _, expert_index = jax.lax.top_k(jax.lax.stop_gradient(probs), self.top_k)
        gates = jnp.take_along_axis(probs, expert_index, axis=-1)
        if self.renormalize:
            gates = gates / jnp.maximum(jnp.sum(gates, axis=-1, keepdims=True), jnp.finfo(probs.dtype).eps)
        return Routes(expert_index, gates, load_balancing_loss(probs, expert_index[..., 0]))


@dataclass(frozen=True)
class HashRouting(Router):
    """A fixed hash of the token id picks one expert; no router, no auxiliary loss.

    Knuth's multiplicative hash (wrapping uint32 product, high bits) spreads
    neighbouring token ids across experts, like the paper's random hash."""

    top_k: int = 1
    learned: bool = False

    def route(self, logits: jax.Array | None, token_ids: jax.Array, num_experts: int) -> Routes:
        hashed = (token_ids.astype(jnp.uint32) * jnp.uint32(2654435761)) >> 16
        expert_index = (hashed % num_experts).astype(jnp.int32)[..., None]
        gates = jnp.ones(expert_index.shape, jnp.float32)
        return Routes(expert_index, gates, jnp.zeros((), jnp.float32))


@dataclass(frozen=True)
class SinkhornRouting(Router):
    """S-BASE: a few Sinkhorn iterations balance the router scores, then top-1.

    The iterations alternate between giving every expert an equal share of
    the tokens and every token a total weight of one (in log space). The
    balanced matrix only picks the expert; the gate is the plain softmax
    probability of that expert, through which the router learns."""

    iterations: int = 3
    top_k: int = 1
    learned: bool = True

    def route(self, logits: jax.Array | None, token_ids: jax.Array, num_experts: int) -> Routes:
        assert logits is not None, "a learned router has logits"
        tokens = logits.shape[1]
        balanced = jax.lax.stop_gradient(logits)
        for _ in range(self.iterations):
            balanced = balanced - jax.nn.logsumexp(balanced, axis=1, keepdims=True) + math.log(tokens / num_experts)
            balanced = balanced - jax.nn.logsumexp(balanced, axis=2, keepdims=True)
        expert_index = jnp.argmax(balanced, axis=-1).astype(jnp.int32)[..., None]
        gates = jnp.take_along_axis(jax.nn.softmax(logits, axis=-1), expert_index, axis=-1)
        return Routes(expert_index, gates, jnp.zeros((), logits.dtype))


# --------------------------------------------------------------------------- dispatch


def queue_slots(expert_index: jax.Array, num_experts: int) -> jax.Array:
    """[G, S, K] -> each choice's place in its expert's queue (first choices first).

    The exclusive cumulative sum is a matmul with a strictly lower-triangular
    matrix (the usual TPU trick), which keeps it on the matmul path instead of
    a sequential scan."""
    groups, seq, k = expert_index.shape
    by_priority = jax.nn.one_hot(jnp.swapaxes(expert_index, 1, 2), num_experts).reshape(groups, k * seq, num_experts)
    earlier = jnp.tril(jnp.ones((k * seq, k * seq), by_priority.dtype), -1)
    queued_before = jnp.einsum("ts,gse->gte", earlier, by_priority)
    slots = jnp.sum(queued_before * by_priority, axis=-1).astype(jnp.int32)  # [G, K * S]
    return jnp.swapaxes(slots.reshape(groups, k, seq), 1, 2)


def dispatch(method: str, x: jax.Array, routes: Routes, num_experts: int, capacity: int,
             experts: ExpertFn) -> jax.Array:
    """x: [G, S, D] -> sum over each token's kept choices of gate x expert output, [G, S, D]."""
    if method == "einsum":
        return _dispatch_einsum(x, routes, num_experts, capacity, experts)
    if method == "gather":
        return _dispatch_gather(x, routes, num_experts, capacity, experts)
    if method == "sort":
        return _dispatch_sort(x, routes, num_experts, capacity, experts)
    raise ValueError(f"unknown dispatch method {method!r}; valid methods: {', '.join(DISPATCH_METHODS)}")


def _dispatch_einsum(x: jax.Array, routes: Any, num_experts: int, capacity: int, experts: Callable) -> jax.Array:
    slots = queue_slots(routes.expert_index, num_experts)
    expert_mask = jax.nn.one_hot(routes.expert_index, num_experts, dtype=x.dtype, axis=-2)  # [G, S, E, K]
    # A choice past capacity gets an all-zero slot row, so it is dropped.
    slot_mask = jax.nn.one_hot(slots, capacity, dtype=x.dtype)  # [G, S, K, C]
    dispatch_mask = jnp.einsum("gsek,gskc->gsec", expert_mask, slot_mask)
    combine = jnp.einsum("gsek,gskc->gsec", expert_mask * routes.gates[..., None, :].astype(x.dtype), slot_mask)
    expert_out = experts(jnp.einsum("gsec,gsd->gecd", dispatch_mask, x))
    return jnp.einsum("gsec,gecd->gsd", combine, expert_out)


def _dispatch_gather(x: jax.Array, routes: Any, num_experts: int, capacity: int, experts: Callable) -> jax.Array:
    groups, seq, d_model = x.shape
    k = routes.expert_index.shape[-1]
    slots = queue_slots(routes.expert_index, num_experts)
    kept = slots < capacity
    # Flat buffer index of each choice; dropped choices point one past the end.
    flat = jnp.where(kept, routes.expert_index * capacity + slots, num_experts * capacity)  # [G, S, K]

    def scatter(tokens: jax.Array, index: jax.Array) -> jax.Array:  # one group: [S, D], [S, K] -> [E * C, D]
        sources = jnp.broadcast_to(tokens[:, None, :], (seq, k, d_model)).reshape(seq * k, d_model)
        return jnp.zeros((num_experts * capacity, d_model), x.dtype).at[index.reshape(-1)].add(sources, mode="drop")

    buffers = jax.vmap(scatter)(x, flat).reshape(groups, num_experts, capacity, d_model)
    expert_out = experts(buffers).reshape(groups, num_experts * capacity, d_model)
    gathered = jax.vmap(lambda out, index: out.at[index].get(mode="fill", fill_value=0))(expert_out, flat)
    weights = jnp.where(kept, routes.gates, 0).astype(x.dtype)
    return jnp.einsum("gsk,gskd->gsd", weights, gathered)


def _dispatch_sort(x: jax.Array, routes: Any, num_experts: int, capacity: int, experts: Callable) -> jax.Array:
    groups, seq, d_model = x.shape
    k = routes.expert_index.shape[-1]

    def to_buffers(tokens: jax.Array, expert_index: jax.Array) -> Any:  # one group: [S, D], [S, K]
        # The queue: choices k-major, so a stable sort by expert keeps first
        # choices ahead of second ones within every expert's segment.
        choice_expert = expert_index.T.reshape(-1)  # [K * S]
        order = jnp.argsort(choice_expert, stable=True)
        counts = jnp.sum(jax.nn.one_hot(choice_expert, num_experts, dtype=jnp.int32), axis=0)
        starts = jnp.cumsum(counts) - counts
        slot = jnp.arange(capacity)
        source = order[jnp.minimum(starts[:, None] + slot, k * seq - 1)] % seq  # [E, C] token ids
        filled = slot < counts[:, None]
        buffers = jnp.where(filled[..., None], tokens[source], 0)
        sorted_expert = choice_expert[order]
        position = jnp.arange(k * seq) - starts[sorted_expert]  # place within the expert's segment
        return buffers, order, sorted_expert, position

    buffers, order, sorted_expert, position = jax.vmap(to_buffers)(x, routes.expert_index)
    expert_out = experts(buffers)  # [G, E, C, D]

    def from_buffers(out: jax.Array, gates: jax.Array, order: jax.Array, sorted_expert: jax.Array,
                     position: jax.Array) -> jax.Array:  # one group
        kept = position < capacity
        values = out[sorted_expert, jnp.minimum(position, capacity - 1)]  # [K * S, D]
        weights = jnp.where(kept, gates.T.reshape(-1)[order], 0).astype(out.dtype)
        return jnp.zeros((seq, d_model), out.dtype).at[order % seq].add(weights[:, None] * values)

    return jax.vmap(from_buffers)(expert_out, routes.gates, order, sorted_expert, position)
