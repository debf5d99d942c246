"""tilesplash.diffusers.enable on a tiny random-weight CogVideoXTransformer3DModel.

CogVideoX runs joint attention: 8 text tokens before 4 latent frames of 8 x 8
video tokens. Same tolerance as test_diffusers.py (see there for why).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

from diffusers_tiny import relative_error  # noqa: E402

DENSE_TOLERANCE = 1e-5
HEADS, HEAD_DIM, LAYERS, TEXT = 2, 64, 2, 8
FRAMES, HEIGHT, WIDTH = 4, 16, 16  # latent; patch 2 gives 4 x 8 x 8 video tokens


@pytest.fixture(scope="module")
def model():
    from diffusers import CogVideoXTransformer3DModel

    torch.manual_seed(0)
    return CogVideoXTransformer3DModel(
        num_attention_heads=HEADS,
        attention_head_dim=HEAD_DIM,
        in_channels=4,
        out_channels=4,
        time_embed_dim=32,
        text_embed_dim=32,
        num_layers=LAYERS,
        sample_width=WIDTH,
        sample_height=HEIGHT,
        sample_frames=4 * (FRAMES - 1) + 1,
        patch_size=2,
        temporal_compression_ratio=4,
        max_text_seq_length=TEXT,
    ).eval()


@pytest.fixture(scope="module")
def inputs():
    generator = torch.Generator().manual_seed(1)
    hidden = torch.randn(1, FRAMES, 4, HEIGHT, WIDTH, generator=generator)
    text = torch.randn(1, TEXT, 32, generator=generator)
    video_tokens = FRAMES * (HEIGHT // 2) * (WIDTH // 2)
    angles = torch.rand(video_tokens, HEAD_DIM, generator=generator) * 6.28
    return hidden, text, (angles.cos(), angles.sin())


def run(model, inputs, rotary: bool = True):
    hidden, text, rotary_emb = inputs
    with torch.no_grad():
        return model(
            hidden_states=hidden,
            encoder_hidden_states=text,
            timestep=torch.tensor([500]),
            image_rotary_emb=rotary_emb if rotary else None,
            return_dict=False,
        )[0]


@pytest.mark.parametrize("rotary", [True, False])
def test_force_dense_equals_native(model, inputs, rotary):
    native = run(model, inputs, rotary)
    handle = tsd.enable(model, force="dense")
    try:
        out = run(model, inputs, rotary)
        report = handle.report()
    finally:
        handle.remove()
    assert relative_error(out, native) <= DENSE_TOLERANCE
    assert len(report) == LAYERS
    assert report[0]["geometry"] == {"frames": FRAMES, "height": HEIGHT // 2, "width": WIDTH // 2, "text": TEXT,
                                     "text_at": "before", "key_lengths": None}
    assert torch.equal(run(model, inputs, rotary), native)


def test_routed_sparse_runs_and_differs(model, inputs):
    native = run(model, inputs)
    handle = tsd.enable(model, density=0.25, dense_layers=0, sink=False)
    try:
        out = run(model, inputs)
        heads = [head for record in handle.report() for head in record["heads"]]
    finally:
        handle.remove()
    assert torch.isfinite(out).all()
    assert relative_error(out, native) > 1000 * DENSE_TOLERANCE
    assert {head["choice"] for head in heads} <= {"spatial", "temporal"}
    # Text rows and columns stay full, so a head keeps more than its 25% band of the video.
    assert all(0.2 < head["density"] < 0.5 for head in heads)


def test_density_one_equals_native(model, inputs):
    native = run(model, inputs)
    handle = tsd.enable(model, density=1.0, dense_layers=0)
    try:
        out = run(model, inputs)
    finally:
        handle.remove()
    assert relative_error(out, native) <= DENSE_TOLERANCE
