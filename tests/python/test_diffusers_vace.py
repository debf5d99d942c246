"""tilesplash.diffusers.enable on a tiny random-weight WanVACETransformer3DModel.

VACE adds a control branch (vace_blocks) whose self-attention is diffusers'
WanAttnProcessor on the same video tokens; each control block takes the layer
of the main block it feeds. Same tolerance as test_diffusers.py (see there).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

from diffusers_tiny import HEAD_DIM, HEADS, IN_CHANNELS, TEXT_DIM, relative_error, wan_inputs  # noqa: E402

DENSE_TOLERANCE = 1e-5
LAYERS, VACE_LAYERS, CONTROL_CHANNELS = 3, [0, 2], 8


@pytest.fixture(scope="module")
def model():
    from diffusers import WanVACETransformer3DModel

    torch.manual_seed(0)
    return WanVACETransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=HEADS,
        attention_head_dim=HEAD_DIM,
        in_channels=IN_CHANNELS,
        out_channels=IN_CHANNELS,
        text_dim=TEXT_DIM,
        freq_dim=32,
        ffn_dim=64,
        num_layers=LAYERS,
        rope_max_seq_len=64,
        vace_layers=VACE_LAYERS,
        vace_in_channels=CONTROL_CHANNELS,
    ).eval()


@pytest.fixture(scope="module")
def inputs():
    hidden, text = wan_inputs()
    control = torch.randn(1, CONTROL_CHANNELS, *hidden.shape[2:], generator=torch.Generator().manual_seed(2))
    return hidden, text, control


def run(model, inputs):
    hidden, text, control = inputs
    with torch.no_grad():
        return model(
            hidden_states=hidden,
            timestep=torch.tensor([500.0]),
            encoder_hidden_states=text,
            control_hidden_states=control,
            return_dict=False,
        )[0]


def test_force_dense_equals_native_and_remove_restores(model, inputs):
    native = run(model, inputs)
    handle = tsd.enable(model, force="dense")
    try:
        out = run(model, inputs)
        report = handle.report()
    finally:
        handle.remove()
    assert relative_error(out, native) <= DENSE_TOLERANCE
    # The control branch runs first, then the main blocks; every self-attention is swapped.
    assert [(r["module"], r["layer"]) for r in report] == [
        ("vace_blocks.0.attn1", 0),
        ("vace_blocks.1.attn1", 2),
        ("blocks.0.attn1", 0),
        ("blocks.1.attn1", 1),
        ("blocks.2.attn1", 2),
    ]
    assert torch.equal(run(model, inputs), native)


def test_warmup_layer_covers_the_control_block_that_feeds_it(model, inputs):
    native = run(model, inputs)
    handle = tsd.enable(model, dense_layers=1)
    try:
        out = run(model, inputs)
        report = handle.report()
    finally:
        handle.remove()
    assert torch.isfinite(out).all()
    assert relative_error(out, native) > 1000 * DENSE_TOLERANCE
    for record in report:
        choices = {head["choice"] for head in record["heads"]}
        assert (choices == {"dense"}) == (record["layer"] == 0), record["module"]
