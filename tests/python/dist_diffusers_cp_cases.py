"""Rank-side code of the tests of diffusers' own context parallelism with tilesplash
(test_diffusers_context_parallel.py, run inside dist_harness ranks).

Every rank builds the same tiny model and inputs, turns on diffusers'
``enable_parallelism(config=ContextParallelConfig(ulysses_degree=world))`` and tilesplash's
``enable()``, and returns the output and its per-head choices; the test runs the same
model and settings in one process.

The CPU shim (diffusers 0.42.1 assumes an accelerator: ``_resolve_parallel_config``
takes the device as ``rank % torch.accelerator.device_count()``, 0 devices here, and builds
its mesh on the accelerator's device type): the ranks pass a gloo ``DeviceMesh`` of their
own as ``ContextParallelConfig(mesh=...)`` and ``torch.accelerator.device_count`` answers 1
while ``enable_parallelism`` runs. Nothing else is patched; on GPUs neither is needed.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import torch

import tilesplash.diffusers as tsd
from diffusers_models import BY_NAME, run
from diffusers_models_042 import helios_inputs


def helios_cp_inputs(batch, seed):
    # Short and mid history (32 + 4 tokens) before 48 video tokens: 84, which the 2 ranks split
    # evenly (diffusers' Ulysses needs that; its ulysses_anything mode does not).
    return dict(helios_inputs(batch, seed), latents_history_long=None,
                indices_latents_history_long=None)


def ltx_cp_inputs(batch, seed):
    # Without encoder_attention_mask: diffusers 0.42.1's LTX cross-attention expands it per
    # head, and its Ulysses template then adds an all-heads mask to one rank's heads (a shape
    # error in its native backend, tilesplash not involved).
    return dict(BY_NAME["LTXVideoTransformer3DModel"].inputs(batch, seed), encoder_attention_mask=None)


# model -> its inputs
INPUTS = {
    "WanTransformer3DModel": BY_NAME["WanTransformer3DModel"].inputs,
    "LTXVideoTransformer3DModel": ltx_cp_inputs,
    "HeliosTransformer3DModel": helios_cp_inputs,
    "ChronoEditTransformer3DModel": BY_NAME["ChronoEditTransformer3DModel"].inputs,
}
# name -> enable() keyword arguments
SETTINGS = {
    "dense": dict(force="dense"),
    "routed": dict(density=0.3, dense_layers=0, samples=8),
}


def _plan(model):
    """The model's _cp_plan without entries for blocks the tiny model lacks (Helios's names
    blocks 0-39 one by one, the released depth)."""
    def exists(name):
        try:
            model.get_submodule(name)
        except AttributeError:
            return False
        return True

    return {name: entry for name, entry in type(model)._cp_plan.items()
            if name == "" or "*" in name or exists(name)}


def enable_parallelism(model, **config):
    from diffusers import ContextParallelConfig
    from torch.distributed.device_mesh import init_device_mesh

    world = torch.distributed.get_world_size()
    shape = (config.get("ring_degree", 1), config.get("ulysses_degree", 1))
    assert shape[0] * shape[1] == world
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=("ring", "ulysses"))
    with _cpu_accelerator():
        model.enable_parallelism(config=ContextParallelConfig(**config, mesh=mesh),
                                 cp_plan=_plan(model))


@contextlib.contextmanager
def _cpu_accelerator():
    with mock.patch.object(torch.accelerator, "device_count", lambda: 1):
        yield


def choices(report):
    """(layer, step, batch, global head, choice) of every head the report holds."""
    return sorted((r["layer"], r["step"], h["batch"], h["head"], h["choice"])
                  for r in report for h in r["heads"])


def run_one(model_name, setting, world=1, tilesplash_first=False):
    """(output, choices) of one model and setting; with world > 1 under diffusers' context
    parallelism over the default group (this rank's choices: its heads)."""
    model = BY_NAME[model_name].build()
    inputs = INPUTS[model_name](1, 3)
    handle = None
    if tilesplash_first:
        handle = tsd.enable(model, threads=1, **SETTINGS[setting])
    if world > 1:
        enable_parallelism(model, ulysses_degree=world)
    if handle is None:
        handle = tsd.enable(model, threads=1, **SETTINGS[setting])
    try:
        out = run(model, inputs)
        return out.numpy(), choices(handle.report())
    finally:
        handle.remove()


def run_cp_cases(rank, world, cases):
    return {case: run_one(*case, world=world) for case in cases}


# One case enables tilesplash before enable_parallelism (the other order than the rest).
FIRST = ("LTXVideoTransformer3DModel", "routed")


def run_tilesplash_first(rank, world):
    return run_one(*FIRST, world=world, tilesplash_first=True)


def ring_is_refused(rank, world):
    model = BY_NAME["WanTransformer3DModel"].build()
    enable_parallelism(model, ring_degree=world)
    handle = tsd.enable(model, threads=1, force="dense")
    try:
        run(model, BY_NAME["WanTransformer3DModel"].inputs(1, 3))
    except NotImplementedError as error:
        return str(error)
    finally:
        handle.remove()
    return "no error"


def remove_restores_native(rank, world):
    """enable() then enable_parallelism, then remove(): the native model, in parallel, equals
    one process's native output."""
    model = BY_NAME["WanTransformer3DModel"].build()
    inputs = BY_NAME["WanTransformer3DModel"].inputs(1, 3)
    handle = tsd.enable(model, threads=1, density=0.3, dense_layers=0, samples=8)
    enable_parallelism(model, ulysses_degree=world)
    run(model, inputs)
    handle.remove()
    return run(model, inputs).numpy()
