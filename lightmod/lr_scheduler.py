"""Learning-rate schedules (``mx.lr_scheduler``), following MXNet 1.9.1.

The optimizer calls its scheduler with ``num_update`` (how many updates it has made) and uses the
number it gets back as the learning rate. Every schedule here may open with ``warmup_steps``
updates of warmup; after that:

- ``FactorScheduler`` and ``MultiFactorScheduler`` scale ``base_lr`` down in place each time
  ``num_update`` crosses one of their boundaries, and keep a cursor of the boundaries already crossed;
- ``PolyScheduler`` and ``CosineScheduler`` derive ``base_lr`` afresh from ``num_update`` until
  ``max_update`` and hold the last value from then on.

Attribute names match MXNet's, because optimizers are pickled together with their scheduler into
``.states`` files (``dump_optimizer=True``) and those files travel in both directions.
"""
import logging
from math import cos, pi

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler"]


def _require_reducing(factor):
    if factor > 1.0:
        raise ValueError("Factor must be no more than 1 to make lr reduce")


def _require_max_update(max_update):
    if not isinstance(max_update, int):
        raise AssertionError("max_update must be an int, got %r" % (max_update,))
    if max_update < 1:
        raise ValueError("maximum number of updates must be strictly positive")


class LRScheduler:
    """Common part of the schedules: the target ``base_lr`` and the warmup in front of it.

    Parameters
    ----------
    base_lr : float
        Learning rate the schedule proper starts from, reached when the warmup ends.
    warmup_steps : int
        How many of the first updates belong to the warmup (0: none).
    warmup_begin_lr : float
        Learning rate of the very first update; may not exceed ``base_lr``.
    warmup_mode : {'linear', 'constant'}
        With 'linear' the rate climbs in equal increments from ``warmup_begin_lr`` towards
        ``base_lr``; with 'constant' it sits at ``warmup_begin_lr`` until the warmup is over.
    """

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        if not isinstance(warmup_steps, int):
            raise AssertionError("warmup_steps must be an int, got %r" % (warmup_steps,))
        if warmup_begin_lr > base_lr:
            raise ValueError("Base lr has to be higher than warmup_begin_lr")
        if warmup_steps < 0:
            raise ValueError("Warmup steps has to be positive or 0")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError("Supports only linear and constant modes of warmup")
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update):
        """Learning rate for an update that falls inside the warmup."""
        if num_update >= self.warmup_steps:
            raise AssertionError("get_warmup_lr(%d) called after the %d warmup steps"
                                 % (num_update, self.warmup_steps))
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        if self.warmup_mode != "linear":
            raise ValueError("Invalid warmup mode %s" % self.warmup_mode)
        climb = self.warmup_final_lr - self.warmup_begin_lr
        return self.warmup_begin_lr + climb * float(num_update) / float(self.warmup_steps)

    def __call__(self, num_update):
        raise NotImplementedError("LRScheduler subclasses must define __call__(num_update)")


class FactorScheduler(LRScheduler):
    """Scale the rate by ``factor`` after every ``step`` updates, with ``stop_factor_lr`` as floor."""

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError("Schedule step must be greater or equal than 1 round")
        _require_reducing(factor)
        self.step, self.factor, self.stop_factor_lr = step, factor, stop_factor_lr
        self.count = 0  # update count at which the latest decay took effect

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        # A loop, not a single test: a run resumed at a late num_update owes several decays.
        while num_update > self.count + self.step:
            self.count += self.step
            decayed = self.base_lr * self.factor
            floored = decayed < self.stop_factor_lr
            self.base_lr = self.stop_factor_lr if floored else decayed
            logging.info("Update[%d]: learning rate %s %0.5e", num_update,
                         "held at its floor" if floored else "lowered to", self.base_lr)
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """Scale the rate by ``factor`` each time ``num_update`` goes past one of the boundaries in
    ``step`` (a list of strictly increasing update counts)."""

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not (isinstance(step, list) and len(step) >= 1):
            raise AssertionError("step must be a non-empty list of update counts, got %r"
                                 % (step,))
        if any(later <= earlier for earlier, later in zip(step, step[1:])):
            raise ValueError("Schedule step must be an increasing integer list")
        if min(step) < 1:
            raise ValueError("Schedule step must be greater or equal than 1 round")
        _require_reducing(factor)
        self.step, self.factor = step, factor
        self.cur_step_ind = 0  # index of the first boundary not yet crossed
        self.count = 0         # the last boundary crossed

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        boundaries = self.step
        while self.cur_step_ind < len(boundaries) and num_update > boundaries[self.cur_step_ind]:
            self.count = boundaries[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
            logging.info("Update[%d]: learning rate lowered to %0.5e", num_update, self.base_lr)
        return self.base_lr


class _AnnealToFinal(LRScheduler):
    """Shared frame of the schedules that move from ``base_lr`` to ``final_lr`` by
    ``max_update``: ``final_lr + (base_lr - final_lr) * self._remaining(done)``, where ``done`` counts
    the updates since the warmup and ``_remaining`` falls from 1 to 0."""

    def __init__(self, max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _require_max_update(max_update)
        self.base_lr_orig = base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = max_update - warmup_steps  # length of the schedule after the warmup

    def _remaining(self, done):
        raise NotImplementedError

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            span = self.base_lr_orig - self.final_lr
            self.base_lr = self.final_lr + span * self._remaining(num_update - self.warmup_steps)
        return self.base_lr


class PolyScheduler(_AnnealToFinal):
    """Polynomial decay: the remaining fraction is ``(1 - done / max_steps) ** pwr``."""

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.power = pwr

    def _remaining(self, done):
        return pow(1 - float(done) / float(self.max_steps), self.power)


class CosineScheduler(_AnnealToFinal):
    """Half a cosine wave: the remaining fraction is ``(1 + cos(pi * done / max_steps)) / 2``."""

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)

    def _remaining(self, done):
        return (1 + cos(pi * done / self.max_steps)) / 2
