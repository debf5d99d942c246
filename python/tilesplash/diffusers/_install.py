"""Switching one transformer to tilesplash, and back.

For each self-attention module the model's spec names: a copy of its
processor that asks the dispatcher for the "tilesplash" backend (or, for the
models that bypass the dispatcher, tilesplash's copy of their processor), a
forward pre-hook that makes the module's ``Site`` current and a forward hook
that clears it. On the transformer, a forward pre-hook that reads the call's
geometry (``ModelSpec.forward``). ``remove`` puts the original processor
objects back and drops the hooks, so the model computes exactly what it did.
"""

from __future__ import annotations

import copy
import inspect

import torch

from ._dispatch import ModelState, Site, backend_name, enter, leave
from ._models import ModelSpec
from ._processors import COPIES


def check_processors(model: torch.nn.Module, spec: ModelSpec, who: str) -> None:
    """Every module to switch holds one of the processors the spec serves, not tilesplash's."""
    for _, path, module in spec.modules(model):
        processor = module.processor
        name = type(processor).__name__
        if name in COPIES or getattr(processor, "_attention_backend", None) == "tilesplash":
            raise ValueError(f"{who}: {spec.name} already has tilesplash enabled; call "
                             "handle.remove() first")
        if name not in spec.processors or not type(processor).__module__.startswith("diffusers."):
            expected = " or ".join(spec.processors)
            raise ValueError(f"{who}: {path} runs {name}; expected diffusers' {expected} "
                             "(tilesplash reproduces that one exactly)")


class Installed:
    """What enable() changed on one transformer."""

    def __init__(self, model: torch.nn.Module, spec: ModelSpec, state: ModelState, runtime,
                 runtime_id: int, sequence=None) -> None:
        self.model = model
        self.spec = spec
        self.state = state
        self._runtime = runtime
        self._runtime_id = runtime_id
        self._sequence = sequence
        self._originals: list[tuple[torch.nn.Module, object]] = []
        self._hooks: list = []
        self._inputs = _input_readers(model, spec.inputs)

    def install(self) -> None:
        backend = None if self.spec.copy else backend_name()
        for layer, path, module in self.spec.modules(self.model):
            original = module.processor
            if self.spec.copy:
                processor = COPIES[self.spec.copy]()
            else:
                processor = copy.copy(original)  # its own: the original may be shared
                processor._attention_backend = backend
            self._originals.append((module, original))
            _set_processor(module, processor)
            site = Site(self._runtime_id, self._runtime.add_site(layer, path, self.state), self.state)
            self._hooks.append(module.register_forward_pre_hook(enter(site)))
            self._hooks.append(module.register_forward_hook(leave))
        self._hooks.append(self.model.register_forward_pre_hook(self._before_forward,
                                                                with_kwargs=True))
        if self._sequence is not None:
            self._sequence.install(self.model)

    def remove(self) -> None:
        for module, original in reversed(self._originals):
            _set_processor(module, original)
        self._originals.clear()
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        self.state.forward = None

    def _before_forward(self, module, args, kwargs):
        inputs = {name: read(args, kwargs) for name, read in self._inputs.items()}
        if inputs.get("hidden_states") is None or inputs.get("timestep") is None:
            raise ValueError(f"tilesplash: {self.spec.name} was called without hidden_states or "
                             "timestep")
        call = self.spec.forward(module, inputs)
        if self._sequence is not None:
            self._sequence.begin_forward(call.video, call.timestep)
        self.state.forward = call
        return None


def _set_processor(module, processor) -> None:
    # MochiAttention keeps its processor as a plain attribute, without set_processor.
    if hasattr(module, "set_processor"):
        module.set_processor(processor)
    else:
        module.processor = processor


def _input_readers(model, names: tuple[str, ...]) -> dict:
    """name -> read(args, kwargs): the forward argument as the call passed it, or its default.
    Resolved once here, so the hook itself is plain indexing (traceable by torch.compile)."""
    parameters = list(inspect.signature(type(model).forward).parameters.values())[1:]  # no self
    readers = {}
    for name in names:
        found = [i for i, p in enumerate(parameters) if p.name == name]
        if not found:
            raise TypeError(f"tilesplash: {type(model).__name__}.forward has no argument {name!r}")
        index = found[0]
        default = parameters[index].default
        default = None if default is inspect.Parameter.empty else default
        readers[name] = _reader(name, index, default)
    return readers


def _reader(name: str, index: int, default):
    def read(args, kwargs):
        if name in kwargs:
            return kwargs[name]
        return args[index] if index < len(args) else default

    return read
