"""The pure pieces of coordination: a parent run's next step (F-04), the
cycles among jobs (F-33, F-04) and the dependency trigger's words and
statuses (F-33)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobs.core.graph import ancestors, find_cycle
from jobs.core.triggers import (
    AfterSpec,
    TriggerError,
    compute_first_fire,
    describe,
    iter_fire_times,
    validate_spec,
)
from runs.core.children import ChildFacts, compute_parent_step

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)


def kids(*statuses: str | None) -> list[ChildFacts]:
    return [ChildFacts(i + 1, "abc"[i], status) for i, status in enumerate(statuses)]


# (children's latest statuses, stop on failure, start, finish)
STEPS = [
    ((None, None, None), True, 1, None),
    (("queued", None, None), True, None, None),
    (("running", None, None), True, None, None),
    (("succeeded", None, None), True, 2, None),
    (("succeeded", "succeeded", None), True, 3, None),
    (("succeeded", "succeeded", "succeeded"), True, None, "succeeded"),
    # a failure stops the rest, or not
    (("failed", None, None), True, None, "failed"),
    (("failed", None, None), False, 2, None),
    (("timed_out", "succeeded", None), False, 3, None),
    (("lost", "succeeded", "succeeded"), False, None, "failed"),
    (("cancelled", None, None), True, None, "failed"),
    # a skipped child did not run: not a failure
    (("skipped", None, None), True, 2, None),
    (("skipped", "skipped", "skipped"), True, None, "succeeded"),
    # a retry of the first one is queued: wait
    (("queued", None, None), False, None, None),
    # no children at all
    ((), True, None, "succeeded"),
]


@pytest.mark.parametrize(("statuses", "stop", "start", "finish"), STEPS)
def test_a_parent_runs_its_children_in_order(statuses, stop, start, finish) -> None:
    step = compute_parent_step(kids(*statuses), stop_on_failure=stop)
    assert (step.start, step.finish) == (start, finish)
    assert step.waits == (start is None and finish is None)


def test_the_parent_says_how_each_child_ended() -> None:
    step = compute_parent_step(kids("succeeded", "failed", None), stop_on_failure=True)
    assert step.message == (
        "children: 'a' succeeded, 'b' failed, 'c' not run (stopped after 'b' failed)"
    )
    assert compute_parent_step([], stop_on_failure=True).message == "no enabled child to run"


EDGES = {1: {2}, 2: {3}, 3: set(), 4: {1}}


@pytest.mark.parametrize(
    ("new_from", "new_to", "cycle"),
    [
        (3, 1, [3, 1, 2, 3]),  # 1 → 2 → 3, and now 3 → 1
        (3, 4, [3, 4, 1, 2, 3]),
        (2, 1, [2, 1, 2]),
        (1, 1, [1, 1]),  # a job on itself
        (1, 3, None),  # a second path, no loop
        (3, 5, None),  # fan-out
        (5, 1, None),
    ],
)
def test_an_edge_that_closes_a_loop_is_found_with_the_loop(new_from, new_to, cycle) -> None:
    assert find_cycle(EDGES, new_from=new_from, new_to=new_to) == cycle


def test_ancestors_nearest_first_and_safe_on_a_stored_loop() -> None:
    assert ancestors({3: 2, 2: 1, 1: None}, 3) == [2, 1]
    assert ancestors({3: 2, 2: 3}, 3) == [2]


def test_a_dependency_has_no_fire_times_and_says_what_it_waits_for() -> None:
    spec = AfterSpec("'Import' (#3)", ("succeeded",))
    assert list(iter_fire_times(spec, after=NOW)) == []
    assert compute_first_fire(spec, now=NOW) is None
    assert describe(spec) == "after job 'Import' (#3) ends succeeded"
    failed = AfterSpec("'Import' (#3)", ("timed_out", "failed", "lost"))
    assert validate_spec(failed, now=NOW).statuses == ("failed", "timed_out", "lost")
    assert describe(validate_spec(failed, now=NOW)) == (
        "after job 'Import' (#3) ends failed, timed out or lost"
    )


@pytest.mark.parametrize("statuses", [(), ("skipped",), ("done",)])
def test_a_dependency_refuses_statuses_no_run_ends_with(statuses) -> None:
    with pytest.raises(TriggerError) as caught:
        validate_spec(AfterSpec("'x' (#1)", statuses), now=NOW)
    assert caught.value.field == "upstream_statuses"
