"""Run the tests as on a CPU where no codegen option changes an executable.

    PYTHONPATH=tests/inert_codegen .venv/bin/python -m pytest

Every Python process started with this folder on PYTHONPATH (pytest, and the
tuner's workers, which inherit the environment) compiles with the codegen
stage's CPU options removed from its compile options: every codegen config
then builds the default's executable, as some options do on some CPUs (the
vector width and opt preset on an AVX-512 EPYC and Xeon; issue 29). A test
that fails here relies on a codegen option changing this machine's code.
Passes (`xla_disable_hlo_passes`), program rewrites and runtime decisions are
untouched. A review harness, not collected by pytest.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import jax._src.compiler as _compiler


def _curated():
    """xtat's curated option table, loaded from its file: importing xtat here would put it in
    every process, the presets' xtat-free ones too."""
    package = importlib.util.find_spec("xtat")
    assert package and package.origin, "xtat is not importable"
    path = pathlib.Path(package.origin).parent / "stages" / "codegen" / "curated.py"
    spec = importlib.util.spec_from_file_location("_inert_codegen_curated", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_INERT = frozenset(option.name for option in _curated().CPU)
_original = _compiler.get_compile_options


def _without_codegen(*args, env_options_overrides=None, **kwargs):
    if env_options_overrides:
        env_options_overrides = {k: v for k, v in env_options_overrides.items() if k not in _INERT}
    return _original(*args, env_options_overrides=env_options_overrides, **kwargs)


_compiler.get_compile_options = _without_codegen
