"""XLA's protocol buffer schemas as the installed jaxlib embeds them.

jaxlib ships no Python classes for XLA's protos, but its shared library embeds their serialized
file descriptors. Reading them from there means every message xtat parses or writes (DebugOptions,
autotune results) is checked against exactly the XLA that will read it.
"""

from __future__ import annotations

import functools
import mmap
import os
import re

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from xtat.xla.protowire import read_varint


def embedded_file_descriptor(blob: bytes | mmap.mmap, proto_path: str) -> descriptor_pb2.FileDescriptorProto:
    """Find a serialized FileDescriptorProto in a binary by its leading name field.

    The blob has no length prefix, so walk top-level fields (numbers 1..14,
    varint or length-delimited) until a byte sequence stops looking like one.
    """
    head = b"\n" + bytes([len(proto_path)]) + proto_path.encode()
    match = re.search(re.escape(head), blob)
    if match is None:
        raise RuntimeError(f"descriptor of {proto_path} not found in jaxlib")
    start = i = match.start()
    while i < len(blob):
        tag, j = read_varint(blob, i)  # type: ignore[arg-type]  # an mmap indexes to ints as bytes do
        number, wire = tag >> 3, tag & 7
        if not 1 <= number <= 14 or wire not in (0, 2):
            break
        length, j = read_varint(blob, j)  # type: ignore[arg-type]  # as above
        i = j + length if wire == 2 else j
    return descriptor_pb2.FileDescriptorProto.FromString(blob[start:i])


@functools.cache
def jaxlib_blob() -> mmap.mmap:
    """jaxlib's library that embeds XLA's protos, mapped read-only: searched in place, not read
    whole (a few hundred MB; reading it took a quarter of a second of every `xtat run` that applies
    a config)."""
    import jaxlib

    folder = os.path.dirname(jaxlib.__file__)
    for name in ("libjax_common.so", "_jax.so", "xla_extension.so"):
        path = os.path.join(folder, name)
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path, "rb") as handle:
                blob = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            if blob.find(b"xla/xla.proto") >= 0:
                return blob
            blob.close()
    raise RuntimeError("no jaxlib library embeds xla/xla.proto")


def _add_file(pool: descriptor_pool.DescriptorPool, path: str, added: set[str]) -> None:
    """Add `path` and, first, the files it imports; protobuf's own well-known types come from protobuf."""
    if path in added:
        return
    if path.startswith("google/protobuf/"):
        file = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(path).CopyToProto(file)
    else:
        file = embedded_file_descriptor(jaxlib_blob(), path)
    for dependency in file.dependency:
        _add_file(pool, dependency, added)
    pool.Add(file)
    added.add(path)


@functools.cache
def schema_pool(proto_path: str) -> descriptor_pool.DescriptorPool:
    """A descriptor pool holding `proto_path` (e.g. "xla/autotune_results.proto") and its imports."""
    # Registers the well-known types XLA imports in the default pool.
    from google.protobuf import any_pb2, duration_pb2, timestamp_pb2, wrappers_pb2  # noqa: F401

    pool = descriptor_pool.DescriptorPool()
    _add_file(pool, proto_path, set())
    return pool


def message_class(proto_path: str, full_name: str) -> type:
    """The Python class of message `full_name` (e.g. "xla.AutotuneResults") defined in `proto_path`."""
    return message_factory.GetMessageClass(schema_pool(proto_path).FindMessageTypeByName(full_name))
