"""XLA:GPU autotune-results files: reading the tile configs XLA chose per fusion, and writing them back.

XLA's GPU autotuner picks, per fusion, a GEMM library algorithm or a Triton tile config; it can dump
its choices (`xla_gpu_dump_autotune_results_to`) and load them instead of autotuning
(`xla_gpu_load_autotune_results_from`). The file is the text form of `xla.AutotuneResults`
(xla/autotune_results.proto): one entry per (device, fusion HLO), the HLO in XLA's canonical text.
The schema is the installed jaxlib's own (`xtat.xla.schema`), so a file this module writes is one
this XLA parses, and a file from elsewhere (untrusted) is parsed, never executed.

A fusion with a Triton tile config is a tile point: its id is a hash of its canonical HLO, stable
across processes and machines for the same program, and its parameters' values are XLA's own
exhaustive-search ranges, bounded by the dot's sizes.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any

from google.protobuf import text_format

from xtat.xla.schema import message_class

PROTO = "xla/autotune_results.proto"
MAX_FILE_CHARS = 4_000_000  # a stored file larger than this is refused, not parsed

# XLA's exhaustive tiling search (gemm_fusion_autotuner): every value a tile parameter may take.
BLOCK_SIZES = (16, 32, 64, 128, 256, 512)
PARAMETERS: dict[str, tuple[int, ...]] = {
    "block_m": BLOCK_SIZES,
    "block_n": BLOCK_SIZES,
    "block_k": BLOCK_SIZES,
    "split_k": (1, 2, 4, 8, 16),
    "num_stages": (1, 2, 3, 4),
    "num_warps": (2, 4, 8, 16),
}


class ResultsError(ValueError):
    """An autotune-results text that XLA's schema does not accept, or that names no such fusion."""


def parse(text: str) -> Any:
    """The `xla.AutotuneResults` message of `text`; ResultsError when XLA's schema refuses it."""
    if len(text) > MAX_FILE_CHARS:
        raise ResultsError(f"autotune results of {len(text)} characters exceed the {MAX_FILE_CHARS} xtat accepts")
    message = message_class(PROTO, "xla.AutotuneResults")()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as exc:
        raise ResultsError(f"not an XLA autotune-results text: {exc}") from None
    return message


def render(message: Any) -> str:
    return text_format.MessageToString(message)


def fusion_id(hlo: str) -> str:
    """A fusion's stable id: a hash of its canonical HLO (the entry's key)."""
    return "fusion-" + hashlib.sha256(hlo.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class DotSizes:
    m: int
    n: int
    k: int


_ARRAY = r"\w+\[([\d,]*)\](?:\{[^}]*\})?"
_DOT = re.compile(rf"= {_ARRAY} dot\({_ARRAY} [\w.%-]+, {_ARRAY} [\w.%-]+\)(.*)")


def _dims(attributes: str, name: str) -> list[int]:
    match = re.search(rf"{name}=\{{([\d,]*)\}}", attributes)
    return [int(d) for d in match.group(1).split(",") if d] if match else []


def dot_sizes(hlo: str) -> DotSizes | None:
    """M, N and K of the fusion's dot, read from its canonical HLO; None when there is no dot to read."""
    match = _DOT.search(hlo)
    if match is None:
        return None
    lhs = [int(d) for d in match.group(2).split(",") if d]
    rhs = [int(d) for d in match.group(3).split(",") if d]
    attributes = match.group(4)
    lhs_batch, rhs_batch = _dims(attributes, "lhs_batch_dims"), _dims(attributes, "rhs_batch_dims")
    lhs_contracting = _dims(attributes, "lhs_contracting_dims")
    rhs_contracting = _dims(attributes, "rhs_contracting_dims")
    m = math.prod(d for i, d in enumerate(lhs) if i not in lhs_batch and i not in lhs_contracting)
    n = math.prod(d for i, d in enumerate(rhs) if i not in rhs_batch and i not in rhs_contracting)
    k = math.prod(lhs[i] for i in lhs_contracting)
    return DotSizes(m, n, k)


def _bound(size: int) -> int:
    """The largest block worth offering for a dimension of `size`: its next power of two, at least 16."""
    return max(16, 1 << max(0, size - 1).bit_length())


def offered_values(parameter: str, chosen: int, sizes: DotSizes | None) -> tuple[int, ...]:
    """The values of one tile parameter XLA's exhaustive search would try for this dot, XLA's choice first."""
    values = PARAMETERS[parameter]
    if sizes is not None:
        limit = {"block_m": _bound(sizes.m), "block_n": _bound(sizes.n), "block_k": _bound(sizes.k),
                 "split_k": max(1, sizes.k // 16)}.get(parameter)
        if limit is not None:
            values = tuple(v for v in values if v <= limit)
    return tuple(dict.fromkeys([chosen, *values]))


@dataclass(frozen=True)
class TilePoint:
    """One fusion's Triton tile config as XLA chose it."""

    id: str
    device: str
    hlo: str
    chosen: dict[str, int]  # PARAMETERS' names -> XLA's value
    sizes: DotSizes | None

    def values(self, parameter: str) -> tuple[int, ...]:
        return offered_values(parameter, self.chosen[parameter], self.sizes)


@dataclass(frozen=True)
class Contents:
    """What a results file holds, by kind of choice (Triton tiles, cuBLAS algorithms, others)."""

    tiles: tuple[TilePoint, ...]
    kinds: dict[str, int]


def contents(text: str) -> Contents:
    message = parse(text)
    points: dict[str, TilePoint] = {}
    kinds: dict[str, int] = {}
    for entry in message.results:
        kind = entry.result.WhichOneof("key") or "none"
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind != "triton":
            continue
        triton = entry.result.triton
        chosen = {name: int(getattr(triton, name)) for name in PARAMETERS}
        point = TilePoint(fusion_id(entry.hlo), entry.device, entry.hlo, chosen, dot_sizes(entry.hlo))
        points.setdefault(point.id, point)
    return Contents(tuple(points.values()), kinds)


def decision_id(fusion: str, parameter: str) -> str:
    return f"{fusion}/{parameter}"


def split_decision_id(decision: str) -> tuple[str, str]:
    """(fusion id, parameter) of a tile decision id; ResultsError when it is not one."""
    fusion, _, parameter = decision.partition("/")
    if not re.fullmatch(r"fusion-[0-9a-f]{12}", fusion) or parameter not in PARAMETERS:
        raise ResultsError(f"{decision!r} is not a tile decision (fusion-<12 hex>/<{'|'.join(PARAMETERS)}>)")
    return fusion, parameter


def with_tiles(text: str, values: dict[str, object]) -> str:
    """`text` with the tile parameters of `values` ({"fusion-…/block_m": 64, …}) set on their fusions' entries.

    Every entry of the fusion is changed (one per device string). A fusion the file lacks, or one
    whose choice is not a Triton tile config, is a ResultsError: the config does not belong to it."""
    message = parse(text)
    by_fusion: dict[str, list] = {}
    for entry in message.results:
        if entry.result.WhichOneof("key") == "triton":
            by_fusion.setdefault(fusion_id(entry.hlo), []).append(entry)
    for decision, value in sorted(values.items()):
        fusion, parameter = split_decision_id(decision)
        if isinstance(value, bool) or not isinstance(value, int) or value not in PARAMETERS[parameter]:
            raise ResultsError(f"{decision}={value!r} is not one of XLA's values {list(PARAMETERS[parameter])}")
        entries = by_fusion.get(fusion)
        if not entries:
            raise ResultsError(f"{decision}: the autotune results hold no Triton fusion {fusion}")
        for entry in entries:
            setattr(entry.result.triton, parameter, value)
            entry.result.ClearField("run_time")  # XLA's timing was of its own choice, not this one
    return render(message)


def merged(pinned: str, more: str) -> str:
    """`pinned` plus the entries of `more` for fusions (device, HLO) that `pinned` lacks."""
    if not pinned:
        return more
    base, extra = parse(pinned), parse(more) if more else None
    if extra is None:
        return pinned
    known = {(e.device, e.hlo) for e in base.results}
    for entry in extra.results:
        if (entry.device, entry.hlo) not in known:
            base.results.add().CopyFrom(entry)
    return render(base)
