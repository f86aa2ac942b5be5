"""The one list of placement plugins and where each runs.

Filter order matters only for reasons and speed: cheap static filters first, so a reason
reads "no host with zone=us-east1 and free gpu>=2 (1000 hosts; zone=us-east1: 40;
capacity gpu>=2: 40; free gpu>=2: 0)". Score weights: preferences (soft constraints)
outrank the allocation scores, which only order hosts the preferences tie on.
"""

from __future__ import annotations

from types import MappingProxyType

from peloton.placement.domain.framework import Registry
from peloton.placement.domain.plugins.bind import DefaultBind
from peloton.placement.domain.plugins.capacity import Capacity
from peloton.placement.domain.plugins.free_resources import FreeResources
from peloton.placement.domain.plugins.gang import Gang
from peloton.placement.domain.plugins.gpu_scarcity import GpuScarcity
from peloton.placement.domain.plugins.host_constraint import HostConstraint
from peloton.placement.domain.plugins.least_allocated import LeastAllocated
from peloton.placement.domain.plugins.most_allocated import MostAllocated
from peloton.placement.domain.plugins.pack import Pack
from peloton.placement.domain.plugins.ports import Ports
from peloton.placement.domain.plugins.preference import Preference
from peloton.placement.domain.plugins.spread import Spread
from peloton.placement.domain.plugins.task_constraint import TaskConstraint
from peloton.placement.domain.plugins.task_labels import TaskLabels
from peloton.placement.domain.types import Strategy

__all__ = ["DEFAULT_REGISTRY"]

_gang = Gang()
_gpu = GpuScarcity()
_free = FreeResources()
_ports = Ports()

DEFAULT_REGISTRY = Registry(
    prefilter=(_gang,),
    filter=(HostConstraint(), Capacity(), _gpu, TaskConstraint(), _free, _ports),
    tier=(_gpu,),
    score=((Preference(), 10.0), (MostAllocated(), 1.0), (LeastAllocated(), 1.0)),
    assign=MappingProxyType({Strategy.PACK: Pack(), Strategy.SPREAD: Spread()}),
    reserve=(_free, _ports, TaskLabels()),
    permit=(_gang,),
    bind=DefaultBind(),
)
