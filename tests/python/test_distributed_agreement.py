"""Ranks that disagree, and peers that stop, on local gloo ranks.

Ranks that disagree on anything that changes the result (an argument of
ulysses_attention / ring_attention, VideoAttention's configuration or call,
enable()'s settings, the diffusers model's weights or inputs) must all raise
a ValueError naming what differs, before any data moves; ranks that differ
only where they may (threads, timeout, a mask as a string or a Mask) must
run. One 3-rank launch runs every case.

A stopped peer (SIGSTOP) must make every entry point raise TimeoutError
within its timeout, including timeouts under a millisecond, which c10d would
read as "no timeout" if they reached it as 0 ms. One 2-rank launch.
"""

from __future__ import annotations

import datetime
import functools
import math

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
pytest.importorskip("diffusers")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from tilesplash import distributed  # noqa: E402
from tilesplash._dist import check_timeout  # noqa: E402

import dist_robust_cases as cases  # noqa: E402
from dist_harness import run_ranks, values  # noqa: E402

WORLD = 3


@functools.cache
def disagreement_run():
    return values(run_ranks(WORLD, cases.disagreements, list(cases.DISAGREEMENTS), timeout=300))


@pytest.mark.parametrize("name", list(cases.DISAGREEMENTS))
def test_ranks_that_disagree_all_raise_naming_what_differs(name):
    field = cases.DISAGREEMENTS[name][1]
    per_rank = disagreement_run()
    for rank in range(WORLD):
        kind, message = per_rank[rank][name]
        if field is None:
            assert kind is None, (rank, message)
            continue
        assert kind == "ValueError", (rank, kind, message)
        assert "every rank must pass the same" in message and field in message, (rank, message)


def test_a_disagreement_shows_every_rank_s_value():
    per_rank = disagreement_run()
    # The argument, not what the library made of it (the band, the candidates).
    _, message = per_rank[0]["video density"]
    assert message.endswith(
        "every rank must pass the same VideoAttention.density; by rank: [0.25, 0.25, 0.3]"), (
        message)
    # Several fields: each with its values; values with ", " in them quoted.
    _, message = per_rank[2]["diffusers inputs"]
    assert "same input hidden_states, input encoder_hidden_states; by rank: " in message
    assert "input hidden_states: ['tensor(1, 4, 6, 16, 16) float32 " in message, message
    # One field: the short form.
    _, message = per_rank[1]["ulysses scale"]
    assert message.endswith("every rank must pass the same scale; by rank: [None, None, 0.5]"), (
        message)


@functools.cache
def stopped_run():
    return run_ranks(2, cases.stopped_peer, cases.STOPPED_CASES, timeout=120)


@pytest.mark.parametrize("index", range(len(cases.STOPPED_CASES)),
                         ids=[f"{n}-{t}" for n, t in cases.STOPPED_CASES])
def test_a_stopped_peer_makes_every_entry_point_time_out(index):
    (status0, value0), (status1, value1) = stopped_run()
    assert status0 == "ok", value0  # "missing": a call waited for ever
    assert (status1, value1) == ("ok", "woken")  # rank 0 woke it: nothing left stopped
    name, kind, message, seconds = value0[index]
    timeout = cases.STOPPED_CASES[index][1]
    wait = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
    assert kind == "TimeoutError", (name, kind, message)
    assert "no answer within" in message and "rank 0 of 2" in message, message
    # Sub-millisecond waits are one millisecond; none waits less than it was given.
    assert max(wait, 1e-3) <= seconds < max(wait, 1e-3) + 10, (name, seconds)


@pytest.mark.parametrize("value, millis", [
    (1e-4, 1), (5e-324, 1), (0.001, 1), (0.0015, 2), (1.1, 1100), (2, 2000),
    (datetime.timedelta(microseconds=1), 1), (datetime.timedelta(seconds=1.5), 1500),
    (distributed.MAX_TIMEOUT, 365 * 24 * 3600 * 1000), (datetime.timedelta(days=365), None),
])
def test_timeouts_round_up_to_whole_milliseconds(value, millis):
    wait = check_timeout(value)
    if millis is None:
        millis = int(distributed.MAX_TIMEOUT * 1000)
    assert wait == datetime.timedelta(milliseconds=millis)


@pytest.mark.parametrize("value", [0, -1, 0.0, -0.0, math.nan, math.inf, -math.inf, 1e300,
                                   math.nextafter(distributed.MAX_TIMEOUT, math.inf),
                                   datetime.timedelta(0), datetime.timedelta(days=366),
                                   datetime.timedelta.max, datetime.timedelta(seconds=-1)])
def test_timeouts_outside_the_range_are_refused_by_name(value):
    with pytest.raises(ValueError, match=r"^timeout: expected seconds in \(0, 31536000\]"):
        check_timeout(value)


@pytest.mark.parametrize("value", [True, "5", [5], object()])
def test_timeouts_of_another_type_are_refused_by_name(value):
    with pytest.raises(TypeError, match="^timeout: "):
        check_timeout(value)
