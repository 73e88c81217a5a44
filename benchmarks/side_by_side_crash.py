"""Does a config's executable crash its worker when it runs side by side? Each config given is placed
beside the default in fresh workers (`ProcessRunner.interleave`, as the finalists are), `--tries`
times, then all of them together in one worker; prints each try's outcome and the build the failure
names (`WorkerFailure.build`). Run with PYTHONFAULTHANDLER=1 to have a crashed worker's Python stack
in its log (the run folder is printed).

    .venv/bin/python benchmarks/side_by_side_crash.py suite:gpt/train \\
        --config '{"passes": {"algsimp": true, "cse": true}}' --config '{"passes": {"algsimp": true}}' [--tries 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--config", action="append", required=True, help="a config in the tuner's form (JSON)")
    parser.add_argument("--tries", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    options = parser.parse_args()
    configs = []
    for text in options.config:
        try:
            config = json.loads(text)
        except json.JSONDecodeError as error:
            parser.error(f"--config {text!r} is not JSON ({error}): give a config as `xtat show` prints one")
        if not isinstance(config, dict):
            parser.error(f"--config {text!r} is not a JSON object: give a config as `xtat show` prints one")
        configs.append(config)

    from xtat.capture.targets import load_target
    from xtat.capture.workload import capture
    from xtat.core.candidate import Candidate
    from xtat.core.space import config_id
    from xtat.runner.base import DEFAULT_ID, WorkerFailure
    from xtat.runner.process import ProcessRunner
    from xtat.stages.base import concretize
    from xtat.stages.registry import make_stages
    from xtat.tuning.settings import TuneSettings

    folder = Path(tempfile.mkdtemp(prefix="side-by-side-crash-"))
    captured = capture(load_target(options.target))
    stages = make_stages()
    builds = [(config_id(config), concretize(stages, config)) for config in configs]
    runner = ProcessRunner(folder, captured.exported, captured.inputs, captured.verify_inputs,
                           lambda program, layout: b"", 120.0, 10.0, 60.0)
    timing = TuneSettings().timing
    runner.start()
    try:
        for attempt in range(options.tries):
            for config, build in zip(configs, builds):
                placed = [(DEFAULT_ID, Candidate()), build]
                try:
                    runner.interleave(placed, options.rounds, timing)
                    print(f"try {attempt}: {json.dumps(config)} beside the default: ran", flush=True)
                except WorkerFailure as failure:
                    print(f"try {attempt}: {json.dumps(config)} beside the default: {failure.status} "
                          f"({failure.error.splitlines()[0][:80]}), naming build {failure.build}", flush=True)
            try:
                runner.interleave([(DEFAULT_ID, Candidate()), *builds], options.rounds, timing)
                print(f"try {attempt}: all {len(builds)} in one worker: ran", flush=True)
            except WorkerFailure as failure:
                named = next((json.dumps(c) for c, (id, _) in zip(configs, builds) if id == failure.build),
                             failure.build)
                print(f"try {attempt}: all {len(builds)} in one worker: {failure.status}, naming {named}", flush=True)
    finally:
        runner.close()
    print(f"workers' logs: {folder}")


if __name__ == "__main__":
    main()
