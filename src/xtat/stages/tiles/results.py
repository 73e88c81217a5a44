"""XLA:GPU autotune-results files: reading the tile configs XLA chose per fusion, and writing them back.

XLA's GPU autotuner picks, per fusion, a GEMM library algorithm, a Triton tile config or another
emitter; it can dump its choices (`xla_gpu_dump_autotune_results_to`) and load them instead of
autotuning (`xla_gpu_load_autotune_results_from`). The file is the text form of one of two messages,
by XLA's version (`FORMATS`):

- `xla.AutotuneResults` (xla/autotune_results.proto), older XLA: one entry per (device, fusion HLO),
  the HLO in XLA's canonical text.
- `xla.autotuner.AutotuneCache` (xla/autotune_cache.proto), the autotuner of newer XLA (seen with jax
  0.11.2 on an H200): one entry per (device, fingerprint of the fusion's HLO); no HLO text.

The schema is the installed jaxlib's or its GPU plugin's own (`xtat.xla.schema`), so a file this
module writes is one this XLA parses, and a file from elsewhere (untrusted) is parsed, never executed.

A fusion with a Triton tile config is a tile point: its id is a hash of its key (HLO text or
fingerprint), stable across processes and machines for the same program, and its parameters'
values are XLA's own exhaustive-search ranges, bounded by the dot's sizes where the HLO gives them.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Protocol

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


class _Format(Protocol):
    """One format of XLA's autotune results: its schema, and where an entry keeps what the stage reads."""

    proto: str  # the .proto file holding its schema
    message: str  # the file's message type
    entries: str  # the message's repeated field of entries

    def key(self, entry: Any) -> tuple[str, str]:
        """The entry's device and its fusion's key (HLO text or XLA's fingerprint of it)."""
        ...

    def kind(self, entry: Any) -> str:
        """Which backend's config the entry holds ("triton" for a tiled GEMM fusion)."""
        ...

    def triton(self, entry: Any) -> Any:
        """The entry's Triton tile config (mutable)."""
        ...

    def forget_timing(self, entry: Any) -> None:
        """Drop any timing XLA recorded for its own choice."""
        ...


class _Legacy:
    """`xla.AutotuneResults`: entries keyed by device and the fusion's HLO text."""

    proto, message, entries = "xla/autotune_results.proto", "xla.AutotuneResults", "results"

    @staticmethod
    def key(entry: Any) -> tuple[str, str]:
        return entry.device, entry.hlo

    @staticmethod
    def kind(entry: Any) -> str:
        return entry.result.WhichOneof("key") or "none"

    @staticmethod
    def triton(entry: Any) -> Any:
        return entry.result.triton

    @staticmethod
    def forget_timing(entry: Any) -> None:
        entry.result.ClearField("run_time")  # XLA's timing was of its own choice, not an edited one


class _Cache:
    """`xla.autotuner.AutotuneCache`: entries keyed by device and XLA's fingerprint of the fusion's HLO."""

    proto, message, entries = "xla/autotune_cache.proto", "xla.autotuner.AutotuneCache", "entries"

    @staticmethod
    def key(entry: Any) -> tuple[str, str]:
        return entry.key.target.device, entry.key.target.hlo_fingerprint

    @staticmethod
    def kind(entry: Any) -> str:
        return entry.value.optimal_config.backend_config.WhichOneof("config") or "none"

    @staticmethod
    def triton(entry: Any) -> Any:
        return entry.value.optimal_config.backend_config.triton

    @staticmethod
    def forget_timing(entry: Any) -> None:
        """The cache holds no timings."""


FORMATS: tuple[_Format, ...] = (_Cache(), _Legacy())


@dataclass(frozen=True)
class Parsed:
    """A parsed results file: its format and its message (mutable, as protobuf messages are)."""

    format: _Format
    message: Any

    def entries(self) -> Any:
        return getattr(self.message, self.format.entries)


def parse(text: str) -> Parsed:
    """`text` read as whichever format this XLA's schemas accept; ResultsError when none does, and
    RuntimeError when neither schema is in this jaxlib or its plugins."""
    if len(text) > MAX_FILE_CHARS:
        raise ResultsError(f"autotune results of {len(text)} characters exceed the {MAX_FILE_CHARS} xtat accepts")
    missing, refused = [], []
    for form in FORMATS:
        try:
            message = message_class(form.proto, form.message)()
        except RuntimeError as exc:
            missing.append(str(exc))
            continue
        try:
            text_format.Parse(text, message)
        except text_format.ParseError as exc:
            refused.append(f"{form.message}: {exc}")
            continue
        return Parsed(form, message)
    if not refused:
        raise RuntimeError("; ".join(missing))
    raise ResultsError("not an XLA autotune-results text: " + "; ".join(refused + missing))


def render(parsed: Parsed) -> str:
    return text_format.MessageToString(parsed.message)


def fusion_id(key: str) -> str:
    """A fusion's stable id: a hash of the entry's key (its canonical HLO, or XLA's fingerprint of it)."""
    return "fusion-" + hashlib.sha256(key.encode()).hexdigest()[:12]


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
    key: str  # the fusion's canonical HLO, or XLA's fingerprint of it (the cache format holds no HLO)
    chosen: dict[str, int]  # PARAMETERS' names XLA set -> XLA's value (one it left unset is no decision)
    sizes: DotSizes | None

    def values(self, parameter: str) -> tuple[int, ...]:
        return offered_values(parameter, self.chosen[parameter], self.sizes)


@dataclass(frozen=True)
class Contents:
    """What a results file holds, by kind of choice (Triton tiles, cuBLAS algorithms, others)."""

    tiles: tuple[TilePoint, ...]
    kinds: dict[str, int]


def _chosen(triton: Any) -> dict[str, int]:
    """XLA's tile parameters of one fusion; a parameter it left unset (0: the cache format's split_k) is
    not one of XLA's values and not offered."""
    return {name: int(getattr(triton, name)) for name in PARAMETERS if int(getattr(triton, name)) in PARAMETERS[name]}


def contents(text: str) -> Contents:
    parsed = parse(text)
    points: dict[str, TilePoint] = {}
    kinds: dict[str, int] = {}
    for entry in parsed.entries():
        kind = parsed.format.kind(entry)
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind != "triton":
            continue
        device, key = parsed.format.key(entry)
        point = TilePoint(fusion_id(key), device, key, _chosen(parsed.format.triton(entry)), dot_sizes(key))
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

    Every entry of the fusion is changed (one per device string). A fusion the file lacks, one whose
    choice is not a Triton tile config, or a parameter XLA left unset there is a ResultsError: the
    config does not belong to this file."""
    parsed = parse(text)
    by_fusion: dict[str, list] = {}
    for entry in parsed.entries():
        if parsed.format.kind(entry) == "triton":
            by_fusion.setdefault(fusion_id(parsed.format.key(entry)[1]), []).append(entry)
    for decision, value in sorted(values.items()):
        fusion, parameter = split_decision_id(decision)
        if isinstance(value, bool) or not isinstance(value, int) or value not in PARAMETERS[parameter]:
            raise ResultsError(f"{decision}={value!r} is not one of XLA's values {list(PARAMETERS[parameter])}")
        entries = by_fusion.get(fusion)
        if not entries:
            raise ResultsError(f"{decision}: the autotune results hold no Triton fusion {fusion}")
        for entry in entries:
            triton = parsed.format.triton(entry)
            if parameter not in _chosen(triton):
                raise ResultsError(f"{decision}: XLA left {parameter} unset for this fusion; it is no decision here")
            setattr(triton, parameter, value)
            parsed.format.forget_timing(entry)
    return render(parsed)


def merged(pinned: str, more: str) -> str:
    """`pinned` plus the entries of `more` for fusions (device, key) that `pinned` lacks."""
    if not pinned:
        return more
    if not more:
        return pinned
    base, extra = parse(pinned), parse(more)
    if base.format is not extra.format:
        raise ResultsError(f"cannot merge a {extra.format.message} file into a {base.format.message} one")
    known = {base.format.key(e) for e in base.entries()}
    for entry in extra.entries():
        if base.format.key(entry) not in known:
            base.entries().add().CopyFrom(entry)
    return render(base)
