"""The `xtat` command. `main` starts `xtat run` at once where it can (`apply.launch.fast_run`: no
jax, no store library), and the whole command line (`cli.app`) otherwise."""

import sys


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        from xtat.apply.launch import fast_run

        fast_run(sys.argv[2:])  # returns only where the full command must decide
    from xtat.cli.app import main as full

    full()
