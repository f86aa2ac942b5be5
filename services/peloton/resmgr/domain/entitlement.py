"""Hierarchical max-min fair entitlement, computed exactly, one resource kind at a time.

Contract of `compute_entitlements(tree, capacity, usage, slack_capacity)`:

Requirement (bottom-up). A leaf's requirement is
`min(limit, allocation + demand + slack requirement)` where allocation and demand are its
non-revocable holdings and pending asks, and the slack requirement is
`min(slack limit, slack allocation + slack demand)` for memory/disk/gpu (0 for cpu, whose
revocable side is divided separately). An inner pool's requirement is
`min(limit, sum of its children's requirements)`. A STATIC pool's requirement is at least
its reservation: it always holds that reservation, so its ancestors must ask for it too.

Division (top-down). The root's entitlement is the capacity. A parent's entitlement E is
divided among its children by `divide_batch` (vectorised: all parents at one depth with a
similar fan-out are divided in one set of array operations):
1. floors: each child gets its reservation (STATIC in full, ELASTIC up to its
   requirement); if these exceed E they are all scaled by the same factor and nothing
   else is handed out (this is how lost capacity is absorbed);
2. the rest is water-filled by share among children whose requirement is unmet, each
   capped at its requirement, in closed form;
3. what is still left goes to all children by share, capped at their limits, with what a
   cap cuts off redistributed (again exact water-filling). A parent keeps a remainder
   only when every child is at its limit.

Slack: see `slack.py`. memory/disk/gpu slack is carved out of each pool's entitlement;
revocable cpus (`slack_capacity.cpu`) are divided down the tree by the same `divide_batch`
with floors = current revocable allocation, wants = allocation + revocable demand, no caps.
The root's own slack uses the default slack limit (20%) of the capacity.

Guarantees: deterministic (children in name order, ties broken by that order), never
above a limit, children never sum above their parent (beyond float rounding), no
iteration cut-offs. Cost O(n log n) per parent. Usage given for an inner pool is
ignored: tasks live in leaf pools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from peloton.model.resources import KINDS, Resources

from .poolconfig import DEFAULT_SLACK_LIMIT_PERCENT, ReservationType
from .pooltree import PoolTree
from .slack import (
    CARVED_MASK,
    carve_slack,
    revocable_floor,
    revocable_want,
    slack_limits,
    slack_requirement,
)

__all__ = [
    "PoolUsage",
    "PoolEntitlement",
    "compute_entitlements",
    "divide",
    "divide_batch",
    "waterfill",
    "waterfill_batch",
]

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]

_ZERO = Resources()
#: A share of 0 still takes part (last in line), so capacity is never stranded.
_MIN_SHARE = 1e-9


@dataclass(frozen=True, slots=True)
class PoolUsage:
    """A leaf pool's holdings and pending asks, split non-revocable / revocable."""

    demand: Resources = _ZERO
    allocation: Resources = _ZERO
    slack_demand: Resources = _ZERO
    slack_allocation: Resources = _ZERO


class PoolEntitlement:
    """One pool's result. For cpu: slack = its revocable-cpu split, nonslack = entitlement.

    An immutable value: `entitlement`, `slack_entitlement`, `nonslack_entitlement` and
    `requirement` are `Resources`, equality compares all four. It stores the 16 numbers
    and builds the `Resources` on access, so a cycle over 10,000 pools allocates one
    object per pool instead of five.
    """

    __slots__ = ("_values",)
    _values: tuple[float, ...]

    def __init__(
        self,
        entitlement: Resources,
        slack_entitlement: Resources,
        nonslack_entitlement: Resources,
        requirement: Resources,
    ) -> None:
        values = (entitlement, slack_entitlement, nonslack_entitlement, requirement)
        object.__setattr__(self, "_values", tuple(float(x) for r in values for x in _vec(r)))

    @classmethod
    def _of(cls, values: Sequence[float]) -> PoolEntitlement:
        obj = object.__new__(cls)
        object.__setattr__(obj, "_values", tuple(values))
        return obj

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"PoolEntitlement is immutable (cannot set {name})")

    @property
    def entitlement(self) -> Resources:
        return Resources(*self._values[0:4])

    @property
    def slack_entitlement(self) -> Resources:
        return Resources(*self._values[4:8])

    @property
    def nonslack_entitlement(self) -> Resources:
        return Resources(*self._values[8:12])

    @property
    def requirement(self) -> Resources:
        return Resources(*self._values[12:16])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PoolEntitlement):
            return NotImplemented
        return self._values == other._values

    def __hash__(self) -> int:
        return hash(self._values)

    def __reduce__(self) -> tuple[object, tuple[tuple[float, ...]]]:
        return (PoolEntitlement._of, (self._values,))

    def __repr__(self) -> str:
        return (
            f"PoolEntitlement(entitlement={self.entitlement!r}, "
            f"slack_entitlement={self.slack_entitlement!r}, "
            f"nonslack_entitlement={self.nonslack_entitlement!r}, "
            f"requirement={self.requirement!r})"
        )


# ----------------------------------------------------------------- water-filling core


def waterfill_batch(amount: Array, weights: Array, caps: Array) -> Array:
    """Exact weighted water-filling of many independent groups at once.

    Shapes: `amount` S x C; `weights`, `caps` S x K x C (S groups of K members, C
    independent columns, e.g. resource kinds). For every group and column, returns x with
    x[k] = min(caps[k], w[k] * level) for the single level at which the x sum to
    min(amount, sum(caps)): each member gets its weight's share, a member whose cap is
    reached keeps its cap and the rest is shared among the others. Closed form: members
    sorted by cap/weight (stable, so ties go by position), the level found from prefix
    sums of caps and suffix sums of weights; O(K log K) per group, no iteration cut-off.
    Weights below 1e-9 count as 1e-9; members with cap 0 (e.g. padding) get 0 and do
    not affect the others. Caps must be finite.
    """
    amount = np.maximum(amount, 0.0)
    w = np.maximum(weights, _MIN_SHARE)
    caps = np.maximum(caps, 0.0)
    ratio = caps / w
    order = np.argsort(ratio, axis=1, kind="stable")
    cs = np.take_along_axis(caps, order, axis=1)
    ws = np.take_along_axis(w, order, axis=1)
    ts = np.take_along_axis(ratio, order, axis=1)
    prefix = np.zeros_like(cs)  # caps of the members before position j
    np.cumsum(cs[:, :-1], axis=1, out=prefix[:, 1:])
    suffix = np.cumsum(ws[:, ::-1], axis=1)[:, ::-1]  # weights from position j on
    filled_at = prefix + ts * suffix  # total handed out if the level were ratio[j]
    exceeds = filled_at > amount[:, None, :]
    j = np.argmax(exceeds, axis=1)[:, None, :]
    p_j = np.take_along_axis(prefix, j, axis=1)[:, 0, :]
    s_j = np.take_along_axis(suffix, j, axis=1)[:, 0, :]
    level = np.where(exceeds.any(axis=1), (amount - p_j) / s_j, np.inf)
    # caps/weight can underflow to 0 for subnormal caps, leaving p_j a hair above amount:
    # a negative level would hand out negative amounts
    level = np.maximum(level, 0.0)
    return np.minimum(caps, w * level[:, None, :])


def divide_batch(total: Array, floors: Array, wants: Array, caps: Array, shares: Array) -> Array:
    """Divide each group's `total` (S x C) among its members (S x K x C) in three phases.

    1. `floors`, scaled down together when they exceed the total (then nothing else);
    2. the rest water-filled by `shares` up to `wants`;
    3. what is still left water-filled by `shares` up to `caps`.
    Members never receive more than max(floor, want, cap); a group keeps a remainder only
    when all its members are at their caps.
    """
    floor_sum = floors.sum(axis=1)
    total = np.maximum(total, 0.0)
    scale = np.divide(total, floor_sum, out=np.ones_like(total), where=floor_sum > total)
    out = floors * scale[:, None, :]
    remaining = np.maximum(total - out.sum(axis=1), 0.0)
    extra = waterfill_batch(remaining, shares, wants - out)
    out = out + extra
    remaining = np.maximum(remaining - extra.sum(axis=1), 0.0)
    return out + waterfill_batch(remaining, shares, caps - out)


def waterfill(amount: float, weights: Sequence[float], caps: Sequence[float]) -> list[float]:
    """`waterfill_batch` for a single group and column."""
    if not caps:
        return []
    shape = (1, len(caps), 1)
    out = waterfill_batch(
        np.array([[amount]], dtype=float),
        np.asarray(weights, dtype=float).reshape(shape),
        np.asarray(caps, dtype=float).reshape(shape),
    )
    return [float(x) for x in out[0, :, 0]]


def divide(
    total: float,
    floors: Sequence[float],
    wants: Sequence[float],
    caps: Sequence[float],
    shares: Sequence[float],
) -> list[float]:
    """`divide_batch` for a single group and column."""
    if not floors:
        return []
    shape = (1, len(floors), 1)
    args = [np.asarray(x, dtype=float).reshape(shape) for x in (floors, wants, caps, shares)]
    out = divide_batch(np.array([[total]], dtype=float), *args)
    return [float(x) for x in out[0, :, 0]]


# ----------------------------------------------------------------------- tree layout


@dataclass(frozen=True, slots=True, eq=False)
class _Group:
    """Parents at one depth with similar fan-out; children padded with the dummy row."""

    parents: IntArray  # S
    kids: IntArray  # S x K, padding = index of the dummy row
    mask: BoolArray  # S x K, True for real children
    real_kids: IntArray  # kids[mask]


@dataclass(frozen=True, slots=True, eq=False)
class _Layout:
    """The tree as arrays (rows in preorder, plus one all-zero dummy row at the end).

    Cached per tree; row 0 (the root) gets the capacity at each call.
    """

    order: tuple[str, ...]
    index: dict[str, int]
    is_leaf: list[bool]
    levels: list[list[_Group]]  # levels[d]: groups whose parents are at depth d
    leaf: BoolArray  # rows
    res: Array  # rows x kinds, clamped into [0, limit]
    lim: Array
    share: Array
    static: BoolArray
    slack_lim: Array


_LAYOUT_KEY = __name__ + ".layout"


def _layout(tree: PoolTree) -> _Layout:
    cached = tree.scratch.get(_LAYOUT_KEY)
    if isinstance(cached, _Layout):
        return cached
    order = tree.preorder
    n = len(order)
    index = {p: i for i, p in enumerate(order)}
    nodes = tree.nodes
    configs = [nodes[p].config for p in order]
    specs = [c.specs for c in configs] + [configs[0].specs]  # dummy row, zeroed below
    lim = np.maximum(np.array([[s.limit for s in row] for row in specs], dtype=float), 0.0)
    res = np.clip(np.array([[s.reservation for s in row] for row in specs], dtype=float), 0.0, lim)
    share = np.array([[s.share for s in row] for row in specs], dtype=float)
    static = np.array([[s.type is ReservationType.STATIC for s in row] for row in specs])
    percent = np.array([c.slack_limit_percent for c in configs] + [0.0], dtype=float)
    for a in (lim, res, share, static):
        a[n] = 0
    static[0] = False
    kids = [[index[c] for c in nodes[p].children] for p in order]
    layout = _Layout(
        order=order,
        index=index,
        is_leaf=[not k for k in kids],
        levels=_groups(order, kids, n),
        leaf=np.array([not k for k in kids] + [False]),
        res=res,
        lim=lim,
        share=share,
        static=static,
        slack_lim=slack_limits(res, percent),
    )
    tree.scratch[_LAYOUT_KEY] = layout
    return layout


def _groups(order: Sequence[str], kids: list[list[int]], dummy: int) -> list[list[_Group]]:
    depth = [0] * len(order)
    buckets: dict[tuple[int, int], list[int]] = {}
    for i, ks in enumerate(kids):
        for c in ks:
            depth[c] = depth[i] + 1
        if ks:
            width = 1 << (len(ks) - 1).bit_length()  # padding at most doubles the work
            buckets.setdefault((depth[i], width), []).append(i)
    levels: list[list[_Group]] = [[] for _ in range(max(depth) + 1 if kids[0] else 0)]
    for (d, width), parents in sorted(buckets.items()):
        matrix = np.full((len(parents), width), dummy, dtype=np.intp)
        for row, p in enumerate(parents):
            matrix[row, : len(kids[p])] = kids[p]
        mask = matrix != dummy
        levels[d].append(_Group(np.array(parents, dtype=np.intp), matrix, mask, matrix[mask]))
    return levels


# ------------------------------------------------------------------------- the cycle


def compute_entitlements(
    tree: PoolTree,
    capacity: Resources,
    usage: Mapping[str, PoolUsage],
    slack_capacity: Resources = _ZERO,
) -> dict[str, PoolEntitlement]:
    """Entitlement, slack and non-slack entitlement of every pool, keyed by path (incl "/").

    Pure and deterministic (same inputs, bit-identical output); `tree.capacity` is not
    consulted (the root gets `capacity`). Negative inputs count as 0. Never raises for a
    tree `build_tree` accepts. The result is in tree preorder.
    """
    lay = _layout(tree)
    cap = np.maximum(np.array([capacity.get(k) for k in KINDS], dtype=float), 0.0)
    ns_raw, s_raw, rev_alloc, rev_want = _usage_arrays(lay, usage)
    res, lim, slack_lim = lay.res.copy(), lay.lim.copy(), lay.slack_lim.copy()
    res[0] = lim[0] = cap
    slack_lim[0] = cap * (DEFAULT_SLACK_LIMIT_PERCENT / 100.0) * CARVED_MASK
    req, nsreq = _requirements(lay, res, lim, slack_lim, ns_raw, s_raw)
    ent = np.zeros_like(res)
    ent[0] = cap
    for level in lay.levels:
        for g in level:
            k = g.kids
            floors = np.where(lay.static[k], res[k], np.minimum(res[k], req[k]))
            out = divide_batch(ent[g.parents], floors, req[k], lim[k], lay.share[k])
            ent[g.real_kids] = out[g.mask]
    slack = carve_slack(ent, nsreq, slack_lim, s_raw)
    slack[:, 0] = _revocable_cpu(lay, max(0.0, slack_capacity.cpu), rev_alloc, rev_want)
    nonslack = ent - slack
    nonslack[:, 0] = ent[:, 0]
    return _results(lay.order, ent, slack, nonslack, req)


def _usage_arrays(
    lay: _Layout, usage: Mapping[str, PoolUsage]
) -> tuple[Array, Array, Array, Array]:
    """Leaf usage as rows: non-slack raw ask, slack raw ask, revocable-cpu floor and want."""
    rows: list[int] = []
    values: list[tuple[float, ...]] = []
    for path, u in usage.items():
        i = lay.index.get(path)
        if i is None or not lay.is_leaf[i]:
            continue
        a, d, sa, sd = u.allocation, u.demand, u.slack_allocation, u.slack_demand
        rows.append(i)
        values.append((*_vec(a), *_vec(d), *_vec(sa), *_vec(sd)))
    shape = (len(lay.order) + 1, len(KINDS))
    ns_raw, s_raw = np.zeros(shape), np.zeros(shape)
    rev_alloc, rev_want = np.zeros(shape[0]), np.zeros(shape[0])
    if rows:
        v = np.maximum(np.array(values, dtype=float), 0.0)
        ns_raw[rows] = v[:, 0:4] + v[:, 4:8]
        s_raw[rows] = (v[:, 8:12] + v[:, 12:16]) * CARVED_MASK
        rev_alloc[rows] = revocable_floor(v[:, 8])
        rev_want[rows] = revocable_want(v[:, 8], v[:, 12])
    return ns_raw, s_raw, rev_alloc, rev_want


def _vec(r: Resources) -> tuple[float, float, float, float]:
    return (r.cpu, r.memory, r.disk, r.gpu)


def _requirements(
    lay: _Layout, res: Array, lim: Array, slack_lim: Array, ns_raw: Array, s_raw: Array
) -> tuple[Array, Array]:
    """Bottom-up requirement and non-slack requirement; fills inner rows of `s_raw`."""
    leaf = lay.leaf[:, None]
    raw = ns_raw + slack_requirement(slack_lim, s_raw)
    req = np.where(leaf, np.minimum(lim, np.where(lay.static, np.maximum(raw, res), raw)), 0.0)
    nsreq = np.where(leaf, np.minimum(lim, ns_raw), 0.0)
    for level in reversed(lay.levels):
        for g in level:
            p, k = g.parents, g.kids
            raw_p = req[k].sum(axis=1)
            s_raw[p] = s_raw[k].sum(axis=1)
            req[p] = np.minimum(lim[p], np.where(lay.static[p], np.maximum(raw_p, res[p]), raw_p))
            nsreq[p] = np.minimum(lim[p], nsreq[k].sum(axis=1))
    return req, nsreq


def _revocable_cpu(lay: _Layout, slack_cpu: float, alloc: Array, want: Array) -> Array:
    """The cluster's revocable cpus divided down the tree (see module doc)."""
    for level in reversed(lay.levels):
        for g in level:
            alloc[g.parents] = alloc[g.kids].sum(axis=1)
            want[g.parents] = want[g.kids].sum(axis=1)
    out = np.zeros_like(alloc)
    out[0] = slack_cpu
    share = lay.share[:, 0]
    for level in lay.levels:
        for g in level:
            k = g.kids
            total = out[g.parents][:, None]
            uncapped = np.where(g.mask, total, 0.0)  # no child can get more than the total
            parts = divide_batch(
                total,
                alloc[k][..., None],
                want[k][..., None],
                uncapped[..., None],
                share[k][..., None],
            )
            out[g.real_kids] = parts[..., 0][g.mask]
    return out


def _results(
    order: Sequence[str], ent: Array, slack: Array, nonslack: Array, req: Array
) -> dict[str, PoolEntitlement]:
    rows = np.concatenate((ent, slack, nonslack, req), axis=1).tolist()
    make = PoolEntitlement._of
    return {path: make(rows[i]) for i, path in enumerate(order)}
