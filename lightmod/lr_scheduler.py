"""Learning-rate schedules (``mx.lr_scheduler``), following MXNet 1.9.1.

A scheduler is called with the optimizer's ``num_update`` and returns the learning rate to use.
``FactorScheduler`` and ``MultiFactorScheduler`` are stateful: they lower ``base_lr`` as
``num_update`` moves past their steps and remember where they are. ``PolyScheduler`` and
``CosineScheduler`` recompute ``base_lr`` from ``num_update`` up to ``max_update`` and keep the
last value afterwards. All of them can start with a warmup phase of ``warmup_steps`` updates.

The attribute names are MXNet's, so a scheduler pickled inside an optimizer (``.states`` files
written with ``dump_optimizer=True``) loads on either side.
"""
import logging
from math import cos, pi

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler"]


class LRScheduler:
    """Base class: ``base_lr`` plus an optional warmup.

    Parameters
    ----------
    base_lr : float
        The learning rate after warmup (the schedule starts from it).
    warmup_steps : int
        Number of updates spent warming up.
    warmup_begin_lr : float
        Learning rate at update 0 of the warmup.
    warmup_mode : {'linear', 'constant'}
        'linear' ramps from ``warmup_begin_lr`` to ``base_lr``; 'constant' stays at
        ``warmup_begin_lr`` for the whole warmup.
    """

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        self.base_lr = base_lr
        if not isinstance(warmup_steps, int):
            raise AssertionError("warmup_steps must be an int, got %r" % (warmup_steps,))
        self.warmup_steps = warmup_steps
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        if self.warmup_begin_lr > self.warmup_final_lr:
            raise ValueError("Base lr has to be higher than warmup_begin_lr")
        if self.warmup_steps < 0:
            raise ValueError("Warmup steps has to be positive or 0")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError("Supports only linear and constant modes of warmup")
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update):
        """The learning rate at ``num_update`` (which must lie inside the warmup)."""
        if not num_update < self.warmup_steps:
            raise AssertionError("get_warmup_lr(%d) called after the %d warmup steps"
                                 % (num_update, self.warmup_steps))
        if self.warmup_mode == "linear":
            ramp = (self.warmup_final_lr - self.warmup_begin_lr) \
                * float(num_update) / float(self.warmup_steps)
            return self.warmup_begin_lr + ramp
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        raise ValueError("Invalid warmup mode %s" % self.warmup_mode)

    def __call__(self, num_update):
        raise NotImplementedError("LRScheduler subclasses must define __call__(num_update)")


class FactorScheduler(LRScheduler):
    """Multiply the learning rate by ``factor`` every ``step`` updates, never going below
    ``stop_factor_lr``.
    """

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise ValueError("Factor must be no more than 1 to make lr reduce")
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr
        self.count = 0

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        # The decay happens once num_update strictly passes count + step.
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
                logging.info("Update[%d]: now learning rate arrived at %0.5e, will not "
                             "change in the future", num_update, self.base_lr)
            else:
                logging.info("Update[%d]: Change learning rate to %0.5e",
                             num_update, self.base_lr)
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """Multiply the learning rate by ``factor`` once ``num_update`` passes each of the
    increasing update counts in ``step``.
    """

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not (isinstance(step, list) and len(step) >= 1):
            raise AssertionError("step must be a non-empty list of update counts, got %r"
                                 % (step,))
        for i, one_step in enumerate(step):
            if i != 0 and step[i] <= step[i - 1]:
                raise ValueError("Schedule step must be an increasing integer list")
            if one_step < 1:
                raise ValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise ValueError("Factor must be no more than 1 to make lr reduce")
        self.step = step
        self.cur_step_ind = 0
        self.factor = factor
        self.count = 0

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind <= len(self.step) - 1:
            if num_update > self.step[self.cur_step_ind]:
                self.count = self.step[self.cur_step_ind]
                self.cur_step_ind += 1
                self.base_lr *= self.factor
                logging.info("Update[%d]: Change learning rate to %0.5e",
                             num_update, self.base_lr)
            else:
                return self.base_lr
        return self.base_lr


class PolyScheduler(LRScheduler):
    """Polynomial decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates:
    ``final_lr + (base_lr - final_lr) * (1 - n / max_steps) ** pwr`` with ``n`` counted from
    the end of the warmup.
    """

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int):
            raise AssertionError("max_update must be an int, got %r" % (max_update,))
        if max_update < 1:
            raise ValueError("maximum number of updates must be strictly positive")
        self.power = pwr
        self.base_lr_orig = self.base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            progress = float(num_update - self.warmup_steps) / float(self.max_steps)
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) \
                * pow(1 - progress, self.power)
        return self.base_lr


class CosineScheduler(LRScheduler):
    """Cosine decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates (after the
    warmup)."""

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int):
            raise AssertionError("max_update must be an int, got %r" % (max_update,))
        if max_update < 1:
            raise ValueError("maximum number of updates must be strictly positive")
        self.base_lr_orig = base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            angle = pi * (num_update - self.warmup_steps) / self.max_steps
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) \
                * (1 + cos(angle)) / 2
        return self.base_lr
