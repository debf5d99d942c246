"""What people stack with tilesplash: diffusers' cache hooks (FirstBlockCache, TaylorSeer),
torch.compile after enable(), model CPU offload and group offloading, a peft LoRA added before
and after enable(), and classifier-free guidance batched or as two calls. In each case
force="dense" must give what the same stack gives with diffusers' own attention."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

from diffusers_models import BY_NAME, hunyuan_inputs, relative_error, run  # noqa: E402

DENSE_TOLERANCE = 1e-5
WAN = BY_NAME["WanTransformer3DModel"]
TIMESTEPS = (900.0, 800.0, 700.0, 600.0)


def _steps(model, inputs, context="cond"):
    """The transformer at each of TIMESTEPS, inside a cache context as pipelines call it."""
    outputs = []
    for t in TIMESTEPS:
        with model.cache_context(context):
            outputs.append(run(model, dict(inputs, timestep=torch.full_like(inputs["timestep"], t))))
    return outputs


@pytest.mark.parametrize("cache", ["first_block", "taylorseer"])
def test_cache_hooks(cache):
    from diffusers.hooks import FirstBlockCacheConfig, TaylorSeerCacheConfig

    def config():
        if cache == "first_block":  # a threshold no residual change reaches: blocks after the first reused
            return FirstBlockCacheConfig(threshold=1e9)
        # attn1's output predicted at steps 1 and 3, computed at 0 and 2
        return TaylorSeerCacheConfig(cache_interval=2, disable_cache_before_step=1,
                                     taylor_factors_dtype=torch.float32,
                                     cache_identifiers=[r"blocks\.\d+\.attn1"])

    inputs = WAN.inputs(1, 2)
    results = []
    for with_tilesplash in (False, True):
        model = WAN.build()
        model.enable_cache(config())
        handle = tsd.enable(model, force="dense") if with_tilesplash else None
        results.append(_steps(model, inputs))
        if handle is not None:
            calls = [(record["step"], record["layer"]) for record in handle.report()]
            handle.remove()
        model.disable_cache()
    native, tiled = results
    for a, b in zip(tiled, native):
        assert relative_error(a, b) <= DENSE_TOLERANCE
    uncached = WAN.build()
    assert relative_error(run(uncached, dict(inputs, timestep=torch.tensor([TIMESTEPS[-1]]))),
                          native[-1]) > 100 * DENSE_TOLERANCE  # the cache changed the result
    if cache == "first_block":  # step 0 runs both layers, later steps only the first block
        assert calls == [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0)]
    else:  # attn1 computed at TaylorSeer's first two steps, its output predicted at the next two
        assert calls == [(0, 0), (0, 1), (1, 0), (1, 1)]


@pytest.mark.parametrize("name", ["WanTransformer3DModel", "HunyuanVideoTransformer3DModel"])
def test_torch_compile_after_enable_is_one_graph(name):
    # fullgraph=True: any graph break raises. The tilesplash op is one opaque node of the graph;
    # steps are observed when it runs, so a new timestep neither recompiles nor is missed.
    from torch._dynamo.testing import CompileCounterWithBackend

    case = BY_NAME[name]
    model = case.build()
    inputs = hunyuan_inputs(2, 3, lengths=[4, 10]) if name.startswith("Hunyuan") else case.inputs(1, 3)
    native = run(model, inputs)
    handle = tsd.enable(model, density=0.3, dense_layers=0, samples=8)
    try:
        eager = run(model, inputs)
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(model, fullgraph=True, backend=counter)
        outputs = [run(compiled, dict(inputs, timestep=torch.full_like(inputs["timestep"], t)))
                   for t in (500.0, 400.0, 300.0)]
        steps = [record["step"] for record in handle.report() if record["layer"] == 0]
        handle.remove()  # the compiled model's guards see it: the next call recompiles, native
        assert torch.equal(run(compiled, inputs), native)
    finally:
        handle.remove()
        torch._dynamo.reset()
    assert counter.frame_count == 2
    assert torch.equal(outputs[0], eager)
    assert steps == [0, 0, 1, 2]
    assert not torch.equal(outputs[0], native)


def test_torch_compile_force_dense_equals_native():
    model = WAN.build()
    inputs = WAN.inputs(1, 4)
    native = run(model, inputs)
    handle = tsd.enable(model, force="dense")
    try:
        torch._dynamo.reset()
        out = run(torch.compile(model, fullgraph=True, backend="aot_eager"), inputs)
    finally:
        handle.remove()
        torch._dynamo.reset()
    assert relative_error(out, native) <= DENSE_TOLERANCE


def test_group_offloading():
    # Block-level group offloading's hooks (CPU to CPU here: no accelerator; the hooks run the same).
    inputs = WAN.inputs(1, 5)
    model = WAN.build()
    native = run(model, inputs)
    model.enable_group_offload(onload_device=torch.device("cpu"), offload_device=torch.device("cpu"),
                               offload_type="block_level", num_blocks_per_group=1)
    handle = tsd.enable(model, force="dense")
    try:
        out = run(model, inputs)
        assert len(handle.report()) == 2
    finally:
        handle.remove()
    assert relative_error(out, native) <= DENSE_TOLERANCE


def _example():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import wan_pipeline

    return wan_pipeline


def test_model_cpu_offload_pipeline():
    pytest.importorskip("accelerate")
    example = _example()
    positive, negative = example.prompt_embeddings(0)

    def generate(with_tilesplash):
        pipe = example.tiny_pipeline(0)
        pipe.enable_model_cpu_offload(device="cpu")  # accelerate's hooks on every component
        handle = tsd.enable(pipe, force="dense") if with_tilesplash else None
        try:
            return pipe(prompt_embeds=positive, negative_prompt_embeds=negative, height=32, width=32,
                        num_frames=5, num_inference_steps=2, generator=torch.Generator().manual_seed(0),
                        output_type="latent").frames
        finally:
            if handle is not None:
                assert len(handle.report()) == 2 * 2 * 4  # steps x CFG calls x layers
                handle.remove()

    assert relative_error(generate(True), generate(False)) <= DENSE_TOLERANCE


@pytest.mark.parametrize("order", ["lora_then_enable", "enable_then_lora"])
def test_peft_lora(order):
    pytest.importorskip("peft")
    from peft import LoraConfig

    inputs = WAN.inputs(1, 6)
    model = WAN.build()
    plain = run(model, inputs)
    lora = LoraConfig(r=4, lora_alpha=4, init_lora_weights=False,
                      target_modules=["to_q", "to_k", "to_v", "to_out.0"])

    def add_lora():
        torch.manual_seed(1)  # init_lora_weights=False: random A and B, so the LoRA changes the output
        model.add_adapter(lora, adapter_name="style")

    if order == "lora_then_enable":
        add_lora()
        handle = tsd.enable(model, force="dense")
    else:  # the LoRA wraps the projections of processors tilesplash already switched
        handle = tsd.enable(model, force="dense")
        add_lora()
    try:
        out = run(model, inputs)
    finally:
        handle.remove()
    native = run(model, inputs)  # diffusers' attention, the LoRA still loaded
    assert relative_error(native, plain) > 100 * DENSE_TOLERANCE  # the LoRA is there
    assert relative_error(out, native) <= DENSE_TOLERANCE


def test_classifier_free_guidance_batched_and_as_two_calls():
    model = WAN.build()
    cond = WAN.inputs(1, 7)
    uncond = dict(cond, encoder_hidden_states=torch.zeros_like(cond["encoder_hidden_states"]))
    batched = dict(cond, hidden_states=torch.cat([cond["hidden_states"]] * 2),
                   encoder_hidden_states=torch.cat([cond["encoder_hidden_states"],
                                                    uncond["encoder_hidden_states"]]),
                   timestep=torch.cat([cond["timestep"]] * 2))
    native = run(model, batched)
    handle = tsd.enable(model, density=0.3, samples=8)
    try:
        for t in (900.0, 800.0):
            two = [run(model, dict(x, timestep=torch.tensor([t]))) for x in (cond, uncond)]
            one = run(model, dict(batched, timestep=torch.tensor([t, t])))
            # Per entry, the same decisions (a batch of two may sum the linear layers in another
            # order than two batches of one, so bits may differ; a different mask would not be 1e-5).
            assert relative_error(torch.cat(two), one) <= DENSE_TOLERANCE
        steps = [record["step"] for record in handle.report() if record["layer"] == 1]
    finally:
        handle.remove()
    assert steps == [0, 0, 0, 1, 1, 1]  # two calls and a batch at one timestep: one step
    handle = tsd.enable(model, force="dense")
    try:
        assert relative_error(run(model, batched), native) <= DENSE_TOLERANCE
    finally:
        handle.remove()


def test_two_models_in_two_threads():
    # Each thread's attention calls reach its own model's handle (the current call site is
    # per thread), each handle on its own threading context.
    import threading

    import tilesplash

    cases = [(WAN.build(), WAN.inputs(1, 8)), (BY_NAME["CogVideoXTransformer3DModel"].build(),
                                               BY_NAME["CogVideoXTransformer3DModel"].inputs(1, 8))]
    handles = [tsd.enable(model, density=0.3, samples=8, context=tilesplash.ThreadingContext(1))
               for model, _ in cases]
    try:
        alone = [run(model, inputs) for model, inputs in cases]
        results = [[], []]

        def work(i):
            model, inputs = cases[i]
            for _ in range(4):
                results[i].append(run(model, inputs))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for handle in handles:
            handle.remove()
    for i in range(2):
        assert len(results[i]) == 4 and all(torch.equal(out, alone[i]) for out in results[i])
