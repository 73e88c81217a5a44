"""What every standard suite entry is built from: a `Task`, its two steps, synthetic data.

A suite entry describes its model once, as a `Task` (a Flax module, a seeded
batch generator, a loss and an inference output) per size; this module turns
that into the two workloads the suite exposes:

    train_workload(built)      -> Workload(train_step, (variables, opt_state, batch))
                                  returns (new variables, new opt_state, loss)
    inference_workload(built)  -> Workload(inference_step, (variables, batch))

`variables` is the Flax variable dict: `params`, plus `batch_stats` for models
with BatchNorm. Those models take a `train` flag: the train step runs them in
train mode (batch statistics, running averages returned as new state), the
inference step in inference mode (running averages). Parameters come from a
fixed random init; batches from a seeded numpy generator, and
`make_inputs(seed)` changes only the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from xtat.capture.workload import Workload
from xtat.core.errors import UserError
from xtat.suite import SIZES, SuiteEntry

PyTree = Any
Batch = dict[str, jax.Array]
Choice = TypeVar("Choice")


def _first_input(batch: Batch) -> tuple:
    return (batch["inputs"],)


def _raw_output(output: PyTree, batch: Batch) -> PyTree:
    return output


@dataclass(frozen=True)
class Task:
    """One model at one size with its synthetic data and objective."""

    model: nn.Module
    make_batch: Callable[[int], dict[str, np.ndarray]]  # seed -> one batch, same shapes for every seed
    loss: Callable[[PyTree, Batch], jax.Array]  # (model output, batch) -> scalar training loss
    model_inputs: Callable[[Batch], tuple] = _first_input  # batch -> positional model arguments
    predict: Callable[[PyTree, Batch], PyTree] = _raw_output  # what the inference step returns
    learning_rate: float = 1e-3

    def optimizer(self) -> optax.GradientTransformation:
        return optax.adamw(self.learning_rate, weight_decay=1e-4)


@dataclass(frozen=True)
class Built:
    """A task with its initialized variables and its seed-0 batch."""

    task: Task
    variables: PyTree
    batch: Batch

    @property
    def has_state(self) -> bool:
        """Whether the model keeps running statistics (BatchNorm) next to its params."""
        return any(collection != "params" for collection in self.variables)


def build(task: Task) -> Built:
    """Initialize the model's variables for the seed-0 batch."""
    batch = as_device_batch(task.make_batch(0))
    return Built(task, init_variables(task.model, task.model_inputs(batch)), batch)


def init_variables(model: nn.Module, inputs: tuple, seed: int = 0) -> PyTree:
    """The model's variables, drawn by a seeded numpy generator from their shapes.

    Flax's own `model.init` would be one more XLA program per model, and
    compiling it (a random draw per parameter) took longer than compiling the
    training step itself. So only shapes are traced, and each leaf is filled
    by its role (the end of its name) as Flax's default initializers would:
    kernels LeCun normal (std 1/sqrt(fan in)), embeddings normal with std
    1/sqrt(width), norm scales and running variances one, biases and running
    means zero, other parameters (class tokens, learned positions) normal with
    std 0.02. The initializers modules declare are only used for shapes; the
    suite's modules declare the same distributions.
    """
    shapes = jax.eval_shape(model.init, jax.random.key(0), *inputs)
    rng = np.random.default_rng(seed)

    def draw(path: tuple, leaf: jax.ShapeDtypeStruct) -> jax.Array:
        role, shape = path[-1].key, leaf.shape
        if role.endswith(("scale", "var")):
            value = np.ones(shape)
        elif role.endswith(("bias", "mean")):
            value = np.zeros(shape)
        elif role.endswith("kernel"):
            value = rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))
        elif role.endswith("embedding"):
            value = rng.standard_normal(shape) / np.sqrt(shape[-1])
        else:
            value = rng.standard_normal(shape) * 0.02
        return jnp.asarray(value, leaf.dtype)

    return dict(jax.tree_util.tree_map_with_path(draw, shapes))


def as_device_batch(batch: dict[str, np.ndarray]) -> Batch:
    return {name: jnp.asarray(value) for name, value in batch.items()}


# The dimensions Mesh-TF's layouts split; a workload's other names (length, d_kv) are left unsplit.
LAYOUT_NAMES = frozenset({"batch", "d_model", "d_ff", "heads", "vocab", "experts"})


def _key_name(key: Any) -> Any:
    return getattr(key, "key", getattr(key, "name", getattr(key, "idx", key)))


def named_like(tree: PyTree, rules: dict[tuple, tuple[str, ...]]) -> PyTree:
    """`tree` with `xtat.dims(...)` for each array whose key path ends with a path of `rules`
    (`("moe", "w_in") -> ("experts", "d_model", "d_ff")`) and has its rank, None elsewhere; names
    outside LAYOUT_NAMES become unsplit axes. The parameters' rules name the optimizer state's
    moments too, whose paths end the same way."""
    from xtat.capture.dimnames import dims

    def one(path: tuple, leaf: Any) -> Any:
        keys = tuple(_key_name(k) for k in path)
        for start in range(len(keys)):
            names = rules.get(keys[start:])
            if names is not None and len(names) == np.ndim(leaf):
                return dims(*(n if n in LAYOUT_NAMES else None for n in names))
        return None

    return jax.tree_util.tree_map_with_path(one, tree)


def train_workload(built: Built, name: str, rules: dict[tuple, tuple[str, ...]] | None = None) -> Workload:
    """One optax step: loss and gradients on a batch, then the update."""
    task, model = built.task, built.task.model
    tx = task.optimizer()
    opt_state = jax.jit(tx.init)(built.variables["params"])  # one program, not one per leaf

    def loss_fn(params: PyTree, state: PyTree, batch: Batch) -> tuple[jax.Array, PyTree]:
        inputs = task.model_inputs(batch)
        if state:
            output, new_state = model.apply({"params": params, **state}, *inputs, train=True,
                                            mutable=list(state))
        else:
            output, new_state = model.apply({"params": params}, *inputs), state
        return task.loss(output, batch), new_state

    def train_step(variables: PyTree, opt_state: PyTree, batch: Batch) -> tuple[PyTree, PyTree, jax.Array]:
        params = variables["params"]
        state = {k: v for k, v in variables.items() if k != "params"}
        (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, state, batch)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return {"params": optax.apply_updates(params, updates), **new_state}, new_opt_state, loss

    def make_inputs(seed: int) -> tuple:
        return (built.variables, opt_state, as_device_batch(task.make_batch(seed)))

    dims = None if rules is None else (named_like(built.variables, rules), named_like(opt_state, rules),
                                       named_like(built.batch, rules))
    return Workload(train_step, (built.variables, opt_state, built.batch), name=name, dims=dims,
                    make_inputs=make_inputs)


def inference_workload(built: Built, name: str, rules: dict[tuple, tuple[str, ...]] | None = None) -> Workload:
    """The forward pass (inference mode for BatchNorm) and the task's prediction."""
    task, model = built.task, built.task.model
    mode: dict[str, Any] = {"train": False} if built.has_state else {}

    def inference_step(variables: PyTree, batch: Batch) -> PyTree:
        return task.predict(model.apply(variables, *task.model_inputs(batch), **mode), batch)

    def make_inputs(seed: int) -> tuple:
        return (built.variables, as_device_batch(task.make_batch(seed)))

    dims = None if rules is None else (named_like(built.variables, rules), named_like(built.batch, rules))
    return Workload(inference_step, (built.variables, built.batch), name=name, make_inputs=make_inputs, dims=dims)


def suite_entry(name: str, family: str, description: str, task: Callable[[str], Task]) -> SuiteEntry:
    """The suite entry whose train and inference forms are built from `task(size)`."""
    return SuiteEntry(
        name, family, description,
        train=lambda size: train_workload(build(task(size)), f"{name}/train"),
        inference=lambda size: inference_workload(build(task(size)), f"{name}/inference"),
    )


def choose(size: str, small: Choice, large: Choice) -> Choice:
    """The setting for `size`; a clear error for any other size."""
    if size not in SIZES:
        raise UserError(f"suite size {size!r}: choose one of {', '.join(SIZES)}")
    return small if size == "small" else large


# --------------------------------------------------------------------------- synthetic data


def class_pattern(label: int, shape: tuple[int, ...]) -> np.ndarray:
    """A fixed random pattern for one class, the same for every seed."""
    return np.random.default_rng([1234, label]).standard_normal(shape).astype(np.float32)


def labelled_patterns(seed: int, batch: int, shape: tuple[int, ...], classes: int) -> dict[str, np.ndarray]:
    """Inputs that are their class's pattern plus noise, with the labels.

    Unlike pure noise, the label is learnable from the input, so a training
    loss falls the way it does on real data. Patterns are drawn only for the
    labels present (1000 ImageNet-sized patterns would take 600 MB).
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=batch).astype(np.int32)
    patterns = {label: class_pattern(label, shape) for label in np.unique(labels).tolist()}
    inputs = np.stack([patterns[label] for label in labels.tolist()])
    return {"inputs": inputs + rng.standard_normal((batch, *shape)).astype(np.float32), "labels": labels}


def random_walk_tokens(seed: int, batch: int, length: int, vocab: int) -> np.ndarray:
    """Token sequences from a random walk (small steps mod vocab): text with local structure."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, vocab, size=(batch, 1))
    steps = rng.integers(-2, 3, size=(batch, length - 1))
    return (np.concatenate([start, start + np.cumsum(steps, axis=1)], axis=1) % vocab).astype(np.int32)


def classification_loss(logits: jax.Array, batch: Batch) -> jax.Array:
    """Mean softmax cross-entropy against `batch["labels"]`."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()
