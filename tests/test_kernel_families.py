"""kernels/cpu/__init__.py imports some kernel families on demand: every name of every family
is reachable from the kernel set, means the same object as in its family (staged for float16
like the others), no two families export one name, and a process that only runs an MLP does
not import the on-demand families."""
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from lightmod.kernels import cpu

FAMILIES = ("conv", "conv_direct", "conv_wgrad", "winograd", "pooling", "norm", "elemwise", "nn",
            "optimizer", "tensor", "reduce", "rnn", "svm", "linalg", "contrib", "ctc", "sequence",
            "spatial", "detection", "fused")


def test_every_family_is_eager_or_on_demand():
    eager = set(FAMILIES) - set(cpu._ON_DEMAND)
    assert eager == {"elemwise", "nn", "optimizer", "tensor", "reduce", "fused"}
    assert set(cpu._ON_DEMAND) <= set(FAMILIES)


def test_no_two_families_export_one_name():
    owner = {}
    for family in FAMILIES:
        module = importlib.import_module("lightmod.kernels.cpu." + family)
        for name in module.__all__:
            assert name not in owner, (name, owner.get(name), family)
            owner[name] = family


def test_every_name_reachable_and_staged():
    """Each name means its family's object, wrapped for float16 exactly when the staging rule
    wraps it (the same for eager and on-demand families)."""
    wrapped = 0
    for family in FAMILIES:
        module = importlib.import_module("lightmod.kernels.cpu." + family)
        for name in module.__all__:
            got = getattr(cpu, name)
            original = getattr(module, name)
            expected = {name: original}
            cpu._stage_kernels(expected)
            # == : a family may hand out bound methods, a new object per look-up
            assert (got == original) == (expected[name] == original), (family, name)
            wrapped += got != original
    assert wrapped > 100


def test_on_demand_kernel_runs_on_float16():
    """An on-demand kernel takes float16 arrays like the eager ones (staged through float32)."""
    x = np.arange(6, dtype=np.float16).reshape(3, 1, 2)
    out = np.zeros_like(x)
    cpu.sequence_reverse(x, np.zeros(1, np.float16), out, False, False)
    np.testing.assert_array_equal(out, x[::-1])


def test_unknown_names_and_dunders():
    for name in ("no_such_kernel", "__no_such_dunder__"):
        with pytest.raises(AttributeError):
            getattr(cpu, name)


PROBE = r'''
import json, sys
import numpy as np
import lightmod as mx
data = mx.sym.Variable("data")
net = mx.sym.FullyConnected(data, num_hidden=8, name="fc")
net = mx.sym.SoftmaxOutput(mx.sym.Activation(net, act_type="tanh"), name="softmax")
mod = mx.mod.Module(net, context=mx.cpu())
mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
mod.init_params()
mod.init_optimizer()
mod.forward_backward(mx.io.DataBatch([mx.nd.ones((4, 5))], [mx.nd.zeros((4,))]))
mod.update()
print(json.dumps(sorted(m.rsplit(".", 1)[1] for m in sys.modules
                        if m.startswith("lightmod.kernels.cpu."))))
'''


def test_mlp_training_imports_no_on_demand_family():
    env = dict(os.environ, PYTHONSAFEPATH="1")
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert not loaded & set(cpu._ON_DEMAND), loaded
