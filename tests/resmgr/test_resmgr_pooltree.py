"""Pool tree operations: create/update/delete/move return a new tree or error strings."""

from __future__ import annotations

import pytest

from peloton.model.resources import Resources
from peloton.resmgr.domain.poolconfig import PoolConfig, PoolConfigError, ResourceSpec
from peloton.resmgr.domain.pooltree import (
    DEFAULT_POOL_PATH,
    ROOT,
    PoolTree,
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


def cpu_pool(name: str, reservation: float = 0, limit: float = 100, share: float = 1) -> PoolConfig:
    return PoolConfig.create(name, {"cpu": ResourceSpec(reservation, limit, share)})


def ok(result: PoolTree | list[str]) -> PoolTree:
    assert isinstance(result, PoolTree), result
    return result


@pytest.fixture
def team_tree() -> PoolTree:
    """root(100 cpu) -> team-a(40..100) -> {batch(10..50), web(20..100)}; team-b(30..60)."""
    tree = PoolTree.empty(Resources(cpu=100))
    tree = ok(create_pool(tree, "/", cpu_pool("team-a", 40, 100)))
    tree = ok(create_pool(tree, "/team-a", cpu_pool("batch", 10, 50)))
    tree = ok(create_pool(tree, "team-a", cpu_pool("web", 20, 100)))
    return ok(create_pool(tree, "root", cpu_pool("team-b", 30, 60)))


def test_create_builds_paths_and_sorted_children(team_tree: PoolTree) -> None:
    assert team_tree.preorder == ("/", "/team-a", "/team-a/batch", "/team-a/web", "/team-b")
    assert team_tree.children("/team-a") == ("/team-a/batch", "/team-a/web")
    assert team_tree.leaves() == ["/team-a/batch", "/team-a/web", "/team-b"]
    assert validate_tree(team_tree) == []


def test_operations_do_not_mutate_their_input(team_tree: PoolTree) -> None:
    before = dict(team_tree.nodes)
    ok(create_pool(team_tree, "/team-b", cpu_pool("x", 1, 10)))
    ok(delete_pool(team_tree, "/team-b"))
    assert dict(team_tree.nodes) == before


@pytest.mark.parametrize(
    ("parent", "config", "error"),
    [
        (
            "/team-a",
            cpu_pool("batch", 0, 10),
            "/team-a/batch: name: 'batch' is already used under /team-a",
        ),
        (
            "/team-a",
            cpu_pool("big", 0, 150),
            "/team-a/big: resources.cpu.limit: 150 exceeds parent /team-a limit 100",
        ),
        (
            "/",
            cpu_pool("huge", 0, 101),
            "/huge: resources.cpu.limit: 101 exceeds cluster capacity 100",
        ),
        (
            "/team-a",
            cpu_pool("more", 11, 20),
            "/team-a: resources.cpu.reservation: children reserve 41 in total, "
            "more than its reservation 40",
        ),
        (
            "/",
            cpu_pool("c", 31, 50),
            "/: resources.cpu.reservation: children reserve 101 in total, "
            "more than the cluster capacity 100",
        ),
        ("/nope", cpu_pool("c"), "/nope: parent: no pool at this path"),
        (
            "/team-a",
            cpu_pool("bad", 5, 1),
            "/team-a/bad: resources.cpu.limit: 1 is below reservation 5",
        ),
    ],
)
def test_create_rejections(
    team_tree: PoolTree, parent: str, config: PoolConfig, error: str
) -> None:
    result = create_pool(team_tree, parent, config)
    assert result == [error]


def test_bare_names_resolve_when_unique(team_tree: PoolTree) -> None:
    assert resolve_pool(team_tree, "batch") == "/team-a/batch"
    assert resolve_pool(team_tree, "root") == ROOT
    assert resolve_pool(team_tree, "/team-a/") == "/team-a"
    assert resolve_pool(team_tree, "ghost") == ["ghost: pool: no pool with this name"]
    tree = ok(create_pool(team_tree, "/team-b", cpu_pool("batch", 0, 10)))
    assert resolve_pool(tree, "batch") == [
        "batch: pool: name is ambiguous (/team-a/batch, /team-b/batch); use a path"
    ]
    assert tree.resolve("batch") is None


def test_update_checks_parent_children_and_siblings(team_tree: PoolTree) -> None:
    # shrinking team-a's limit below web's limit is rejected
    assert update_pool(team_tree, "/team-a", cpu_pool("team-a", 40, 80)) == [
        "/team-a/web: resources.cpu.limit: 100 exceeds parent /team-a limit 80"
    ]
    # shrinking its reservation below the children's sum is rejected
    assert update_pool(team_tree, "/team-a", cpu_pool("team-a", 25, 100)) == [
        "/team-a: resources.cpu.reservation: children reserve 30 in total, "
        "more than its reservation 25"
    ]
    tree = ok(update_pool(team_tree, "web", cpu_pool("web", 25, 90)))
    assert tree.config("/team-a/web").reservation.cpu == 25


def test_update_with_new_name_renames_subtree(team_tree: PoolTree) -> None:
    tree = ok(update_pool(team_tree, "/team-a", cpu_pool("team-x", 40, 100)))
    assert tree.preorder == ("/", "/team-b", "/team-x", "/team-x/batch", "/team-x/web")
    assert tree.node("/team-x/web").parent == "/team-x"
    assert validate_tree(tree) == []


def test_root_cannot_be_changed_deleted_or_moved(team_tree: PoolTree) -> None:
    assert update_pool(team_tree, "/", cpu_pool("x"))[0].startswith("/: pool:")  # type: ignore[index]
    assert delete_pool(team_tree, "/") == ["/: pool: the root pool cannot be deleted"]
    assert move_pool(team_tree, "/", "/team-a") == ["/: pool: the root pool cannot be moved"]


def test_delete_only_empty_leaves(team_tree: PoolTree) -> None:
    assert delete_pool(team_tree, "/team-a") == [
        "/team-a: children: pool has child pools (/team-a/batch, /team-a/web)"
    ]
    assert delete_pool(team_tree, "/team-b", has_tasks=True) == [
        "/team-b: tasks: pool still has tasks"
    ]
    tree = ok(delete_pool(team_tree, "/team-a/batch"))
    assert tree.children("/team-a") == ("/team-a/web",)
    assert "/team-a/batch" not in tree


def test_move_revalidates_at_the_target(team_tree: PoolTree) -> None:
    # batch (res 10, limit 50) under team-b (res 30, limit 60): fits
    tree = ok(move_pool(team_tree, "batch", "team-b"))
    assert tree.children("/team-b") == ("/team-b/batch",)
    assert tree.children("/team-a") == ("/team-a/web",)
    # web (limit 100) cannot go under team-b (limit 60)
    assert move_pool(team_tree, "web", "team-b") == [
        "/team-b/web: resources.cpu.limit: 100 exceeds parent /team-b limit 60"
    ]
    assert move_pool(team_tree, "/team-a", "/team-a/web") == [
        "/team-a: parent: cannot move a pool under itself (/team-a/web)"
    ]
    assert move_pool(team_tree, "batch", "/team-a") is team_tree  # already there


def test_move_subtree_keeps_links() -> None:
    tree = PoolTree.empty(None)
    tree = ok(create_pool(tree, "/", cpu_pool("a")))
    tree = ok(create_pool(tree, "/", cpu_pool("b")))
    tree = ok(create_pool(tree, "/a", cpu_pool("a1")))
    tree = ok(create_pool(tree, "/a/a1", cpu_pool("deep")))
    tree = ok(move_pool(tree, "/a", "/b"))
    assert tree.preorder == ("/", "/b", "/b/a", "/b/a/a1", "/b/a/a1/deep")
    assert tree.node("/b/a/a1/deep").parent == "/b/a/a1"
    assert validate_tree(tree) == []


def test_unknown_capacity_skips_root_checks() -> None:
    tree = ok(create_pool(PoolTree.empty(None), "/", cpu_pool("big", 500, 1000)))
    assert validate_tree(tree) == []
    assert validate_tree(tree.with_capacity(Resources(cpu=100))) == [
        "/: resources.cpu.reservation: children reserve 500 in total, "
        "more than the cluster capacity 100",
        "/big: resources.cpu.limit: 1000 exceeds cluster capacity 100",
    ]


def test_default_pool() -> None:
    capacity = Resources(cpu=64, memory=1024, disk=2048, gpu=2)
    tree = ok(ensure_default_pool(PoolTree.empty(capacity)))
    cfg = tree.config(DEFAULT_POOL_PATH)
    assert cfg.reservation == Resources.zero()
    assert cfg.limit == capacity
    assert cfg.share == Resources(1, 1, 1, 1)
    assert ensure_default_pool(tree) is tree
    assert default_pool_config(None).limit.cpu >= 1e9


def test_build_tree_any_order_and_warnings() -> None:
    tree, errors = build_tree(
        [("/a", cpu_pool("a1", 5, 10)), ("/", cpu_pool("a", 4, 10))], Resources(cpu=10)
    )
    assert tree.preorder == ("/", "/a", "/a/a1")
    assert errors == [
        "/a: resources.cpu.reservation: children reserve 5 in total, more than its reservation 4"
    ]


def test_build_tree_structural_errors_raise() -> None:
    with pytest.raises(PoolConfigError, match="/x/a: parent: no pool at /x"):
        build_tree([("/x", cpu_pool("a"))])
    with pytest.raises(PoolConfigError, match="given twice"):
        build_tree([("/", cpu_pool("a")), ("/", cpu_pool("a"))])
