"""The codegen stage's space: the curated XLA options of a platform, typed by the installed XLA."""

from __future__ import annotations

import warnings

from xtat.core.errors import UserError
from xtat.core.space import Decision, Space
from xtat.stages.codegen import catalog
from xtat.stages.codegen.curated import BY_PLATFORM

CODEGEN = "codegen"


def _typed(info: catalog.OptionInfo, value: object) -> object:
    """Coerce a curated value to the type XLA expects, or raise ValueError."""
    if info.kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"expects a bool, got {value!r}")
        return value
    if info.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expects an int, got {value!r}")
        return value
    if info.kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"expects a float, got {value!r}")
        return float(value)
    if info.kind == "enum":
        names = [v for v in str(value).split(",") if v] if info.repeated else [str(value)]
        unknown = [n for n in names if n not in info.enum_values]
        if unknown:
            raise ValueError(f"unknown enum value(s) {unknown}; valid: {list(info.enum_values)}")
        return ",".join(names) if info.repeated else names[0]
    return str(value)


def default_value(info: catalog.OptionInfo) -> object:
    if info.repeated and isinstance(info.default, (list, tuple)):
        return ",".join(str(v) for v in info.default)
    return info.default


def codegen_space(platform: str, allow_numerics_change: bool = False, only: tuple[str, ...] | None = None) -> Space:
    """Curated XLA options for this platform, typed by the installed XLA.

    `only` restricts the space to the named curated options.
    """
    options = {**catalog.debug_options(), **catalog.build_options()}
    if only is not None:
        curated_names = {c.name for c in BY_PLATFORM.get(platform, ())}
        unknown = sorted(set(only) - curated_names)
        if unknown:
            raise UserError(
                f"--options names {unknown}, which are not searchable on {platform}; "
                f"choose from: {', '.join(sorted(curated_names))}"
            )
    decisions, missing = [], []
    for curated in BY_PLATFORM.get(platform, ()):
        info = options.get(curated.name)
        if info is None:
            missing.append(curated.name)
            continue
        if only is not None and curated.name not in only:
            continue
        if curated.relaxes_numerics and not allow_numerics_change:
            if only is not None:
                raise UserError(f"{curated.name} relaxes numerics: add --allow-numerics-change and a tolerance")
            continue
        default = default_value(info)
        values = tuple(dict.fromkeys([default, *(_typed(info, v) for v in curated.values)]))
        if len(values) > 1:
            decisions.append(Decision(CODEGEN, curated.name, values, default, curated.relaxes_numerics))
    if missing:
        warnings.warn(
            f"xtat: this XLA has no option(s) {', '.join(missing)}; left out of the search",
            stacklevel=2,
        )
    return Space(tuple(decisions), tuple(missing))
