"""The stages' names in the XTAT-M order, importable without the stages themselves (and so without
jax): what the command line offers and checks `--stages` against. `stages.registry` registers the
stage classes in this order; `tests/test_stages.py` checks that the two agree."""

STAGE_ORDER: tuple[str, ...] = ("runtime", "sharding", "program", "passes", "codegen", "tiles")
