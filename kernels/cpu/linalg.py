"""CPU launchers of the ``linalg`` family: the per-matrix math of ``kernels/linalg_math.py``
compiled into the loops below and run over the batch (the leading axis of 3-d views) with ``prange``.

Batched matrices are passed as (batch, rows, cols) arrays, vectors as (batch, length); the
scratch matrices (``work``) are float64 arrays of the same batch the operator allocates once.
The launchers returning an int give the first matrix of the batch that failed (-1: none).
"""
import numpy as np
from numba import prange

from .. import linalg_math as M
from .jit import parallel_loop

__all__ = list(M.LAUNCHER_NAMES)


# a matrix of n x n costs about n^3 element operations; the loops below go parallel once the
# batch holds enough of them (see cpu/jit.py)
_COST = 1.0


def _work(a):
    """Elements of work of a batch of matrices a (batch, rows, cols): rows^2 * cols each."""
    return a.shape[0] * a.shape[1] * a.shape[1] * max(a.shape[2], 1)


def _first_failure(info):
    return int(np.argmax(info != 0)) if info.any() else -1


# --- Cholesky ---------------------------------------------------------------------------------
@parallel_loop(cost=_COST)
def _potrf_loop(a, out, lower, info):
    for b in prange(a.shape[0]):
        info[b] = M.cholesky(a[b], out[b], lower)


def linalg_potrf(a, out, lower, info):
    """out[b] = the Cholesky factor of a[b] (lower or upper); info (batch,) int32 scratch.
    Returns the first matrix that is not positive definite, or -1."""
    _potrf_loop(_work(a), a, out, bool(lower), info)
    return _first_failure(info)


@parallel_loop(cost=_COST)
def _potri_loop(a, out, lower, work):
    for b in prange(a.shape[0]):
        M.cholesky_inverse(a[b], out[b], lower, work[b])


def linalg_potri(a, out, lower, work):
    """out[b] = L^-T L^-1 for the triangular factor a[b] (its lower view L)."""
    _potri_loop(_work(a), a, out, bool(lower), work)


@parallel_loop(cost=_COST)
def _potrf_grad_loop(factor, dfactor, da, lower, work, work2):
    for b in prange(factor.shape[0]):
        M.cholesky_grad(factor[b], dfactor[b], da[b], lower, work[b], work2[b])


def linalg_potrf_backward(factor, dfactor, da, lower, work, work2):
    """potrf's input gradient da from the factor and its head gradient dfactor."""
    _potrf_grad_loop(_work(factor), factor, dfactor, da, bool(lower), work, work2)


@parallel_loop(cost=_COST)
def _potri_grad_loop(a, inv, g, da, lower, work, work2):
    for b in prange(a.shape[0]):
        M.cholesky_inverse_grad(a[b], inv[b], g[b], da[b], lower, work[b], work2[b])


def linalg_potri_backward(a, inv, g, da, lower, work, work2):
    """potri's input gradient da from its input a, its output inv and the head gradient g."""
    _potri_grad_loop(_work(a), a, inv, g, da, bool(lower), work, work2)


# --- triangular products and solves ---------------------------------------------------------------
@parallel_loop(cost=_COST)
def _triangular_loop(a, b, out, solve, rightside, transpose, lower, alpha):
    for i in prange(a.shape[0]):
        if solve:
            M.triangular_solve(a[i], b[i], out[i], rightside, transpose, lower, alpha)
        else:
            M.triangular_product(a[i], b[i], out[i], rightside, transpose, lower, alpha)


def _triangular(a, b, out, solve, rightside, transpose, lower, alpha):
    _triangular_loop(b.size * a.shape[1], a, b, out, solve, bool(rightside), bool(transpose),
                     bool(lower), float(alpha))


def linalg_trmm(a, b, out, rightside, transpose, lower, alpha):
    """out[i] = alpha op(tri(a[i])) b[i] (or alpha b[i] op(tri(a[i])) with rightside)."""
    _triangular(a, b, out, False, rightside, transpose, lower, alpha)


def linalg_trsm(a, b, out, rightside, transpose, lower, alpha):
    """out[i] solves op(tri(a[i])) X = alpha b[i] (or X op(tri(a[i])) = alpha b[i])."""
    _triangular(a, b, out, True, rightside, transpose, lower, alpha)


@parallel_loop(cost=_COST)
def _tri_grad_loop(p, q, da, rightside, transpose, lower, scale):
    for i in prange(da.shape[0]):
        M.triangle_grad(p[i], q[i], da[i], rightside, transpose, lower, scale)


def linalg_triangle_grad(p, q, da, rightside, transpose, lower, scale):
    """da[i] = scale (p q^T or p^T q, transposed when asked) on the triangle, 0 elsewhere."""
    _tri_grad_loop(p.size * da.shape[1], p, q, da, bool(rightside), bool(transpose),
                   bool(lower), float(scale))


# --- LQ, eigendecomposition --------------------------------------------------------------------------
@parallel_loop(cost=_COST)
def _gelqf_loop(a, q, l, work):
    for b in prange(a.shape[0]):
        M.lq_factor(a[b], q[b], l[b], work[b])


def linalg_gelqf(a, q, l, work):
    """a[b] = l[b] q[b] (LQ factorisation, LAPACK's signs)."""
    _gelqf_loop(_work(a), a, q, l, work)


@parallel_loop(cost=_COST)
def _gelqf_grad_loop(q, l, dq, dl, da, work, work2):
    for b in prange(q.shape[0]):
        M.lq_grad(q[b], l[b], dq[b], dl[b], da[b], work[b], work2[b])


def linalg_gelqf_backward(q, l, dq, dl, da, work, work2):
    """gelqf's input gradient from its outputs q, l and their head gradients dq, dl."""
    _gelqf_grad_loop(_work(q), q, l, dq, dl, da, work, work2)


@parallel_loop(cost=_COST)
def _syevd_loop(a, u, lam, work):
    for b in prange(a.shape[0]):
        M.sym_eig(a[b], u[b], lam[b], work[b])


def linalg_syevd(a, u, lam, work):
    """u[b] A = diag(lam[b]) u[b] for the symmetric a[b] (its lower triangle)."""
    _syevd_loop(_work(a) * 8, a, u, lam, work)


@parallel_loop(cost=_COST)
def _syevd_grad_loop(u, lam, du, dlam, da, work, work2):
    for b in prange(u.shape[0]):
        M.sym_eig_grad(u[b], lam[b], du[b], dlam[b], da[b], work[b], work2[b])


def linalg_syevd_backward(u, lam, du, dlam, da, work, work2):
    """syevd's input gradient from its outputs u, lam and their head gradients du, dlam."""
    _syevd_grad_loop(_work(u), u, lam, du, dlam, da, work, work2)


# --- inverse, determinant ------------------------------------------------------------------------------
@parallel_loop(cost=_COST)
def _inverse_loop(a, out, work, info):
    for b in prange(a.shape[0]):
        info[b] = M.lu_inverse(a[b], out[b], work[b])


def linalg_inverse(a, out, work, info):
    """out[b] = a[b]^-1. Returns the first singular matrix, or -1."""
    _inverse_loop(_work(a), a, out, work, info)
    return _first_failure(info)


@parallel_loop(cost=_COST)
def _determinant_loop(a, work, sign, value, log):
    for b in prange(a.shape[0]):
        M.lu_determinant(a[b], work[b], sign, value, b, log)


def linalg_determinant(a, work, sign, value, log):
    """sign[b] = the sign of det a[b]; value[b] = log|det a[b]| (log) or det a[b]."""
    _determinant_loop(_work(a), a, work, sign, value, bool(log))


@parallel_loop(cost=_COST)
def _det_grad_loop(a, coef, coef2, use_coef2, da, inv, work):
    for b in prange(a.shape[0]):
        singular = M.lu_inverse(a[b], inv[b], work[b])
        M.inverse_transpose_scaled(inv[b], singular, coef, coef2, use_coef2, b, da[b])


def linalg_det_backward(a, coef, coef2, use_coef2, da, inv, work):
    """da[b] = coef[b] (* coef2[b]) a[b]^-T, or 0 for a singular a[b]; inv is scratch."""
    _det_grad_loop(_work(a), a, coef, coef2, bool(use_coef2), da, inv, work)


# --- diagonals, triangles, sumlogdiag ------------------------------------------------------------------
@parallel_loop(cost=_COST)
def _diagonal_loop(mat, vec, offset, to_matrix):
    for b in prange(mat.shape[0]):
        M.diagonal_copy(mat[b], vec[b], offset, to_matrix)


def linalg_diagonal(mat, vec, offset, to_matrix):
    """vec[b] = the offset diagonal of mat[b], or (to_matrix) mat[b] = vec[b] on it, 0 elsewhere."""
    _diagonal_loop(mat.size if to_matrix else vec.size, mat, vec, int(offset), bool(to_matrix))


@parallel_loop(cost=_COST)
def _triangle_loop(mat, vec, offset, lower, to_matrix):
    for b in prange(mat.shape[0]):
        M.triangle_copy(mat[b], vec[b], offset, lower, to_matrix)


def linalg_triangle(mat, vec, offset, lower, to_matrix):
    """vec[b] = the triangle of mat[b], or (to_matrix) mat[b] = vec[b] on it, 0 elsewhere."""
    _triangle_loop(mat.size, mat, vec, int(offset), bool(lower), bool(to_matrix))


@parallel_loop(cost=_COST)
def _sumlogdiag_loop(a, out):
    for b in prange(a.shape[0]):
        M.sum_log_diagonal(a[b], out, b)


def linalg_sumlogdiag(a, out):
    """out[b] = sum_i log a[b, i, i]."""
    _sumlogdiag_loop(a.shape[0] * a.shape[1], a, out)


@parallel_loop(cost=_COST)
def _sumlogdiag_grad_loop(a, g, da):
    for b in prange(a.shape[0]):
        M.sum_log_diagonal_grad(a[b], g, b, da[b])


def linalg_sumlogdiag_backward(a, g, da):
    """da[b] = g[b] / a[b, i, i] on the diagonal, 0 elsewhere."""
    _sumlogdiag_grad_loop(a.size, a, g, da)


# --- element-wise helpers -----------------------------------------------------------------------------
@parallel_loop(cost=1.0)
def _axpby_loop(out, x, alpha, beta):
    for i in prange(out.size):
        v = alpha * out[i]
        if beta != 0.0:
            v += beta * x[i]
        out[i] = v


def linalg_axpby(out, x, alpha, beta):
    """out = alpha * out + beta * x (same shapes)."""
    _axpby_loop(out.size, out.reshape(-1), x.reshape(-1), float(alpha), float(beta))


@parallel_loop(cost=1.0)
def _scaled_assign_loop(dst, src, alpha, add):
    for i in prange(dst.size):
        v = alpha * src[i]
        dst[i] = dst[i] + v if add else v


def linalg_scaled_assign(dst, src, alpha, req):
    """dst (req) alpha * src: 'write' stores, 'add' accumulates, 'null' does nothing."""
    if req != "null":
        _scaled_assign_loop(dst.size, dst.reshape(-1), src.reshape(-1), float(alpha),
                            req == "add")
