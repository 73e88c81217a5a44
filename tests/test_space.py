"""The option catalog from the installed XLA, the curated space, output comparison."""

from __future__ import annotations

import numpy as np
import pytest

from xtat.core.errors import UserError
from xtat.runner.verify import Tolerance, compare
from xtat.stages.codegen import catalog, codegen_space
from xtat.stages.codegen.curated import CPU


def test_catalog_is_read_from_installed_xla():
    options = catalog.debug_options()
    assert len(options) > 200
    assert options["xla_cpu_enable_fast_math"].kind == "bool"
    assert options["xla_backend_optimization_level"].default == 3
    preset = options["xla_cpu_opt_preset"]
    assert preset.kind == "enum" and "CPU_OPT_PRESET_FAST_RUNTIME" in preset.enum_values
    assert options["xla_cpu_experimental_ynn_fusion_type"].repeated


def test_codegen_space_is_typed_and_hides_numerics_changes_by_default():
    space = codegen_space("cpu")
    names = {d.id for d in space.decisions}
    assert "xla_cpu_prefer_vector_width" in names
    assert not {c.name for c in CPU if c.relaxes_numerics} & names
    relaxed = codegen_space("cpu", allow_numerics_change=True)
    assert "xla_cpu_enable_fast_min_max" in {d.id for d in relaxed.decisions}
    for decision in space.decisions:
        assert decision.default in decision.values
        assert all(type(v) is type(decision.default) for v in decision.values)


def test_unknown_and_mistyped_options_are_clear_errors():
    with pytest.raises(UserError, match="not searchable"):
        codegen_space("cpu", only=("xla_nope",))
    space = codegen_space("cpu")
    with pytest.raises(UserError, match="unknown decision"):
        space.canonical({"codegen": {"xla_nope": 1}})
    with pytest.raises(UserError, match="not one of"):
        space.canonical({"codegen": {"xla_cpu_prefer_vector_width": 3}})


def test_compare_nan_positions_tolerance_and_dtypes():
    ref = [np.array([1.0, np.nan, np.inf], np.float32), np.array([1, 2], np.int32)]
    assert compare([r.copy() for r in ref], ref, Tolerance()).ok
    moved_nan = [np.array([np.nan, 1.0, np.inf], np.float32), ref[1]]
    assert "NaN" in compare(moved_nan, ref, Tolerance()).message
    close = [np.array([1.00001, np.nan, np.inf], np.float32), ref[1]]
    assert compare(close, ref, Tolerance()).ok
    far = [np.array([1.01, np.nan, np.inf], np.float32), ref[1]]
    result = compare(far, ref, Tolerance())
    assert not result.ok and result.max_abs_err == pytest.approx(0.01, rel=1e-3)
    assert compare(far, ref, Tolerance(rtol=0.1)).ok
    assert not compare([ref[0], np.array([1, 3], np.int32)], ref, Tolerance()).ok
    assert not compare([ref[0].astype(np.float64), ref[1]], ref, Tolerance()).ok


def test_near_zero_elements_are_judged_against_the_output_scale():
    ref = [np.array([1.0, 1e-4, -0.5], np.float32)]
    reordered = [np.array([1.0, 1.3e-4, -0.5], np.float32)]  # off by 30% of a tiny element
    assert compare(reordered, ref, Tolerance()).ok
    wrong = [np.array([1.0, 5e-3, -0.5], np.float32)]  # off by 0.5% of the output's scale
    assert not compare(wrong, ref, Tolerance()).ok
