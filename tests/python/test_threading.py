"""tilesplash.ThreadingContext: calls from several Python threads, each with its
own context (or sharing one), give the one-thread bits; the context reaches
attention (NumPy, windows and the torch op), VideoAttention (every method),
kmeans and the diffusers drop-in (tilesplash.distributed: test_distributed.py);
bad values are refused."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import tilesplash
from tilesplash import ThreadingContext, VideoAttention, VideoGeometry
from conftest import random_qkv

G = VideoGeometry(4, 4, 6, text=5, text_at="after")  # 101 tokens


def in_threads(work, count=2):
    """work(i) on `count` threads at once; returns their results, re-raising any error."""
    results, errors = [None] * count, []

    def run(i):
        try:
            results[i] = work(i)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_context_properties_and_errors():
    ctx = ThreadingContext(3)
    assert (ctx.threads, ctx.pin, ctx.first_cpu) == (3, False, 0)
    assert "ThreadingContext(3)" in repr(ctx)
    assert ThreadingContext().threads == tilesplash.hardware_threads() >= 1
    pinned = ThreadingContext(2, pin=True, first_cpu=1)
    assert (pinned.pin, pinned.first_cpu) == (True, 1)
    with pytest.raises(ValueError, match="threads"):
        ThreadingContext(-1)
    with pytest.raises(TypeError, match="threads"):
        ThreadingContext(1.5)
    with pytest.raises(ValueError, match="first_cpu"):
        ThreadingContext(1, first_cpu=-1)
    with pytest.raises(TypeError, match="pin"):
        ThreadingContext(1, pin=1)
    q = np.zeros((1, 1, 8, 8), np.float32)
    with pytest.raises(TypeError, match="context: expected a tilesplash.ThreadingContext"):
        tilesplash.attention(q, q, q, context=2)
    with pytest.raises(TypeError, match="context"):
        VideoAttention(G, context="ctx")


@pytest.mark.parametrize("mask", ["dense", "causal", "local:left=40,right=7"])
def test_attention_on_a_context_equals_the_default(mask):
    rng = np.random.default_rng(3)
    q, k, v = random_qkv(rng, 2, 3, 300, 300, 32, 32)
    plain, plain_lse = tilesplash.attention(q, k, v, mask=mask, return_lse=True)
    for ctx, threads in [(ThreadingContext(1), 0), (ThreadingContext(2), 0),
                         (ThreadingContext(1), 3)]:
        out, lse = tilesplash.attention(q, k, v, mask=mask, return_lse=True, context=ctx,
                                        threads=threads)
        assert np.array_equal(out, plain) and np.array_equal(lse, plain_lse)


@pytest.mark.parametrize("share", [False, True])
def test_two_python_threads_give_the_one_thread_bits(share):
    rng = np.random.default_rng(4)
    cases = [random_qkv(rng, 1, 2, n, n, 64, 64) for n in (257, 640)]
    one = ThreadingContext(1)
    serial = [tilesplash.attention(q, k, v, mask="causal", context=one) for q, k, v in cases]
    shared = ThreadingContext(2)

    def work(_):
        ctx = shared if share else ThreadingContext(2)
        return [[tilesplash.attention(q, k, v, mask="causal", context=ctx) for q, k, v in cases]
                for _ in range(3)]

    for rounds in in_threads(work):
        for outs in rounds:
            assert all(np.array_equal(a, b) for a, b in zip(outs, serial))


def test_two_video_attentions_with_their_own_contexts_give_the_one_thread_bits():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, G.tokens, 3, 32)).astype(np.float32) for _ in range(3))
    options = dict(density=0.3, sink=True, samples=16, block_q=64, block_kv=64)
    serial_layer = VideoAttention(G, context=ThreadingContext(1), **options)
    serial = [serial_layer(q, k, v, layer=1, step=s) for s in range(2)]

    def work(_):
        layer = VideoAttention(G, context=ThreadingContext(2), **options)
        return [layer(q, k, v, layer=1, step=s) for s in range(2)]

    for run in in_threads(work):
        for (out, report), (expected, expected_report) in zip(run, serial):
            assert np.array_equal(out, expected)
            assert [h["choice"] for h in report["heads"]] == \
                [h["choice"] for h in expected_report["heads"]]


def test_kmeans_in_two_threads_with_their_own_contexts_gives_the_one_thread_result():
    rng = np.random.default_rng(7)
    points = rng.standard_normal((3000, 24)).astype(np.float32)
    serial = tilesplash.kmeans(points, 17, seed=3, context=ThreadingContext(1))
    plain = tilesplash.kmeans(points, 17, seed=3)

    def work(_):
        return tilesplash.kmeans(points, 17, seed=3, context=ThreadingContext(2))

    for result in in_threads(work) + [plain]:
        assert np.array_equal(result.centroids, serial.centroids)
        assert np.array_equal(result.labels, serial.labels)
        assert result.iterations == serial.iterations
    with pytest.raises(TypeError, match="context"):
        tilesplash.kmeans(points, 3, context=object())


@pytest.mark.parametrize("method", ["mix", "svg2"])
def test_every_method_on_contexts_in_two_threads_gives_the_one_thread_bits(method):
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((1, G.tokens, 2, 32)).astype(np.float32) for _ in range(3))
    options = dict(method=method, density=0.4, samples=16, block_q=64, block_kv=64)
    serial_layer = VideoAttention(G, context=ThreadingContext(1), **options)
    serial = [serial_layer(q, k, v, layer=0, step=s)[0] for s in range(2)]

    def work(_):
        layer = VideoAttention(G, context=ThreadingContext(2), **options)
        return [layer(q, k, v, layer=0, step=s)[0] for s in range(2)]

    for run in in_threads(work):
        assert all(np.array_equal(a, b) for a, b in zip(run, serial))


def test_torch_op_takes_a_context_handle():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    q, k, v = (torch.from_numpy(a) for a in random_qkv(rng, 1, 2, 130, 130, 16, 16))
    ctx = ThreadingContext(2)
    assert torch.equal(tilesplash.attention(q, k, v, mask="causal", context=ctx),
                       tilesplash.attention(q, k, v, mask="causal"))
    causal = tilesplash.Mask.causal()  # a Mask, not a SPEC: dynamo cannot trace the parser
    compiled = torch.compile(lambda a, b, c: tilesplash.attention(a, b, c, mask=causal,
                                                                  context=ctx), fullgraph=True)
    assert torch.equal(compiled(q, k, v), tilesplash.attention(q, k, v, mask=causal))
    dropped = ThreadingContext(1)
    handle = dropped._handle
    del dropped
    gc.collect()
    with pytest.raises(ValueError, match="no longer exists"):
        torch.ops.tilesplash.attention(q, k, v, "dense", "bhnd", None, None, None, 0,
                                       context=handle)
    window = dict(mask="causal", q_offset=60, kv_offset=0, q_total=190, kv_total=130)
    assert torch.equal(tilesplash.attention(q, k, v, context=ctx, **window),
                       tilesplash.attention(q, k, v, **window))


def test_diffusers_enable_takes_a_context():
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    tsd = pytest.importorskip("tilesplash.diffusers")
    from diffusers_tiny import run_wan, tiny_wan, wan_inputs

    model, inputs = tiny_wan(), wan_inputs()
    outputs = []
    for context in (None, ThreadingContext(1)):
        handle = tsd.enable(model, density=0.5, dense_layers=0, context=context)
        outputs.append(run_wan(model, *inputs))
        handle.remove()
    assert torch.equal(outputs[0], outputs[1])
    with pytest.raises(TypeError, match="context"):
        tsd.enable(model, context=1)
