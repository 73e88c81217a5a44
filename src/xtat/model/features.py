"""Compile-time facts of one executable: the features the cost model learns from.

Runs inside the worker right after a compile (`compile_metrics`), so every
trial records them in `trials.metrics`, whatever happens to it later. Three
sources, each optional because backends differ in what they report:

- `compiled.cost_analysis()`: flops, transcendentals, bytes accessed;
- `compiled.memory_analysis()`: argument / output / temp / peak bytes;
- the optimized HLO text: op counts by opcode, fusions by kind, number of
  computations, while loops.

It also turns configs and recorded metrics into the name-keyed feature dicts
the cost model (`model.cost_model`) trains on. No jax import here: the tuner
process uses the feature functions too.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

# Per-operand and per-output entries ("bytes accessed0{}", "utilization1{}") vary in number
# between programs and say little on their own; the totals are kept.
_COST_KEYS = ("flops", "transcendentals", "bytes accessed", "optimal_seconds")
_MEMORY_KEYS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes",
                "generated_code_size_in_bytes", "peak_memory_in_bytes")

# `%name = type opcode(operands), attributes`; the type may be a tuple with nested parentheses,
# so the opcode is taken as the last identifier directly before the operand list.
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(", re.MULTILINE)
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?[\w.\-]+\s*\(.*\)\s*->\s*.*\{\s*$", re.MULTILINE)
_FUSION_KIND = re.compile(r"\bfusion\(.*?kind=(k\w+)")


def compile_metrics(compiled: Any) -> dict:
    """Cost analysis, memory analysis and HLO features of a `jax.stages.Compiled`."""
    metrics: dict = {"cost": cost_features(compiled), "memory": memory_features(compiled)}
    try:
        metrics["hlo"] = hlo_features(compiled.as_text())
    except Exception:  # some backends cannot print the optimized module
        metrics["hlo"] = {}
    return metrics


def cost_features(compiled: Any) -> dict[str, float]:
    try:
        analysis = compiled.cost_analysis() or {}
    except Exception:  # not every backend implements it
        return {}
    if isinstance(analysis, list):  # older jax: one dict per device
        analysis = analysis[0] if analysis else {}
    return {key: float(analysis[key]) for key in _COST_KEYS if key in analysis}


def memory_features(compiled: Any) -> dict[str, int]:
    try:
        stats = compiled.memory_analysis()
    except Exception:
        return {}
    if stats is None:
        return {}
    out = {key: int(getattr(stats, key)) for key in _MEMORY_KEYS if getattr(stats, key, None) is not None}
    if "peak_memory_in_bytes" not in out and {"argument_size_in_bytes", "temp_size_in_bytes"} <= out.keys():
        # Without a reported peak, everything live at once is the upper bound.
        out["peak_memory_in_bytes"] = (out["argument_size_in_bytes"] + out.get("output_size_in_bytes", 0)
                                       + out["temp_size_in_bytes"] - out.get("alias_size_in_bytes", 0))
    return out


def hlo_features(text: str) -> dict:
    """Counts read from optimized HLO text: ops by opcode (fused computations included),
    fusion instructions by kind, computations, and while loops."""
    # Metadata strings hold op names like "jit(f)/mul(...)" that would read as instructions.
    body = re.sub(r",? metadata=\{[^{}]*\}", "", text)
    ops = Counter(_INSTRUCTION.findall(body))
    fusion_kinds = Counter(_FUSION_KIND.findall(body))
    return {
        "ops": dict(sorted(ops.items())),
        "fusion_kinds": dict(sorted(fusion_kinds.items())),
        "instructions": sum(ops.values()),
        "computations": len(_COMPUTATION.findall(body)),
        "fusions": ops.get("fusion", 0),
        "loops": ops.get("while", 0),
    }


def peak_bytes(metrics: dict | None) -> int | None:
    """The peak memory of a trial's executable, when its backend reported one."""
    return ((metrics or {}).get("memory") or {}).get("peak_memory_in_bytes")


# -- feature vectors for the cost model ------------------------------------------------------
# Name-keyed dicts (vectorised by the model), so that rows from different workloads and spaces
# share the columns they have in common: an XLA option means the same thing in every workload.

def decision_features(config: dict) -> dict[str, float]:
    """One-hot of the config's non-default decision values (`stage.id=value`); absent means default."""
    return {f"decision:{stage}.{id}={value}": 1.0 for stage, values in config.items() for id, value in values.items()}


def _numbers(metrics: dict | None) -> dict[str, float]:
    """Every number in a trial's compile metrics, flattened to `source.name` keys."""
    out: dict[str, float] = {}
    for source in ("cost", "memory", "hlo"):
        for name, value in ((metrics or {}).get(source) or {}).items():
            if isinstance(value, dict):
                out.update({f"{source}.{name}.{k}": float(v) for k, v in value.items()})
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out[f"{source}.{name}"] = float(value)
    return out


def workload_features(default_metrics: dict | None) -> dict[str, float]:
    """What the workload is, from its default build: log sizes, so workloads of any scale compare."""
    return {f"workload:{k}": float(np.log1p(v)) for k, v in _numbers(default_metrics).items()}


def compiled_features(metrics: dict | None, default_metrics: dict | None) -> dict[str, float]:
    """How the candidate's executable differs from the default's: log ratios of every count and size."""
    mine, base = _numbers(metrics), _numbers(default_metrics)
    return {f"compiled:{k}": float(np.log1p(mine.get(k, 0.0)) - np.log1p(base.get(k, 0.0)))
            for k in sorted(mine.keys() | base.keys())}
