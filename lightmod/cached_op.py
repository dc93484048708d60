"""``mx.nd.CachedOp``: a symbol called like one operator on NDArrays.

``CachedOp(sym)(*inputs)`` takes one NDArray per name of ``sym.list_inputs()`` (arguments and
auxiliary states, in that order) and returns the symbol's outputs as new NDArrays (one array,
or a list of several), or writes them into ``out=``. A bound executor is kept per input
signature (shapes, dtypes, context) and reused by later calls; auxiliary states the graph
updates are written back into the arrays given (BatchNorm updates its moving statistics in
its backward pass, as MXNet's does: after a recorded call's backward).

Under ``autograd.record()``, a call whose inputs take part in the tape binds an executor of
its own, with gradients for those inputs, and becomes one tape node: backward runs that
executor's backward (its forward values stay its own, so a retained graph can be
differentiated again). Operators run in training mode when autograd's training switch is on.
"""
from . import autograd
from .base import MXNetError
from .ndarray import NDArray, zeros
from .ndarray import autograd as _tape

__all__ = ["CachedOp"]


class CachedOp:
    """A symbol run imperatively (``flags`` are accepted for MXNet's signature; lightmod's
    executor plans the graph the same way whatever they say)."""

    def __init__(self, sym, flags=()):
        self._symbol = sym
        self._flags = dict(flags)
        self._inputs = sym.list_inputs()
        self._aux = set(sym.list_auxiliary_states())
        self._executors = {}

    def __call__(self, *args, **kwargs):
        out = kwargs.pop("out", None)
        if kwargs:
            raise TypeError("CachedOp call got unexpected keyword arguments %s"
                            % sorted(kwargs))
        if len(args) != len(self._inputs):
            raise MXNetError("CachedOp expects %d inputs (%s), got %d"
                             % (len(self._inputs), ", ".join(self._inputs), len(args)))
        for name, arr in zip(self._inputs, args):
            if not isinstance(arr, NDArray):
                raise TypeError("CachedOp: input '%s' must be an NDArray, got %s"
                                % (name, type(arr).__name__))
        recorded = _tape.takes_part(args)
        exe = self._bind(args, recorded) if recorded else self._cached(args)
        for name, arr in zip(self._inputs, args):
            target = exe.aux_dict[name] if name in self._aux else exe.arg_dict[name]
            target[:] = arr
        exe.forward(is_train=autograd.is_training())
        for name, arr in zip(self._inputs, args):
            if name in self._aux:
                arr[:] = exe.aux_dict[name]
        if out is not None:
            targets = [out] if isinstance(out, NDArray) else list(out)
            if len(targets) != len(exe.outputs):
                raise MXNetError("CachedOp: out= has %d arrays for %d outputs"
                                 % (len(targets), len(exe.outputs)))
            if not recorded:
                for target, result in zip(targets, exe.outputs):
                    target[:] = result
                return out
        # the executor's outputs are overwritten by its next call: the caller gets copies
        results = [o.copy() for o in exe.outputs]
        if recorded:
            self._record(exe, args, results)
        if out is not None:
            for target, result in zip(targets, results):
                target[:] = result
            return out
        return results[0] if len(results) == 1 else results

    def _cached(self, args):
        key = tuple((a.shape, str(a.dtype), a.context) for a in args)
        exe = self._executors.get(key)
        if exe is None:
            exe = self._executors[key] = self._bind(args, False)
        return exe

    def _bind(self, args, with_gradients):
        shapes = {n: a.shape for n, a in zip(self._inputs, args) if n not in self._aux}
        types = {n: a.dtype for n, a in zip(self._inputs, args)}
        reqs = {n: ("write" if with_gradients and _tape.entry_of(a) is not None else "null")
                for n, a in zip(self._inputs, args) if n not in self._aux}
        return self._symbol.simple_bind(args[0].context if args else None, grad_req=reqs,
                                        type_dict=types, **shapes)

    def _record(self, exe, args, results):
        names = self._inputs

        def differentiate(out_grads):
            heads = [g if g is not None else zeros(r.shape, ctx=r.context, dtype=r.dtype)
                     for g, r in zip(out_grads, results)]
            exe.backward(heads)
            for name, arr in zip(names, args):
                if name in self._aux:
                    arr[:] = exe.aux_dict[name]
            grads = exe.grad_dict
            return [grads[n].copy() if grads.get(n) is not None else None for n in names]

        node = _tape._Node([_tape.entry_of(a) for a in args], differentiate, len(results),
                           "CachedOp")
        _tape.label_outputs(node, results)
