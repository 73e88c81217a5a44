"""Tiles stage: XLA:GPU's per-fusion Triton tile configs, read from and written to autotune-results files
(results.py: the file; stage.py: the decisions)."""

from xtat.stages.tiles.stage import TILES, TilesStage, pin_autotuning

__all__ = ["TILES", "TilesStage", "pin_autotuning"]
