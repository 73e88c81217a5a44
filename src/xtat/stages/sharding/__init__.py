"""Sharding stage: Mesh-TensorFlow layouts of a workload over several devices (layouts.py: meshes, rules,
enumeration, placement; stage.py: the decision)."""

from xtat.stages.sharding.stage import SHARDING, ShardingStage

__all__ = ["SHARDING", "ShardingStage"]
