"""The pieces of one tuning run, in the order data flows through them.

- `settings`: what a run is asked to do (`TuneSettings`);
- `loop`: the search loop and the XTAT-M formulations (ask a strategy, measure or
  resume each config, tell it the result);
- `measure`: one config compiled, deduplicated, verified and timed in a worker;
- `adoption`: the finalists re-measured interleaved with the default, re-verified,
  and adopted only when significantly faster;
- `result`: what the run returns (`TuneResult`, `TrialEvent`).

`xtat.tuner.tune` wires them to a store and a worker session.
"""
