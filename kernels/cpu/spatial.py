"""CPU kernels of the spatial operators; what one output element reads is
``kernels/spatial_math.py`` (shared with the CUDA half), the scalar math
``kernels/scalar_spatial.py``. Forward and backward of an operator are one loop each.

Images are (planes, H, W) views for the per-plane operators (resize, adaptive pooling) and
(N, C, H, W) for the sampler and Correlation. Gradients that scatter (several outputs read one
input) loop over independent planes or samples in parallel and add within them; a 'write'
request zeroes the destination first.
"""
from numba import njit, prange

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import scalar_spatial as S
from .. import spatial_math as M
from ..math_build import compiled
from .jit import parallel_loop

__all__ = ["bilinear_resize", "bilinear_resize_backward", "adaptive_avg_pool",
           "adaptive_avg_pool_backward", "grid_affine", "grid_affine_backward", "grid_warp",
           "grid_warp_backward", "bilinear_sample", "bilinear_sample_backward", "correlation",
           "correlation_backward"]


# the per-element reads of kernels/spatial_math.py, inlined into the loops below
K = compiled(M, njit(cache=True, inline="always"))


# --- BilinearResize2D ---------------------------------------------------------------------------
@parallel_loop(cost=4.0)
def _resize(x, y, align_corners, backward):
    # forward: y = x resized; backward: y holds the head gradient, spread back into x
    planes, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    for p in prange(planes):
        for r in range(oh):
            i0, i1, fy = S.linear_source(r, h, oh, align_corners)
            for c in range(ow):
                j0, j1, fx = S.linear_source(c, w, ow, align_corners)
                if not backward:
                    y[p, r, c] = K.resize_value(x, p, i0, i1, fy, j0, j1, fx)
                    continue
                g = y[p, r, c]
                x[p, i0, j0] += (1.0 - fy) * (1.0 - fx) * g
                x[p, i0, j1] += (1.0 - fy) * fx * g
                x[p, i1, j0] += fy * (1.0 - fx) * g
                x[p, i1, j1] += fy * fx * g


def bilinear_resize(x, y, align_corners):
    """y (planes, oh, ow) = x (planes, h, w) resized bilinearly."""
    _resize(y.size, x, y, bool(align_corners), False)


def bilinear_resize_backward(dy, dx, align_corners, accumulate=False):
    """dx (planes, h, w) (+)= the resize's gradient for head gradient dy (planes, oh, ow)."""
    if not accumulate:
        dx[...] = 0
    _resize(dy.size, dx, dy, bool(align_corners), True)


# --- AdaptiveAvgPooling2D -----------------------------------------------------------------------
@parallel_loop(cost=2.0)
def _adaptive(x, y, backward):
    # forward: y = the window means of x; backward: y holds the head gradient, spread into x
    planes, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    for p in prange(planes):
        for r in range(oh):
            r0, r1 = S.adaptive_window(r, h, oh)
            for c in range(ow):
                c0, c1 = S.adaptive_window(c, w, ow)
                if not backward:
                    y[p, r, c] = K.window_mean(x, p, r0, r1, c0, c1)
                    continue
                g = y[p, r, c] / ((r1 - r0) * (c1 - c0))
                for i in range(r0, r1):
                    for j in range(c0, c1):
                        x[p, i, j] += g


def adaptive_avg_pool(x, y):
    """y (planes, oh, ow) = the mean of every adaptive window of x (planes, h, w)."""
    _adaptive(x.size, x, y, False)


def adaptive_avg_pool_backward(dy, dx, accumulate=False):
    if not accumulate:
        dx[...] = 0
    _adaptive(dx.size, dx, dy, True)


# --- GridGenerator ------------------------------------------------------------------------------
@parallel_loop(cost=1.0)
def _affine(theta, grid):
    n, _, h, w = grid.shape
    for s in prange(n):
        for r in range(h):
            yt = S.grid_coordinate(r, h)
            for c in range(w):
                xt = S.grid_coordinate(c, w)
                grid[s, 0, r, c] = theta[s, 0] * xt + theta[s, 1] * yt + theta[s, 2]
                grid[s, 1, r, c] = theta[s, 3] * xt + theta[s, 4] * yt + theta[s, 5]


@parallel_loop(cost=1.0)
def _affine_backward(dgrid, dtheta, accumulate):
    n, _, h, w = dgrid.shape
    for s in prange(n):
        for k in range(2):
            sx = 0.0
            sy = 0.0
            s1 = 0.0
            for r in range(h):
                yt = S.grid_coordinate(r, h)
                for c in range(w):
                    g = dgrid[s, k, r, c]
                    sx += g * S.grid_coordinate(c, w)
                    sy += g * yt
                    s1 += g
            if not accumulate:
                dtheta[s, 3 * k] = 0
                dtheta[s, 3 * k + 1] = 0
                dtheta[s, 3 * k + 2] = 0
            dtheta[s, 3 * k] += sx
            dtheta[s, 3 * k + 1] += sy
            dtheta[s, 3 * k + 2] += s1


@parallel_loop(cost=1.0)
def _warp(flow, grid):
    n, _, h, w = grid.shape
    for s in prange(n):
        for r in range(h):
            for c in range(w):
                grid[s, 0, r, c] = S.normalised(flow[s, 0, r, c] + c, w)
                grid[s, 1, r, c] = S.normalised(flow[s, 1, r, c] + r, h)


@parallel_loop(cost=1.0)
def _warp_backward(dgrid, dflow, accumulate):
    n, _, h, w = dgrid.shape
    for s in prange(n):
        for k in range(2):
            scale = S.pixel_scale(w if k == 0 else h)
            for r in range(h):
                for c in range(w):
                    g = dgrid[s, k, r, c] * scale
                    if accumulate:
                        dflow[s, k, r, c] += g
                    else:
                        dflow[s, k, r, c] = g


def grid_affine(theta, grid):
    """grid (N, 2, h, w) = the affine map theta (N, 6) of the normalised target grid."""
    _affine(grid.size, theta, grid)


def grid_affine_backward(dgrid, dtheta, accumulate=False):
    _affine_backward(dgrid.size, dgrid, dtheta, bool(accumulate))


def grid_warp(flow, grid):
    """grid (N, 2, h, w) = the target pixel positions moved by flow, normalised to -1 .. 1."""
    _warp(grid.size, flow, grid)


def grid_warp_backward(dgrid, dflow, accumulate=False):
    _warp_backward(dgrid.size, dgrid, dflow, bool(accumulate))


# --- BilinearSampler ----------------------------------------------------------------------------
@parallel_loop(cost=8.0)
def _sample(x, grid, y, dy, dx, dgrid, backward, want_dx, want_dgrid, acc_dgrid):
    # forward: y = x sampled at grid; backward: dy spread into dx and the grid's gradient
    n, channels, h, w = x.shape
    oh, ow = grid.shape[2], grid.shape[3]
    for s in prange(n):
        for r in range(oh):
            for c in range(ow):
                x0, y0, fx, fy = S.bilinear_corner(S.source_pixel(grid[s, 0, r, c], w),
                                                   S.source_pixel(grid[s, 1, r, c], h))
                if not backward:
                    for ch in range(channels):
                        y[s, ch, r, c] = K.sample_value(x, s, ch, x0, y0, fx, fy)
                    continue
                for ch in range(channels if want_dx else 0):
                    for q in range(4):
                        xx, yy, weight, _, _ = S.bilinear_corner_point(x0, y0, fx, fy, q)
                        if S.inside(xx, w) and S.inside(yy, h):
                            dx[s, ch, yy, xx] += dy[s, ch, r, c] * weight
                if want_dgrid:
                    K.sample_grid_grad(x, dy, dgrid, s, r, c, x0, y0, fx, fy, acc_dgrid)


def bilinear_sample(x, grid, y):
    """y (N, C, oh, ow) = x (N, C, h, w) sampled bilinearly at grid (N, 2, oh, ow) (x then y,
    -1 .. 1 spanning the image); pixels outside the image read as 0."""
    _sample(y.size, x, grid, y, y, x, grid, False, False, False, False)


def bilinear_sample_backward(x, grid, dy, dx, dgrid, req_dx, req_dgrid):
    """Gradients of :func:`bilinear_sample` for the requests ('null' / 'write' / 'add')."""
    want_dx, want_dgrid = req_dx != "null", req_dgrid != "null"
    if req_dx == "write":
        dx[...] = 0
    _sample(dy.size * 2, x, grid, dy, dy, dx if want_dx else x, dgrid if want_dgrid else grid,
            True, want_dx, want_dgrid, req_dgrid == "add")


# --- Correlation --------------------------------------------------------------------------------
@parallel_loop(cost=8.0)
def _correlation(a, b, out, da, db, ksize, max_disp, stride1, stride2, pad, is_multiply,
                 scatter, want_a, want_b):
    # forward (scatter False): out = the sums; backward (True): out holds the head gradient,
    # whose share is added into da / db (over the samples in parallel: each owns its pixels)
    n, channels, h, w = a.shape
    top_c, top_h, top_w = out.shape[1], out.shape[2], out.shape[3]
    norm = 1.0 / (ksize * ksize * channels)
    for s in prange(n):
        for tc in range(top_c):
            oy, ox = S.correlation_displacement(tc, max_disp, stride2)
            for i in range(top_h):
                y1 = i * stride1 + max_disp - pad
                for j in range(top_w):
                    x1 = j * stride1 + max_disp - pad
                    if not scatter:
                        out[s, tc, i, j] = K.correlation_sum(a, b, s, y1, x1, oy, ox, ksize,
                                                             is_multiply) * norm
                        continue
                    g = out[s, tc, i, j] * norm
                    for kh in range(ksize):
                        for kw in range(ksize):
                            ya, xa, yb, xb, in_a, in_b = S.correlation_tap(y1, x1, oy, ox, kh,
                                                                           kw, h, w)
                            for ch in range(channels):
                                ga, gb = K.correlation_pair_grads(a, b, s, ch, ya, xa, yb, xb,
                                                                  in_a, in_b, is_multiply)
                                if want_a and in_a:
                                    da[s, ch, ya, xa] += g * ga
                                if want_b and in_b:
                                    db[s, ch, yb, xb] += g * gb


def correlation(a, b, out, kernel_size, max_displacement, stride1, stride2, pad_size,
                is_multiply):
    """out (N, D*D, th, tw) = the correlation of a and b (N, C, h, w) over D*D displacements."""
    _correlation(out.size * kernel_size * kernel_size * a.shape[1], a, b, out, a, b,
                 int(kernel_size), int(max_displacement), int(stride1), int(stride2),
                 int(pad_size), bool(is_multiply), False, False, False)


def correlation_backward(a, b, dy, da, db, kernel_size, max_displacement, stride1, stride2,
                         pad_size, is_multiply, req_a, req_b):
    want_a, want_b = req_a != "null", req_b != "null"
    for grad, req in ((da, req_a), (db, req_b)):
        if req == "write":
            grad[...] = 0
    _correlation(dy.size * kernel_size * kernel_size * a.shape[1], a, b, dy,
                 da if want_a else a, db if want_b else b, int(kernel_size),
                 int(max_displacement), int(stride1), int(stride2), int(pad_size),
                 bool(is_multiply), True, want_a, want_b)
