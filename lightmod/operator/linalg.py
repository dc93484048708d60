"""The ``linalg`` family: batched dense linear algebra as MXNet 1.9.1 defines it.

``gemm``, ``gemm2``, ``syrk``, ``trmm``, ``trsm``, ``potrf``, ``potri``, ``sumlogdiag``,
``gelqf``, ``syevd``, ``inverse``, ``det``, ``slogdet``, ``extractdiag``, ``makediag``,
``extracttrian`` and ``maketrian``, registered as ``_linalg_X`` (``mx.nd.linalg.X``,
``mx.sym.linalg.X``) with the alias ``linalg_X``. Every operator works on the trailing two
axes (matrices) or the last axis (vectors) and repeats over the leading ones (the batch);
``gemm`` and ``gemm2`` take the row axis from ``axis``. float32 and float64 only, as in MXNet.

Products go through ``k.matmul_batched`` (BLAS on the CPU); the factorisations, solves and
index maps through the per-matrix math of ``kernels/linalg_math.py`` (``k.linalg_*``).
Gradients follow MXNet's definitions: potrf's is symmetric, trmm's and trsm's and potri's
stay on the input triangle, det's and slogdet's are 0 for a singular matrix.
"""
import math

from .common import data_grad_needed, no_head_gradient, zero_grads
from .conv import scratch
from .registry import Bool, Float, Int, Operator, register
from .tensor import contiguous_strides

_FLOATS = ("float32", "float64")


def _mats(x, rows, cols):
    """x as a (batch, rows, cols) array (a reshape of a contiguous array)."""
    return x.reshape(x.size // (rows * cols) if rows * cols else 0, rows, cols)


def _vecs(x, length):
    return x.reshape(x.size // length if length else 0, length)


def _head(k, state, key, g, like):
    """The head gradient g, or zeros of like's shape when nobody consumed that output."""
    if g is not None:
        return g
    buf = scratch(k, state, key, like.shape, like.dtype)
    k.fill(buf, 0.0)
    return buf


def _target(k, state, key, dst, req):
    """Where a gradient is computed: dst itself for 'write', a scratch array for 'add'."""
    return dst if req == "write" else scratch(k, state, key, dst.shape, dst.dtype)


def _finish(k, dst, buf, req):
    if req == "add":
        k.assign(dst, buf, "add")


class _LinalgOp(Operator):
    """Common rules: float32 / float64 inputs of one dtype; square-matrix checks."""
    inputs = ("A",)
    params = {}

    @property
    def aliases(self):
        """Every operator ``_linalg_X`` is also registered as ``linalg_X``."""
        return (self.name[1:],)

    @property
    def hint(self):
        """Nodes made by ``sym.linalg.X`` are named like MXNet's: X0, X1, ..."""
        return self.name[len("_linalg_"):]

    def infer_type(self, p, in_types):
        names = self.list_inputs(p)
        dtype = next((t for t in in_types if t is not None), None)
        if dtype is not None and dtype not in _FLOATS:
            raise self.error("supports float32 and float64 only; input '%s' is %s",
                             names[in_types.index(dtype)], dtype)
        for name, t in zip(names, in_types):
            if t is not None and t != dtype:
                raise self.error("input '%s' is %s, expected %s like the other inputs",
                                 name, t, dtype)
        return [dtype] * len(in_types), [dtype] * self.num_outputs(p)

    def matrix_shape(self, name, s, square=False, min_ndim=2):
        """Check an input holds matrices (and square ones when asked)."""
        if s is None:
            return None
        if len(s) < min_ndim:
            raise self.error("input '%s' must have at least %d dimensions, got shape %s",
                             name, min_ndim, tuple(s))
        if square and s[-1] and s[-2] and s[-1] != s[-2]:
            raise self.error("input '%s' must hold square matrices (..., n, n), got shape %s",
                             name, tuple(s))
        return tuple(s)

    def same_batch(self, names, shapes, tail=2):
        known = [(n, s) for n, s in zip(names, shapes) if s is not None]
        for (n1, s1), (n2, s2) in zip(known, known[1:]):
            if len(s1) != len(s2) or any(a and b and a != b for a, b in
                                         zip(s1[:-tail], s2[:-tail])):
                raise self.error("inputs '%s' %s and '%s' %s must have the same leading "
                                 "(batch) dimensions", n1, s1, n2, s2)


# ---------------------------------------------------------------------------------------------
# gemm, gemm2, syrk
# ---------------------------------------------------------------------------------------------
def _swapped(shape, axis):
    """(shape with axis and ndim-2 exchanged, element strides that read the original array
    in that order)."""
    nd = len(shape)
    order = list(range(nd))
    order[axis], order[nd - 2] = order[nd - 2], order[axis]
    st = contiguous_strides(shape)
    return tuple(shape[i] for i in order), tuple(st[i] for i in order)


class _Gemm(_LinalgOp):
    """out = alpha op(A) op(B) (+ beta C), the row axis of each matrix at ``axis``."""
    with_c = True

    def row_axis(self, p, ndim):
        axis = p.axis + ndim if p.axis < 0 else p.axis
        if not 0 <= axis < ndim - 1:
            raise self.error("axis=%d is out of range for inputs of %d dimensions (the row "
                             "axis must come before the last one)", p.axis, ndim)
        return axis

    def infer_shape(self, p, in_shapes):
        names = self.list_inputs(p)
        shapes = [self.matrix_shape(n, s) for n, s in zip(names, in_shapes)]
        a, b = shapes[0], shapes[1]
        if a is None or b is None:
            return list(in_shapes), [shapes[2] if self.with_c else None]
        if len(a) != len(b):
            raise self.error("inputs 'A' %s and 'B' %s must have the same number of dimensions",
                             a, b)
        axis = self.row_axis(p, len(a))
        sa, _ = _swapped(a, axis)
        sb, _ = _swapped(b, axis)
        m, ka = (sa[-1], sa[-2]) if p.transpose_a else (sa[-2], sa[-1])
        kb, n = (sb[-1], sb[-2]) if p.transpose_b else (sb[-2], sb[-1])
        if ka and kb and ka != kb:
            raise self.error("cannot multiply op(A) of shape %s by op(B) of shape %s (A %s, B %s, "
                             "transpose_a=%s, transpose_b=%s, axis=%d)", (m, ka), (kb, n), a, b,
                             p.transpose_a, p.transpose_b, p.axis)
        self.same_batch(("A", "B"), (sa, sb))
        out_swapped = sa[:-2] + (m, n)
        out, _ = _swapped(out_swapped, axis)
        if self.with_c and shapes[2] is not None and tuple(shapes[2]) != out:
            raise self.error("input 'C' has shape %s, expected %s (the shape of op(A) op(B) for "
                             "A %s, B %s)", tuple(shapes[2]), out, a, b)
        return ([a, b, out] if self.with_c else [a, b]), [out]

    # --- layout: the swapped (row axis at -2) copies the products run on -----------------------
    def _in_layout(self, k, state, key, x, axis):
        """x with its row axis moved to ndim-2 (x itself for the default axis) as 3-d."""
        shape = tuple(x.shape)
        if axis != len(shape) - 2:
            sshape, strides = _swapped(shape, axis)
            buf = scratch(k, state, key, sshape, x.dtype)
            k.strided_gather(buf, x, 0, sshape, strides, "write")
            x, shape = buf, sshape
        return _mats(x, shape[-2], shape[-1])

    def _out_layout(self, k, state, key, dst, axis, req):
        """(a 3-d buffer in swapped layout to compute into, a function storing it into dst)."""
        shape = tuple(dst.shape)
        if axis == len(shape) - 2:
            buf = _target(k, state, key, dst, req)
            return _mats(buf, shape[-2], shape[-1]), lambda: _finish(k, dst, buf, req)
        sshape, _ = _swapped(shape, axis)
        buf = scratch(k, state, key, sshape, dst.dtype)

        def store():
            _, strides = _swapped(sshape, axis)        # swapping back is the same exchange
            k.strided_gather(dst, buf, 0, shape, strides, req)
        return _mats(buf, sshape[-2], sshape[-1]), store

    def forward(self, p, k, inputs, outputs, is_train, state):
        axis = self.row_axis(p, len(inputs[0].shape))
        a = self._in_layout(k, state, "a", inputs[0], axis)
        b = self._in_layout(k, state, "b", inputs[1], axis)
        out, store = self._out_layout(k, state, "out", outputs[0], axis, "write")
        k.matmul_batched(out, a, b, p.transpose_a, p.transpose_b, "write")
        if self.with_c:
            c = self._in_layout(k, state, "c", inputs[2], axis)
            k.linalg_axpby(out, c, p.alpha, p.beta)
        else:
            k.linalg_axpby(out, out, p.alpha, 0.0)
        store()

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        axis = self.row_axis(p, len(inputs[0].shape))
        g = self._in_layout(k, state, "g", out_grads[0], axis)
        ta, tb = p.transpose_a, p.transpose_b
        a = self._in_layout(k, state, "a", inputs[0], axis) if req[1] != "null" else None
        b = self._in_layout(k, state, "b", inputs[1], axis) if req[0] != "null" else None
        if req[0] != "null":
            da, store = self._out_layout(k, state, "da", in_grads[0], axis, req[0])
            if ta:      # A^T op(B) = out  ->  dA = op(B) g^T
                k.matmul_batched(da, b, g, tb, True, "write")
            else:       # dA = g op(B)^T
                k.matmul_batched(da, g, b, False, not tb, "write")
            k.linalg_axpby(da, da, p.alpha, 0.0)
            store()
        if req[1] != "null":
            db, store = self._out_layout(k, state, "db", in_grads[1], axis, req[1])
            if tb:      # dB = g^T op(A)
                k.matmul_batched(db, g, a, True, ta, "write")
            else:       # dB = op(A)^T g
                k.matmul_batched(db, a, g, not ta, False, "write")
            k.linalg_axpby(db, db, p.alpha, 0.0)
            store()
        if self.with_c and req[2] != "null":
            k.linalg_scaled_assign(in_grads[2], out_grads[0], p.beta, req[2])


_GEMM_PARAMS = {"transpose_a": Bool(False, doc="Multiply with transposed of first input (A)."),
                "transpose_b": Bool(False, doc="Multiply with transposed of second input (B)."),
                "alpha": Float(1.0, doc="Scalar factor multiplied with A*B.")}


@register
class LinalgGemm(_Gemm):
    name = "_linalg_gemm"
    inputs = ("A", "B", "C")
    params = dict(_GEMM_PARAMS, beta=Float(1.0, doc="Scalar factor multiplied with C."),
                  axis=Int(-2, doc="Axis corresponding to the matrix rows."))


@register
class LinalgGemm2(_Gemm):
    name = "_linalg_gemm2"
    inputs = ("A", "B")
    with_c = False
    params = dict(_GEMM_PARAMS, axis=Int(-2, doc="Axis corresponding to the matrix row "
                                                 "indices."))


@register
class LinalgSyrk(_LinalgOp):
    """out = alpha A A^T (or alpha A^T A with transpose)."""
    name = "_linalg_syrk"
    params = {"transpose": Bool(False, doc="Use transpose of input matrix."),
              "alpha": Float(1.0, doc="Scalar factor to be applied to the result.")}

    def infer_shape(self, p, in_shapes):
        a = self.matrix_shape("A", in_shapes[0])
        if a is None:
            return [None], [None]
        n = a[-1] if p.transpose else a[-2]
        return [a], [a[:-2] + (n, n)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        r, c = tuple(x.shape)[-2], tuple(x.shape)[-1]
        a = _mats(x, r, c)
        n = c if p.transpose else r
        out = _mats(outputs[0], n, n)
        k.matmul_batched(out, a, a, p.transpose, not p.transpose, "write")
        k.linalg_axpby(out, out, p.alpha, 0.0)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        x = inputs[0]
        r, c = tuple(x.shape)[-2], tuple(x.shape)[-1]
        a = _mats(x, r, c)
        n = c if p.transpose else r
        g = _mats(out_grads[0], n, n)
        buf = scratch(k, state, "da", a.shape, a.dtype)
        # d(A A^T) = (G + G^T) A; d(A^T A) = A (G + G^T)
        if p.transpose:
            k.matmul_batched(buf, a, g, False, False, "write")
            k.matmul_batched(buf, a, g, False, True, "add")
        else:
            k.matmul_batched(buf, g, a, False, False, "write")
            k.matmul_batched(buf, g, a, True, False, "add")
        k.linalg_scaled_assign(_mats(in_grads[0], r, c), buf, p.alpha, req[0])


# ---------------------------------------------------------------------------------------------
# trmm, trsm
# ---------------------------------------------------------------------------------------------
_LOWER = Bool(True, doc="True if the triangular matrix is lower triangular, false if it is "
                       "upper triangular.")
_TRI_PARAMS = {"transpose": Bool(False, doc="Use transposed of the triangular matrix"),
               "rightside": Bool(False, doc="Multiply triangular matrix from the right to "
                                           "non-triangular one."),
               "lower": _LOWER,
               "alpha": Float(1.0, doc="Scalar factor to be applied to the result.")}


class _Triangular(_LinalgOp):
    inputs = ("A", "B")
    params = _TRI_PARAMS

    def infer_shape(self, p, in_shapes):
        a = self.matrix_shape("A", in_shapes[0], square=True)
        b = self.matrix_shape("B", in_shapes[1])
        if a is not None and b is not None:
            self.same_batch(("A", "B"), (a, b))
            n = b[-1] if p.rightside else b[-2]
            if a[-1] and n and a[-1] != n:
                raise self.error("triangular A %s does not fit B %s (rightside=%s: A must be "
                                 "%d x %d)", a, b, p.rightside, n, n)
        return [a, b], [b]

    def views(self, inputs, outputs):
        a, b = inputs
        n = tuple(a.shape)[-1]
        r, c = tuple(b.shape)[-2], tuple(b.shape)[-1]
        return _mats(a, n, n), _mats(b, r, c), _mats(outputs[0], r, c)

    solves = False      # trsm (solve op(A) X = alpha B) rather than trmm (multiply)

    def forward(self, p, k, inputs, outputs, is_train, state):
        a, b, out = self.views(inputs, outputs)
        run = k.linalg_trsm if self.solves else k.linalg_trmm      # the same arguments
        run(a, b, out, p.rightside, p.transpose, p.lower, p.alpha)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if no_head_gradient(k, out_grads, in_grads, req):
            return
        a, b, out = self.views(inputs, outputs)
        da_dst, db_dst = (None if r == "null" else _mats(grad, m.shape[1], m.shape[2])
                          for grad, r, m in zip(in_grads, req, (a, b)))
        g = _mats(out_grads[0], b.shape[1], b.shape[2])
        self.gradients(p, k, state, a, b, out, g, da_dst, db_dst, req)

    def gradients(self, p, k, state, a, b, out, g, da_dst, db_dst, req):
        """The gradients of A and B (as matrices; None where not requested) from head g."""
        raise NotImplementedError

    def triangle_gradient(self, p, k, state, dst, req, u, v, scale):
        """A's gradient, scale * v u^T (left side) or scale * u^T v (rightside), on A's
        triangle."""
        da = _target(k, state, "da", dst, req)
        if p.rightside:
            k.linalg_triangle_grad(u, v, da, True, p.transpose, p.lower, scale)
        else:
            k.linalg_triangle_grad(v, u, da, False, p.transpose, p.lower, scale)
        _finish(k, dst, da, req)


@register
class LinalgTrmm(_Triangular):
    """out = alpha op(A) B, or alpha B op(A) with rightside; A's other triangle is ignored."""
    name = "_linalg_trmm"

    def gradients(self, p, k, state, a, b, out, g, da_dst, db_dst, req):
        if da_dst is not None:
            # out = alpha op(A) B:  d op(A) = alpha G B^T;  out = alpha B op(A):  alpha B^T G
            self.triangle_gradient(p, k, state, da_dst, req[0], b, g, p.alpha)
        if db_dst is not None:
            db = _target(k, state, "db", db_dst, req[1])
            # dB = alpha op(A)^T G (left) or alpha G op(A)^T (right): trmm with op transposed
            k.linalg_trmm(a, g, db, p.rightside, not p.transpose, p.lower, p.alpha)
            _finish(k, db_dst, db, req[1])


@register
class LinalgTrsm(_Triangular):
    """out solves op(A) X = alpha B (or X op(A) = alpha B with rightside)."""
    name = "_linalg_trsm"

    solves = True

    def gradients(self, p, k, state, a, b, out, g, da_dst, db_dst, req):
        # Y solves op(A)^T Y = G (left) or Y op(A)^T = G (right); dB = alpha Y and
        # d op(A) = -Y X^T (left) or -X^T Y (right), X being the output
        y = scratch(k, state, "y", b.shape, b.dtype)
        k.linalg_trsm(a, g, y, p.rightside, not p.transpose, p.lower, 1.0)
        if da_dst is not None:
            self.triangle_gradient(p, k, state, da_dst, req[0], out, y, -1.0)
        if db_dst is not None:
            k.linalg_scaled_assign(db_dst, y, p.alpha, req[1])


# ---------------------------------------------------------------------------------------------
# potrf, potri, sumlogdiag
# ---------------------------------------------------------------------------------------------
class _SquareOp(_LinalgOp):
    """One batch of square matrices in; the same shape out (unless out_shape says otherwise)."""

    def infer_shape(self, p, in_shapes):
        a = self.matrix_shape("A", in_shapes[0], square=True)
        if a is None:
            return [None], [None] * self.num_outputs(p)
        return [a], self.out_shapes(p, a)

    def out_shapes(self, p, a):
        return [a]

    @staticmethod
    def square(x):
        n = tuple(x.shape)[-1]
        return _mats(x, n, n)

    def work(self, k, state, key, a):
        return scratch(k, state, key, a.shape, "float64")

    head = 0        # the output whose head gradient the gradient comes from

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads[self.head:], in_grads, req):
            return
        dst = self.square(in_grads[0])
        da = _target(k, state, "da", dst, req[0])
        self.gradient(p, k, state, inputs[0], outputs, out_grads[self.head], da)
        _finish(k, dst, da, req[0])

    def gradient(self, p, k, state, x, outputs, g, da):
        """Write the gradient of input A (as matrices) into da, from head gradient g."""
        raise NotImplementedError


def _batch_shape(a):
    """The shape of one value per matrix: the leading dims, (1,) for a single matrix."""
    return tuple(a[:-2]) or (1,)


@register
class LinalgPotrf(_SquareOp):
    """The Cholesky factor of symmetric positive-definite matrices (reading the ``lower``
    triangle, else the upper one)."""
    name = "_linalg_potrf"
    params = {"lower": _LOWER}

    def forward(self, p, k, inputs, outputs, is_train, state):
        a = self.square(inputs[0])
        info = scratch(k, state, "info", (a.shape[0],), "int32")
        bad = k.linalg_potrf(a, self.square(outputs[0]), p.lower, info)
        if bad >= 0:
            raise self.error("matrix %d of input 'A' %s is not positive definite (or not "
                             "symmetric): the Cholesky factorisation failed",
                             bad, tuple(inputs[0].shape))

    def gradient(self, p, k, state, x, outputs, g, da):
        factor = self.square(outputs[0])
        k.linalg_potrf_backward(factor, self.square(g), da, p.lower,
                                self.work(k, state, "w1", factor),
                                self.work(k, state, "w2", factor))


@register
class LinalgPotri(_SquareOp):
    """The inverse of B from its Cholesky factor A: A^-T A^-1 (lower) or A^-1 A^-T (upper)."""
    name = "_linalg_potri"
    params = {"lower": _LOWER}

    def forward(self, p, k, inputs, outputs, is_train, state):
        a = self.square(inputs[0])
        k.linalg_potri(a, self.square(outputs[0]), p.lower, self.work(k, state, "w1", a))

    def gradient(self, p, k, state, x, outputs, g, da):
        a = self.square(x)
        k.linalg_potri_backward(a, self.square(outputs[0]), self.square(g), da, p.lower,
                                self.work(k, state, "w1", a), self.work(k, state, "w2", a))


@register
class LinalgSumlogdiag(_SquareOp):
    """The sum of the natural logarithms of the diagonal of each matrix."""
    name = "_linalg_sumlogdiag"

    def out_shapes(self, p, a):
        return [_batch_shape(a)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        a = self.square(inputs[0])
        k.linalg_sumlogdiag(a, outputs[0].reshape(a.shape[0]))

    def gradient(self, p, k, state, x, outputs, g, da):
        a = self.square(x)
        k.linalg_sumlogdiag_backward(a, g.reshape(a.shape[0]), da)


# ---------------------------------------------------------------------------------------------
# gelqf, syevd
# ---------------------------------------------------------------------------------------------
@register
class LinalgGelqf(_LinalgOp):
    """A = L Q for (..., m, n) matrices with m <= n: outputs Q (..., m, n), L (..., m, m)."""
    name = "_linalg_gelqf"

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes):
        a = self.matrix_shape("A", in_shapes[0])
        if a is None:
            return [None], [None, None]
        if a[-2] and a[-1] and a[-2] > a[-1]:
            raise self.error("input 'A' has shape %s: gelqf needs at most as many rows as "
                             "columns (m <= n)", a)
        return [a], [a, a[:-1] + (a[-2],)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        m, n = tuple(inputs[0].shape)[-2], tuple(inputs[0].shape)[-1]
        a = _mats(inputs[0], m, n)
        work = scratch(k, state, "w1", a.shape, "float64")
        k.linalg_gelqf(a, _mats(outputs[0], m, n), _mats(outputs[1], m, m), work)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        if out_grads[0] is None and out_grads[1] is None:
            return zero_grads(k, in_grads, req)
        m, n = tuple(inputs[0].shape)[-2], tuple(inputs[0].shape)[-1]
        q, l = _mats(outputs[0], m, n), _mats(outputs[1], m, m)
        dq = _mats(_head(k, state, "dq", out_grads[0], outputs[0]), m, n)
        dl = _mats(_head(k, state, "dl", out_grads[1], outputs[1]), m, m)
        dst = _mats(in_grads[0], m, n)
        da = _target(k, state, "da", dst, req[0])
        k.linalg_gelqf_backward(q, l, dq, dl, da, scratch(k, state, "w1", l.shape, "float64"),
                                scratch(k, state, "w2", q.shape, "float64"))
        _finish(k, dst, da, req[0])


@register
class LinalgSyevd(_SquareOp):
    """Eigendecomposition of symmetric matrices (their lower triangle): U (..., n, n) with the
    eigenvectors as rows, each signed so that its largest entry is positive, and L (..., n)
    the eigenvalues in ascending order, so that U A = diag(L) U."""
    name = "_linalg_syevd"

    def num_outputs(self, p):
        return 2

    def out_shapes(self, p, a):
        return [a, a[:-1]]

    def forward(self, p, k, inputs, outputs, is_train, state):
        a = self.square(inputs[0])
        n = tuple(a.shape)[-1]
        k.linalg_syevd(a, self.square(outputs[0]), _vecs(outputs[1], n),
                       self.work(k, state, "w1", a))

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        if out_grads[0] is None and out_grads[1] is None:
            return zero_grads(k, in_grads, req)
        u = self.square(outputs[0])
        n = tuple(u.shape)[-1]
        du = self.square(_head(k, state, "du", out_grads[0], outputs[0]))
        dlam = _vecs(_head(k, state, "dlam", out_grads[1], outputs[1]), n)
        dst = self.square(in_grads[0])
        da = _target(k, state, "da", dst, req[0])
        k.linalg_syevd_backward(u, _vecs(outputs[1], n), du, dlam, da,
                                self.work(k, state, "w1", u), self.work(k, state, "w2", u))
        _finish(k, dst, da, req[0])


# ---------------------------------------------------------------------------------------------
# inverse, det, slogdet
# ---------------------------------------------------------------------------------------------
@register
class LinalgInverse(_SquareOp):
    """The inverse of each square matrix."""
    name = "_linalg_inverse"

    def forward(self, p, k, inputs, outputs, is_train, state):
        a = self.square(inputs[0])
        info = scratch(k, state, "info", (a.shape[0],), "int32")
        bad = k.linalg_inverse(a, self.square(outputs[0]), self.work(k, state, "w1", a), info)
        if bad >= 0:
            raise self.error("matrix %d of input 'A' %s is singular (not invertible)", bad,
                             tuple(inputs[0].shape))

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        inv = self.square(outputs[0])
        g = self.square(out_grads[0])
        # dA = -B^T G B^T with B = A^-1
        tmp = scratch(k, state, "tmp", inv.shape, inv.dtype)
        k.matmul_batched(tmp, inv, g, True, False, "write")
        dst = self.square(in_grads[0])
        da = scratch(k, state, "da", inv.shape, inv.dtype)
        k.matmul_batched(da, tmp, inv, False, True, "write")
        k.linalg_scaled_assign(dst, da, -1.0, req[0])


class _Determinant(_SquareOp):
    log = False

    def out_shapes(self, p, a):
        return [_batch_shape(a)] * self.num_outputs(p)

    def determinant(self, k, state, inputs, sign, value):
        a = self.square(inputs[0])
        k.linalg_determinant(a, self.work(k, state, "w1", a), sign.reshape(a.shape[0]),
                             value.reshape(a.shape[0]), self.log)

    def gradient(self, p, k, state, x, outputs, g, da):
        # d det(A) / dA = det(A) A^-T; d log|det(A)| / dA = A^-T
        a = self.square(x)
        batch = a.shape[0]
        coef2 = g if self.log else outputs[0]
        k.linalg_det_backward(a, g.reshape(batch), coef2.reshape(batch), not self.log, da,
                              scratch(k, state, "inv", a.shape, "float64"),
                              self.work(k, state, "w1", a))


@register
class LinalgDet(_Determinant):
    """The determinant of each square matrix; its gradient is 0 for a singular matrix."""
    name = "_linalg_det"

    def forward(self, p, k, inputs, outputs, is_train, state):
        sign = scratch(k, state, "sign", outputs[0].shape, outputs[0].dtype)
        self.determinant(k, state, inputs, sign, outputs[0])


@register
class LinalgSlogdet(_Determinant):
    """The sign and the log of the absolute value of each determinant (0 and -inf for a
    singular matrix); the gradient flows from logabsdet only, and is 0 for a singular one."""
    name = "_linalg_slogdet"
    log = True
    head = 1        # logabsdet

    def num_outputs(self, p):
        return 2

    def forward(self, p, k, inputs, outputs, is_train, state):
        self.determinant(k, state, inputs, outputs[0], outputs[1])


# ---------------------------------------------------------------------------------------------
# extractdiag, makediag, extracttrian, maketrian
# ---------------------------------------------------------------------------------------------
_OFFSET = Int(0, doc="Offset of the diagonal versus the main diagonal. 0 corresponds to the "
                     "main diagonal, a negative/positive value to diagonals below/above the "
                     "main diagonal.")
_LOWER = Bool(True, doc="Refer to the lower triangular matrix if lower=true, refer to the "
                        "upper otherwise. Only relevant when offset=0")


def _triangle_size(m):
    return m * (m + 1) // 2


class _MatrixVector(_LinalgOp):
    """Index maps between square matrices (..., n, n) and vectors (..., length)."""
    to_matrix = False     # the forward direction

    def length(self, p, n):
        raise NotImplementedError

    def side(self, p, length):
        """The matrix side for a vector length (raise when there is none)."""
        raise NotImplementedError

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None]
        if self.to_matrix:
            s = self.matrix_shape("A", s, min_ndim=1)
            n = self.side(p, s[-1]) if s[-1] else 0
            return [s], [s[:-1] + (n, n)]
        s = self.matrix_shape("A", s, square=True)
        if s[-1] and self.length(p, s[-1]) <= 0:
            raise self.error("offset=%d leaves no entries in %d x %d matrices (input 'A' %s)",
                             p.offset, s[-1], s[-1], s)
        return [s], [s[:-2] + (self.length(p, s[-1]),)]

    def copy(self, p, k, mat, vec, to_matrix):
        raise NotImplementedError

    def run(self, p, k, mat_arr, vec_arr, to_matrix):
        n = tuple(mat_arr.shape)[-1]
        self.copy(p, k, _mats(mat_arr, n, n), _vecs(vec_arr, tuple(vec_arr.shape)[-1]), to_matrix)

    def forward(self, p, k, inputs, outputs, is_train, state):
        if self.to_matrix:
            self.run(p, k, outputs[0], inputs[0], True)
        else:
            self.run(p, k, inputs[0], outputs[0], False)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        dst = in_grads[0]
        buf = _target(k, state, "da", dst, req[0])
        if self.to_matrix:          # the gradient picks the entries back out
            self.run(p, k, out_grads[0], buf, False)
        else:                       # the gradient puts them back, zeros elsewhere
            self.run(p, k, buf, out_grads[0], True)
        _finish(k, dst, buf, req[0])


class _Diagonal(_MatrixVector):
    params = {"offset": _OFFSET}

    def length(self, p, n):
        return n - abs(p.offset)

    def side(self, p, length):
        return length + abs(p.offset)

    def copy(self, p, k, mat, vec, to_matrix):
        k.linalg_diagonal(mat, vec, p.offset, to_matrix)


@register
class LinalgExtractdiag(_Diagonal):
    """The ``offset`` diagonal of each square matrix as a vector."""
    name = "_linalg_extractdiag"


@register
class LinalgMakediag(_Diagonal):
    """Square matrices holding each vector on their ``offset`` diagonal, zeros elsewhere."""
    name = "_linalg_makediag"
    to_matrix = True


class _Triangle(_MatrixVector):
    params = {"offset": _OFFSET, "lower": _LOWER}

    def length(self, p, n):
        m = n - abs(p.offset)
        return _triangle_size(m) if m > 0 else 0

    def side(self, p, length):
        m = int(round((math.sqrt(8 * length + 1) - 1) / 2))
        if _triangle_size(m) != length:
            raise self.error("input 'A' has %d entries per matrix, which is no triangle size "
                             "m (m + 1) / 2", length)
        return m + abs(p.offset)

    def copy(self, p, k, mat, vec, to_matrix):
        k.linalg_triangle(mat, vec, p.offset, p.lower, to_matrix)


@register
class LinalgExtracttrian(_Triangle):
    """The triangle on and below the ``offset`` diagonal (offset < 0, or 0 with lower) of each
    square matrix row by row, or on and above it column by column, as a vector."""
    name = "_linalg_extracttrian"


@register
class LinalgMaketrian(_Triangle):
    """The inverse of extracttrian: square matrices with each vector in that triangle."""
    name = "_linalg_maketrian"
    to_matrix = True
