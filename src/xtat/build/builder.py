"""Builder: a config's compile options applied to the captured program.

Runs inside a worker process. The program arrives as a `jax.export`
serialization, so workers never import the user's code.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import jax
from jax.experimental import serialize_executable


@dataclass(frozen=True)
class Built:
    compiled: Any  # jax.stages.Compiled
    exe_hash: str  # sha256 of the serialized executable: equal bytes, equal program
    compile_s: float


def load_program(serialized: bytes):
    return jax.export.deserialize(bytearray(serialized))


def build(exported, args: tuple, kwargs: dict, options: dict[str, object]) -> Built:
    """jit(program).lower(...).compile(compiler_options=options), with its hash.

    Codegen options can leave the HLO text unchanged while changing machine
    code, so identity is decided on the serialized executable bytes.
    """
    start = time.perf_counter()
    lowered = jax.jit(exported.call).lower(*args, **kwargs)
    compiled = lowered.compile(compiler_options=options or None)
    compile_s = time.perf_counter() - start
    payload, _, _ = serialize_executable.serialize(compiled)
    return Built(compiled, hashlib.sha256(payload).hexdigest(), compile_s)
