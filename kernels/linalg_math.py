"""Per-matrix math of the ``linalg`` family, written once for both kernel halves.

Each function works on one matrix (2-d views of a batch) with plain loops and scalar math.
They are ``register_jitable``: numba compiles them into whichever code calls them (the CPU
loops of ``kernels/cpu/linalg.py``, the CUDA kernels of ``kernels/cuda/linalg.py``), and the
CUDA simulator runs them as Python on its own arrays, so unlike ``@njit`` functions they may
take arrays and call each other. They allocate nothing (device code cannot): the scratch
matrices they need are arguments.

Triangles: ``lower`` says which triangle of a stored matrix holds the factor. Functions read
a triangular factor through its *lower view* ``L[i, j] = a[i, j]`` (lower) or ``a[j, i]``
(upper), so one algorithm serves both layouts. Unless a docstring says otherwise the output
matrices are written completely.

numba's on-disk cache entries of the launchers that inline this math carry a digest of the whole
package (``cache_stamp.py``): an edit here makes them recompile.
"""
import math

from numba.extending import register_jitable

# the functions both kernel sets export (kernels/cpu/linalg.py, kernels/cuda/linalg.py)
LAUNCHER_NAMES = (
    "linalg_potrf", "linalg_potri", "linalg_trmm", "linalg_trsm", "linalg_triangle_grad",
    "linalg_potrf_backward", "linalg_potri_backward", "linalg_gelqf", "linalg_gelqf_backward",
    "linalg_syevd", "linalg_syevd_backward", "linalg_inverse", "linalg_determinant",
    "linalg_det_backward", "linalg_diagonal", "linalg_triangle", "linalg_sumlogdiag",
    "linalg_sumlogdiag_backward", "linalg_axpby", "linalg_scaled_assign")


# ---------------------------------------------------------------------------------------------
# steps several functions share
# ---------------------------------------------------------------------------------------------
@register_jitable
def matmul(a, b, out):
    """``out = a b`` (pass ``x.T`` for a transposed operand)."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            s = 0.0
            for k in range(a.shape[1]):
                s += a[i, k] * b[k, j]
            out[i, j] = s
    return 0


@register_jitable
def solve_lower_transposed(factor, lower, rhs, x):
    """Solve ``L^T x = rhs`` for the vector ``x``, L the lower view of ``factor`` (L^T is
    upper triangular: substitute from the last row). rhs and x may be rows or columns of
    matrices."""
    n = factor.shape[0]
    for step in range(n):
        i = n - 1 - step
        s = rhs[i]
        for k in range(i + 1, n):
            lki = factor[k, i] if lower else factor[i, k]
            s -= lki * x[k]
        x[i] = s / factor[i, i]
    return 0


@register_jitable
def reflect_row(x, v, i, tau):
    """``x = x H`` for the row vector x and the Householder reflector ``H = I - tau u u^T``,
    ``u = [0, ..., 0, 1, v[i+1:]]`` (its 1 at position i)."""
    s = x[i]
    for j in range(i + 1, x.shape[0]):
        s += x[j] * v[j]
    s *= tau
    x[i] -= s
    for j in range(i + 1, x.shape[0]):
        x[j] -= s * v[j]
    return 0


# ---------------------------------------------------------------------------------------------
# Cholesky factorisation and inverse from the factor (potrf, potri)
# ---------------------------------------------------------------------------------------------
@register_jitable
def cholesky(a, out, lower):
    """Factor the symmetric matrix whose ``lower`` (else upper) triangle ``a`` holds into
    ``out`` (lower: A = L L^T with L in out's lower triangle; upper: A = U^T U). The other
    triangle of out is zeroed. Returns 0, or 1 + the column whose pivot was not positive
    (the matrix is not positive definite)."""
    n = a.shape[0]
    for j in range(n):
        for i in range(n):
            if i < j:
                if lower:
                    out[i, j] = 0.0
                else:
                    out[j, i] = 0.0
        s = a[j, j]
        for k in range(j):
            v = out[j, k] if lower else out[k, j]
            s -= v * v
        if not s > 0.0:
            return j + 1
        d = math.sqrt(s)
        out[j, j] = d
        for i in range(j + 1, n):
            t = a[i, j] if lower else a[j, i]
            for k in range(j):
                if lower:
                    t -= out[i, k] * out[j, k]
                else:
                    t -= out[k, i] * out[k, j]
            if lower:
                out[i, j] = t / d
            else:
                out[j, i] = t / d
    return 0


@register_jitable
def cholesky_inverse(a, out, lower, work):
    """``out = L^-T L^-1`` for the lower view L of the triangular factor ``a`` (potri: the
    inverse of the matrix whose Cholesky factor a is). ``work`` (n, n) receives L^-1."""
    n = a.shape[0]
    # work = L^-1, column by column (forward substitution on the identity)
    for c in range(n):
        for i in range(n):
            if i < c:
                work[i, c] = 0.0
                continue
            s = 1.0 if i == c else 0.0
            for k in range(c, i):
                lik = a[i, k] if lower else a[k, i]
                s -= lik * work[k, c]
            work[i, c] = s / a[i, i]
    for i in range(n):
        for j in range(i + 1):
            s = 0.0
            for k in range(i, n):          # work is lower triangular: rows k >= max(i, j)
                s += work[k, i] * work[k, j]
            out[i, j] = s
            out[j, i] = s
    return 0


# ---------------------------------------------------------------------------------------------
# triangular products and solves (trmm, trsm) and their gradient with respect to the triangle
# ---------------------------------------------------------------------------------------------
@register_jitable
def triangular_product(a, b, out, rightside, transpose, lower, alpha):
    """``out = alpha op(A) B`` (or ``alpha B op(A)`` with rightside), A the ``lower`` (else
    upper) triangle of ``a``, op transposing when asked. Written as T Y with T = op(A) (left)
    or op(A)^T (right, Y = out^T), so one loop serves the four cases."""
    n = a.shape[0]
    swap = transpose != rightside            # T[i, k] = A[k, i]
    cols = b.shape[0] if rightside else b.shape[1]
    for c in range(cols):
        for i in range(n):
            s = 0.0
            for k in range(n):
                r, q = (k, i) if swap else (i, k)
                if (r >= q) if lower else (r <= q):
                    bk = b[c, k] if rightside else b[k, c]
                    s += a[r, q] * bk
            if rightside:
                out[c, i] = alpha * s
            else:
                out[i, c] = alpha * s
    return 0


@register_jitable
def triangular_solve(a, b, out, rightside, transpose, lower, alpha):
    """Solve ``op(A) X = alpha B`` (or ``X op(A) = alpha B`` with rightside) for ``out``, A
    the ``lower`` (else upper) triangle of ``a``. Written as T Y = alpha C with T = op(A) or
    op(A)^T; T is lower triangular exactly when ``lower`` differs from ``swap``."""
    n = a.shape[0]
    swap = transpose != rightside
    forward = lower != swap                    # T lower: substitute from the first row
    cols = b.shape[0] if rightside else b.shape[1]
    for c in range(cols):
        for step in range(n):
            i = step if forward else n - 1 - step
            s = alpha * (b[c, i] if rightside else b[i, c])
            lo = 0 if forward else i + 1
            hi = i if forward else n
            for k in range(lo, hi):
                tik = a[k, i] if swap else a[i, k]
                s -= tik * (out[c, k] if rightside else out[k, c])
            if rightside:
                out[c, i] = s / a[i, i]
            else:
                out[i, c] = s / a[i, i]
    return 0


@register_jitable
def triangle_grad(p, q, da, rightside, transpose, lower, scale):
    """The gradient of trmm / trsm with respect to the triangle: ``da = scale M`` (``M^T`` when
    transpose) on the ``lower`` (else upper) triangle and 0 elsewhere, with ``M = p q^T``
    (left side) or ``p^T q`` (right side)."""
    n = da.shape[0]
    inner = p.shape[0] if rightside else p.shape[1]
    for r in range(n):
        for c in range(n):
            if not ((r >= c) if lower else (r <= c)):
                da[r, c] = 0.0
                continue
            i, k = (c, r) if transpose else (r, c)
            s = 0.0
            for j in range(inner):
                if rightside:
                    s += p[j, i] * q[j, k]
                else:
                    s += p[i, j] * q[k, j]
            da[r, c] = scale * s
    return 0


@register_jitable
def cholesky_grad(factor, dfactor, da, lower, work, work2):
    """potrf's gradient ``dA = 0.5 L^-T sym(L^T dL) L^-1`` for the lower view L of ``factor``
    (dL the lower view of ``dfactor``), where sym copies the lower triangle onto the upper one.
    The result is symmetric. work, work2: (n, n)."""
    n = da.shape[0]
    # work = L^T dL (lower triangle), mirrored onto the upper one
    for i in range(n):
        for j in range(i + 1):
            s = 0.0
            for k in range(i, n):
                lki = factor[k, i] if lower else factor[i, k]
                dkj = dfactor[k, j] if lower else dfactor[j, k]
                s += lki * dkj
            work[i, j] = s
            work[j, i] = s
    # work2 = L^-T work: solve L^T Y = work, column by column
    for c in range(n):
        solve_lower_transposed(factor, lower, work[:, c], work2[:, c])
    # da = 0.5 work2 L^-1: solve X L = work2, i.e. L^T X^T = work2^T, row by row of X
    for r in range(n):
        solve_lower_transposed(factor, lower, work2[r, :], da[r, :])
    for r in range(n):
        for c in range(n):
            da[r, c] *= 0.5
    return 0


@register_jitable
def cholesky_inverse_grad(a, inv, g, da, lower, work, work2):
    """potri's gradient: ``dL = -tril(B (G + G^T) B L)`` for B = ``inv`` (the output), G the
    head gradient and L the lower view of ``a``; written into the same triangle of ``da`` that
    ``a`` holds, the other triangle 0."""
    n = a.shape[0]
    for i in range(n):
        for j in range(n):
            work[i, j] = g[i, j] + g[j, i]
    matmul(inv, work, work2)                # work2 = B work
    matmul(work2, inv, work)                # work = work2 B
    for i in range(n):                      # dL = -tril(work L)
        for j in range(n):
            if j > i:
                if lower:
                    da[i, j] = 0.0
                else:
                    da[j, i] = 0.0
                continue
            s = 0.0
            for k in range(j, n):
                lkj = a[k, j] if lower else a[j, k]
                s += work[i, k] * lkj
            if lower:
                da[i, j] = -s
            else:
                da[j, i] = -s
    return 0


# ---------------------------------------------------------------------------------------------
# LQ factorisation (gelqf)
# ---------------------------------------------------------------------------------------------
@register_jitable
def lq_factor(a, q, l, work):
    """``A = L Q`` for ``a`` of shape (m, n), m <= n: L (m, m) lower triangular, Q (m, n) with
    orthonormal rows, by Householder reflections applied from the right with LAPACK's sign
    rule (the diagonal of L is ``-sign(a_ii) * norm`` of the reflected row, as gelqf gives).
    ``work`` (m, n) holds the reduced matrix and, right of its diagonal, the reflectors
    v = [1, work[i, i+1:]]; H_i = I - tau v v^T with tau = 2 / (v^T v), or 0 (H = I) when the
    row needed no reflection."""
    m = a.shape[0]
    n = a.shape[1]
    for i in range(m):
        for j in range(n):
            work[i, j] = a[i, j]
    for i in range(m):
        alpha = work[i, i]
        xnorm = 0.0
        for j in range(i + 1, n):
            xnorm += work[i, j] * work[i, j]
        xnorm = math.sqrt(xnorm)
        tau = 0.0
        beta = alpha
        if xnorm != 0.0:
            beta = -math.copysign(math.sqrt(alpha * alpha + xnorm * xnorm), alpha)
            tau = (beta - alpha) / beta
            scale = 1.0 / (alpha - beta)
            for j in range(i + 1, n):
                work[i, j] *= scale
        work[i, i] = beta
        for r in range(i + 1, m):              # the rows below, times H from the right
            reflect_row(work[r], work[i], i, tau)
    for i in range(m):
        for j in range(m):
            l[i, j] = work[i, j] if j <= i else 0.0
    # Q = the first m rows of H_{m-1} ... H_0: the identity times H_{m-1}, ..., H_0
    for r in range(m):
        for j in range(n):
            q[r, j] = 1.0 if r == j else 0.0
    for step in range(m):
        i = m - 1 - step
        vv = 0.0
        for j in range(i + 1, n):
            vv += work[i, j] * work[i, j]
        if vv == 0.0:
            continue
        tau = 2.0 / (1.0 + vv)
        for r in range(m):
            reflect_row(q[r], work[i], i, tau)
    return 0


@register_jitable
def lq_grad(q, l, dq, dl, da, work, work2):
    """gelqf's gradient ``dA = L^-T (dQ + sym(M) Q)`` with ``M = L^T dL - dQ Q^T`` and sym
    copying M's lower triangle onto its upper one. work: (m, m); work2: (m, n)."""
    m = q.shape[0]
    n = q.shape[1]
    for i in range(m):
        for j in range(i + 1):
            s = 0.0
            for k in range(i, m):
                s += l[k, i] * dl[k, j]
            for k in range(n):
                s -= dq[i, k] * q[j, k]
            work[i, j] = s
            work[j, i] = s
    for i in range(m):
        for c in range(n):
            s = dq[i, c]
            for k in range(m):
                s += work[i, k] * q[k, c]
            work2[i, c] = s
    for c in range(n):                        # solve L^T X = work2, column by column
        solve_lower_transposed(l, True, work2[:, c], da[:, c])
    return 0


# ---------------------------------------------------------------------------------------------
# symmetric eigendecomposition (syevd)
# ---------------------------------------------------------------------------------------------
@register_jitable
def sym_eig(a, u, lam, work):
    """Eigenvalues ``lam`` (ascending) and eigenvectors (the rows of ``u``) of the symmetric
    matrix whose lower triangle ``a`` holds, so that ``U A = diag(lam) U``. Cyclic Jacobi
    rotations on ``work`` (n, n); each eigenvector is signed so that its entry of largest
    magnitude (the first such) is positive, which makes U unique for distinct eigenvalues."""
    n = a.shape[0]
    for i in range(n):
        for j in range(i + 1):
            work[i, j] = a[i, j]
            work[j, i] = a[i, j]
        for j in range(n):
            u[i, j] = 1.0 if i == j else 0.0
    for _sweep in range(100):
        off = 0.0
        total = 0.0
        for i in range(n):
            for j in range(n):
                total += work[i, j] * work[i, j]
                if i != j:
                    off += work[i, j] * work[i, j]
        if off <= 1e-30 * total or off == 0.0:
            break
        for p in range(n - 1):
            for r in range(p + 1, n):
                apr = work[p, r]
                if apr == 0.0:
                    continue
                theta = (work[r, r] - work[p, p]) / (2.0 * apr)
                t = math.copysign(1.0, theta) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(n):            # columns p, r
                    wkp = work[k, p]
                    wkr = work[k, r]
                    work[k, p] = c * wkp - s * wkr
                    work[k, r] = s * wkp + c * wkr
                for k in range(n):            # rows p, r
                    wpk = work[p, k]
                    wrk = work[r, k]
                    work[p, k] = c * wpk - s * wrk
                    work[r, k] = s * wpk + c * wrk
                for k in range(n):            # eigenvectors are the rows of u
                    upk = u[p, k]
                    urk = u[r, k]
                    u[p, k] = c * upk - s * urk
                    u[r, k] = s * upk + c * urk
    for i in range(n):
        lam[i] = work[i, i]
    for i in range(n):                        # selection sort, ascending, rows move along
        best = i
        for j in range(i + 1, n):
            if lam[j] < lam[best]:
                best = j
        if best != i:
            v = lam[i]
            lam[i] = lam[best]
            lam[best] = v
            for k in range(n):
                v = u[i, k]
                u[i, k] = u[best, k]
                u[best, k] = v
    for i in range(n):
        big = 0
        for k in range(1, n):
            if abs(u[i, k]) > abs(u[i, big]):
                big = k
        if u[i, big] < 0.0:
            for k in range(n):
                u[i, k] = -u[i, k]
    return 0


@register_jitable
def sym_eig_grad(u, lam, du, dlam, da, work, work2):
    """syevd's gradient ``dA = U^T S U``: S has ``dlam`` on its diagonal and, off it,
    ``(T_ij - T_ji) / (2 (lam_i - lam_j))`` with ``T = dU U^T``. work, work2: (n, n)."""
    n = u.shape[0]
    matmul(du, u.T, work)                     # T = dU U^T
    for i in range(n):
        work2[i, i] = dlam[i]
        for j in range(i):
            v = (work[i, j] - work[j, i]) / (2.0 * (lam[i] - lam[j]))
            work2[i, j] = v
            work2[j, i] = v
    matmul(work2, u, work)                    # work = S U
    matmul(u.T, work, da)                     # da = U^T work
    return 0


# ---------------------------------------------------------------------------------------------
# LU with partial pivoting: inverse, determinant (inverse, det, slogdet)
# ---------------------------------------------------------------------------------------------
@register_jitable
def lu_inverse(a, out, work):
    """``out = A^-1`` by Gauss-Jordan elimination with partial pivoting on ``work`` (n, n).
    Returns 0, or 1 when A is singular (a zero pivot; out is then undefined)."""
    n = a.shape[0]
    for i in range(n):
        for j in range(n):
            work[i, j] = a[i, j]
            out[i, j] = 1.0 if i == j else 0.0
    for c in range(n):
        piv = c
        for r in range(c + 1, n):
            if abs(work[r, c]) > abs(work[piv, c]):
                piv = r
        if work[piv, c] == 0.0:
            return 1
        if piv != c:
            for k in range(n):
                v = work[c, k]
                work[c, k] = work[piv, k]
                work[piv, k] = v
                v = out[c, k]
                out[c, k] = out[piv, k]
                out[piv, k] = v
        d = 1.0 / work[c, c]
        for k in range(n):
            work[c, k] *= d
            out[c, k] *= d
        for r in range(n):
            if r == c:
                continue
            f = work[r, c]
            if f == 0.0:
                continue
            for k in range(n):
                work[r, k] -= f * work[c, k]
                out[r, k] -= f * out[c, k]
    return 0


@register_jitable
def lu_determinant(a, work, sign_out, value_out, index, log):
    """The determinant of ``a`` by LU elimination with partial pivoting on ``work`` (n, n):
    ``sign_out[index]`` = its sign (0 when singular) and ``value_out[index]`` = log|det A|
    (-inf when singular) when ``log``, else det A itself (the product of the pivots)."""
    n = a.shape[0]
    for i in range(n):
        for j in range(n):
            work[i, j] = a[i, j]
    sign = 1.0
    logabs = 0.0
    product = 1.0
    for c in range(n):
        piv = c
        for r in range(c + 1, n):
            if abs(work[r, c]) > abs(work[piv, c]):
                piv = r
        p = work[piv, c]
        if p == 0.0:
            sign_out[index] = 0.0
            value_out[index] = -math.inf if log else 0.0
            return 1
        if piv != c:
            sign = -sign
            product = -product
            for k in range(c, n):
                v = work[c, k]
                work[c, k] = work[piv, k]
                work[piv, k] = v
        if p < 0.0:
            sign = -sign
        logabs += math.log(abs(p))
        product *= p
        for r in range(c + 1, n):
            f = work[r, c] / p
            for k in range(c + 1, n):
                work[r, k] -= f * work[c, k]
    sign_out[index] = sign
    value_out[index] = logabs if log else product
    return 0


# ---------------------------------------------------------------------------------------------
# diagonals and triangles as vectors (extractdiag, makediag, extracttrian, maketrian), sumlogdiag
# ---------------------------------------------------------------------------------------------
@register_jitable
def diagonal_copy(mat, vec, offset, to_matrix):
    """Between the ``offset`` diagonal of the square ``mat`` (above the main one when
    positive) and ``vec``: fill vec from it, or (to_matrix) zero mat and write vec onto it."""
    n = mat.shape[0]
    r0 = -offset if offset < 0 else 0
    c0 = offset if offset > 0 else 0
    if to_matrix:
        for i in range(n):
            for j in range(n):
                mat[i, j] = 0.0
        for t in range(vec.shape[0]):
            mat[r0 + t, c0 + t] = vec[t]
    else:
        for t in range(vec.shape[0]):
            vec[t] = mat[r0 + t, c0 + t]
    return 0


@register_jitable
def triangle_copy(mat, vec, offset, lower, to_matrix):
    """Between a triangle of the square ``mat`` and ``vec``: the triangle on and below the
    ``offset`` diagonal (offset < 0, or 0 with lower) in row-major order, or on and above it
    (offset > 0, or 0 without lower) in column-major order, i.e. the lower triangle of mat^T.
    Fill vec from it, or (to_matrix) zero mat and write vec into it."""
    n = mat.shape[0]
    upper = offset > 0 or (offset == 0 and not lower)
    shift = -offset if upper else offset       # <= 0: the lower triangle of the view
    if to_matrix:
        for i in range(n):
            for j in range(n):
                mat[i, j] = 0.0
    t = 0
    for r in range(n):
        for c in range(r + shift + 1):
            if to_matrix:
                if upper:
                    mat[c, r] = vec[t]
                else:
                    mat[r, c] = vec[t]
            else:
                vec[t] = mat[c, r] if upper else mat[r, c]
            t += 1
    return 0


@register_jitable
def sum_log_diagonal(a, out, index):
    """``out[index]`` = the sum of the natural logarithms of the diagonal of ``a``."""
    s = 0.0
    for i in range(a.shape[0]):
        s += math.log(a[i, i])
    out[index] = s
    return 0


@register_jitable
def sum_log_diagonal_grad(a, g, index, da):
    """sumlogdiag's gradient: ``g[index] / a_ii`` on the diagonal of ``da``, 0 elsewhere."""
    n = a.shape[0]
    for i in range(n):
        for j in range(n):
            da[i, j] = g[index] / a[i, i] if i == j else 0.0
    return 0


@register_jitable
def inverse_transpose_scaled(inv, singular, coef, coef2, use_coef2, index, da):
    """det's and slogdet's gradient from the inverse: ``da = coef[index] * inv^T`` (times
    ``coef2[index]`` when use_coef2), or 0 when the matrix is ``singular`` (MXNet passes no
    gradient through a singular matrix)."""
    n = inv.shape[0]
    scale = 0.0 if singular else coef[index]
    if use_coef2:
        scale *= coef2[index]
    for i in range(n):
        for j in range(n):
            da[i, j] = scale * inv[j, i] if scale != 0.0 else 0.0
    return 0
