"""The XTAT-M stages through the tuner: runtime environment, passes discovery, program
rewrites, formulations, and the ablation report. Real XLA, real workers."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import xtat
from tiny import FAST, tiny_mlp
from xtat.core.candidate import Candidate, ProcessSetup
from xtat.core.space import Decision, Space
from xtat.search.sweep import SweepThenRandom
from xtat.stages.base import concretize
from xtat.stages.passes import CSE_BARRIER_EXPANDER
from xtat.stages.registry import make_stages
from xtat.store.records import ResultDetail
from xtat.store.sql import Store


def _trials(db):
    store = Store.open(db, read_only=True)
    return store.trials(store.workloads()[0].id)


def test_the_registered_stages_are_in_the_order_the_command_line_offers():
    from xtat.stages.order import STAGE_ORDER
    from xtat.stages.registry import STAGES

    assert tuple(stage.name for stage in STAGES) == STAGE_ORDER


def test_configs_become_candidates_stage_by_stage():
    config = {"runtime": {"cpus": 1}, "passes": {"cse": True, CSE_BARRIER_EXPANDER: True},
              "codegen": {"xla_cpu_prefer_vector_width": 128}, "program": {"knob:block": 4}}
    candidate = concretize(make_stages(), config)
    assert candidate.compile_options == {"xla_disable_hlo_passes": f"cse,{CSE_BARRIER_EXPANDER}",
                                         "xla_cpu_prefer_vector_width": 128}
    assert candidate.program == {"knob:block": 4}
    assert candidate.process == ProcessSetup(cpus=1)
    assert concretize(make_stages(), {}) == Candidate()
    devices = concretize(make_stages(), {"runtime": {"host_devices": 2}})
    assert devices.process == ProcessSetup(host_devices=2)


def test_the_worker_applies_the_host_device_count_before_jax_starts():
    import subprocess
    import sys

    code = ("from xtat.core.candidate import ProcessSetup; ProcessSetup.from_environment().enter(); "
            "import jax, os; print(jax.local_device_count('cpu'), os.environ['XLA_FLAGS'])")
    env = {**__import__("os").environ, **ProcessSetup(host_devices=3).variables(),
           "XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=5"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    # The tuned count replaces any earlier one; the user's other flags stay.
    assert out.split() == ["3", "--xla_cpu_enable_fast_math=false", "--xla_force_host_platform_device_count=3"]


def test_conditional_decisions_are_dropped_when_inactive_and_probed_as_no_ops():
    parent = Decision("passes", CSE_BARRIER_EXPANDER, (False, True), False)
    child = Decision("program", "barrier@1", (False, True), False, requires=(("passes", CSE_BARRIER_EXPANDER, True),))
    space = Space((parent, child))
    assert space.canonical({"program": {"barrier@1": True}}) == {}
    both = {"passes": {CSE_BARRIER_EXPANDER: True}, "program": {"barrier@1": True}}
    assert space.canonical(both) == both
    sweep = SweepThenRandom([parent, child], canonical=space.canonical)
    asked = [sweep.ask() for _ in range(3)]
    assert asked == [{}, {"passes": {CSE_BARRIER_EXPANDER: True}}, both]  # the child's sweep sets its parent
    for config in asked:
        sweep.tell(config, 1.0, same_as={} if config != {} else None)
    sweep.ask()
    assert sweep.no_ops == [f"passes.{CSE_BARRIER_EXPANDER}", "program.barrier@1"]
    staged = SweepThenRandom([child], searchable=lambda stage, id: stage == "program")
    assert staged.inactive == [child]


@pytest.mark.slow  # ~30 s; the default run times a pinned worker in test_loop.py and confirms a runtime
# setup in test_confirmation.py
def test_runtime_stage_pins_the_worker_and_passes_are_discovered(db):
    # What is checked is the search's discovery and pinning: one finalist, a setup factor from the
    # run's own pair of workers (`setup_pairs` is tested in test_loop and test_confirmation).
    result = xtat.tune(tiny_mlp(), db=db, budget=8, stages=("runtime", "passes"), finalists=1,
                       **{**FAST, "setup_pairs": 1})
    trials = _trials(db)
    configs = [t.config for t in trials]
    assert {"runtime": {"cpus": 1}} in configs or len(__import__("os").sched_getaffinity(0)) == 1
    passes = {id for c in configs for id in c.get("passes", {})}
    assert passes, configs  # some optimisation pass ran on this program and was offered
    assert all(t.status in ("ok", "duplicate", "compile_error", "wrong_result") for t in trials)
    pinned = next((t for t in trials if t.config == {"runtime": {"cpus": 1}}), None)
    if pinned is not None:  # same machine code, other environment: measured, not a duplicate
        assert pinned.status == "ok" and pinned.same_as is None
    assert result.trials


def _knobbed(x, w):
    block = xtat.knob("block", (8, 16, 32), 32)
    parts = [jnp.tanh(x[i:i + block] @ w) for i in range(0, x.shape[0], block)]
    return jnp.concatenate(parts).sum()


def test_program_stage_knobs_are_tuned_and_applied_by_jit(db):
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((64, 32), dtype=np.float32), rng.standard_normal((32, 32), dtype=np.float32))
    xtat.tune(xtat.Workload(_knobbed, args, name="knobbed"), db=db, budget=4, stages=("program",), **FAST)
    configs = [t.config for t in _trials(db)]
    assert {"program": {"knob:block": 8}} in configs and {"program": {"knob:block": 16}} in configs
    store = Store.open(db)
    store.add_result(store.workloads()[0].id, None, True, {"program": {"knob:block": 8}}, 1, 1, (1.2, 1.1, 1.3),
                     ResultDetail())
    store.close()
    tuned = xtat.jit(_knobbed, db=db)
    np.testing.assert_allclose(tuned(*args), _knobbed(*args), rtol=1e-5)
    assert tuned.lookups()[0].candidate.program == {"knob:block": 8}


@pytest.mark.parametrize("formulation", ["staged", "alternating"])
def test_staged_formulations_freeze_earlier_stages(db, formulation):
    result = xtat.tune(tiny_mlp(), db=db, budget=8, stages=("program", "codegen"), formulation=formulation,
                       options=("xla_cpu_prefer_vector_width", "xla_backend_optimization_level"), **FAST)
    trials = _trials(db)
    # staged spends the whole budget; alternating stops after a round without improvement
    assert len(trials) == 8 if formulation == "staged" else 3 <= len(trials) <= 8
    assert sum(result.trials.values()) == len(trials)
    assert all(t.status != "running" for t in trials)
    assert {"codegen"} <= {stage for t in trials for stage in t.config}  # the later stage was reached


@pytest.mark.slow  # ~15 s; the default run explains an adopted config in test_cli.py's contract test
def test_explain_reports_each_stage_share(db, monkeypatch):
    monkeypatch.setenv("XTAT_FAULT", "default:run:slow")  # TEST-ONLY: every candidate beats the default
    config = {"codegen": {"xla_cpu_prefer_vector_width": 128}, "runtime": {"cpus": 1}}
    store = Store.open(db)
    from xtat.capture.workload import capture

    identity = capture(tiny_mlp()).identity
    wid = store.upsert_workload(identity.fingerprint, identity.program, "tiny_mlp", identity.env, {})
    store.add_result(wid, None, True, config, 1, 1, (1.2, 1.1, 1.3), ResultDetail())
    store.close()
    from xtat.tuner import TuneSettings
    from xtat.tuning.ablation import explain

    report = explain(tiny_mlp(), db=db, settings=TuneSettings(rounds=5, min_sample_s=0.005))
    assert set(report.variants) == {"adopted", "without codegen", "without runtime"}
    assert report.variants["adopted"].speedup_ci[0] > 1.0
    assert set(report.stage_shares) == {"codegen", "runtime"}
    assert type(report).from_json(report.to_json()) == report


def test_jit_names_the_runtime_environment_it_was_not_tuned_under():
    import jax

    assert ProcessSetup(host_devices=1).mismatch(jax.local_device_count("cpu")) is None
    message = ProcessSetup(host_devices=4).mismatch(jax.local_device_count("cpu"))
    assert "4 host device(s)" in message and "xtat run --" in message
