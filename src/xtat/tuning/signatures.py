"""One function's several signatures (a smaller last batch, several sequence lengths): its largest
signature is searched with the function's whole share of the budget; each other signature is then
offered the largest's best configs and keeps whichever of them is faster on it.

Each signature is its own program with its own fingerprint, so `xtat run` applies to each the
config adopted for it. The function's gain is the share-weighted sum of its signatures' gains
(`weighted_gain`), and choosing per signature among the offered configs maximises that sum: no
single config shared by all of them can do better on the same measurements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xtat.core.space import Config, config_id
from xtat.tuning.result import Finalist, TuneResult

# A signature's own search would cost as much as the largest's; these few are what it gets instead.
MAX_OFFERED = 3
# Passes and codegen options hold for any program; tiles name one program's fusions.
SHARED_STAGES = ("passes", "codegen")


@dataclass(frozen=True)
class SignatureGain:
    """One signature's part of its function: its share of the script's time and its adopted speedup."""

    share: float
    speedup: float  # 1.0 where nothing was adopted


def offered_configs(largest: TuneResult) -> tuple[Config, ...]:
    """The configs the other signatures try, best first: the largest's adopted config, then each
    finalist that was faster than the default side by side, each cut to the shared stages, with no
    config twice. None when the largest adopted nothing: its finalists were not confirmed anywhere."""
    if not largest.adopted:
        return ()
    return _distinct([largest.best_config, *(f.config for f in _faster(largest.finalists))])


def weighted_gain(parts: Sequence[SignatureGain]) -> float:
    """The function's speedup over its signatures together: its time over its time with each
    signature's speedup applied (a share of 0 counts for nothing)."""
    total = sum(part.share for part in parts)
    if total <= 0:
        return 1.0
    return total / sum(part.share / part.speedup for part in parts)


def _faster(finalists: Sequence[Finalist]) -> list[Finalist]:
    return [f for f in finalists if f.speedup_ci[0] > 1.0 and f.gave_way_to is None]


def _distinct(configs: Sequence[Config]) -> tuple[Config, ...]:
    offered: dict[str, Config] = {}
    for config in configs:
        shared = {stage: values for stage, values in config.items() if stage in SHARED_STAGES and values}
        if shared and config_id(shared) not in offered:
            offered[config_id(shared)] = shared
    return tuple(offered.values())[:MAX_OFFERED]
