"""Builder: a config's compile options applied to the captured program.

Runs inside a worker process. The program arrives as a `jax.export`
serialization, so workers never import the user's code, unless the program
has host callbacks: then it arrives as the target to import (`source.py`).
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any

import jax
from jax.experimental import serialize_executable

from xtat.xla.protowire import encode_varint, fields, read_varint


@dataclass(frozen=True)
class Built:
    compiled: Any  # jax.stages.Compiled
    exe_hash: str  # sha256 of the serialized executable: equal bytes, equal program
    compile_s: float


def load_program(serialized: bytes) -> Any:
    """A program with a `call` over the flat input arrays: a `jax.export` serialization, or the
    `Source` of a program with host callbacks, which the worker traces itself."""
    from xtat.build.source_program import SourceProgram
    from xtat.capture.source import Source, is_source

    if is_source(serialized):
        return SourceProgram(Source.from_bytes(serialized))
    return jax.export.deserialize(bytearray(serialized))


def build(exported: Any, args: tuple, kwargs: dict, options: dict[str, object],
          in_shardings: tuple | None = None) -> Built:
    """jit(program, in_shardings=...).lower(...).compile(compiler_options=options), with its hash.

    Codegen options can leave the HLO text unchanged while changing machine
    code, so identity is decided on the serialized executable bytes. With
    `in_shardings` (one per flat input: a layout's placement) XLA's SPMD
    partitioner splits the single-device program over the mesh.
    """
    start = time.perf_counter()
    jitted = jax.jit(exported.call) if in_shardings is None else jax.jit(exported.call, in_shardings=in_shardings)
    lowered = jitted.lower(*args, **kwargs)
    compiled = lowered.compile(compiler_options=options or None)  # type: ignore[arg-type]  # XLA's own types
    compile_s = time.perf_counter() - start
    return Built(compiled, executable_identity(compiled), compile_s)


def executable_identity(compiled: Any) -> str:
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
    try:
        payload = compiled.runtime_executable().serialize()
    except Exception:
        payload = serialize_executable.serialize(compiled)[0]
    return identity_of(compiled.as_text(), payload)


def identity_of(text: str, payload: bytes) -> str:
    """`executable_identity` from the optimized HLO text and the serialized executable.

    Split out so that a process without xtat (a preset's user) can hand over
    the two and be compared with what xtat compiled.
    """
    # Source locations and op names in metadata say where the program was traced
    # from (a rewritten program is traced elsewhere), not what it computes.
    digest = hashlib.sha256(_STACK_FRAMES.sub("", _METADATA.sub("", text)).encode())
    try:
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
        digest.update(payload)
    return digest.hexdigest()


_METADATA = re.compile(r",? metadata=\{[^{}]*\}")
# The tables of Python frames that the metadata points into (file names, lines, callers).
_STACK_FRAMES = re.compile(r"^(FileNames|FunctionNames|FileLocations|StackFrames)\n(?:.+\n)*", re.MULTILINE)


def _module_name(hlo_text: str) -> bytes:
    first = hlo_text.split("\n", 1)[0]
    return first.split()[1].rstrip(",").encode() if first.startswith("HloModule ") else b""


def _without_module_id(thunks: bytes, module: bytes) -> bytes:
    """The thunk sequence re-encoded without ThunkInfo.module_id.

    Each ThunkInfo is {module_name: 2, module_id: 3}; the id is a process-wide
    counter (0, and so left out of the encoding, in a fresh process's first
    compile), so it must not reach the hash, and neither may the lengths of
    the messages around it. We have no schema for the sequence, so every
    length-delimited field that parses as a message is re-encoded
    recursively; one that does not stays as it is.
    """
    try:
        parsed = _parse(thunks)
    except (ValueError, IndexError):
        return thunks
    numbers = {number: value for number, _, value in parsed}
    info = numbers.get(2) == module and any(n == 3 and w == 0 for n, w, _ in parsed)
    out = bytearray()
    for number, wire, value in parsed:
        if info and number == 3:
            continue
        if wire == 2:
            value = _without_module_id(value, module)
            out += encode_varint(number << 3 | 2) + encode_varint(len(value)) + value
        else:
            out += encode_varint(number << 3 | wire) + value
    return bytes(out)


def _parse(data: bytes) -> list[tuple[int, int, bytes]]:
    """(number, wire type, raw value) of each field; ValueError when `data` is not a message."""
    out, i = [], 0
    while i < len(data):
        tag, i = read_varint(data, i)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == 2:
            length, i = read_varint(data, i)
            if i + length > len(data):
                raise ValueError("truncated")
            out.append((number, wire, data[i:i + length]))
            i += length
        elif wire == 0:
            start = i
            _, i = read_varint(data, i)
            out.append((number, wire, data[start:i]))
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if i + size > len(data):
                raise ValueError("truncated")
            out.append((number, wire, data[i:i + size]))
            i += size
        else:
            raise ValueError(f"wire type {wire}")
    return out
