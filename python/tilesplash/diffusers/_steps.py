"""The denoising step of each transformer call.

diffusers does not tell a transformer which step it is at. With a pipeline,
its scheduler knows (``step_index``, advanced by ``scheduler.step()`` after
each denoising step; ``len(scheduler.timesteps)`` steps in all), and every
transformer of the pipeline (Wan 2.2's two experts) reads the same count.
With a bare transformer the step comes from the timesteps it is called with:
a timestep different from the previous call's starts a new step, so
classifier-free guidance's two calls at one timestep are one step, and a
timestep larger than the previous one starts a new denoising run at step 0
(samplers walk timesteps downwards).

The step is observed by every attention call (inside the tilesplash op, so
that a compiled model observes it at run time, not at trace time); calls at
the timestep of the previous one keep its step, which makes the per-layer
observation a per-forward one.
"""

from __future__ import annotations

import torch


class Steps:
    """Step source: the scheduler's count when there is one, else the timesteps'."""

    def __init__(self, scheduler=None) -> None:
        self.scheduler = scheduler
        self.step = 0
        self.restarted = False  # the last new timestep began a new denoising run
        self._last: torch.Tensor | None = None
        self._last_tensor = None  # held, so that its id cannot be reused while compared
        self._last_version = -1
        self._pin: int | None = None
        self._pinned = False  # the current timestep's step was pinned
        self._counted = False  # a step was observed
        self._stale = False  # steps since _last were the scheduler's, not read from timesteps

    def pin(self, step: int) -> None:
        """The next call is step `step` (and the calls at its timestep); counting goes on after."""
        self._pin = step

    def total(self) -> int | None:
        """The run's number of steps when a scheduler says it, else None."""
        timesteps = getattr(self.scheduler, "timesteps", None)
        return None if timesteps is None else len(timesteps)

    def observe(self, timestep) -> int:
        if self.scheduler is not None and self._pin is None and not self._pinned \
                and getattr(self.scheduler, "step_index", None) is not None:
            # The scheduler counts the steps on the host: the timestep's values need not
            # be read (on a GPU that would wait for the device at every forward).
            previous, self.step = self.step, _scheduler_step(self.scheduler)
            self.restarted = self._counted and self.step < previous
            self._counted, self._stale = True, True
            return self.step
        version = _version(timestep)
        if (timestep is self._last_tensor and self._pin is None and version is not None
                and version == self._last_version):
            self.restarted = False  # the layers after the first of one forward: same step
            return self.step
        # The distinct values, so that the batch size (CFG batched or not, several videos per
        # prompt) or a per-token timestep layout does not make the same timestep look new.
        # unique() also copies, which matters: a pipeline may update its timestep in place.
        current = torch.unique(torch.as_tensor(timestep).detach().flatten().to(torch.float64))
        new = self._last is None or self._stale or not torch.equal(
            self._last.to(current.device), current)
        self.restarted = False
        if self._pin is not None:
            self.step, self._pin, self._pinned = self._pin, None, True
        elif new:
            self._pinned = False
            previous = self.step
            if self.scheduler is not None:
                self.step = _scheduler_step(self.scheduler)
                self.restarted = self._counted and self.step < previous
            elif self._last is None:
                self.step = 0
            elif current.numel() and self._last.numel() and bool(current.max() > self._last.max().to(current.device)):
                self.step = 0
                self.restarted = True
            else:
                self.step += 1
        self._last, self._stale, self._counted = current, False, True
        self._last_tensor, self._last_version = timestep, version
        return self.step


def _version(timestep) -> int | None:
    """The in-place version counter of a tensor; None when it has none (inference tensors)."""
    if not isinstance(timestep, torch.Tensor) or timestep.is_inference():
        return None
    return timestep._version


def _scheduler_step(scheduler) -> int:
    index = getattr(scheduler, "step_index", None)
    if index is None:  # before the run's first scheduler.step(): its first step, or img2img's start
        index = getattr(scheduler, "begin_index", None) or 0
    return int(index)
