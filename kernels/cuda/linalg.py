"""CUDA launchers of the ``linalg`` family: the per-matrix math of ``kernels/linalg_math.py``
compiled into the kernels below, one thread per matrix of the batch (grid-stride over the batch).

Same functions and arguments as ``kernels/cpu/linalg.py``. The factorisations are sequential
within a matrix, so a thread owns a whole matrix: right for the many small matrices these
operators usually see, slow for single large ones (a cuSOLVER binding would be the next step).
"""
import numpy as np
from numba import cuda

from .. import linalg_math as M
from .memory import flat
from .memory import launch_config as launch

__all__ = list(M.LAUNCHER_NAMES)



def _first_failure(info):
    bad = np.flatnonzero(info.copy_to_host())
    return int(bad[0]) if bad.size else -1


# --- Cholesky ---------------------------------------------------------------------------------
@cuda.jit
def _potrf_k(a, out, lower, info):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        info[b] = M.cholesky(a[b], out[b], lower)


def linalg_potrf(a, out, lower, info):
    """out[b] = the Cholesky factor of a[b]; returns the first failing matrix, or -1."""
    if a.shape[0] == 0:
        return -1
    _potrf_k[launch(a.shape[0])](a, out, bool(lower), info)
    return _first_failure(info)


@cuda.jit
def _potri_k(a, out, lower, work):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        M.cholesky_inverse(a[b], out[b], lower, work[b])


def linalg_potri(a, out, lower, work):
    """out[b] = L^-T L^-1 for the triangular factor a[b] (its lower view L)."""
    if a.shape[0]:
        _potri_k[launch(a.shape[0])](a, out, bool(lower), work)


@cuda.jit
def _potrf_grad_k(factor, dfactor, da, lower, work, work2):
    for b in range(cuda.grid(1), factor.shape[0], cuda.gridsize(1)):
        M.cholesky_grad(factor[b], dfactor[b], da[b], lower, work[b], work2[b])


def linalg_potrf_backward(factor, dfactor, da, lower, work, work2):
    """potrf's input gradient da from the factor and its head gradient dfactor."""
    if factor.shape[0]:
        _potrf_grad_k[launch(factor.shape[0])](factor, dfactor, da, bool(lower), work, work2)


@cuda.jit
def _potri_grad_k(a, inv, g, da, lower, work, work2):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        M.cholesky_inverse_grad(a[b], inv[b], g[b], da[b], lower, work[b], work2[b])


def linalg_potri_backward(a, inv, g, da, lower, work, work2):
    """potri's input gradient da from its input a, its output inv and the head gradient g."""
    if a.shape[0]:
        _potri_grad_k[launch(a.shape[0])](a, inv, g, da, bool(lower), work, work2)


# --- triangular products and solves ---------------------------------------------------------------
@cuda.jit
def _triangular_k(a, b, out, solve, rightside, transpose, lower, alpha):
    for i in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        if solve:
            M.triangular_solve(a[i], b[i], out[i], rightside, transpose, lower, alpha)
        else:
            M.triangular_product(a[i], b[i], out[i], rightside, transpose, lower, alpha)


def _triangular(a, b, out, solve, rightside, transpose, lower, alpha):
    if a.shape[0]:
        _triangular_k[launch(a.shape[0])](a, b, out, solve, bool(rightside), bool(transpose),
                                          bool(lower), float(alpha))


def linalg_trmm(a, b, out, rightside, transpose, lower, alpha):
    """out[i] = alpha op(tri(a[i])) b[i] (or alpha b[i] op(tri(a[i])) with rightside)."""
    _triangular(a, b, out, False, rightside, transpose, lower, alpha)


def linalg_trsm(a, b, out, rightside, transpose, lower, alpha):
    """out[i] solves op(tri(a[i])) X = alpha b[i] (or X op(tri(a[i])) = alpha b[i])."""
    _triangular(a, b, out, True, rightside, transpose, lower, alpha)


@cuda.jit
def _tri_grad_k(p, q, da, rightside, transpose, lower, scale):
    for i in range(cuda.grid(1), da.shape[0], cuda.gridsize(1)):
        M.triangle_grad(p[i], q[i], da[i], rightside, transpose, lower, scale)


def linalg_triangle_grad(p, q, da, rightside, transpose, lower, scale):
    """da[i] = scale (p q^T or p^T q, transposed when asked) on the triangle, 0 elsewhere."""
    if da.shape[0]:
        _tri_grad_k[launch(da.shape[0])](p, q, da, bool(rightside), bool(transpose),
                                         bool(lower), float(scale))


# --- LQ, eigendecomposition --------------------------------------------------------------------------
@cuda.jit
def _gelqf_k(a, q, l, work):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        M.lq_factor(a[b], q[b], l[b], work[b])


def linalg_gelqf(a, q, l, work):
    """a[b] = l[b] q[b] (LQ factorisation, LAPACK's signs)."""
    if a.shape[0]:
        _gelqf_k[launch(a.shape[0])](a, q, l, work)


@cuda.jit
def _gelqf_grad_k(q, l, dq, dl, da, work, work2):
    for b in range(cuda.grid(1), q.shape[0], cuda.gridsize(1)):
        M.lq_grad(q[b], l[b], dq[b], dl[b], da[b], work[b], work2[b])


def linalg_gelqf_backward(q, l, dq, dl, da, work, work2):
    """gelqf's input gradient from its outputs q, l and their head gradients dq, dl."""
    if q.shape[0]:
        _gelqf_grad_k[launch(q.shape[0])](q, l, dq, dl, da, work, work2)


@cuda.jit
def _syevd_k(a, u, lam, work):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        M.sym_eig(a[b], u[b], lam[b], work[b])


def linalg_syevd(a, u, lam, work):
    """u[b] A = diag(lam[b]) u[b] for the symmetric a[b] (its lower triangle)."""
    if a.shape[0]:
        _syevd_k[launch(a.shape[0])](a, u, lam, work)


@cuda.jit
def _syevd_grad_k(u, lam, du, dlam, da, work, work2):
    for b in range(cuda.grid(1), u.shape[0], cuda.gridsize(1)):
        M.sym_eig_grad(u[b], lam[b], du[b], dlam[b], da[b], work[b], work2[b])


def linalg_syevd_backward(u, lam, du, dlam, da, work, work2):
    """syevd's input gradient from its outputs u, lam and their head gradients du, dlam."""
    if u.shape[0]:
        _syevd_grad_k[launch(u.shape[0])](u, lam, du, dlam, da, work, work2)


# --- inverse, determinant ------------------------------------------------------------------------------
@cuda.jit
def _inverse_k(a, out, work, info):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        info[b] = M.lu_inverse(a[b], out[b], work[b])


def linalg_inverse(a, out, work, info):
    """out[b] = a[b]^-1. Returns the first singular matrix, or -1."""
    if a.shape[0] == 0:
        return -1
    _inverse_k[launch(a.shape[0])](a, out, work, info)
    return _first_failure(info)


@cuda.jit
def _determinant_k(a, work, sign, value, log):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        M.lu_determinant(a[b], work[b], sign, value, b, log)


def linalg_determinant(a, work, sign, value, log):
    """sign[b] = the sign of det a[b]; value[b] = log|det a[b]| (log) or det a[b]."""
    if a.shape[0]:
        _determinant_k[launch(a.shape[0])](a, work, sign, value, bool(log))


@cuda.jit
def _det_grad_k(a, coef, coef2, use_coef2, da, inv, work):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        singular = M.lu_inverse(a[b], inv[b], work[b])
        M.inverse_transpose_scaled(inv[b], singular, coef, coef2, use_coef2, b, da[b])


def linalg_det_backward(a, coef, coef2, use_coef2, da, inv, work):
    """da[b] = coef[b] (* coef2[b]) a[b]^-T, or 0 for a singular a[b]; inv is scratch."""
    if a.shape[0]:
        _det_grad_k[launch(a.shape[0])](a, coef, coef2, bool(use_coef2), da, inv, work)


# --- diagonals, triangles, sumlogdiag ------------------------------------------------------------------
@cuda.jit
def _diagonal_k(mat, vec, offset, to_matrix):
    for b in range(cuda.grid(1), mat.shape[0], cuda.gridsize(1)):
        M.diagonal_copy(mat[b], vec[b], offset, to_matrix)


def linalg_diagonal(mat, vec, offset, to_matrix):
    """vec[b] = the offset diagonal of mat[b], or (to_matrix) mat[b] = vec[b] on it, 0 elsewhere."""
    if mat.shape[0]:
        _diagonal_k[launch(mat.shape[0])](mat, vec, int(offset), bool(to_matrix))


@cuda.jit
def _triangle_k(mat, vec, offset, lower, to_matrix):
    for b in range(cuda.grid(1), mat.shape[0], cuda.gridsize(1)):
        M.triangle_copy(mat[b], vec[b], offset, lower, to_matrix)


def linalg_triangle(mat, vec, offset, lower, to_matrix):
    """vec[b] = the triangle of mat[b], or (to_matrix) mat[b] = vec[b] on it, 0 elsewhere."""
    if mat.shape[0]:
        _triangle_k[launch(mat.shape[0])](mat, vec, int(offset), bool(lower), bool(to_matrix))


@cuda.jit
def _sumlogdiag_k(a, out):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        M.sum_log_diagonal(a[b], out, b)


def linalg_sumlogdiag(a, out):
    """out[b] = sum_i log a[b, i, i]."""
    if a.shape[0]:
        _sumlogdiag_k[launch(a.shape[0])](a, out)


@cuda.jit
def _sumlogdiag_grad_k(a, g, da):
    for b in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        M.sum_log_diagonal_grad(a[b], g, b, da[b])


def linalg_sumlogdiag_backward(a, g, da):
    """da[b] = g[b] / a[b, i, i] on the diagonal, 0 elsewhere."""
    if a.shape[0]:
        _sumlogdiag_grad_k[launch(a.shape[0])](a, g, da)


# --- element-wise helpers -----------------------------------------------------------------------------
@cuda.jit
def _axpby_k(out, x, alpha, beta):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        v = alpha * out[i]
        if beta != 0.0:
            v += beta * x[i]
        out[i] = v


def linalg_axpby(out, x, alpha, beta):
    """out = alpha * out + beta * x (same shapes)."""
    if out.size:
        _axpby_k[launch(out.size)](flat(out), flat(x), float(alpha), float(beta))


@cuda.jit
def _scaled_assign_k(dst, src, alpha, add):
    for i in range(cuda.grid(1), dst.shape[0], cuda.gridsize(1)):
        v = alpha * src[i]
        if add:
            v += dst[i]
        dst[i] = v


def linalg_scaled_assign(dst, src, alpha, req):
    """dst (req) alpha * src: 'write' stores, 'add' accumulates, 'null' does nothing."""
    if req != "null" and dst.size:
        _scaled_assign_k[launch(dst.size)](flat(dst), flat(src), float(alpha), req == "add")
