"""float16 staging: the one wrapper that lets every kernel of a kernel set take float16 arrays.

numba has no half-precision arithmetic on the CPU, and many CUDA kernels cannot compute in it
either: handed float16 arrays, such a kernel fails to compile (before it runs, so nothing is
half-written). The wrapper re-runs the call on float32 copies of its float16 arrays and rounds
the results back into them, as MXNet's float16 kernels round their float32 math. The happy path
costs one extra Python call; a failing dtype signature is remembered, so the failing compile is
attempted once per kernel and signature.

Each half describes its arrays with a :class:`Float16Staging` (how to recognise one of its
arrays, how to make a float32 copy, how to copy back, which errors mean "no float16 here").
"""
import functools

import numpy as np

__all__ = ["Float16Staging"]


class Float16Staging:
    """The float16 staging of one kind of array (host or device)."""

    def __init__(self, is_array, float32_copy, copy_back, errors):
        self.is_array = is_array
        self.float32_copy = float32_copy
        self.copy_back = copy_back
        self.errors = errors
        self._wrapped = {}    # kernel -> its wrapper (shared by every kernel set of the half)

    def _signature(self, args):
        return tuple(a.dtype.char if self.is_array(a) else None for a in args)

    def _is_half(self, a):
        return self.is_array(a) and a.dtype == np.float16

    def wrap(self, kernel):
        """``kernel`` made to accept float16 arrays (one wrapper per kernel)."""
        staged = self._wrapped.get(kernel)
        if staged is not None:
            return staged
        needs_staging = set()
        errors = self.errors

        @functools.wraps(kernel)
        def staged(*args, **kwargs):
            # the signature is only built once some float16 call has failed (hot-path cost)
            if not needs_staging or self._signature(args) not in needs_staging:
                try:
                    return kernel(*args, **kwargs)
                except errors:
                    if not any(self._is_half(a) for a in args):
                        raise
                    needs_staging.add(self._signature(args))
            copies = {}   # one float32 copy per distinct array, so aliased arguments stay aliased
            staged_args = []
            for a in args:
                if self._is_half(a):
                    if id(a) not in copies:
                        copies[id(a)] = (a, self.float32_copy(a))
                    staged_args.append(copies[id(a)][1])
                else:
                    staged_args.append(a)
            result = kernel(*staged_args, **kwargs)
            for original, copy32 in copies.values():
                self.copy_back(original, copy32)
            return result

        staged.__wrapped_kernel__ = kernel
        self._wrapped[kernel] = staged
        return staged
