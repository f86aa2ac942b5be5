"""The resource manager's pure core: pool tree, entitlement, slack, admission, preemption.

Nothing here does I/O, reads a clock or draws random numbers; the Kafka/etcd shell feeds
plain values in and publishes the decisions that come out. Modules:

- `poolconfig`: one pool's config, parsing and per-config rules (`PoolConfigError`).
- `pooltree`: the immutable pool tree and create/update/delete/move.
- `entitlement`: hierarchical max-min fair entitlement (exact water-filling).
- `slack`: the revocable carve-out rules used by `entitlement`.
- `admission`: which pending gangs start, with a reason for every one that waits.
- `preemption`: victims between pools and within a pool, with reason codes.
"""

from .admission import (
    AdmissionResult,
    AdmissionState,
    Gang,
    PoolAdmissionView,
    PoolAllocation,
    admission_views,
    admit,
)
from .entitlement import PoolEntitlement, PoolUsage, compute_entitlements, divide, waterfill
from .poolconfig import (
    PoolConfig,
    PoolConfigError,
    ReservationType,
    ResourceSpec,
    config_errors,
    parse_pool_config,
)
from .pooltree import (
    DEFAULT_POOL_PATH,
    ROOT,
    PoolNode,
    PoolTree,
    TreeResult,
    build_tree,
    create_pool,
    default_pool_config,
    delete_pool,
    ensure_default_pool,
    move_pool,
    resolve_pool,
    update_pool,
    validate_tree,
)
from .preemption import (
    HIGHER_PRIORITY_IN_POOL,
    POOL_OVER_ENTITLEMENT,
    PreemptionPlan,
    PreemptionState,
    TaskView,
    Victim,
    plan_in_pool_preemption,
    plan_pool_preemption,
    plan_preemption,
)

__all__ = [
    "AdmissionResult",
    "AdmissionState",
    "DEFAULT_POOL_PATH",
    "Gang",
    "HIGHER_PRIORITY_IN_POOL",
    "POOL_OVER_ENTITLEMENT",
    "PoolAdmissionView",
    "PoolAllocation",
    "PoolConfig",
    "PoolConfigError",
    "PoolEntitlement",
    "PoolNode",
    "PoolTree",
    "PoolUsage",
    "PreemptionPlan",
    "PreemptionState",
    "ROOT",
    "ReservationType",
    "ResourceSpec",
    "TaskView",
    "TreeResult",
    "Victim",
    "admission_views",
    "admit",
    "build_tree",
    "compute_entitlements",
    "config_errors",
    "create_pool",
    "default_pool_config",
    "delete_pool",
    "divide",
    "ensure_default_pool",
    "move_pool",
    "parse_pool_config",
    "plan_in_pool_preemption",
    "plan_pool_preemption",
    "plan_preemption",
    "resolve_pool",
    "update_pool",
    "validate_tree",
    "waterfill",
]
