"""Standard families over structured data: a graph network and DLRM.

The GNN passes messages over a fixed random graph with `jax.ops.segment_sum`;
DLRM looks up embedding tables, runs bottom and top MLPs and the pairwise
dot-product feature interactions between them.
"""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from xtat.suite.common import Batch, Task, choose, classification_loss, labelled_patterns, suite_entry
from xtat.suite.layers import MLP

# --------------------------------------------------------------------------- GNN


class GraphNetwork(nn.Module):
    """Interaction network (Battaglia et al., 2018) for node classification.

    Each layer updates every edge from itself and its two end nodes, sums the
    updated edges into their receivers (segment_sum), and updates every node
    from itself and that sum; both updates are residual.
    """

    hidden: int
    num_layers: int
    num_classes: int

    @nn.compact
    def __call__(self, nodes: jax.Array, edges: jax.Array, senders: jax.Array, receivers: jax.Array) -> jax.Array:
        h = nn.Dense(self.hidden, name="node_encoder")(nodes)
        e = nn.Dense(self.hidden, name="edge_encoder")(edges)
        for i in range(self.num_layers):
            e = e + MLP((self.hidden,), self.hidden, name=f"edge_update_{i}")(
                jnp.concatenate([e, h[senders], h[receivers]], axis=-1))
            incoming = jax.ops.segment_sum(e, receivers, num_segments=nodes.shape[0])
            h = h + MLP((self.hidden,), self.hidden, name=f"node_update_{i}")(
                jnp.concatenate([h, incoming], axis=-1))
            h = nn.LayerNorm(name=f"ln_{i}")(h)
        return nn.Dense(self.num_classes, name="head")(h)


def graph_batch(seed: int, nodes: int, edges: int, features: int, classes: int) -> dict[str, np.ndarray]:
    """Node features and labels (seeded) on one random graph (the same for every seed)."""
    graph = np.random.default_rng(1234)
    senders = graph.integers(0, nodes, size=edges).astype(np.int32)
    receivers = graph.integers(0, nodes, size=edges).astype(np.int32)
    labelled = labelled_patterns(seed, nodes, (features,), classes)
    edge_features = np.random.default_rng([seed, 1]).standard_normal((edges, 4)).astype(np.float32)
    return {"nodes": labelled["inputs"], "labels": labelled["labels"], "edges": edge_features,
            "senders": senders, "receivers": receivers}


def _graph_inputs(batch: Batch) -> tuple:
    return batch["nodes"], batch["edges"], batch["senders"], batch["receivers"]


def gnn_task(size: str) -> Task:
    model, nodes, edges, features = choose(
        size,
        small=(GraphNetwork(hidden=64, num_layers=3, num_classes=8), 512, 2048, 16),
        large=(GraphNetwork(hidden=256, num_layers=6, num_classes=64), 65536, 524288, 128),
    )
    return Task(model, partial(graph_batch, nodes=nodes, edges=edges, features=features, classes=model.num_classes),
                classification_loss, model_inputs=_graph_inputs)


# --------------------------------------------------------------------------- DLRM


class Dlrm(nn.Module):
    """DLRM (Naumov et al., 2019): dense features through the bottom MLP, one embedding
    per categorical feature, dot products of every pair of those vectors, top MLP -> click logit."""

    tables: int
    rows: int
    dim: int
    bottom: tuple[int, ...]
    top: tuple[int, ...]

    @nn.compact
    def __call__(self, dense: jax.Array, sparse: jax.Array) -> jax.Array:
        x = nn.relu(MLP(self.bottom, self.dim, name="bottom")(dense))  # [B, D]
        tables = self.param("embedding", nn.initializers.normal(self.dim**-0.5), (self.tables, self.rows, self.dim))
        looked_up = tables[jnp.arange(self.tables), sparse]  # [B, T, D]
        vectors = jnp.concatenate([x[:, None, :], looked_up], axis=1)  # [B, T + 1, D]
        dots = jnp.einsum("bfd,bgd->bfg", vectors, vectors)
        first, second = np.tril_indices(self.tables + 1, k=-1)  # each pair once, no self-products
        features = jnp.concatenate([x, dots[:, first, second]], axis=-1)
        return MLP(self.top, 1, name="top")(features)[:, 0]


DENSE_FEATURES = 13  # as in the Criteo click logs


def click_batch(seed: int, batch: int, tables: int, rows: int) -> dict[str, np.ndarray]:
    """Criteo-like rows: log-scaled counts, power-law categorical ids, and clicks that
    depend on both through a fixed random model (so there is something to learn)."""
    truth = np.random.default_rng(1234)
    dense_weights = truth.standard_normal(DENSE_FEATURES) * 0.3
    row_effects = truth.standard_normal((tables, rows)) * 0.5
    rng = np.random.default_rng(seed)
    dense = np.log1p(rng.exponential(10.0, size=(batch, DENSE_FEATURES))).astype(np.float32)
    sparse = ((rng.zipf(1.3, size=(batch, tables)) - 1) % rows).astype(np.int32)
    logit = (dense - 2.0) @ dense_weights + row_effects[np.arange(tables), sparse].sum(axis=1)
    clicks = (rng.random(batch) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    return {"dense": dense, "sparse": sparse, "clicks": clicks}


def _click_inputs(batch: Batch) -> tuple:
    return batch["dense"], batch["sparse"]


def click_loss(logits: jax.Array, batch: Batch) -> jax.Array:
    return optax.sigmoid_binary_cross_entropy(logits, batch["clicks"]).mean()


def dlrm_task(size: str) -> Task:
    model, batch = choose(
        size,
        small=(Dlrm(tables=8, rows=1000, dim=16, bottom=(64,), top=(64,)), 128),
        # The MLPerf DLRM's MLPs and batch, with 26 tables of 100k rows.
        large=(Dlrm(tables=26, rows=100_000, dim=128, bottom=(512, 256), top=(1024, 1024, 512, 256)), 2048),
    )
    return Task(model, partial(click_batch, batch=batch, tables=model.tables, rows=model.rows), click_loss,
                model_inputs=_click_inputs)


ENTRIES = [
    suite_entry("gnn", "standard structured",
                "interaction-network GNN, segment_sum message passing on a fixed random graph; "
                "small: 512 nodes, 2048 edges, hidden 64, 3 layers", gnn_task),
    suite_entry("dlrm", "standard structured", "DLRM: embedding tables, bottom/top MLP, pairwise dot interactions; "
                "small: 8 tables x 1000 rows x 16, batch 128", dlrm_task),
]
