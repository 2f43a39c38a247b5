"""Nodes x local ranks: which ranks of the group share a node (and so reach each other by load/store).

Every rank names its node (``node_key``: torchrun's node rank ``$GROUP_RANK`` where torchrun started it, else the
host name) and reports torchrun's ``$LOCAL_RANK`` / ``$LOCAL_WORLD_SIZE``; ``init()`` gathers them (a collective) and
:func:`layout_from_node_keys` numbers the nodes by their first rank, and the ranks within a node by group rank.
:func:`launcher_problems` checks that torchrun's variables say the same, so every rank agrees on one layout or
``init()`` fails on every rank.

``init()`` writes this rank's local rank and its node's size into the device context, so kernels read them as
``dl.rank("local")`` / ``dl.num_ranks("local")``; ``dl.rank("node")`` / ``dl.num_ranks("node")`` divide by the
node's size, right where every node holds the same number of consecutive ranks (``NodeLayout.ranks_per_node``:
torchrun's layout; docs/multi-node.md).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NODE_ENV = "GROUP_RANK"
"""torchrun's node rank (``--node-rank``), the same on every rank one torchrun agent started."""
LOCAL_RANK_ENV = "LOCAL_RANK"
LOCAL_WORLD_SIZE_ENV = "LOCAL_WORLD_SIZE"


@dataclass(frozen=True)
class NodeLayout:
    """The ranks of a group by node: ``nodes[n]`` lists node ``n``'s group ranks, ascending; nodes are numbered in
    the order of their first rank, so rank 0 is on node 0."""

    nodes: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        ranks = sorted(rank for node in self.nodes for rank in node)
        if ranks != list(range(len(ranks))) or not all(self.nodes):
            raise ValueError(f"a node layout lists every rank 0..n-1 once, on non-empty nodes, got {self.nodes}")

    @classmethod
    def single_node(cls, world_size: int) -> NodeLayout:
        """Every rank of ``world_size`` on one node."""
        return cls((tuple(range(world_size)),))

    @property
    def world_size(self) -> int:
        return sum(len(node) for node in self.nodes)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    def node_of(self, rank: int) -> int:
        """The node of group rank ``rank`` (ValueError if it is not a rank of the layout)."""
        for node, ranks in enumerate(self.nodes):
            if rank in ranks:
                return node
        raise ValueError(f"rank {rank} is not in a layout of {self.world_size} ranks")

    def local_rank_of(self, rank: int) -> int:
        """The position of ``rank`` among the ranks of its node."""
        return self.nodes[self.node_of(rank)].index(rank)

    def local_world_size_of(self, rank: int) -> int:
        """How many ranks share ``rank``'s node."""
        return len(self.nodes[self.node_of(rank)])

    @property
    def ranks_per_node(self) -> int | None:
        """``L`` when node ``n`` holds exactly ranks ``[n L, (n + 1) L)`` for every ``n`` (then ``rank // L`` is
        the node and ``rank % L`` the local rank), else None."""
        size = len(self.nodes[0])
        expected = tuple(tuple(range(n * size, (n + 1) * size)) for n in range(self.num_nodes))
        return size if self.nodes == expected else None


def node_key(environ: Mapping[str, str] | None = None) -> str:
    """This process's node: ``torchrun-node-<GROUP_RANK>`` under torchrun, else ``host-<host name>``."""
    environ = os.environ if environ is None else environ
    node = environ.get(NODE_ENV, "").strip()
    return f"torchrun-node-{node}" if node else f"host-{socket.gethostname()}"


def launcher_view(environ: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """``($LOCAL_RANK, $LOCAL_WORLD_SIZE)`` as torchrun set them, or None where either is unset or not an integer."""
    environ = os.environ if environ is None else environ
    try:
        return int(environ[LOCAL_RANK_ENV]), int(environ[LOCAL_WORLD_SIZE_ENV])
    except (KeyError, ValueError):
        return None


def layout_from_node_keys(keys: Sequence[str]) -> NodeLayout:
    """The layout of ranks whose node keys are ``keys`` (by group rank): equal keys share a node."""
    order: dict[str, list[int]] = {}
    for rank, key in enumerate(keys):
        order.setdefault(key, []).append(rank)
    return NodeLayout(tuple(tuple(ranks) for ranks in order.values()))


def launcher_problems(layout: NodeLayout, views: Sequence[tuple[int, int] | None]) -> list[str]:
    """Where torchrun's ``(LOCAL_RANK, LOCAL_WORLD_SIZE)`` of each rank (None: not set) contradicts ``layout``.

    Pass the views only when the group is the whole world (torchrun's variables describe the world, not a
    subgroup); ranks without them are not checked.
    """
    found = []
    for rank, view in enumerate(views):
        if view is None:
            continue
        expected = (layout.local_rank_of(rank), layout.local_world_size_of(rank))
        if view != expected:
            found.append(
                f"rank {rank} has LOCAL_RANK={view[0]} LOCAL_WORLD_SIZE={view[1]}, but it is local rank {expected[0]} "
                f"of {expected[1]} on node {layout.node_of(rank)} (ranks {list(layout.nodes[layout.node_of(rank)])}, "
                f"grouped by ${NODE_ENV} or host name)"
            )
    return found
