"""Cycles among jobs (F-33, F-04): dependencies ("when A ends, start B")
and parents ("B runs as part of A") must never loop back. Pure core: the
callers read the edges from the database and ask before they save one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def find_cycle(
    edges: Mapping[int, Iterable[int]], *, new_from: int, new_to: int
) -> list[int] | None:
    """The cycle that the edge new_from → new_to would close in the graph
    `edges` (node → the nodes it points to), as the list of nodes from
    new_from round to new_from again; None when it closes none. An edge
    from a node to itself is a cycle of one."""
    if new_from == new_to:
        return [new_from, new_from]
    # A path new_to → … → new_from, found breadth-first: the shortest loop.
    came_from: dict[int, int] = {new_to: new_to}
    frontier = [new_to]
    while frontier:
        following = []
        for node in frontier:
            for nxt in edges.get(node, ()):
                if nxt in came_from:
                    continue
                came_from[nxt] = node
                if nxt == new_from:
                    path = [new_from]
                    while path[-1] != new_to:
                        path.append(came_from[path[-1]])
                    return [new_from, *reversed(path)]
                following.append(nxt)
        frontier = following
    return None


def ancestors(parents: Mapping[int, int | None], node: int) -> list[int]:
    """The chain of parents above `node`, nearest first, stopping at a node
    seen before (a stored loop, which validation never lets in)."""
    chain: list[int] = []
    seen = {node}
    current = parents.get(node)
    while current is not None and current not in seen:
        chain.append(current)
        seen.add(current)
        current = parents.get(current)
    return chain


def reference_order(
    nodes: Iterable[int], refers_to: Mapping[int, Iterable[int]]
) -> tuple[list[int], list[int] | None]:
    """`nodes` in an order where each comes after the nodes it refers to
    (so those can be saved first), else in the order given; and the first
    loop of references found, as the nodes from one round to it again
    (``[a, b, a]``: a refers to b, b to a; ``[a, a]``: a to itself), or
    None. References to nodes not in `nodes` are ignored. Iterative: a
    chain of thousands of references is no deeper than one."""
    wanted = list(nodes)
    known = set(wanted)
    order: list[int] = []
    done: set[int] = set()
    loop: list[int] | None = None
    for root in wanted:
        if root in done:
            continue
        path = [root]
        on_path = {root}
        pending = [iter(refers_to.get(root, ()))]
        while pending:
            node = path[-1]
            nxt = next((n for n in pending[-1] if n in known and n not in done), None)
            if nxt is None:
                pending.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                order.append(node)
            elif nxt in on_path:
                if loop is None:
                    loop = [*path[path.index(nxt) :], nxt]
            else:
                path.append(nxt)
                on_path.add(nxt)
                pending.append(iter(refers_to.get(nxt, ())))
    return order, loop
