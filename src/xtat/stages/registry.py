"""Which stages exist and in what order: the one place a stage is registered.

A stage is a module with a class that has a `name`, takes the stages before it, and
implements `stages.base.Stage`. Its position here is its place in the XTAT-M order: each
stage's space is discovered on the program the earlier stages' decisions produce.
"""

from __future__ import annotations

from xtat.stages.base import Stage
from xtat.stages.codegen import CodegenStage
from xtat.stages.order import STAGE_ORDER
from xtat.stages.passes import PassesStage
from xtat.stages.program.stage import ProgramStage
from xtat.stages.runtime import RuntimeStage
from xtat.stages.sharding import ShardingStage
from xtat.stages.tiles import TilesStage

STAGES: tuple[type[Stage], ...] = (
    RuntimeStage,
    ShardingStage,
    ProgramStage,
    PassesStage,
    CodegenStage,
    TilesStage,
)
__all__ = ["STAGES", "STAGE_ORDER", "make_stages"]  # STAGE_ORDER: the names, in `stages.order`


def make_stages() -> list[Stage]:
    """Every stage, in order, each given the ones before it. Configs are always concretized by
    all of them, so records made with other --stages still build the same candidate."""
    stages: list[Stage] = []
    for kind in STAGES:
        stages.append(kind(tuple(stages)))
    return stages
