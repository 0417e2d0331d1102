"""The order in which a file of jobs is saved (jobs.core.graph.reference_order):
the jobs a job names (its parent, its dependencies' upstream jobs) come
before it, else the file's order; a loop of references is found."""

from __future__ import annotations

import pytest

from jobs.core.graph import reference_order

# (nodes, references, order, loop)
ORDERS = [
    ([0, 1, 2], {}, [0, 1, 2], None),
    # a child before its parent, a dependency on a later job
    ([0, 1], {0: [1]}, [1, 0], None),
    ([0, 1, 2], {0: [2], 1: [2]}, [2, 0, 1], None),
    ([0, 1, 2, 3], {0: [1], 1: [2], 2: [3]}, [3, 2, 1, 0], None),
    # a reference to a node not in the list (a stored job) is no constraint
    ([0, 1], {0: [7]}, [0, 1], None),
    # a node named twice is placed once
    ([0, 1, 2], {0: [2], 1: [2, 0]}, [2, 0, 1], None),
    # loops
    ([0], {0: [0]}, [0], [0, 0]),
    ([0, 1], {0: [1], 1: [0]}, [1, 0], [0, 1, 0]),
    ([0, 1, 2], {0: [1], 1: [2], 2: [1]}, [2, 1, 0], [1, 2, 1]),
]


@pytest.mark.parametrize(("nodes", "refs", "order", "loop"), ORDERS)
def test_reference_order(nodes, refs, order, loop) -> None:
    assert reference_order(nodes, refs) == (order, loop)


def test_a_long_chain_is_no_recursion() -> None:
    n = 5000
    order, loop = reference_order(range(n), {i: [i + 1] for i in range(n - 1)})
    assert order == list(reversed(range(n))) and loop is None
