"""What a function's other signatures are offered, and the function's weighted gain (pure: no
measurement; the tuning of a real two-signature script is in tests/test_profile.py)."""

from __future__ import annotations

import pytest

from xtat.tuning.result import AdoptionOutcome, Finalist, TimeSplit, TuneResult
from xtat.tuning.signatures import MAX_OFFERED, SignatureGain, offered_configs, weighted_gain

PASS_OFF = {"passes": {"cse": False}}
OPTION = {"codegen": {"xla_cpu_enable_fast_math": True}}


def finalist(trial: int, config: dict, low: float) -> Finalist:
    """A SYNTHETIC finalist whose side-by-side interval starts at `low` (nothing measured)."""
    return Finalist(trial, config, 1e-3, (1e-3, 1e-3), low + 0.05, (low, low + 0.1))


def result(adopted: dict, finalists: list[Finalist]) -> TuneResult:
    """A SYNTHETIC result of the largest signature's search (nothing measured)."""
    outcome = AdoptionOutcome.ADOPTED if adopted else AdoptionOutcome.NOT_FASTER
    return TuneResult("w", "f" * 64, 1.0, (1.0, 1.0), 0.8, (0.8, 0.8), 1.25, (1.2, 1.3), bool(adopted), outcome,
                      {"ok": 5}, adopted, 5, "synthetic", 10.0, TimeSplit(), "", finalists=tuple(finalists))


def test_the_adopted_config_comes_first_then_the_faster_finalists_cut_to_the_shared_stages():
    tiles = {"tiles": {"fusion.1": {"block_m": 16}}}
    adopted = {**PASS_OFF, **tiles}
    finalists = [finalist(1, adopted, 1.1), finalist(2, {**OPTION, **tiles}, 1.05),
                 finalist(3, {**PASS_OFF, **OPTION}, 0.97),  # its interval reaches 1: not offered
                 finalist(4, tiles, 1.2),  # tiles alone name the largest's fusions: nothing to offer
                 finalist(5, {**PASS_OFF, "codegen": {}}, 1.1)]  # the adopted one again, once
    assert offered_configs(result(adopted, finalists)) == (PASS_OFF, OPTION)


def test_nothing_is_offered_when_the_largest_adopted_nothing():
    assert offered_configs(result({}, [finalist(1, PASS_OFF, 1.2)])) == ()


def test_at_most_a_few_configs_are_offered():
    configs = [{"passes": {f"pass-{i}": False}} for i in range(MAX_OFFERED + 2)]
    offered = offered_configs(result(configs[0], [finalist(i, c, 1.1) for i, c in enumerate(configs)]))
    assert offered == tuple(configs[:MAX_OFFERED])


def test_the_function_gain_weights_each_signature_by_its_share_of_the_time():
    # 3/4 of the time 1.5x faster, 1/4 unchanged: 1 / (0.75/1.5 + 0.25) = 1.333...
    assert weighted_gain([SignatureGain(0.3, 1.5), SignatureGain(0.1, 1.0)]) == pytest.approx(4 / 3)
    assert weighted_gain([SignatureGain(0.2, 2.0), SignatureGain(0.0, 0.5)]) == pytest.approx(2.0)
    assert weighted_gain([]) == 1.0 and weighted_gain([SignatureGain(0.0, 2.0)]) == 1.0
