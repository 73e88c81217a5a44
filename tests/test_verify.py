"""The verification policy (runner/verify.py): wrong elements cannot hide behind a large one,
legitimate reordering passes, chaotic outputs get a calibrated budget, and a failure says
which rule failed, where and by how much."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xtat.runner.verify import Budget, LeafBudget, Rule, Tolerance, calibrate, compare, perturbed


def rules(result) -> set[Rule]:
    return {m.rule for m in result.mismatches}


def test_a_large_element_does_not_hide_wrong_small_ones():
    # The first example of issue 15: passed the old 1e-3 x max|leaf| floor.
    want = [np.array([1000, 0.5, -0.2, 0.001], np.float32)]
    got = [np.array([1000, 1.4, 0.7, 0.9], np.float32)]
    result = compare(got, want, Tolerance())
    assert not result.ok and Rule.ELEMENT in rules(result)
    element = next(m for m in result.mismatches if m.rule is Rule.ELEMENT)
    assert element.output == 0 and element.index == (2,) and element.measured == 3  # three wrong values
    assert "0.7 vs -0.2" in element.detail


def test_many_elements_five_times_too_large_are_rejected():
    # The second example: one element at 50, 999 elements five times too large.
    want = np.full(1000, 0.01, np.float32)
    want[0] = 50
    got = want * 5
    got[0] = 50
    result = compare([got], [want], Tolerance())
    assert not result.ok and {Rule.ELEMENT, Rule.SPREAD, Rule.NORM} <= rules(result)


def test_a_small_error_on_most_elements_is_caught_by_the_spread_rule():
    # Each small element 1% off: within the RMS floor, but almost every element moved.
    want = np.array([10.0] + [0.1] * 99, np.float32)
    got = want.copy()
    got[1:] *= 1.01
    result = compare([got], [want], Tolerance())
    assert rules(result) == {Rule.SPREAD}


def test_an_error_norm_beyond_the_bound_is_caught_by_the_norm_rule():
    # Every element off by 0.95 of its element bound and in the same direction: each one passes,
    # the spread rule is relaxed by the caller's budget, the leaf as a whole is 1.05e-3 off.
    want = np.ones(100, np.float32)
    got = want + 0.95 * (1e-5 + 1e-4 + 1e-3)
    budget = Budget((LeafBudget(spread=1.0),), 1, 4.0)
    result = compare([got.astype(np.float32)], [want], Tolerance(), budget)
    assert rules(result) == {Rule.NORM}, result.message


def test_a_leaf_of_rounding_noise_passes_though_it_differs_entirely():
    # Adam's moments of a bias whose gradient cancels (mlp-mixer/train: RMS 8e-11 and 1e-21): two
    # summation orders give unrelated noise, a relative error near 1, every element far below atol.
    rng = np.random.default_rng(7)
    mu, nu = (rng.normal(scale=s, size=(2, 64)).astype(np.float32) for s in (1e-10, 1e-21))
    assert compare([mu[0], nu[0]], [mu[1], nu[1]], Tolerance()).ok
    # Errors of RMS beyond atol are not noise, however small the values.
    want = np.full(64, 1e-7, np.float32)
    assert rules(compare([want + 3e-5], [want], Tolerance())) >= {Rule.NORM}


def test_legitimate_reordering_passes():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(64, 512)).astype(np.float32)
    b = rng.normal(size=(512, 32)).astype(np.float32)
    want = a @ b
    # The same products summed in another order (blocked, reversed), as another kernel would.
    got = sum(a[:, k:k + 64] @ b[k:k + 64] for k in reversed(range(0, 512, 64)))
    assert not np.array_equal(got, want)
    assert compare([got], [want], Tolerance()).ok
    # Adam-like: a near-zero gradient element amplified into an update of a few ulps of the leaf's scale.
    params = rng.normal(scale=0.1, size=1000).astype(np.float32)
    moved = params.copy()
    moved[::100] += np.float32(2e-6)
    assert compare([moved], [params], Tolerance()).ok


def test_adam_sign_flips_pass_in_a_large_leaf_but_not_many_nor_large_ones():
    # Adam's first step moves each parameter by +-lr: a near-zero gradient whose sign a reordering
    # flips moves it by 2*lr, far beyond the element bound (as in ResNet-18 with `algsimp` off).
    params = np.random.default_rng(3).normal(scale=0.05, size=50_000).astype(np.float32)
    flipped = params.copy()
    flipped[[7, 1000, 40_000]] += np.float32(2e-3)
    assert compare([flipped], [params], Tolerance()).ok  # 3 of 50,000: within 1 in 10,000
    many = params.copy()
    many[:10] += np.float32(2e-3)
    assert rules(compare([many], [params], Tolerance())) == {Rule.ELEMENT}  # 10 > 5
    large = params.copy()
    large[7] += np.float32(1.0)
    assert rules(compare([large], [params], Tolerance())) == {Rule.NORM}  # one outlier, but far off
    # A leaf of a few thousand (halonet/train's 4096-element attention kernel: one update moved
    # under another dot library) may hold one; not two, and a leaf under a thousand none.
    kernel = params[:4096]
    one, two = kernel.copy(), kernel.copy()
    one[9] += np.float32(2e-3)
    two[[9, 99]] += np.float32(2e-3)
    assert compare([one], [kernel], Tolerance()).ok
    assert rules(compare([two], [kernel], Tolerance())) == {Rule.ELEMENT}
    assert Rule.ELEMENT in rules(compare([one[:999]], [kernel[:999]], Tolerance()))


def test_the_near_zero_rule_is_relative_to_the_leaf_rms_not_its_max():
    want = np.array([1000.0] + [1.0] * 9, np.float32)
    got = want.copy()
    got[3] = 1.5  # half a unit off: 0.05% of the max, but 0.16% of the RMS (316)
    assert not compare([got], [want], Tolerance()).ok


def test_a_scalar_a_tenth_of_a_percent_off_fails_and_a_reassociated_one_passes():
    # Issue 33: a float32 loss summed from 262,144 terms. Summed in another order it moves by
    # about 1e-7 relative; a dropped term or a wrong mean moves it by 1e-3, which the RMS floor
    # (for a scalar, its own magnitude) used to let through.
    terms = np.random.default_rng(5).normal(size=262_144).astype(np.float32) ** 2
    want = np.sum(terms, dtype=np.float32)
    blocked = np.cumsum(terms.reshape(512, 512).sum(axis=0, dtype=np.float32), dtype=np.float32)[-1]
    sequential = np.cumsum(terms, dtype=np.float32)[-1]  # the worst order: 7e-5 relative here
    for reordered in (blocked, sequential):
        assert reordered != want and compare([reordered], [want], Tolerance()).ok
    result = compare([np.float32(want * np.float32(1.001))], [want], Tolerance())
    assert rules(result) == {Rule.SPREAD}
    # A near-zero element of a small leaf may still lean on the floor (a cancellation), as may a
    # scalar whose calibration saw one-ulp input changes move it beyond rtol.
    small = np.array([3.0, 4.0, 1e-4], np.float32)
    moved = small + np.array([0, 0, 2e-3], np.float32)
    assert compare([moved], [small], Tolerance()).ok
    calibrated = Budget((LeafBudget(spread=1.0),), perturbations=3, factor=4.0)
    assert compare([np.float32(want * np.float32(1.0005))], [want], Tolerance(), calibrated).ok


def test_structure_exact_nan_and_inf_rules():
    want = [np.array([1.0, np.nan, np.inf], np.float32), np.array([1, 2], np.int32)]
    assert rules(compare([want[0], np.array([1, 3], np.int32)], want, Tolerance())) == {Rule.EXACT}
    assert rules(compare([np.array([np.nan, 1, np.inf], np.float32), want[1]], want, Tolerance())) == {Rule.NAN}
    assert rules(compare([np.array([1, np.nan, -np.inf], np.float32), want[1]], want, Tolerance())) == {Rule.INF}
    assert rules(compare([want[0]], want, Tolerance())) == {Rule.STRUCTURE}


def test_perturbation_moves_each_nonzero_float_one_ulp_and_nothing_else():
    leaves = [np.array([1.0, 0.0, -2.5, np.inf], np.float32), np.array([3, 4], np.uint32)]
    moved = perturbed(leaves, seed=0)
    ulps = np.abs(moved[0][[0, 2]].view(np.int32) - leaves[0][[0, 2]].view(np.int32))
    assert list(ulps) == [1, 1]
    assert moved[0][1] == 0 and np.isinf(moved[0][3]) and np.array_equal(moved[1], leaves[1])


def test_calibration_widens_only_the_outputs_a_perturbation_moved():
    rng = np.random.default_rng(1)
    steady = rng.normal(size=200).astype(np.float32)
    chain = rng.normal(size=200).astype(np.float32)
    # A perturbed run: the steady output moves by an ulp, the chaotic one diverges after step 190.
    diverged = chain.copy()
    diverged[190:] = rng.normal(size=10).astype(np.float32)
    run = compare([np.nextafter(steady, np.inf), diverged], [steady, chain], Tolerance())
    assert not run.ok  # the default policy alone would reject the default's own spread
    budget = calibrate([run], 2)
    assert budget.leaf(0) == LeafBudget() and budget.widened == [1]
    assert budget.leaf(1).outliers >= 10 and budget.leaf(1).excess > 1
    assert "output 1" in budget.describe()
    # A candidate that diverges a little earlier passes; one wrong everywhere does not.
    earlier = chain.copy()
    earlier[185:] = rng.normal(size=15).astype(np.float32)
    assert compare([steady, earlier], [steady, chain], Tolerance(), budget).ok
    assert not compare([steady, -chain], [steady, chain], Tolerance(), budget).ok
    # The steady output keeps the default policy.
    assert not compare([steady * 1.01, chain], [steady, chain], Tolerance(), budget).ok
    assert Budget.from_json(json.loads(json.dumps(budget.to_json()))) == budget


def test_a_user_tolerance_relaxes_the_element_and_norm_bounds():
    want = np.ones(10, np.float32)
    got = want * 1.01
    assert not compare([got], [want], Tolerance()).ok
    assert compare([got], [want], Tolerance(rtol=0.05)).ok


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_one_ulp_everywhere_passes_in_every_float_dtype(dtype):
    want = np.random.default_rng(2).normal(size=500).astype(dtype)
    assert compare([np.nextafter(want, np.inf)], [want], Tolerance()).ok


# -- end to end: a chaotic program's right answers pass, a wrong steady output still fails --

def logistic_map(x0, weights):
    """A chaotic recurrence (logistic map, r = 3.9) and a steady output beside it. The knob
    picks how r*x*(1-x) is rounded (two right answers whose trajectories part after some
    steps) or a wrong steady output."""
    import jax

    import xtat

    form = xtat.knob("form", ("factored", "expanded", "wrong_steady"), "factored")

    def step(x, _):
        nxt = 3.9 * x * (1.0 - x) if form == "factored" else 3.9 * x - 3.9 * x * x
        return nxt, nxt

    _, path = jax.lax.scan(step, x0, None, length=300)
    steady = weights * (2.0 if form != "wrong_steady" else 2.02)
    return path, steady


def test_a_chaotic_output_gets_a_budget_and_a_wrong_steady_output_still_fails(db):
    import sqlite3

    import xtat
    from tiny import FAST

    x0 = np.linspace(0.1, 0.9, 64, dtype=np.float32)
    weights = np.linspace(-1, 1, 64, dtype=np.float32)
    workload = xtat.Workload(logistic_map, (x0, weights), name="logistic-map",
                             make_inputs=lambda seed: (np.random.default_rng(seed).uniform(0.1, 0.9, 64).astype(
                                 np.float32), weights))
    result = xtat.tune(workload, db=db, stages=("program",), budget=3, **FAST)
    assert any("verification budget" in note and "output 0" in note for note in result.notes), result.notes
    with sqlite3.connect(db) as con:
        rows = dict(con.execute("SELECT config, status FROM trials").fetchall())
        detail = json.loads(con.execute("SELECT detail FROM results").fetchone()[0])
    by_form = {json.loads(config).get("program", {}).get("knob:form", "factored"): status
               for config, status in rows.items()}
    assert by_form["expanded"] in ("ok", "duplicate")  # the chaotic output moved, within its budget
    assert by_form["wrong_steady"] == "wrong_result"  # the steady output keeps the default policy
    assert detail["verification"]["leaves"][0]["outliers"] > 0 and detail["verification"]["leaves"][1]["outliers"] == 0


def scalar_loss(x, form: str = "sum"):
    import jax.numpy as jnp

    import xtat

    form = xtat.knob("form", ("sum", "chunked", "scaled"), "sum")
    squares = x * x
    if form == "chunked":  # the same terms, summed in another order: another program
        return jnp.sum(jnp.sum(squares.reshape(512, 512), axis=0)) / x.size
    loss = jnp.sum(squares) / x.size
    return loss * 1.001 if form == "scaled" else loss


def test_a_loss_a_tenth_of_a_percent_off_is_a_wrong_result_and_reassociation_is_not(db):
    import sqlite3

    import xtat
    from tiny import FAST

    def inputs(seed):
        return (np.random.default_rng(seed).normal(size=262_144).astype(np.float32),)

    workload = xtat.Workload(scalar_loss, inputs(0), name="scalar-loss", make_inputs=inputs)
    xtat.tune(workload, db=db, stages=("program",), budget=3, **FAST)
    with sqlite3.connect(db) as con:
        rows = dict(con.execute("SELECT config, status FROM trials").fetchall())
    by_form = {json.loads(config).get("program", {}).get("knob:form", "sum"): status for config, status in rows.items()}
    assert by_form["chunked"] in ("ok", "duplicate") and by_form["scaled"] == "wrong_result", by_form
