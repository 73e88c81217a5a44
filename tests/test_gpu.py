"""GPU code paths, on CPU: autotune-results files, the tiles stage, the GPU codegen space, pinned
autotuning and its deployment, workers pinned to one device.

The autotune results come from the recorded fixture `fixtures/autotune/h200-fusions.textproto`
(its README says where it comes from); its schema is the installed jaxlib's own. Nothing here
needs a GPU; `scripts/gpu-check` runs the rest on one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from processes import environment_of
from tiny import tiny_mlp
from xtat.apply.lookup import AUTOTUNE_OPTION, Found, Lookup, deployment
from xtat.capture.workload import capture, environment_identity
from xtat.core.candidate import AUTOTUNE_FLAG, Candidate, ProcessSetup
from xtat.core.errors import UserError
from xtat.runner.host_lock import holding, host_locks, measured_device
from xtat.runner.pool import Pool
from xtat.runner.process import ProcessRunner
from xtat.stages.base import Context
from xtat.stages.codegen import CodegenStage
from xtat.stages.codegen.space import codegen_space
from xtat.stages.registry import STAGE_ORDER, make_stages
from xtat.stages.tiles import TilesStage, results

FIXTURE = Path(__file__).parent / "fixtures" / "autotune" / "h200-fusions.textproto"
MLP, ATTENTION, TINY = "mlp", "attention", "tiny"


@pytest.fixture(scope="module")
def recorded() -> str:
    return FIXTURE.read_text()


@pytest.fixture(scope="module")
def fusions(recorded) -> dict[str, results.TilePoint]:
    """The fixture's Triton fusions by what their dot is."""
    operand = {"f32[256,512]": MLP, "bf16[8,128,64]": ATTENTION, "f32[16,16]": TINY}
    return {name: p for p in results.contents(recorded).tiles for shape, name in operand.items() if shape in p.key}


def _context(platform: str, probe=lambda candidate: "") -> Context:
    return Context(lambda: None, (), {}, platform, False, None, lambda candidate: [], probe)


def _tiles(stages) -> TilesStage:
    return next(stage for stage in stages if isinstance(stage, TilesStage))


# -- the file ------------------------------------------------------------------------


def test_the_recorded_file_is_read_with_xlas_own_schema(recorded, fusions):
    found = results.contents(recorded)
    assert found.kinds == {"triton": 3, "gemm": 1}  # the cuBLAS fusion is no tile point
    assert fusions[MLP].sizes == results.DotSizes(m=256, n=1024, k=512)
    assert fusions[ATTENTION].sizes == results.DotSizes(m=128, n=128, k=64)  # batch dimension left out
    assert fusions[MLP].chosen == {"block_m": 64, "block_n": 128, "block_k": 32, "split_k": 1,
                                   "num_stages": 3, "num_warps": 4}
    assert fusions[MLP].device.startswith("CUDA: 9.0")
    with pytest.raises(results.ResultsError, match="not an XLA autotune-results text"):
        results.parse(recorded.replace("block_m", "block_q", 1))


def test_fusion_ids_are_hashes_of_the_fusion_key_and_survive_a_rewrite(recorded, fusions):
    again = results.contents(results.render(results.parse(recorded)))
    assert {p.id for p in again.tiles} == {p.id for p in fusions.values()}
    assert fusions[MLP].id == results.fusion_id(fusions[MLP].key)
    assert results.fusion_id(fusions[MLP].key.replace("256", "257")) != fusions[MLP].id
    # Every character counts, the last line's too: two fusions differing only in their dot's attributes.
    late = fusions[MLP].key.replace("rhs_contracting_dims={0}", "rhs_contracting_dims={1}")
    assert late != fusions[MLP].key and results.fusion_id(late) != fusions[MLP].id
    assert len({p.id for p in fusions.values()}) == 3


def test_offered_values_are_xlas_exhaustive_ranges_bounded_by_the_dot(fusions):
    attention = fusions[ATTENTION]  # M=N=128, K=64
    assert attention.values("block_k") == (64, 16, 32)  # XLA's choice first; no block beyond K
    assert attention.values("block_m") == (32, 16, 64, 128)
    assert attention.values("split_k") == (1, 2, 4)  # K / 16
    assert attention.values("num_warps") == (4, 2, 8, 16)
    for point in fusions.values():
        for parameter, allowed in results.PARAMETERS.items():
            values = point.values(parameter)
            assert values[0] == point.chosen[parameter] and set(values) <= set(allowed) | {values[0]}


def test_with_tiles_edits_exactly_the_named_fusion(recorded, fusions):
    mlp, attention = fusions[MLP], fusions[ATTENTION]
    edited = results.with_tiles(recorded, {results.decision_id(mlp.id, "block_n"): 256,
                                           results.decision_id(mlp.id, "num_warps"): 8})
    after = {p.id: p for p in results.contents(edited).tiles}
    assert after[mlp.id].chosen == {**mlp.chosen, "block_n": 256, "num_warps": 8}
    assert after[attention.id].chosen == attention.chosen
    message = results.parse(edited)
    edited_entry = next(e for e in message.entries() if results.fusion_id(e.hlo) == mlp.id)
    assert not edited_entry.result.HasField("run_time")  # XLA's timing was of its own choice
    gemm = [e for e in message.entries() if e.result.WhichOneof("key") == "gemm"]
    assert len(gemm) == 1 and gemm[0].result.gemm.algorithm == -1
    assert results.with_tiles(recorded, {}) == results.render(results.parse(recorded))


@pytest.mark.parametrize("values, refusal", [
    ({"fusion-000000000000/block_m": 64}, "hold no Triton fusion"),
    ({"{mlp}/block_m": 48}, "not one of XLA's values"),
    ({"{mlp}/block_m": True}, "not one of XLA's values"),
    ({"{mlp}/unroll": 2}, "is not a tile decision"),
    ({"mlp/block_m": 64}, "is not a tile decision"),
])
def test_with_tiles_refuses_what_xla_would_not_take(recorded, fusions, values, refusal):
    values = {key.format(mlp=fusions[MLP].id): value for key, value in values.items()}
    with pytest.raises(results.ResultsError, match=refusal):
        results.with_tiles(recorded, values)


def test_merged_adds_only_fusions_the_pin_lacks(recorded, fusions):
    message = results.parse(recorded)
    first, rest = results.parse(recorded), results.parse(recorded)
    del first.entries()[1:]
    del rest.entries()[:1]
    rest.entries()[0].result.triton.block_m = 16  # a later dump's choice does not replace the pin's
    merged = results.contents(results.merged(results.render(first), results.render(message)))
    assert len(merged.tiles) == 3
    kept = results.merged(recorded, results.render(rest))
    assert len(results.parse(kept).entries()) == 4  # nothing added twice
    assert {p.id: p.chosen for p in results.contents(kept).tiles} == {p.id: p.chosen for p in fusions.values()}


# -- the cache format of newer XLA (recorded on an H200 with jax 0.11.2) ----------------------

CACHE_FIXTURES = Path(__file__).parent / "fixtures" / "autotune"


@pytest.fixture
def cache_schema(monkeypatch):
    """A test double for the CUDA plugin's schema of `xla.autotuner.AutotuneCache`, which a jaxlib without
    the plugin lacks: the plugin's own file descriptors, recorded (fixtures/autotune/README.md)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from xtat.xla import schema

    pool = descriptor_pool.DescriptorPool()
    for name in ("any", "duration", "wrappers", "timestamp"):
        file = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(f"google/protobuf/{name}.proto").CopyToProto(file)
        pool.Add(file)
    recorded = (CACHE_FIXTURES / "xla-0.11.2-autotune-cache.binpb").read_bytes()
    for file in descriptor_pb2.FileDescriptorSet.FromString(recorded).file:
        pool.Add(file)

    def message_class(proto_path, full_name):
        if proto_path == "xla/autotune_cache.proto":
            return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
        return schema.message_class(proto_path, full_name)

    monkeypatch.setattr(results, "message_class", message_class)


@pytest.fixture(scope="module")
def cached() -> str:
    return (CACHE_FIXTURES / "h200-jax0.11.2-bf16-gelu.textproto").read_text()


def test_the_cache_format_is_read_with_its_own_schema(cache_schema, cached):
    parsed = results.parse(cached)
    assert parsed.format.message == "xla.autotuner.AutotuneCache" and len(parsed.entries()) == 6
    found = results.contents(cached)
    assert found.kinds == {"triton": 2, "block_level": 2, "native_emitter": 2}
    by_block_n = {p.chosen["block_n"]: p for p in found.tiles}
    assert by_block_n[32].chosen == {"block_m": 64, "block_n": 32, "block_k": 64, "num_stages": 1, "num_warps": 4}
    point = by_block_n[128]
    assert "split_k" not in point.chosen  # XLA left it unset: not offered
    assert point.device == "ed0e56ab8b2a0ecb" and point.sizes is None  # a fingerprint holds no dot sizes
    assert point.id == results.fusion_id("d379f9800758115bd6f1bbecc39879cf")
    assert point.values("block_m") == (64, 16, 32, 128, 256, 512)  # XLA's whole range, its choice first
    # A legacy-format text is still read with the legacy schema, beside the cache's.
    assert results.parse(FIXTURE.read_text()).format.message == "xla.AutotuneResults"


def test_the_cache_format_is_edited_merged_and_offered_like_the_legacy_one(cache_schema, cached):
    point = next(p for p in results.contents(cached).tiles if p.chosen["block_n"] == 128)
    edited = results.with_tiles(cached, {results.decision_id(point.id, "block_k"): 32})
    after = {p.id: p.chosen for p in results.contents(edited).tiles}
    assert after[point.id] == {**point.chosen, "block_k": 32}
    assert sum(a != b for a, b in zip(cached.splitlines(), edited.splitlines(), strict=False)) == 1
    with pytest.raises(results.ResultsError, match="left split_k unset"):
        results.with_tiles(cached, {results.decision_id(point.id, "split_k"): 2})
    f32 = (CACHE_FIXTURES / "h200-jax0.11.2-f32.textproto").read_text()
    both = results.parse(results.merged(cached, f32))
    keys = [both.format.key(e) for e in both.entries()]
    mine, theirs = ([p.format.key(e) for e in p.entries()] for p in (results.parse(cached), results.parse(f32)))
    assert keys[:6] == mine and len(keys) == len(set(keys)) == len(set(mine) | set(theirs)) > 6  # none twice
    with pytest.raises(results.ResultsError, match="cannot merge"):
        results.merged(cached, FIXTURE.read_text())
    stage = _tiles(make_stages())
    stage.pin(_context("cuda", lambda candidate: cached))
    decisions = stage.discover(_context("cuda", lambda candidate: cached), {}, [])
    assert {d.id.split("/")[1] for d in decisions} == {"block_m", "block_n", "block_k", "num_stages", "num_warps"}
    assert len(decisions) == 10 and stage.notes() == [
        "tiles: 2 fusion(s) with Triton tiles; left to XLA: 2 block_level, 2 native_emitter"]


def test_schemas_are_looked_for_in_jaxlib_then_in_each_installed_plugin(tmp_path, monkeypatch):
    from xtat.xla import schema

    plugin = tmp_path / "jax_plugins" / "xla_cuda13"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("")
    (plugin / "xla_cuda_plugin.so").write_bytes(b"\x7fELF")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "jax_plugins", raising=False)
    found = schema._libraries()
    assert [os.path.basename(path) for path in found[:3]] == ["libjax_common.so", "_jax.so", "xla_extension.so"]
    assert str(plugin / "xla_cuda_plugin.so") in found[3:]


def test_a_schema_only_a_plugin_embeds_is_read_from_the_plugin_with_what_it_imports(tmp_path, monkeypatch):
    """Real descriptors (the recorded plugin's) in two stand-in libraries: jaxlib's, with an older
    xla/autotuning.proto, and the CUDA plugin's with all of them."""
    from google.protobuf import descriptor_pb2

    from xtat.xla import schema

    files = descriptor_pb2.FileDescriptorSet.FromString(
        (CACHE_FIXTURES / "xla-0.11.2-autotune-cache.binpb").read_bytes()).file
    older = next(f for f in files if f.name == "xla/autotuning.proto")
    older = descriptor_pb2.FileDescriptorProto.FromString(older.SerializeToString())
    triton_key = next(m for m in next(m for m in older.message_type if m.name == "AutotuneResult").nested_type
                      if m.name == "TritonGemmKey")
    kept = [f for f in triton_key.field if f.name != "group_size"]
    del triton_key.field[:]
    triton_key.field.extend(kept)
    jaxlib, plugin = tmp_path / "libjax_common.so", tmp_path / "xla_cuda_plugin.so"
    jaxlib.write_bytes(b"\x7fELF" + older.SerializeToString() + b"\x00")
    plugin.write_bytes(b"\x7fELF" + b"".join(f.SerializeToString() + b"\x00" for f in files))
    monkeypatch.setattr(schema, "_libraries", lambda: [str(jaxlib), str(plugin)])
    for cached in (schema.library_with, schema._mapped, schema.schema_pool):
        cached.cache_clear()
    try:
        cache = schema.message_class("xla/autotune_cache.proto", "xla.autotuner.AutotuneCache")
        triton = cache.DESCRIPTOR.fields_by_name["entries"].message_type.fields_by_name["value"].message_type \
            .fields_by_name["optimal_config"].message_type.fields_by_name["backend_config"].message_type \
            .fields_by_name["triton"].message_type
        assert "group_size" in triton.fields_by_name  # the plugin's own autotuning.proto, not jaxlib's older one
        legacy = schema.message_class("xla/autotuning.proto", "xla.AutotuneResult.TritonGemmKey")
        assert "group_size" not in legacy.DESCRIPTOR.fields_by_name  # asked for alone: jaxlib's, found first
        with pytest.raises(RuntimeError, match="xla/nothing.proto not found in jaxlib or its plugins"):
            schema.library_with("xla/nothing.proto")
    finally:
        for cached in (schema.library_with, schema._mapped, schema.schema_pool):
            cached.cache_clear()


def test_a_cache_text_without_its_schema_names_what_is_missing(cached, monkeypatch):
    from xtat.xla import schema

    def legacy_only(proto_path, full_name):
        if proto_path == "xla/autotune_cache.proto":
            raise RuntimeError("descriptor of xla/autotune_cache.proto not found in jaxlib or its plugins")
        return schema.message_class(proto_path, full_name)

    monkeypatch.setattr(results, "message_class", legacy_only)
    with pytest.raises(results.ResultsError, match="no field named \"entries\".*autotune_cache.proto not found"):
        results.parse(cached)


# -- the stage -----------------------------------------------------------------------


def test_tiles_stage_is_last_and_offers_every_parameter_of_every_triton_fusion(recorded, fusions):
    assert STAGE_ORDER[-1] == "tiles" and STAGE_ORDER.index("codegen") < STAGE_ORDER.index("tiles")
    probed: list[Candidate] = []
    context = _context("cuda", lambda candidate: probed.append(candidate) or recorded)
    stage = _tiles(make_stages())
    stage.pin(context)
    assert stage.pinned == recorded and probed == [Candidate()]  # the default's results, dumped once
    decisions = stage.discover(context, {}, [])
    assert len(probed) == 1  # the default program: the pin's own fusions
    expected = {results.decision_id(p.id, name): p.values(name) for p in fusions.values()
                for name in results.PARAMETERS if len(p.values(name)) > 1}
    assert {d.id: d.values for d in decisions} == expected
    assert all(d.stage == "tiles" and d.default == d.values[0] for d in decisions)
    assert stage.notes() == ["tiles: 3 fusion(s) with Triton tiles; left to XLA: 1 gemm"]


def test_tiles_stage_dumps_again_for_a_program_earlier_stages_changed(recorded):
    context = _context("cuda", lambda candidate: recorded if not candidate.compile_options else "")
    stage = _tiles(make_stages())
    stage.pin(context)
    assert stage.discover(context, {"codegen": {"xla_gpu_enable_cublaslt": False}}, []) == []
    assert "no results" in stage.notes()[0]


def test_tiles_stage_has_nothing_off_gpu():
    def probe(candidate):
        raise AssertionError("no autotune results are dumped off GPU")

    stage = _tiles(make_stages())
    stage.pin(_context("cpu", probe))
    assert stage.discover(_context("cpu", probe), {}, []) == [] and stage.pinned == ""
    assert stage.apply({}, Candidate()) == Candidate()  # a CPU candidate is unchanged
    with pytest.raises(UserError, match="need the autotune results"):
        stage.apply({"fusion-000000000000/block_m": 64}, Candidate())


def test_every_candidate_loads_the_pin_and_a_tile_config_edits_it(recorded, fusions):
    stage = _tiles(make_stages())
    stage.pin(_context("cuda", lambda candidate: recorded))
    plain = stage.apply({}, Candidate())
    assert plain.process.autotune_results == recorded  # the default too: XLA does not autotune again
    tiled = stage.apply({results.decision_id(fusions[TINY].id, "block_m"): 16}, Candidate())
    assert {p.id: p.chosen for p in results.contents(tiled.process.autotune_results).tiles}[fusions[TINY].id][
        "block_m"] == 16
    # Another autotuning level autotunes afresh: nothing pinned, and tiles have no say.
    fresh = stage.apply({results.decision_id(fusions[TINY].id, "block_m"): 16},
                        Candidate(compile_options={"xla_gpu_exhaustive_tiling_search": True}))
    assert fresh.process.autotune_results == ""


def test_tiles_vet_refuses_untrusted_values():
    stage = TilesStage()
    fusion = "fusion-0123456789ab"
    assert stage.vet({f"{fusion}/block_m": 64}, "cuda", False) == []
    assert "not one of XLA's values" in stage.vet({f"{fusion}/block_m": 65}, "cuda", False)[0]
    assert "is for cpu" in stage.vet({f"{fusion}/block_m": 64}, "cpu", False)[0]
    assert "not a tile decision" in stage.vet({"../../etc/passwd": 64}, "cuda", False)[0]


# -- the process, the deploy path ------------------------------------------------------


def test_a_process_setup_hands_xla_its_results_file(recorded, monkeypatch):
    setup = ProcessSetup(autotune_results=recorded)
    flags = setup.environment({"XLA_FLAGS": "--xla_dump_to=x"})["XLA_FLAGS"].split()
    assert flags[0] == "--xla_dump_to=x" and flags[1].startswith(AUTOTUNE_FLAG + "=")
    assert Path(flags[1].split("=", 1)[1]).read_text() == recorded
    assert ProcessSetup.from_environment() == ProcessSetup()
    monkeypatch.setenv("XTAT_PROCESS_SETUP", setup.variables()["XTAT_PROCESS_SETUP"])
    assert ProcessSetup.from_environment() == setup  # what a worker or `xtat run` enters
    # The file named in XLA_FLAGS is the tiles stage's decision, not part of the environment's identity.
    monkeypatch.setenv("XLA_FLAGS", " ".join(flags))
    assert environment_identity()["xla_flags"] == "--xla_dump_to=x"


def test_deployment_applies_the_recorded_file_with_its_tiles(recorded, fusions):
    decision = results.decision_id(fusions[MLP].id, "block_k")
    final = results.with_tiles(recorded, {decision: 64})
    candidate = deployment({"tiles": {decision: 64}, "codegen": {"xla_gpu_enable_cublaslt": False}}, final)
    assert candidate.process.autotune_results == final
    assert candidate.compile_options == {"xla_gpu_enable_cublaslt": False}
    options = Lookup(Found.ADOPTED, candidate=candidate).options  # what xtat.jit compiles with
    assert Path(str(options[AUTOTUNE_OPTION])).read_text() == final
    assert Lookup(Found.ADOPTED, candidate=replace(candidate, process=ProcessSetup())).options == \
        {"xla_gpu_enable_cublaslt": False}
    with pytest.raises(results.ResultsError):
        deployment({}, "results { device: 1 }")
    with pytest.raises(UserError, match="need the autotune results"):
        deployment({"tiles": {decision: 64}}, "")


# -- the GPU codegen space ------------------------------------------------------------


def test_gpu_codegen_space_is_typed_by_this_xla():
    names = {d.id: d for d in codegen_space("cuda").decisions}
    for expected in ("xla_gpu_autotune_level", "xla_gpu_exhaustive_tiling_search", "xla_gpu_enable_triton_gemm",
                     "xla_gpu_cublas_fallback", "xla_gpu_enable_command_buffer", "xla_gpu_graph_min_graph_size",
                     "xla_gpu_enable_latency_hiding_scheduler", "xla_gpu_enable_while_loop_double_buffering",
                     "optimization_level", "memory_fitting_level"):
        assert expected in names, expected
    assert names["xla_gpu_autotune_level"].default == 4 and set(names["xla_gpu_autotune_level"].values) == \
        {0, 1, 2, 3, 4}
    assert names["optimization_level"].values == (0, 9, 19, 29, 39)  # jax's EffortLevel O0..O3
    assert "" in names["xla_gpu_enable_command_buffer"].values  # CUDA graphs off
    relaxing = {"xla_gpu_enable_fast_min_max", "xla_gpu_default_to_alg_dot_bf16_bf16_f32"}
    assert not relaxing & set(names)
    opted = {d.id: d for d in codegen_space("cuda", allow_numerics_change=True).decisions}
    assert relaxing <= set(opted) and all(opted[name].relaxes_numerics for name in relaxing)
    stage = CodegenStage()
    assert stage.vet({"xla_gpu_dump_autotune_results_to": "/tmp/x"}, "cuda", True)
    assert stage.vet({"xla_gpu_load_autotune_results_from": "/tmp/x"}, "cuda", True)
    assert stage.vet({"xla_gpu_default_to_alg_dot_bf16_bf16_f32": True}, "cuda", False)
    assert stage.vet({"xla_gpu_graph_min_graph_size": 20}, "cuda", False) == []


# -- workers ---------------------------------------------------------------------------


def test_gpu_workers_see_one_device_and_preallocate_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert measured_device("cuda") == "3" and measured_device("cpu") is None
    assert host_locks("cuda", "3") != host_locks("cuda", "5")
    pool = Pool(tmp_path, device="3")
    try:
        worker = pool.fresh(ProcessSetup())
        environ = environment_of(worker.pid)
        assert environ["CUDA_VISIBLE_DEVICES"] == "3" and environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    finally:
        pool.close()


def test_a_layout_over_several_gpus_gives_workers_those_gpus_and_times_under_each_ones_lock(tmp_path, monkeypatch):
    from xtat.tuning.session import worker_devices
    from xtat.tuning.settings import TuneSettings

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    assert measured_device("cuda", 2) == "3,5" and measured_device("cpu", 2) is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert measured_device("cuda", 2) == "0,1"
    assert worker_devices(TuneSettings(stages=("codegen",))) == 1  # no layouts: one GPU, as before
    locks = host_locks("cuda", "3,5")
    assert locks == host_locks("cuda", "3") + host_locks("cuda", "5")
    pool = Pool(tmp_path, device="3,5")
    try:
        worker = pool.fresh(ProcessSetup())
        environ = environment_of(worker.pid)
        assert environ["CUDA_VISIBLE_DEVICES"] == "3,5"
    finally:
        pool.close()
    probe = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)")
    with holding(locks):  # a run timing on GPU 5 alone waits for this one
        assert subprocess.run([sys.executable, "-c", probe, str(locks[1])]).returncode == 3
    assert subprocess.run([sys.executable, "-c", probe, str(locks[1])]).returncode == 0


def test_the_pool_closes_the_least_recently_used_worker(tmp_path, monkeypatch):
    monkeypatch.setattr(Pool, "MAX_WORKERS", 2)
    pool = Pool(tmp_path)
    setups = [ProcessSetup(autotune_results=f"version: {n}") for n in range(3)]
    try:
        first, _ = pool.get(setups[0])
        pool.get(setups[1])
        assert pool.get(setups[0]) == (first, False)  # used again: now the most recent
        pool.get(setups[2])
        deadline = time.monotonic() + 10
        while pool.live(setups[1]) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.live(setups[1]) is None and pool.live(setups[0]) is first
        assert len(pool.pids()) == 2
    finally:
        pool.close()


def test_the_autotune_probe_is_empty_on_cpu(tmp_path):
    captured = capture(tiny_mlp())
    runner = ProcessRunner(tmp_path, captured.exported, captured.inputs, None, lambda program, layout: b"",
                           60.0, 10.0, 20.0)
    try:
        assert runner.autotune_results(Candidate()) == ""  # XLA:CPU has no autotuner to dump
        assert not list(tmp_path.glob("autotune-*"))
        assert os.path.exists(tmp_path / "program.bin")
    finally:
        runner.close()


def test_a_jaxlib_without_the_schema_leaves_tiles_to_xla(monkeypatch):
    def missing(*args):
        raise RuntimeError("descriptor of xla/autotune_results.proto not found in jaxlib")

    def probe(candidate):
        raise AssertionError("nothing is dumped without a schema to read it with")

    monkeypatch.setattr(results, "message_class", missing)
    stage = _tiles(make_stages())
    stage.pin(_context("cuda", probe))
    assert stage.pinned == "" and stage.discover(_context("cuda", probe), {}, []) == []
    assert "not found in jaxlib" in stage.notes()[0]
