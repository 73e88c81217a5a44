"""Does a config's time depend on what else its worker process built and ran?

    .venv/bin/python benchmarks/process_history.py FOLDER TARGET [--repeats 3]

FOLDER is one workload's folder of an `xtat compare --db DIR` campaign (it holds
`remeasured.json`); TARGET is that workload, as for `xtat tune`. The config that
re-measured fastest there is measured side by side with the default
(`xtat.tuning.side_by_side`, the adoption procedure) in two kinds of session,
alternating, each in fresh workers:

- alone: the default and that config only (what a tuning run's finalisation sees,
  give or take two more finalists);
- with all: the default and every incumbent of the campaign's runs on the workload
  (what `xtat compare`'s re-measurement sees).

If the two disagree, a config's time depends on the history of the process it runs
in, not only on its own executable. Found on gaussian-mixture/inference, whose
re-measured speedups were about 2.5x its runs' own final speedups.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from xtat.capture.targets import load_target
from xtat.capture.workload import capture
from xtat.compare.remeasure import remeasured_path, speedups_only
from xtat.stages.registry import make_stages
from xtat.tuning.session import open_runner
from xtat.tuning.settings import TuneSettings
from xtat.tuning.side_by_side import side_by_side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("target")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not remeasured_path(args.folder).exists():
        parser.error(f"{args.folder} has no remeasured.json: give a workload folder of an `xtat compare --db DIR` "
                     "campaign whose runs found an incumbent (its re-measurement writes the file)")
    measured = speedups_only(json.loads(remeasured_path(args.folder).read_text())["speedups"])
    top = max(measured, key=measured.__getitem__)
    settings = TuneSettings()
    captured = capture(load_target(args.target))
    print(f"{len(measured)} incumbents; the fastest re-measured {measured[top]:.2f}x")
    for repeat in range(args.repeats):
        for label, keys in (("alone", [top]), ("with all", sorted(measured))):
            with open_runner(captured, settings, verify_inputs=False) as runner:
                result = side_by_side(runner, make_stages(), {key: json.loads(key) for key in keys}, settings)
            mine = result.configs[top].figures
            assert result.default is not None and mine is not None, result.configs[top].error
            print(f"repeat {repeat} {label:8s}: default {result.default.median_s * 1e3:.3f} ms, "
                  f"fastest incumbent {mine.median_s * 1e3:.3f} ms, speedup {mine.speedup:.2f}x", flush=True)


if __name__ == "__main__":
    main()
