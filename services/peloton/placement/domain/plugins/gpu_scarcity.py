"""Tier (or Filter): keep GPU hosts for tasks that need GPUs.

By default a task needing no GPU gets GPU hosts only in a second tier, used when no
other host fits. With ``PlacementConfig.gpu_hosts_exclusive`` (Peloton's own rule) such
tasks never land on GPU hosts: the plugin then acts as a static filter.
"""

from __future__ import annotations

import numpy as np

from peloton.placement.domain.framework import BIG, CycleState, TaskGroup
from peloton.placement.domain.hostindex import IntArray

__all__ = ["GpuScarcity"]


class GpuScarcity:
    name = "gpu_scarcity"
    static = True

    def applies(self, state: CycleState, group: TaskGroup) -> bool:
        return state.config.gpu_hosts_exclusive and group.request[3] <= 0

    def describe(self, state: CycleState, group: TaskGroup) -> str:
        return "no GPU (GPU hosts are kept for GPU tasks)"

    def filter(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray:
        return np.where(state.table.has_gpu[hosts], 0, BIG)

    def tier(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray | None:
        if group.request[3] > 0 or state.config.gpu_hosts_exclusive:
            return None
        gpu = state.table.has_gpu[hosts]
        if not gpu.any():
            return None
        out: IntArray = gpu.astype(np.int64)
        return out
