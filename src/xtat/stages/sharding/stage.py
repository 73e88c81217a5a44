"""Sharding stage: where the workload's named dimensions go on a mesh of the devices it sees.

It runs when the tuner's process sees more than one device (on CPU: started with
`--xla_force_host_platform_device_count`, which its workers inherit; on GPU: several visible GPUs).
Its one decision, `layout`, takes every valid layout of the workload's declared dimensions
(`layouts.enumerate_layouts`: each mesh shape, each mapping of names to its axes that divides every
dimension it splits and never puts two axes of one array on one mesh axis), and "" for jax's own
placement, the default: every input on one device, as plain `jax.jit` runs it. A candidate's inputs
are placed on its layout's mesh and XLA's SPMD partitioner splits the program; its outputs are
verified against the single-device reference like any other candidate's.

A workload that declares no dimensions gets batch-only layouts: the leading axis of every array of
its last argument is named `batch`, and the note says so.
"""

from __future__ import annotations

from dataclasses import replace

from xtat.core.candidate import Candidate
from xtat.core.errors import UserError
from xtat.core.space import Config, Decision
from xtat.stages.base import Context
from xtat.stages.sharding.layouts import Layout, enumerate_layouts

SHARDING = "sharding"
LAYOUT = "layout"


class ShardingStage:
    name = SHARDING

    def __init__(self, earlier: tuple = ()) -> None:
        self._notes: list[str] = []

    def notes(self) -> list[str]:
        return list(self._notes)

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        self._notes = []
        if context.devices < 2:
            return []
        # A layout must divide the marked intermediates' named dimensions too; [1:] leaves out the replicated
        # layout (everything D times).
        layouts = enumerate_layouts([*context.input_dims, *context.marks], context.devices)[1:]
        if not context.dims_declared:
            self._notes.append("sharding: the workload declares no dimensions (Workload dims=); batch-only "
                               "layouts from the leading axis of its last argument's arrays")
        marked = f", {len(context.marks)} marked intermediate(s) laid out by each" if context.marks else ""
        self._notes.append(f"sharding: {len(layouts)} valid layout(s) on {context.devices} devices{marked}")
        if not layouts:
            return []
        return [Decision(self.name, LAYOUT, ("", *(layout.notation() for layout in layouts)), "")]

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        layout = values.get(LAYOUT, "")
        return replace(candidate, layout=str(layout)) if layout else candidate

    def vet(self, values: dict[str, object], platform: str, numerics_opt_in: bool) -> list[str]:
        """A layout in Mesh-TF notation over the named axes; whether it fits the workload and the
        process's devices is decided when it is applied."""
        found = []
        for name, value in values.items():
            if name != LAYOUT or not isinstance(value, str):
                found.append(f"sharding decision {name}={value!r} is not a layout")
                continue
            try:
                Layout.parse(value)
            except UserError as exc:
                found.append(f"sharding: {exc}")
        return found
