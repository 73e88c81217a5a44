"""XLA's protocol buffer schemas as the installed jaxlib and its plugins embed them.

jaxlib ships no Python classes for XLA's protos, but its shared libraries (and a PJRT plugin's, such
as the CUDA one) embed their serialized file descriptors. Reading them from there means every
message xtat parses or writes (DebugOptions, autotune results) is checked against exactly the XLA
that will read it.
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


def _libraries() -> list[str]:
    """The shared libraries that may embed XLA's protos: jaxlib's, then each installed PJRT plugin's
    (the GPU compiler, and the protos only it uses, such as its autotuner's cache, live in the plugin)."""
    import jaxlib

    folder = os.path.dirname(jaxlib.__file__)
    found = [os.path.join(folder, name) for name in ("libjax_common.so", "_jax.so", "xla_extension.so")]
    try:
        import jax_plugins  # a namespace package, present only where a plugin is installed
    except ImportError:
        return found
    for plugins in getattr(jax_plugins, "__path__", []):
        for root, _, files in sorted(os.walk(plugins)):
            found.extend(os.path.join(root, name) for name in sorted(files) if name.endswith(".so"))
    return found


@functools.cache
def _mapped(path: str) -> mmap.mmap | None:
    """`path` mapped read-only: searched in place, not read whole (a few hundred MB; reading it took a
    quarter of a second of every `xtat run` that applies a config). None when it is missing or empty."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    with open(path, "rb") as handle:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


@functools.cache
def library_with(proto_path: str) -> mmap.mmap:
    """The first library of jaxlib or its plugins that embeds the descriptor of `proto_path`."""
    for path in _libraries():
        blob = _mapped(path)
        if blob is not None and _embeds(blob, proto_path):
            return blob
    raise RuntimeError(f"descriptor of {proto_path} not found in jaxlib or its plugins")


def jaxlib_blob() -> mmap.mmap:
    """jaxlib's library that embeds XLA's own protos (xla/xla.proto)."""
    return library_with("xla/xla.proto")


def _embeds(blob: mmap.mmap, proto_path: str) -> bool:
    return blob.find(b"\n" + bytes([len(proto_path)]) + proto_path.encode()) >= 0


def _add_file(pool: descriptor_pool.DescriptorPool, path: str, added: set[str], home: mmap.mmap | None) -> None:
    """Add `path` and, first, the files it imports, each from `home` (the library of the file asked
    for) where it embeds it, so a plugin's proto is read with the plugin's own version of what it
    imports; protobuf's own well-known types come from protobuf."""
    if path in added:
        return
    if path.startswith("google/protobuf/"):
        file = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(path).CopyToProto(file)
    else:
        try:  # one search of `home` (a few hundred MB) where it holds the file, not two
            file = embedded_file_descriptor(home if home is not None else library_with(path), path)
        except RuntimeError:
            file = embedded_file_descriptor(library_with(path), path)
    for dependency in file.dependency:
        _add_file(pool, dependency, added, home)
    pool.Add(file)
    added.add(path)


@functools.cache
def schema_pool(proto_path: str) -> descriptor_pool.DescriptorPool:
    """A descriptor pool holding `proto_path` (e.g. "xla/autotune_results.proto") and its imports."""
    # Registers the well-known types XLA imports in the default pool.
    from google.protobuf import any_pb2, duration_pb2, timestamp_pb2, wrappers_pb2  # noqa: F401

    pool = descriptor_pool.DescriptorPool()
    _add_file(pool, proto_path, set(), library_with(proto_path))
    return pool


def message_class(proto_path: str, full_name: str) -> type:
    """The Python class of message `full_name` (e.g. "xla.AutotuneResults") defined in `proto_path`."""
    return message_factory.GetMessageClass(schema_pool(proto_path).FindMessageTypeByName(full_name))
