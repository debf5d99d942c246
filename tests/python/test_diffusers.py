"""tilesplash.diffusers.enable on a tiny random-weight WanTransformer3DModel.

Tolerance for "equals the native output": DENSE_TOLERANCE, relative to the
largest output value. Dense attention through tilesplash and through PyTorch's
SDPA are both exact f32 algorithms that differ only in summation order and exp
rounding; on this model two such kernels (SDPA against a plain f32 or f64
softmax(QK^T)V) give model outputs that differ by about 3e-7 of the largest
value. 1e-5 leaves a 30x margin and is still four orders of magnitude below
what a wrong mask, layout or geometry does (test_sparse_differs_from_native
checks that gap).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

from diffusers_tiny import HEADS, LAYERS, TOKENS, relative_error, run_wan, tiny_wan, wan_inputs  # noqa: E402

DENSE_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def model():
    return tiny_wan()


@pytest.fixture(scope="module")
def inputs():
    return wan_inputs()


@pytest.fixture(scope="module")
def native(model, inputs):
    return run_wan(model, *inputs)


@pytest.fixture
def enabled(model):
    handles = []

    def make(**options):
        handle = tsd.enable(model, **options)
        handles.append(handle)
        return handle

    yield make
    for handle in handles:
        handle.remove()


def test_force_dense_equals_native(model, inputs, native, enabled):
    handle = enabled(force="dense")
    out = run_wan(model, *inputs)
    assert relative_error(out, native) <= DENSE_TOLERANCE
    assert all(head["choice"] == "dense" for record in handle.report() for head in record["heads"])


def test_density_one_equals_native(model, inputs, native, enabled):
    handle = enabled(density=1.0, dense_layers=0)
    out = run_wan(model, *inputs)
    assert relative_error(out, native) <= DENSE_TOLERANCE
    heads = [head for record in handle.report() for head in record["heads"]]
    assert heads and all(head["choice"] in ("spatial", "temporal") for head in heads)
    assert all(head["density"] == pytest.approx(1.0) for head in heads)


def test_sparse_differs_from_native(model, inputs, native, enabled):
    # The equality tests above mean something only if a 25% mask changes the output.
    enabled(density=0.25, dense_layers=0)
    out = run_wan(model, *inputs)
    assert torch.isfinite(out).all()
    assert relative_error(out, native) > 1000 * DENSE_TOLERANCE


@pytest.mark.parametrize("force", ["spatial", "temporal"])
def test_forced_masks_differ_from_each_other_and_native(model, inputs, native, enabled, force):
    handle = enabled(force=force, dense_layers=0)
    out = run_wan(model, *inputs)
    assert relative_error(out, native) > 1000 * DENSE_TOLERANCE
    assert {head["choice"] for record in handle.report() for head in record["heads"]} == {force}


def test_remove_restores_bit_identical(model, inputs, native, request):
    originals = [block.attn1.processor for block in model.blocks]
    cross = [block.attn2.processor for block in model.blocks]
    handle = tsd.enable(model, dense_layers=0)
    request.addfinalizer(handle.remove)  # a failure below must not leave the shared model enabled
    assert all(block.attn1.processor._attention_backend == "tilesplash" for block in model.blocks)
    assert all(block.attn1.processor is not original for block, original in zip(model.blocks, originals))
    assert [block.attn2.processor for block in model.blocks] == cross  # cross-attention untouched
    sparse = run_wan(model, *inputs)
    assert not torch.equal(sparse, native)
    handle.remove()
    assert not handle.active
    assert [block.attn1.processor for block in model.blocks] == originals
    assert not model._forward_pre_hooks
    assert torch.equal(run_wan(model, *inputs), native)
    handle.remove()  # a second remove changes nothing
    assert torch.equal(run_wan(model, *inputs), native)


def test_enable_again_after_remove(model, inputs, native):
    for _ in range(2):
        handle = tsd.enable(model, force="dense")
        try:
            assert relative_error(run_wan(model, *inputs), native) <= DENSE_TOLERANCE
        finally:
            handle.remove()
    assert torch.equal(run_wan(model, *inputs), native)


def test_warmup_by_layer(model, inputs, enabled):
    handle = enabled(dense_layers=1)
    run_wan(model, *inputs)
    report = handle.report()
    assert [record["layer"] for record in report] == list(range(LAYERS))
    for record in report:
        choices = {head["choice"] for head in record["heads"]}
        if record["layer"] < 1:
            assert choices == {"dense"}
        else:
            assert choices <= {"spatial", "temporal"}
            assert all(head["density"] < 0.5 for head in record["heads"])


def test_warmup_by_step_with_cfg(model, inputs, enabled):
    handle = enabled(dense_layers=0, dense_steps=2)
    hidden, text = inputs
    for timestep in (999.0, 900.0, 750.0):
        run_wan(model, hidden, text, timestep)  # conditional
        run_wan(model, hidden, -text, timestep)  # unconditional: same timestep, same step
    report = handle.report()
    assert len(report) == 3 * 2 * LAYERS
    assert [record["step"] for record in report] == [step for step in range(3) for _ in range(2 * LAYERS)]
    for record in report:
        choices = {head["choice"] for head in record["heads"]}
        assert (choices == {"dense"}) == (record["step"] < 2)


def test_warmup_everywhere_equals_force_dense(model, inputs, enabled):
    handle = enabled(dense_layers=LAYERS)
    warm = run_wan(model, *inputs)
    handle.remove()
    enabled(force="dense")
    assert torch.equal(warm, run_wan(model, *inputs))


def test_step_counting(model, inputs, enabled):
    handle = enabled()
    hidden, text = inputs
    timesteps = [999, 999, 900, 900, 900, 750, 999, 999, 900]  # the second 999 starts a new run
    for timestep in timesteps:
        run_wan(model, hidden, text, float(timestep))
    steps = [record["step"] for record in handle.report() if record["layer"] == 0]
    assert steps == [0, 0, 1, 1, 1, 2, 0, 0, 1]


def test_step_counting_with_batched_cfg(model, enabled):
    # CFG batched into one call (timestep [t, t]) and CFG as two calls count alike;
    # a change of batch size at one timestep is not a new step.
    handle = enabled()
    hidden, text = wan_inputs(batch=2)
    for timestep, batch in ((999.0, 2), (999.0, 1), (900.0, 2), (900.0, 1), (900.0, 1), (800.0, 1)):
        run_wan(model, hidden[:batch], text[:batch], timestep)
    steps = [record["step"] for record in handle.report() if record["layer"] == 0]
    assert steps == [0, 0, 1, 1, 1, 2]


def test_set_step(model, inputs, enabled):
    handle = enabled()
    hidden, text = inputs
    run_wan(model, hidden, text, 999.0)
    handle.set_step(7)
    run_wan(model, hidden, text, 999.0)  # same timestep, but the pinned step wins
    run_wan(model, hidden, text, 999.0)
    run_wan(model, hidden, text, 900.0)
    handle.set_step(3)
    run_wan(model, hidden, text, 100.0)
    steps = [record["step"] for record in handle.report() if record["layer"] == 0]
    assert steps == [0, 7, 7, 8, 3]
    with pytest.raises(ValueError, match="step"):
        handle.set_step(-1)
    with pytest.raises(TypeError, match="step"):
        handle.set_step(1.5)


def test_set_step_drives_warmup(model, inputs, enabled):
    handle = enabled(dense_layers=0, dense_steps=5)
    hidden, text = inputs
    for step, expect_dense in ((4, True), (5, False)):
        handle.set_step(step)
        run_wan(model, hidden, text, 999.0)
        record = handle.report()[-1]
        assert record["step"] == step
        assert ({head["choice"] for head in record["heads"]} == {"dense"}) == expect_dense


def test_report_contents(model, inputs, enabled):
    handle = enabled(dense_layers=1, samples=32)
    run_wan(model, *inputs)
    report = handle.report()
    assert len(report) == LAYERS
    for record in report:
        assert {"layer", "module", "step", "heads", "seconds", "geometry"} <= set(record)
        assert record["module"] == f"blocks.{record['layer']}.attn1"
        assert record["step"] == 0
        assert record["seconds"] > 0
        assert record["geometry"] == {"frames": 6, "height": 8, "width": 8, "text": 0, "text_at": "none",
                                      "key_lengths": None}
        assert record["transformer"] == "WanTransformer3DModel"
        assert len(record["heads"]) == HEADS
        # A head's time is part of the layer's attention time, itself part of the call.
        assert sum(head["seconds"] for head in record["heads"]) == pytest.approx(
            record["attention_seconds"], rel=1e-9, abs=1e-12)
        assert record["attention_seconds"] <= record["seconds"]
        for head in record["heads"]:
            assert {"choice", "mse_spatial", "mse_temporal", "density", "seconds"} <= set(head)
            assert head["seconds"] > 0
            if record["layer"] == 0:
                assert head["choice"] == "dense" and head["density"] == 1.0
            else:
                assert head["choice"] in ("spatial", "temporal")
                assert 0.15 < head["density"] < 0.35  # the 25% target, as achieved
                smaller = min(head["mse_spatial"], head["mse_temporal"])
                chosen = head["mse_spatial"] if head["choice"] == "spatial" else head["mse_temporal"]
                assert chosen == smaller and math.isfinite(chosen)
    assert handle.report() is not handle.report()  # a copy: callers may keep it
    handle.clear_report()
    assert handle.report() == []


def test_report_is_a_deep_copy(model, inputs, enabled):
    handle = enabled(dense_layers=1, samples=32)
    run_wan(model, *inputs)
    before = handle.report()
    edited = handle.report()
    edited[0]["step"] = 99
    edited[0]["heads"][0]["choice"] = "edited"
    edited[0]["heads"][0]["mse"]["spatial"] = -1.0
    edited[0]["geometry"]["frames"] = 0
    edited[1]["heads"].clear()
    edited.clear()
    assert handle.report() == before
    assert tsd.summarize(handle.report()) == tsd.summarize(before)


def test_summarize(model, inputs, enabled):
    handle = enabled(dense_steps=1)
    hidden, text = inputs
    for timestep in (999.0, 999.0, 900.0, 900.0):
        run_wan(model, hidden, text, timestep)
    rows = tsd.summarize(handle.report())
    assert [row["step"] for row in rows] == [0, 1]
    assert [row["calls"] for row in rows] == [2 * LAYERS, 2 * LAYERS]
    assert rows[0]["dense"] == 2 * LAYERS * HEADS and rows[0]["spatial"] + rows[0]["temporal"] == 0
    assert rows[1]["dense"] == 2 * HEADS  # layer 0 stays dense (dense_layers=1)
    assert rows[1]["spatial"] + rows[1]["temporal"] == 2 * (LAYERS - 1) * HEADS
    assert rows[0]["density"] == 1.0 and rows[1]["density"] < 1.0
    table = tsd.summary_table(handle.report()).splitlines()
    assert table[0].split() == ["step", "calls", "dense", "spatial", "temporal", "density", "attention_ms",
                                "saved_ms"]
    assert [line.split()[:3] for line in table[1:]] == [["0", str(2 * LAYERS), str(2 * LAYERS * HEADS)],
                                                        ["1", str(2 * LAYERS), str(2 * HEADS)]]


def test_geometry_follows_the_input(model, enabled):
    shapes = ((6, 16, 16), (3, 8, 12), (6, 16, 16))
    cases = [wan_inputs(frames=f, height=h, width=w) for f, h, w in shapes]
    natives = [run_wan(model, *case) for case in cases]
    handle = enabled(force="dense")
    for case, native in zip(cases, natives):
        assert relative_error(run_wan(model, *case), native) <= DENSE_TOLERANCE
    geometries = [{key: record["geometry"][key] for key in ("frames", "height", "width", "text")}
                  for record in handle.report() if record["layer"] == 0]
    assert geometries == [
        {"frames": 6, "height": 8, "width": 8, "text": 0},
        {"frames": 3, "height": 4, "width": 6, "text": 0},
        {"frames": 6, "height": 8, "width": 8, "text": 0},
    ]
    assert len(handle._runtime._layers) == 2  # one VideoAttention per geometry, reused


def test_batch_of_two_equals_native(model, enabled):
    hidden, text = wan_inputs(batch=2)
    native = run_wan(model, hidden, text)
    handle = enabled(force="dense")
    out = run_wan(model, hidden, text)
    assert relative_error(out, native) <= DENSE_TOLERANCE
    handle.remove()
    handle = enabled(density=0.25, dense_layers=0)
    sparse = run_wan(model, hidden, text)
    single = run_wan(model, hidden[1:], text[1:])
    # Routing looks at each sequence's own rows, so a batch is its sequences run one by one.
    assert relative_error(sparse[1:], single) <= DENSE_TOLERANCE


def test_fused_projections(inputs):
    model = tiny_wan()
    model.fuse_qkv_projections()
    native = run_wan(model, *inputs)
    handle = tsd.enable(model, force="dense")
    try:
        assert relative_error(run_wan(model, *inputs), native) <= DENSE_TOLERANCE
    finally:
        handle.remove()


def test_bfloat16_model(inputs):
    model = tiny_wan(dtype=torch.bfloat16)
    hidden, text = (x.to(torch.bfloat16) for x in inputs)
    native = run_wan(model, hidden, text)
    handle = tsd.enable(model, force="dense")
    try:
        out = run_wan(model, hidden, text)
    finally:
        handle.remove()
    assert out.dtype == torch.bfloat16
    # bf16 keeps 8 bits of mantissa: two correct kernels differ by a few bf16 ulps.
    assert relative_error(out, native) <= 3e-2


def test_blocks_called_alone_need_the_transformer(model, inputs, enabled):
    enabled()
    block = model.blocks[0]
    tokens = torch.randn(1, TOKENS, HEADS * 64)
    with pytest.raises(RuntimeError, match="call the transformer"):
        block.attn1(tokens, None, None, None)


def test_token_count_must_match_the_input(model, inputs, enabled):
    enabled()
    run_wan(model, *inputs)
    with pytest.raises(ValueError, match="tokens"), torch.no_grad():
        model.blocks[1].attn1(torch.randn(1, TOKENS - 8, HEADS * 64), None, None, None)


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"density": 0.0}, ValueError, "density"),
        ({"density": 1.5}, ValueError, "density"),
        ({"density": float("nan")}, ValueError, "density"),
        ({"density": "0.25"}, TypeError, "density"),
        ({"density": True}, TypeError, "density"),
        ({"sink": 1}, TypeError, "sink"),
        ({"dense_layers": -1}, ValueError, "dense_layers"),
        ({"dense_layers": 1.0}, TypeError, "dense_layers"),
        ({"dense_steps": -2}, ValueError, "dense_steps"),
        ({"force": "sparse"}, ValueError, "force"),
        ({"force": 1}, TypeError, "force"),
        ({"samples": -1}, ValueError, "samples"),
        ({"samples": "64"}, TypeError, "samples"),
        ({"threads": -1}, ValueError, "threads"),
        ({"threads": 2**40}, ValueError, r"threads: expected an int in \[0, 4096\]"),
        ({"timeout": -1}, ValueError, "timeout"),
        ({"timeout": 0}, ValueError, "timeout"),
        ({"timeout": float("nan")}, ValueError, "timeout"),
        ({"timeout": float("inf")}, ValueError, "timeout"),
        ({"timeout": "60"}, TypeError, "timeout"),
        ({"process_group": object()}, TypeError, "process_group"),
    ],
)
def test_bad_arguments(model, options, error, match):
    with pytest.raises(error, match=match):
        tsd.enable(model, **options)
    assert all(type(block.attn1.processor).__name__ == "WanAttnProcessor" for block in model.blocks)


def test_unsupported_models():
    with pytest.raises(TypeError, match="WanTransformer3DModel"):
        tsd.enable(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="WanTransformer3DModel"):
        tsd.enable("transformer")


def test_enable_twice_is_refused(model, enabled):
    enabled()
    with pytest.raises(ValueError, match="already"):
        tsd.enable(model)


def test_foreign_processor_is_refused():
    model = tiny_wan(layers=1)
    model.blocks[0].attn1.set_processor(object())
    with pytest.raises(ValueError, match="WanAttnProcessor"):
        tsd.enable(model)


def test_image_to_video_model():
    # Wan 2.1 I2V: image tokens enter through attn2's added projections; attn1 is plain self-attention.
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    model = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=HEADS, attention_head_dim=64, in_channels=8, out_channels=4,
        text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=64, image_dim=16,
        added_kv_proj_dim=HEADS * 64,
    ).eval()
    generator = torch.Generator().manual_seed(3)
    kwargs = dict(
        hidden_states=torch.randn(1, 8, 4, 16, 16, generator=generator),
        timestep=torch.tensor([500]),
        encoder_hidden_states=torch.randn(1, 512, 32, generator=generator),  # Wan's fixed text length
        encoder_hidden_states_image=torch.randn(1, 257, 16, generator=generator),
        return_dict=False,
    )
    with torch.no_grad():
        native = model(**kwargs)[0]
        handle = tsd.enable(model, force="dense")
        try:
            out = model(**kwargs)[0]
            assert len(handle.report()) == 2
        finally:
            handle.remove()
    assert relative_error(out, native) <= DENSE_TOLERANCE


def test_per_token_timesteps_count_as_one_step(model, inputs, enabled):
    # Wan 2.2 TI2V passes timestep [B, tokens]: the first frame's tokens at 0, the rest at t.
    handle = enabled()
    hidden, text = inputs
    for t in (999.0, 999.0, 900.0):
        timestep = torch.full((1, TOKENS), t)
        timestep[:, : TOKENS // 6] = 0.0
        with torch.no_grad():
            model(hidden_states=hidden, timestep=timestep, encoder_hidden_states=text, return_dict=False)
    assert [record["step"] for record in handle.report() if record["layer"] == 0] == [0, 0, 1]


def test_gradients_are_refused_not_cut(model, inputs, enabled):
    # No backward: a call that builds an autograd graph must fail, not return a detached output.
    enabled()
    hidden, text = inputs
    with pytest.raises(RuntimeError, match="no_grad"):
        model(hidden_states=hidden, timestep=torch.tensor([500.0]), encoder_hidden_states=text, return_dict=False)
    with torch.inference_mode():
        model(hidden_states=hidden, timestep=torch.tensor([500.0]), encoder_hidden_states=text, return_dict=False)
