"""On a GPU only (marker `gpu`, run by `scripts/gpu-check`, left out of the default run): what the
CPU tests of test_gpu.py take from a recorded file, checked against XLA:GPU itself.

Run on an H200 with jax 0.11.2 by `scripts/gpu-check` (docs/gpu.md has what it found).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


_COMPILE = """
import re, sys
import jax
from test_gpu_device import _workload, matmuls
option, path = sys.argv[1:]
text = jax.jit(matmuls).lower(*_workload().args).compile({option: path}).as_text()
print(re.findall(r'"kind":"__triton_nested_gemm_fusion"', text).__len__(),
      sorted(set(re.findall(r'"num_warps":"(\\d+)","output_tiles":\\[\\{"sizes":\\[([^\\]]*)\\]', text))))
"""


def _compiled_tiles(option: str, path: Path) -> str:
    """(num_warps, output tile) of the GEMM fusions XLA compiled, in a fresh process: within one process
    XLA's in-memory autotune cache keeps its first choice and a file loaded later has no say (seen on
    an H200 with jax 0.11.2), so, as for a deployed program, the file is read by a process's first compile."""
    done = subprocess.run([sys.executable, "-c", _COMPILE, option, str(path)], capture_output=True, text=True,
                          timeout=180, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_xla_compiles_with_the_tiles_of_a_loaded_edited_file(tmp_path):
    """The deploy path's option (what `xtat.jit` passes to compile), in fresh processes: XLA honours an
    edited tile config (block_m and num_warps show in the compiled fusions' block-level configs)."""
    _on_gpu()
    from xtat.apply.lookup import AUTOTUNE_OPTION

    dumped = tmp_path / "dumped.textproto"
    _compiled_tiles("xla_gpu_dump_autotune_results_to", dumped)
    text = dumped.read_text()
    found = results.contents(text)
    if not found.tiles:
        pytest.fail(f"XLA chose no Triton tiles here ({found.kinds})")
    edited = {results.decision_id(p.id, name): value for p in found.tiles
              for name, value in (("block_m", 16), ("num_warps", 8))}
    compiled = {}
    for name, autotune in (("pinned", text), ("edited", results.with_tiles(text, edited))):
        (tmp_path / name).write_text(autotune)
        compiled[name] = _compiled_tiles(AUTOTUNE_OPTION, tmp_path / name)
    print("compiled GEMM tiles (fusions, [(num_warps, output tile)]):", compiled)
    assert compiled["pinned"] != compiled["edited"] and "('8', '\"1\",\"16\"" in compiled["edited"]
