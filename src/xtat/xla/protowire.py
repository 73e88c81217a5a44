"""Minimal reading of the protobuf wire format, for messages whose classes jaxlib does not expose
(the embedded DebugOptions descriptor, the serialized CPU executable)."""

from __future__ import annotations


def read_varint(data: bytes, i: int) -> tuple[int, int]:
    """The varint at data[i:] and the index after it."""
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def fields(data: bytes) -> list[tuple[int, bytes]]:
    """Top-level fields of a message as (number, raw bytes); varints kept as their encoded bytes."""
    out, i = [], 0
    while i < len(data):
        tag, i = read_varint(data, i)
        number, wire = tag >> 3, tag & 7
        if wire == 2:
            length, i = read_varint(data, i)
            out.append((number, data[i : i + length]))
            i += length
        elif wire == 0:
            start = i
            _, i = read_varint(data, i)
            out.append((number, data[start:i]))
        elif wire == 1:
            out.append((number, data[i : i + 8]))
            i += 8
        elif wire == 5:
            out.append((number, data[i : i + 4]))
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out
