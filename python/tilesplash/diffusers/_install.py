"""Switching one transformer to tilesplash, and back.

For each self-attention module the model's spec names: a copy of its
processor that asks the dispatcher for the "tilesplash" backend (or, for the
models that bypass the dispatcher, tilesplash's copy of their processor), a
forward pre-hook that makes the module's ``Site`` current and a forward hook
that clears it. On the transformer, a forward pre-hook that reads the call's
geometry (``ModelSpec.forward``). ``remove`` puts the original processor
objects back and drops the hooks, so the model computes exactly what it did.

A deep copy of a switched transformer (an EMA copy, a second expert, an A/B
run) is switched too, on a handle of its own: the hooks reach their
``Installed`` through the module, so ``copy.deepcopy`` copies it with the
model (``Installed.__deepcopy__``: a new runtime, sites and handle for the
copy's modules). Pickling one (``pickle``, ``torch.save``) is refused with a
message saying to ``remove(model)`` first. Every processor tilesplash installs remembers the one it
replaced and every hook is of a type known here, so ``strip`` cleans any
model carrying them, copy or not.
"""

from __future__ import annotations

import copy
import inspect

import torch

from ._dispatch import ModelState, Site, add_runtime, backend_name, enter, leave
from ._models import ModelSpec
from ._processors import COPIES


def check_processors(model: torch.nn.Module, spec: ModelSpec, who: str) -> None:
    """Every module to switch holds one of the processors the spec serves, not tilesplash's."""
    for _, path, module in spec.modules(model):
        processor = module.processor
        name = type(processor).__name__
        if name in COPIES or getattr(processor, "_attention_backend", None) == "tilesplash":
            raise ValueError(f"{who}: {spec.name} already has tilesplash enabled (by a handle, "
                             "or as a deep copy of a model that had: "
                             "tilesplash.diffusers.handle_of(model) reaches its handle); call "
                             "tilesplash.diffusers.remove(model) or handle.remove() first")
        if name not in spec.processors or not type(processor).__module__.startswith("diffusers."):
            expected = " or ".join(spec.processors)
            raise ValueError(f"{who}: {path} runs {name}; expected diffusers' {expected} "
                             "(tilesplash reproduces that one exactly)")


class _Enter:
    """The forward pre-hook of a switched module: makes its site current. It reaches the
    site through its Installed, so a deep copy of the model runs the copy's sites."""

    def __init__(self, installed: "Installed", position: int) -> None:
        self.installed = installed
        self.position = position

    def __call__(self, module, args):
        enter(self.installed.sites[self.position])


class Installed:
    """What enable() changed on one transformer."""

    def __init__(self, model: torch.nn.Module, spec: ModelSpec, state: ModelState, runtime,
                 runtime_id: int, sequence=None) -> None:
        self.model = model
        self.spec = spec
        self.state = state
        self.handle = None  # the TilesplashHandle that owns this (set by enable)
        self.sites: list[Site] = []
        self._runtime = runtime
        self._runtime_id = runtime_id
        self._sequence = sequence
        self._originals: list[tuple[torch.nn.Module, object]] = []
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
            processor._tilesplash_original = original  # for strip(), on copies too
            self._originals.append((module, original))
            _set_processor(module, processor)
            self.sites.append(Site(self._runtime_id,
                                   self._runtime.add_site(layer, path, self.state), self.state))
            module.register_forward_pre_hook(_Enter(self, len(self.sites) - 1))
            module.register_forward_hook(leave)
        self.model.register_forward_pre_hook(self._before_forward, with_kwargs=True)
        if self._sequence is not None:
            self._sequence.install(self.model, self.spec.sequence)

    def remove(self) -> None:
        for module, original in reversed(self._originals):
            config = getattr(module.processor, "_parallel_config", None)
            if config is not None and getattr(original, "_parallel_config", None) is None:
                # enable_parallelism ran while tilesplash was on: it set the config on
                # tilesplash's processor; the original must run in the same context-parallel
                # region (the model's hooks shard its sequence now).
                original._parallel_config = config
            _set_processor(module, original)
        self._originals.clear()
        strip(self.model)
        self.state.forward = None

    def __deepcopy__(self, memo):
        """The Installed of a deep copy of the model: the copy's modules switched on a new
        handle (same settings, its own VideoAttention objects, report and step count)."""
        if self._sequence is not None:
            raise TypeError(
                f"tilesplash: copy.deepcopy of a {self.spec.name} enabled with process_group= is "
                "not supported (a process group cannot be copied): call "
                "tilesplash.diffusers.remove(model) first, copy it, then enable each model")
        new = copy.copy(self)
        memo[id(self)] = new
        new.model = copy.deepcopy(self.model, memo)
        new.state = ModelState(self.spec, self.state.name, 0)
        new._runtime = self._runtime.copy_settings()
        new._runtime_id = add_runtime(new._runtime)
        new._originals = copy.deepcopy(self._originals, memo)
        new.sites = []
        for site in self.sites:
            layer, path, _ = self._runtime.sites[site.index]
            new.sites.append(Site(new._runtime_id, new._runtime.add_site(layer, path, new.state),
                                  new.state))
        new.handle = None if self.handle is None else type(self.handle)(
            new._runtime, new._runtime_id, [new], [self.state.name])
        return new

    def __copy__(self):
        new = object.__new__(type(self))  # __deepcopy__'s shallow start, apart from pickling
        new.__dict__.update(self.__dict__)
        return new

    def __reduce_ex__(self, protocol):
        # Every path from a switched model to tilesplash's state runs through here (its
        # hooks), so pickle and torch.save stop at this message, not at a local function.
        raise TypeError(
            f"tilesplash: a {self.spec.name} with tilesplash enabled cannot be pickled or "
            "torch.save()d (its hooks hold the handle's runtime): call "
            "tilesplash.diffusers.remove(model) first, or save model.state_dict(), which "
            "holds no tilesplash state")

    def _before_forward(self, module, args, kwargs):
        inputs = {name: read(args, kwargs) for name, read in self._inputs.items()}
        if inputs.get("hidden_states") is None or inputs.get("timestep") is None:
            raise ValueError(f"tilesplash: {self.spec.name} was called without hidden_states or "
                             "timestep")
        call = self.spec.forward(module, inputs)
        if self._sequence is not None:
            self._sequence.begin_forward(call.video, call.timestep, self._runtime.settings, module,
                                         args, kwargs)
        self.state.forward = call
        return None


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


def _ours(hook) -> bool:
    return (isinstance(hook, _Enter) or hook is leave
            or isinstance(getattr(hook, "__self__", None), Installed))


def installed_on(model: torch.nn.Module) -> Installed | None:
    """The Installed whose hook is on `model` (a switched transformer, or a deep copy of
    one), else None."""
    for hook in getattr(model, "_forward_pre_hooks", {}).values():
        owner = getattr(hook, "__self__", None)
        if isinstance(owner, Installed):
            return owner
    return None


def carries_tilesplash(model: torch.nn.Module) -> bool:
    """Whether any module of `model` holds a processor or hook tilesplash installed."""
    for module in model.modules():
        if hasattr(getattr(module, "processor", None), "_tilesplash_original"):
            return True
        if any(_ours(h) for name in ("_forward_pre_hooks", "_forward_hooks")
               for h in getattr(module, name, {}).values()):
            return True
    return False


def strip(model: torch.nn.Module) -> None:
    """Puts back the processor every tilesplash processor of `model` replaced and drops
    tilesplash's hooks: for any model carrying them (a copy included)."""
    for module in model.modules():
        original = getattr(getattr(module, "processor", None), "_tilesplash_original", None)
        if original is not None:
            _set_processor(module, original)
        for name in ("_forward_pre_hooks", "_forward_hooks"):
            hooks = getattr(module, name, None)
            if not hooks:
                continue
            for key in [key for key, hook in hooks.items() if _ours(hook)]:
                for table in _HOOK_DICTS:
                    getattr(module, table, {}).pop(key, None)


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
