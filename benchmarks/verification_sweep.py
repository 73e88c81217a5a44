"""Which configs the verification policy rejects: every curated codegen option value that does
not relax numerics (and, with --passes, every discovered pass that the passes stage
may switch off, switched off) on suite and gallery workloads.

    .venv/bin/python benchmarks/verification_sweep.py [--passes] [--out FILE.json] SPEC...

SPEC is a suite workload (`nuts-logistic/train`), `suite` (every train and inference
step), `mcmc` (the four Bayesian workloads, both forms), a target as `xtat tune` takes it
(`examples/optax_loop.py:make`) or `gallery` (every `examples/*.py:make`). Each config is compiled in a
worker and checked against the default's outputs on both input sets, exactly as the tuner
checks a candidate (no timing). A config that does not compile is counted apart. Run it
with PYTHONPATH pointing at an older checkout to count what an older policy rejected.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path

from xtat.capture.targets import load_target
from xtat.capture.workload import capture
from xtat.core.candidate import Candidate
from xtat.runner.protocol import Failed, InputSet
from xtat.runner.verify import Tolerance
from xtat.stages.base import concretize
from xtat.stages.codegen.curated import BY_PLATFORM
from xtat.stages.passes import SAFE
from xtat.stages.registry import make_stages
from xtat.suite import FORMS, entries, suite_workload
from xtat.tuning.session import open_runner
from xtat.tuning.settings import TuneSettings

MCMC = ("hmc-logistic", "nuts-logistic", "eight-schools", "gaussian-mixture")
GALLERY = Path(__file__).resolve().parent.parent / "examples"


def codegen_configs() -> list[dict]:
    return [{"codegen": {option.name: value}} for option in BY_PLATFORM["cpu"] if not option.relaxes_numerics
            for value in option.values]


def sweep(spec: str, passes: bool) -> dict:
    captured = capture(load_target(spec) if ":" in spec else suite_workload(spec))
    stages = make_stages()
    rows = []
    with open_runner(captured, TuneSettings()) as runner:
        runner.start()
        configs = codegen_configs()
        if passes:
            # The passes the passes stage offers: those that ran, of the ones it may switch off.
            configs += [{"passes": {name: True}} for name in runner.passes_that_ran(Candidate()) if name in SAFE]
        for number, config in enumerate(configs):
            candidate = concretize(stages, config)
            row: dict = {"config": config}
            built = runner.build(f"c{number}", candidate)
            if isinstance(built, Failed):
                row.update(status=built.status.value, error=built.error[:300])
            else:
                replies = [runner.verify(f"c{number}", candidate, Tolerance(), input_set=name)
                           for name in InputSet]
                runner.release(f"c{number}", candidate)
                checks = [r.check for r in replies if r.check is not None]
                failed = next((r for r in replies if isinstance(r, Failed)), None)
                row.update(status="ok" if failed is None else failed.status.value,
                           mismatch=None if failed is None else failed.error,
                           rules=sorted({m["rule"] for c in checks if not c.verified for m in c.mismatches}),
                           closest={k: max((c.closest.get(k, 0.0) for c in checks), default=0.0)
                                    for k in ("excess", "spread", "norm")})
            rows.append(row)
    return {"workload": spec, "budget": runner.budget.describe(), "configs": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="+")
    parser.add_argument("--passes", action="store_true", help="also switch off each discovered pass")
    parser.add_argument("--out", help="write every row as JSON here")
    args = parser.parse_args()
    specs: list[str] = []
    for spec in args.specs:
        names = list(entries()) if spec == "suite" else list(MCMC) if spec == "mcmc" else None
        if spec == "gallery":
            specs += [f"{os.path.relpath(path)}:make" for path in sorted(GALLERY.glob("*.py"))]
        else:
            specs += [f"{n}/{f}" for n in names for f in FORMS] if names else [spec]
    results, started = [], time.perf_counter()
    for spec in specs:
        result = sweep(spec, args.passes)
        results.append(result)
        counts = Counter(r["status"] for r in result["configs"])
        print(f"{spec}: {dict(sorted(counts.items()))}  budget: {result['budget']}", flush=True)
        for row in result["configs"]:
            if row["status"] == "wrong_result":
                print(f"    wrong_result {json.dumps(row['config'])}: {row['mismatch']}", flush=True)
    passed = [r["closest"] for result in results for r in result["configs"] if r["status"] == "ok" and "closest" in r]
    if passed:  # the margins of the policy on configs it accepted
        print("closest accepted: " + ", ".join(f"{k} {max(c[k] for c in passed):.3g}" for k in passed[0]))
    total = Counter(r["status"] for result in results for r in result["configs"])
    print(f"all {len(specs)} workloads: {dict(sorted(total.items()))} in {time.perf_counter() - started:.0f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
