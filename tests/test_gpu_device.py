"""On a GPU only (marker `gpu`, run by `scripts/gpu-check`, left out of the default run): what the
CPU tests of test_gpu.py take from a recorded file, checked against XLA:GPU itself.

Not yet run on hardware from this project (see docs/gpu.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xtat
from xtat.capture.workload import capture
from xtat.core.candidate import Candidate, ProcessSetup
from xtat.core.errors import UserError
from xtat.runner.process import ProcessRunner
from xtat.runner.protocol import Compiled, Timed
from xtat.runner.timing import TimingPolicy
from xtat.runner.verify import Tolerance
from xtat.stages.tiles import results

pytestmark = pytest.mark.gpu


def _on_gpu() -> None:
    if jax.devices()[0].platform not in ("gpu", "cuda", "rocm"):
        pytest.fail(f"the gpu tests need a GPU; jax sees {jax.devices()}")  # never a silent skip


def matmuls(a, b, c):
    return jnp.tanh(a @ b) @ c


def _workload() -> xtat.Workload:
    rng = np.random.default_rng(0)
    shapes = ((512, 1024), (1024, 768), (768, 256))
    return xtat.Workload(matmuls, tuple(rng.standard_normal(s, dtype=np.float32) * 0.05 for s in shapes),
                         name="gpu_matmuls")


@pytest.fixture
def runner(tmp_path):
    captured = capture(_workload())
    runner = ProcessRunner(tmp_path, captured.exported, captured.inputs, captured.verify_inputs,
                           lambda program, layout: b"", 120.0, 10.0, 60.0, device="0")
    runner.start()
    yield runner
    runner.close()


def test_the_autotuner_dumps_triton_fusions_the_tiles_stage_reads(runner):
    _on_gpu()
    text = runner.autotune_results(Candidate())
    found = results.contents(text)
    assert sum(found.kinds.values()) >= 2, found.kinds  # both dots were autotuned
    print("fusions by kind:", found.kinds, "tile points:", len(found.tiles))


def test_a_pinned_file_with_edited_tiles_compiles_and_computes_the_same(runner):
    _on_gpu()
    text = runner.autotune_results(Candidate())
    found = results.contents(text)
    if not found.tiles:
        pytest.fail(f"XLA chose no Triton tiles here ({found.kinds}): the tiles stage would have nothing")
    point = found.tiles[0]
    other = next(v for v in point.values("block_k") if v != point.chosen["block_k"])
    edited = results.with_tiles(text, {results.decision_id(point.id, "block_k"): other})
    timing = TimingPolicy(min_sample_s=0.005, samples=5)
    for autotune in (text, edited):
        candidate = Candidate(process=ProcessSetup(autotune_results=autotune))
        assert isinstance(runner.build("pinned", candidate), Compiled)
        timed = runner.measure("pinned", candidate, Tolerance(), timing)  # verified against the reference first
        assert isinstance(timed, Timed), timed
        runner.release("pinned", candidate)


def test_running_out_of_device_memory_is_recorded_as_oom(tmp_path):
    _on_gpu()
    free = jax.devices()[0].memory_stats() or {}
    limit = int(free.get("bytes_limit", 200 << 30))
    elements = limit // 4 + (1 << 28)  # more float32 than the device holds

    def too_big(x):
        return jnp.broadcast_to(x, (elements,)) * 2.0

    captured = capture(xtat.Workload(too_big, (np.float32(1.0),), name="gpu_oom"))
    runner = ProcessRunner(tmp_path, captured.exported, captured.inputs, None, lambda program, layout: b"",
                           120.0, 10.0, 60.0, device="0")
    try:
        with pytest.raises(UserError, match="RESOURCE_EXHAUSTED|[Oo]ut of memory"):
            runner.start()  # the default itself does not fit: a clear error, the OOM named
    finally:
        runner.close()


def _triton_tiles(compiled_text: str) -> list[tuple[str, str, str]]:
    """(block_m, block_n, block_k) of each Triton GEMM fusion in an optimized HLO module's text."""
    import re

    return re.findall(r'"block_m":"(\d+)","block_n":"(\d+)","block_k":"(\d+)"', compiled_text)


def test_xla_compiles_with_the_tiles_of_a_loaded_edited_file(tmp_path):
    """The deploy path's option (what `xtat.jit` passes to compile): XLA honours an edited tile."""
    _on_gpu()
    from xtat.apply.lookup import AUTOTUNE_OPTION

    lowered = jax.jit(matmuls).lower(*_workload().args)
    dumped = tmp_path / "dumped.textproto"
    lowered.compile({"xla_gpu_dump_autotune_results_to": str(dumped)})
    text = dumped.read_text()
    found = results.contents(text)
    if not found.tiles:
        pytest.fail(f"XLA chose no Triton tiles here ({found.kinds})")
    tiles = {}
    for name, values in (("pinned", {}), ("edited", {results.decision_id(p.id, "block_k"): 16 for p in found.tiles})):
        path = tmp_path / f"{name}.textproto"
        path.write_text(results.with_tiles(text, values) if values else text)
        tiles[name] = _triton_tiles(lowered.compile({AUTOTUNE_OPTION: str(path)}).as_text())
    print("Triton tiles, pinned:", tiles["pinned"], "edited:", tiles["edited"])
    assert tiles["pinned"], "no Triton GEMM fusion in the compiled program"
    assert all(k == "16" for _, _, k in tiles["edited"]) and tiles["edited"] != tiles["pinned"]
