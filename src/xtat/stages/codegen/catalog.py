"""XLA's DebugOptions as the installed jaxlib defines them.

jaxlib embeds the serialized descriptor of `xla/xla.proto` in its shared
library; we read field names, types and enum values from there at run time,
and the defaults from a default `CompileOptions`, so the catalog always
matches the XLA that will compile the candidates.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from xtat.xla.protowire import fields
from xtat.xla.schema import embedded_file_descriptor, jaxlib_blob

_F = descriptor_pb2.FieldDescriptorProto


@dataclass(frozen=True)
class OptionInfo:
    name: str
    kind: str  # "bool" | "int" | "float" | "string" | "enum"
    repeated: bool
    enum_values: tuple[str, ...] = ()
    default: object = None


def _debug_options_class(debug: descriptor_pb2.DescriptorProto) -> Any:
    """A message class for DebugOptions' scalar fields, to decode defaults."""
    own = descriptor_pb2.FileDescriptorProto(name="xtat_debug_options.proto", package="xla", syntax="proto3")
    message = own.message_type.add()
    message.CopyFrom(debug)
    del message.field[:]
    message.ClearField("nested_type")
    message.ClearField("enum_type")
    message.ClearField("oneof_decl")
    for field in debug.field:
        if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
            continue
        copy = message.field.add()
        copy.CopyFrom(field)
        copy.ClearField("oneof_index")
        copy.ClearField("proto3_optional")
        if field.type == _F.TYPE_ENUM:  # wire-compatible; enums of other files need no import
            copy.type = _F.TYPE_INT32
            copy.ClearField("type_name")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(own)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("xla.DebugOptions"))


def _default_debug_options_bytes() -> bytes:
    """debug_options (field 3 of field 3) of a default serialized CompileOptions."""
    from jax._src.lib import xla_client

    data = xla_client.CompileOptions().SerializeAsString()
    for _ in range(2):  # CompileOptionsProto.executable_build_options.debug_options
        data = dict(fields(data)).get(3, b"")
    return data


_KINDS = {
    _F.TYPE_BOOL: "bool",
    _F.TYPE_INT32: "int",
    _F.TYPE_INT64: "int",
    _F.TYPE_UINT32: "int",
    _F.TYPE_UINT64: "int",
    _F.TYPE_SINT32: "int",
    _F.TYPE_SINT64: "int",
    _F.TYPE_FLOAT: "float",
    _F.TYPE_DOUBLE: "float",
    _F.TYPE_STRING: "string",
    _F.TYPE_ENUM: "enum",
}


# Options jax passes on ExecutableBuildOptions rather than DebugOptions (`compiler_options` takes both).
BUILD_OPTIONS = ("optimization_level", "memory_fitting_level")


@functools.cache
def build_options() -> dict[str, OptionInfo]:
    """The searched ExecutableBuildOptions fields, with the defaults of a default CompileOptions."""
    from jax._src.lib import xla_client

    build = xla_client.CompileOptions().executable_build_options
    return {name: OptionInfo(name, "int", False, (), getattr(build, name)) for name in BUILD_OPTIONS
            if hasattr(build, name)}


@functools.cache
def debug_options() -> dict[str, OptionInfo]:
    """Every scalar or enum DebugOptions field of the installed XLA, by name."""
    file = embedded_file_descriptor(jaxlib_blob(), "xla/xla.proto")
    debug = next(m for m in file.message_type if m.name == "DebugOptions")
    enums = {f".xla.DebugOptions.{e.name}": e for e in debug.enum_type}
    enums.update({f".xla.{e.name}": e for e in file.enum_type})
    defaults_message = _debug_options_class(debug).FromString(_default_debug_options_bytes())
    catalog: dict[str, OptionInfo] = {}
    for field in debug.field:
        kind = _KINDS.get(field.type)
        if kind is None:
            continue
        repeated = field.label == _F.LABEL_REPEATED
        values: tuple[str, ...] = ()
        if kind == "enum":
            enum = enums.get(field.type_name)
            values = tuple(v.name for v in enum.value) if enum else ()
        default = getattr(defaults_message, field.name)
        if repeated:
            default = list(default)
        if kind == "enum" and enum is not None:
            by_number = {v.number: v.name for v in enum.value}
            default = [by_number.get(v, v) for v in default] if repeated else by_number.get(default, default)
        catalog[field.name] = OptionInfo(field.name, kind, repeated, values, default)
    return catalog
