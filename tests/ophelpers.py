"""Registry-level helpers for operator tests: run one op's forward/backward on numpy arrays and
compare its gradient with a central-difference numeric gradient.

These talk to the operator declarations directly (no symbol, no executor), so an operator can be
proven before the rest of the stack exists. ``kernels`` selects the kernel set: the CPU one by
default, or ``lightmod.kernels.cuda`` (under NUMBA_ENABLE_CUDASIM=1) with arrays moved to the device.
"""
import numpy as np

from lightmod.operator import registry


def _kernels(device):
    if device == "cuda":
        from lightmod.kernels import cuda as k
    else:
        from lightmod.kernels import cpu as k
    return k


def _to_device(arr, device):
    if device == "cuda":
        from numba import cuda
        return cuda.to_device(np.ascontiguousarray(arr))
    return arr


def _to_host(arr, device):
    if arr is None:
        return None
    if device == "cuda":
        return arr.copy_to_host()
    return arr


def prepare(name, attrs):
    op = registry.get(name)
    return op, op.parse({k: str(v) if not isinstance(v, str) else v for k, v in attrs.items()})


def infer(op, p, inputs):
    in_shapes = [None if x is None else tuple(x.shape) for x in inputs]
    in_shapes, out_shapes = op.infer_shape(p, in_shapes)
    in_types = [None if x is None else np.dtype(x.dtype).name for x in inputs]
    _, out_types = op.infer_type(p, in_types)
    return in_shapes, out_shapes, out_types


def forward(name, attrs, inputs, is_train=True, device="cpu", state=None):
    """Run the op; returns (outputs as numpy arrays incl. hidden ones, state, op, p)."""
    op, p = prepare(name, attrs)
    inputs = [np.asarray(x) for x in inputs]
    _, out_shapes, out_types = infer(op, p, inputs)
    k = _kernels(device)
    dev_in = [_to_device(x.copy(), device) for x in inputs]
    outs = [_to_device(np.zeros(s, dtype=t or inputs[0].dtype), device)
            for s, t in zip(out_shapes, out_types)]
    state = {} if state is None else state
    op.forward(p, k, dev_in, outs, is_train, state)
    # aux states may have been updated in place: copy them back into the caller's arrays
    return [_to_host(o, device) for o in outs], state, op, p


def backward(name, attrs, inputs, out_grads, req=None, is_train=True, device="cpu",
             init_grads=None):
    """Forward then backward; returns the list of input gradients (None where req is 'null')."""
    op, p = prepare(name, attrs)
    inputs = [np.asarray(x) for x in inputs]
    _, out_shapes, out_types = infer(op, p, inputs)
    k = _kernels(device)
    dev_in = [_to_device(x.copy(), device) for x in inputs]
    outs = [_to_device(np.zeros(s, dtype=t or inputs[0].dtype), device)
            for s, t in zip(out_shapes, out_types)]
    state = {}
    op.forward(p, k, dev_in, outs, is_train, state)
    if req is None:
        aux = set(op.list_aux(p))
        req = ["null" if n in aux else "write" for n in op.list_inputs(p)]
    grads = []
    for i, (x, r) in enumerate(zip(inputs, req)):
        if r == "null":
            grads.append(None)
        elif init_grads is not None and init_grads[i] is not None:
            grads.append(_to_device(np.array(init_grads[i], dtype=x.dtype), device))
        else:
            grads.append(_to_device(np.zeros_like(x), device))
    dev_og = [None if g is None else _to_device(np.asarray(g, dtype=o_t or inputs[0].dtype), device)
              for g, o_t in zip(out_grads, out_types)]
    dev_og += [None] * (len(outs) - len(dev_og))
    op.backward(p, k, dev_og, dev_in, outs, grads, req, state)
    return [_to_host(g, device) for g in grads]


def numeric_grad(name, attrs, inputs, head_grads, wrt, eps=1e-3, is_train=True):
    """Central-difference gradient of sum(outputs[i] * head_grads[i]) w.r.t. inputs[wrt]."""
    base = [np.array(x, dtype=np.float64) for x in inputs]
    x = base[wrt]
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    for j in range(flat.size):
        old = flat[j]
        vals = []
        for delta in (eps, -eps):
            flat[j] = old + delta
            outs, _, _, _ = forward(name, attrs, [b.copy() for b in base], is_train)
            vals.append(sum(float(np.sum(o.astype(np.float64) * h))
                            for o, h in zip(outs, head_grads) if h is not None))
        flat[j] = old
        grad.reshape(-1)[j] = (vals[0] - vals[1]) / (2 * eps)
    return grad


def check_grad(name, attrs, inputs, wrt=None, rtol=1e-4, atol=1e-6, eps=1e-4, seed=0,
               head_grads=None):
    """Assert that the op's analytic gradient matches the numeric one (float64 inputs)."""
    rng = np.random.default_rng(seed)
    inputs = [np.array(x, dtype=np.float64) for x in inputs]
    outs, _, op, p = forward(name, attrs, inputs)
    nvis = op.num_visible_outputs(p)
    if head_grads is None:
        head_grads = [rng.standard_normal(o.shape) for o in outs[:nvis]]
    head_grads = list(head_grads) + [None] * (len(outs) - len(head_grads))
    analytic = backward(name, attrs, inputs, head_grads)
    wrt = range(len(inputs)) if wrt is None else wrt
    for i in wrt:
        num = numeric_grad(name, attrs, inputs, head_grads, i, eps=eps)
        np.testing.assert_allclose(analytic[i], num, rtol=rtol, atol=atol,
                                   err_msg="%s: gradient of input %d (%s)"
                                   % (name, i, op.list_inputs(p)[i]))
