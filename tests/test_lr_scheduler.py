"""mx.lr_scheduler: MXNet 1.9.1's schedules, warmup modes and argument checks."""
import math

import pytest

import lightmod as mx
from lightmod import lr_scheduler


def test_factor_scheduler_steps_and_floor():
    s = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0, stop_factor_lr=0.1)
    # the rate drops once num_update strictly passes count + step
    assert [s(n) for n in (0, 1, 2, 3, 4, 5, 6)] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    assert s(100) == 0.1          # stop_factor_lr is the floor
    assert s.count == 98


def test_factor_scheduler_is_stateful_like_mxnet():
    s = lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    assert s(3) == 0.25
    assert s(1) == 0.25           # going back does not restore the rate


def test_factor_scheduler_warmup_linear_and_constant():
    s = lr_scheduler.FactorScheduler(step=10, factor=0.5, base_lr=1.0, warmup_steps=4,
                                     warmup_begin_lr=0.2)
    assert [s(n) for n in range(4)] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert s(4) == 1.0
    c = lr_scheduler.FactorScheduler(step=10, base_lr=1.0, warmup_steps=3, warmup_begin_lr=0.3,
                                     warmup_mode="constant")
    assert [c(n) for n in range(4)] == [0.3, 0.3, 0.3, 1.0]


def test_multifactor_scheduler():
    s = lr_scheduler.MultiFactorScheduler(step=[2, 5], factor=0.1, base_lr=1.0)
    got = [s(n) for n in range(8)]
    assert got == pytest.approx([1, 1, 1, 0.1, 0.1, 0.1, 0.01, 0.01])
    assert s.cur_step_ind == 2 and s.count == 5


def test_poly_scheduler_with_warmup():
    s = lr_scheduler.PolyScheduler(max_update=10, base_lr=1.0, pwr=2, final_lr=0.1,
                                   warmup_steps=2, warmup_begin_lr=0.5)
    assert s(0) == 0.5 and s(1) == pytest.approx(0.75)
    for n in range(2, 11):
        expect = 0.1 + 0.9 * (1 - (n - 2) / 8) ** 2
        assert s(n) == pytest.approx(expect)
    assert s(50) == pytest.approx(0.1)   # keeps the last value past max_update


def test_cosine_scheduler():
    s = lr_scheduler.CosineScheduler(max_update=8, base_lr=2.0, final_lr=0.5)
    for n in range(9):
        assert s(n) == pytest.approx(0.5 + 1.5 * (1 + math.cos(math.pi * n / 8)) / 2)
    assert s(20) == pytest.approx(0.5)


@pytest.mark.parametrize("make, exc", [
    (lambda: lr_scheduler.FactorScheduler(step=0), ValueError),
    (lambda: lr_scheduler.FactorScheduler(step=1, factor=1.5), ValueError),
    (lambda: lr_scheduler.MultiFactorScheduler(step=[3, 3]), ValueError),
    (lambda: lr_scheduler.MultiFactorScheduler(step=[0, 3]), ValueError),
    (lambda: lr_scheduler.MultiFactorScheduler(step=3), AssertionError),
    (lambda: lr_scheduler.PolyScheduler(max_update=0), ValueError),
    (lambda: lr_scheduler.PolyScheduler(max_update=2.5), AssertionError),
    (lambda: lr_scheduler.CosineScheduler(max_update=0), ValueError),
    (lambda: lr_scheduler.FactorScheduler(step=1, warmup_mode="cubic"), ValueError),
    (lambda: lr_scheduler.FactorScheduler(step=1, warmup_steps=-1), ValueError),
    (lambda: lr_scheduler.FactorScheduler(step=1, base_lr=0.1, warmup_begin_lr=0.5), ValueError),
    (lambda: lr_scheduler.FactorScheduler(step=1, warmup_steps=1.5), AssertionError),
])
def test_bad_arguments(make, exc):
    with pytest.raises(exc):
        make()


def test_base_class_needs_call():
    with pytest.raises(NotImplementedError):
        lr_scheduler.LRScheduler()(0)


def test_namespace():
    assert mx.lr_scheduler.FactorScheduler is lr_scheduler.FactorScheduler
