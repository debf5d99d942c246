"""Issue 27's smaller defects: a per-head BlockMask list of the wrong length, the
key_lengths length check when nothing is padded, NaN/Inf into tilesplash.jax.route,
and `tilesplash plan`'s progress on long plans."""

from __future__ import annotations

import os
import pathlib
import pty
import select
import subprocess
import time

import pytest

torch = pytest.importorskip("torch")

import tilesplash  # noqa: E402


@pytest.mark.parametrize("count", [2, 5])
def test_a_per_head_block_mask_of_another_length_is_refused_by_name(count):
    import tilesplash.flex as tf

    q = torch.randn(1, 3, 64, 16)
    bm = tf.block_mask(["causal"] * count, 64, block_size=16)
    with pytest.raises(ValueError, match=f"per-head list of {count} masks for 3 heads"):
        tf.run_flex(q, q, q, bm, None)
    with pytest.raises(ValueError, match=f"list of {count} masks for 3 heads"):
        tf.block_mask(["causal"] * count, 64, block_size=16, heads=3)
    good = tf.block_mask(["causal", "dense", "causal"], 64, block_size=16, heads=3)
    out, _ = tf.run_flex(q, q, q, good, None)
    dense, _ = tf.run_flex(q, q, q, tf.block_mask("dense", 64, block_size=16, heads=3), None)
    assert torch.equal(out[:, 1], dense[:, 1])


@pytest.mark.parametrize("backend", ["cpu", "flex"])
def test_key_lengths_needs_one_per_batch_entry_even_when_nothing_is_padded(backend):
    geometry = tilesplash.VideoGeometry(2, 4, 4, text=8, text_at="after")
    n = geometry.tokens
    attention = tilesplash.VideoAttention(geometry, backend=backend)
    q = torch.randn(2, n, 2, 16)
    for lengths in ([n, n, n], [n], [n - 2, n, n]):
        with pytest.raises(ValueError, match=r"key_lengths: expected one per batch entry \(2\), "
                                             f"got {len(lengths)}"):
            attention(q, q, q, key_lengths=lengths)
    attention(q, q, q, key_lengths=[n, n])


@pytest.mark.parametrize("name, bad", [("q", float("nan")), ("k", float("inf")),
                                       ("v", float("-inf"))])
def test_jax_route_refuses_nan_and_inf_by_name(name, bad):
    jnp = pytest.importorskip("jax.numpy")
    import tilesplash.jax as tsj

    geometry = tilesplash.VideoGeometry(2, 4, 4)
    arrays = {x: torch.randn(2, geometry.tokens, 16).numpy() for x in "qkv"}
    arrays[name][1, 3, 5] = bad
    with pytest.raises(ValueError, match=f"{name}: NaN or Inf"):
        tsj.route(*(jnp.asarray(arrays[x]) for x in "qkv"), geometry, samples=8)
    arrays[name][1, 3, 5] = 0.0
    tsj.route(*(jnp.asarray(arrays[x]) for x in "qkv"), geometry, samples=8)


def _cli():
    cli = os.environ.get("TILESPLASH_CLI")
    if not cli or not pathlib.Path(cli).exists():
        pytest.skip("TILESPLASH_CLI does not name the built CLI")
    return cli


LONG_PLAN = ["plan", "--mask", "local:left=128,right=128", "--q-len", "50000000"]


def test_plan_help_says_how_long_a_huge_plan_takes():
    out = subprocess.run([_cli(), "plan", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "2,000,000,000" in out and "minutes" in out and "stderr" in out


def test_a_long_plan_shows_progress_on_a_terminal_and_past_two_seconds():
    # On a terminal: a line from the first second on (this plan takes seconds anywhere).
    leader, follower = pty.openpty()
    start = time.monotonic()
    proc = subprocess.Popen([_cli(), *LONG_PLAN, "--json"], stdout=subprocess.PIPE,
                            stderr=follower)
    os.close(follower)
    seen = b""
    while proc.poll() is None or select.select([leader], [], [], 0)[0]:
        if select.select([leader], [], [], 0.2)[0]:
            try:
                seen += os.read(leader, 4096)
            except OSError:
                break
    proc.communicate()
    os.close(leader)
    seconds = time.monotonic() - start
    assert proc.returncode == 0
    if seconds > 1.5:
        assert b"tilesplash plan: building the plan of 50000000 x 50000000" in seen, seen
        assert b"s so far" in seen
    # Not a terminal: quiet for two seconds, then the same lines.
    start = time.monotonic()
    run = subprocess.run([_cli(), *LONG_PLAN], capture_output=True, text=True, check=True)
    seconds = time.monotonic() - start
    if seconds > 3.0:
        assert "tilesplash plan: building the plan of" in run.stderr
    elif seconds < 1.5:
        assert run.stderr == ""
    assert "kept_pairs" in run.stdout
