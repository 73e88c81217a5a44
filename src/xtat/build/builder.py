"""Builder: a config's compile options applied to the captured program.

Runs inside a worker process. The program arrives as a `jax.export`
serialization, so workers never import the user's code.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any

import jax
from jax.experimental import serialize_executable

from xtat.protowire import encode_varint, fields, read_varint


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
    return Built(compiled, executable_identity(compiled), compile_s)


def executable_identity(compiled) -> str:
    """sha256 of what the machine will run, without the options that asked for it.

    jaxlib's serialized executable embeds the compile options (and, inside
    the HLO module, the debug options), so two configs that produce the same
    machine code would never hash equal. On CPU the serialization is a
    length-prefixed metadata block, then {1: CompilationResultProto,
    2: CompileOptionsProto}; we hash the optimized HLO text and every field of
    the compilation result except the module-with-config (buffer assignment,
    thunks, symbols, object files, target machine). Elsewhere, fall back to
    the whole serialization.
    """
    text = compiled.as_text()
    # Source locations and op names in metadata say where the program was traced
    # from (a rewritten program is traced elsewhere), not what it computes.
    digest = hashlib.sha256(_STACK_FRAMES.sub("", _METADATA.sub("", text)).encode())
    try:
        payload = compiled.runtime_executable().serialize()
        length, start = read_varint(payload, 0)
        result = dict(fields(payload[start + length:])).get(1)
        parts = [(n, v) for n, v in fields(result) if n != 1] if result else []
        if not any(n == 8 for n, _ in parts):  # no object files: not the layout we know
            raise ValueError("unknown executable layout")
        module = _module_name(text)
        canonical = []
        for number, value in parts:
            if number == 6 and module:  # thunk sequence: drop the per-compile module id
                value = _without_module_id(value, module)
            canonical.append((number, value))
        # Repeated fields (object files, symbols) in sorted order: parallel LLVM codegen may
        # hand back the same object files in another order on a busy machine.
        for number, value in sorted(canonical):
            digest.update(number.to_bytes(2, "little") + len(value).to_bytes(8, "little") + value)
    except Exception:
        digest.update(serialize_executable.serialize(compiled)[0])
    return digest.hexdigest()


_METADATA = re.compile(r",? metadata=\{[^{}]*\}")
# The tables of Python frames that the metadata points into (file names, lines, callers).
_STACK_FRAMES = re.compile(r"^(FileNames|FunctionNames|FileLocations|StackFrames)\n(?:.+\n)*", re.MULTILINE)


def _module_name(hlo_text: str) -> bytes:
    first = hlo_text.split("\n", 1)[0]
    return first.split()[1].rstrip(",").encode() if first.startswith("HloModule ") else b""


def _without_module_id(thunks: bytes, module: bytes) -> bytes:
    """Each ThunkInfo is {module_name: 2, module_id: 3}; the id is a process-wide
    counter that differs on every compile, so it must not reach the hash."""
    name_field = b"\x12" + encode_varint(len(module)) + module
    return re.sub(re.escape(name_field) + rb"\x18[\x80-\xff]*[\x00-\x7f]", lambda m: name_field, thunks)
