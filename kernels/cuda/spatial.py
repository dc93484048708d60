"""CUDA kernels of the spatial operators: the same functions and signatures as
``kernels/cpu/spatial.py``, one thread per output element calling the per-element functions
of ``kernels/spatial_math.py`` (as device functions) and ``kernels/scalar_spatial.py``;
gradients that scatter add with atomics."""
from numba import cuda

from .. import scalar_spatial as S
from .. import spatial_math as M
from ..math_build import compiled
from .grid import launch
from .memory import fill

__all__ = ["bilinear_resize", "bilinear_resize_backward", "adaptive_avg_pool",
           "adaptive_avg_pool_backward", "grid_affine", "grid_affine_backward", "grid_warp",
           "grid_warp_backward", "bilinear_sample", "bilinear_sample_backward", "correlation",
           "correlation_backward"]


K = compiled(M, cuda.jit(device=True))


@cuda.jit(device=True)
def _plane_element(t, oh, ow):
    """(plane, row, column) of element t of a (planes, oh, ow) array."""
    return t // (oh * ow), (t // ow) % oh, t % ow


# --- BilinearResize2D ---------------------------------------------------------------------------
@cuda.jit
def _resize_k(x, y, align_corners, backward):
    # forward: y = x resized; backward: y holds the head gradient, spread back into x
    h, w = x.shape[1], x.shape[2]
    oh, ow = y.shape[1], y.shape[2]
    for t in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        p, r, c = _plane_element(t, oh, ow)
        i0, i1, fy = S.linear_source(r, h, oh, align_corners)
        j0, j1, fx = S.linear_source(c, w, ow, align_corners)
        if not backward:
            y[p, r, c] = K.resize_value(x, p, i0, i1, fy, j0, j1, fx)
            continue
        g = y[p, r, c]
        cuda.atomic.add(x, (p, i0, j0), (1.0 - fy) * (1.0 - fx) * g)
        cuda.atomic.add(x, (p, i0, j1), (1.0 - fy) * fx * g)
        cuda.atomic.add(x, (p, i1, j0), fy * (1.0 - fx) * g)
        cuda.atomic.add(x, (p, i1, j1), fy * fx * g)


def bilinear_resize(x, y, align_corners):
    """y (planes, oh, ow) = x (planes, h, w) resized bilinearly."""
    launch(_resize_k, y.size, x, y, bool(align_corners), False)


def bilinear_resize_backward(dy, dx, align_corners, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    launch(_resize_k, dy.size, dx, dy, bool(align_corners), True)


# --- AdaptiveAvgPooling2D -----------------------------------------------------------------------
@cuda.jit
def _adaptive_k(x, y, backward):
    # forward: y = the window means of x; backward: y holds the head gradient, spread into x
    h, w = x.shape[1], x.shape[2]
    oh, ow = y.shape[1], y.shape[2]
    for t in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        p, r, c = _plane_element(t, oh, ow)
        r0, r1 = S.adaptive_window(r, h, oh)
        c0, c1 = S.adaptive_window(c, w, ow)
        if not backward:
            y[p, r, c] = K.window_mean(x, p, r0, r1, c0, c1)
            continue
        g = y[p, r, c] / ((r1 - r0) * (c1 - c0))
        for i in range(r0, r1):
            for j in range(c0, c1):
                cuda.atomic.add(x, (p, i, j), g)


def adaptive_avg_pool(x, y):
    launch(_adaptive_k, y.size, x, y, False)


def adaptive_avg_pool_backward(dy, dx, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    launch(_adaptive_k, dy.size, dx, dy, True)


# --- GridGenerator ------------------------------------------------------------------------------
@cuda.jit
def _affine_k(theta, grid):
    h, w = grid.shape[2], grid.shape[3]
    for t in range(cuda.grid(1), grid.shape[0] * h * w, cuda.gridsize(1)):
        s, r, c = _plane_element(t, h, w)
        xt = S.grid_coordinate(c, w)
        yt = S.grid_coordinate(r, h)
        grid[s, 0, r, c] = theta[s, 0] * xt + theta[s, 1] * yt + theta[s, 2]
        grid[s, 1, r, c] = theta[s, 3] * xt + theta[s, 4] * yt + theta[s, 5]


@cuda.jit
def _affine_backward_k(dgrid, dtheta, accumulate):
    # one thread per entry of theta: a sum over the target grid
    h, w = dgrid.shape[2], dgrid.shape[3]
    for t in range(cuda.grid(1), dtheta.size, cuda.gridsize(1)):
        s = t // 6
        k = (t % 6) // 3
        which = t % 3
        acc = 0.0
        for r in range(h):
            for c in range(w):
                if which == 0:
                    factor = S.grid_coordinate(c, w)
                elif which == 1:
                    factor = S.grid_coordinate(r, h)
                else:
                    factor = 1.0
                acc += dgrid[s, k, r, c] * factor
        if accumulate:
            dtheta[s, t % 6] += acc
        else:
            dtheta[s, t % 6] = acc


@cuda.jit
def _warp_k(flow, grid):
    h, w = grid.shape[2], grid.shape[3]
    for t in range(cuda.grid(1), grid.shape[0] * h * w, cuda.gridsize(1)):
        s, r, c = _plane_element(t, h, w)
        grid[s, 0, r, c] = S.normalised(flow[s, 0, r, c] + c, w)
        grid[s, 1, r, c] = S.normalised(flow[s, 1, r, c] + r, h)


@cuda.jit
def _warp_backward_k(dgrid, dflow, accumulate):
    h, w = dgrid.shape[2], dgrid.shape[3]
    for t in range(cuda.grid(1), dgrid.size, cuda.gridsize(1)):
        s = t // (2 * h * w)
        k = (t // (h * w)) % 2
        r = (t // w) % h
        c = t % w
        g = dgrid[s, k, r, c] * S.pixel_scale(w if k == 0 else h)
        if accumulate:
            dflow[s, k, r, c] += g
        else:
            dflow[s, k, r, c] = g


def grid_affine(theta, grid):
    launch(_affine_k, grid.size // 2, theta, grid)


def grid_affine_backward(dgrid, dtheta, accumulate=False):
    launch(_affine_backward_k, dtheta.size, dgrid, dtheta, bool(accumulate))


def grid_warp(flow, grid):
    launch(_warp_k, grid.size // 2, flow, grid)


def grid_warp_backward(dgrid, dflow, accumulate=False):
    launch(_warp_backward_k, dgrid.size, dgrid, dflow, bool(accumulate))


# --- BilinearSampler ----------------------------------------------------------------------------
@cuda.jit
def _sample_k(x, grid, y):
    channels, h, w = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = y.shape[2], y.shape[3]
    for t in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        s = t // (channels * oh * ow)
        ch, r, c = _plane_element(t % (channels * oh * ow), oh, ow)
        x0, y0, fx, fy = S.bilinear_corner(S.source_pixel(grid[s, 0, r, c], w),
                                           S.source_pixel(grid[s, 1, r, c], h))
        y[s, ch, r, c] = K.sample_value(x, s, ch, x0, y0, fx, fy)


@cuda.jit
def _sample_backward_k(x, grid, dy, dx, dgrid, want_dx, want_dgrid, acc_dgrid):
    # one thread per sampled position: its grid gradient sums over the channels
    channels, h, w = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = dy.shape[2], dy.shape[3]
    for t in range(cuda.grid(1), dy.shape[0] * oh * ow, cuda.gridsize(1)):
        s, r, c = _plane_element(t, oh, ow)
        x0, y0, fx, fy = S.bilinear_corner(S.source_pixel(grid[s, 0, r, c], w),
                                           S.source_pixel(grid[s, 1, r, c], h))
        for ch in range(channels if want_dx else 0):
            for q in range(4):
                xx, yy, weight, _, _ = S.bilinear_corner_point(x0, y0, fx, fy, q)
                if S.inside(xx, w) and S.inside(yy, h):
                    cuda.atomic.add(dx, (s, ch, yy, xx), dy[s, ch, r, c] * weight)
        if want_dgrid:
            K.sample_grid_grad(x, dy, dgrid, s, r, c, x0, y0, fx, fy, acc_dgrid)


def bilinear_sample(x, grid, y):
    launch(_sample_k, y.size, x, grid, y)


def bilinear_sample_backward(x, grid, dy, dx, dgrid, req_dx, req_dgrid):
    want_dx, want_dgrid = req_dx != "null", req_dgrid != "null"
    if req_dx == "write":
        fill(dx, 0)
    launch(_sample_backward_k, dy.shape[0] * dy.shape[2] * dy.shape[3], x, grid, dy,
           dx if want_dx else x, dgrid if want_dgrid else grid, want_dx, want_dgrid,
           req_dgrid == "add")


# --- Correlation --------------------------------------------------------------------------------
@cuda.jit
def _correlation_k(a, b, out, ksize, max_disp, stride1, stride2, pad, is_multiply, scatter,
                   da, db, want_a, want_b):
    # forward (scatter False): out = the sum; backward (True): out holds the head gradient
    # and its share is added into da / db
    channels, h, w = a.shape[1], a.shape[2], a.shape[3]
    top_c, top_h, top_w = out.shape[1], out.shape[2], out.shape[3]
    norm = 1.0 / (ksize * ksize * channels)
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        s = t // (top_c * top_h * top_w)
        tc, i, j = _plane_element(t % (top_c * top_h * top_w), top_h, top_w)
        oy, ox = S.correlation_displacement(tc, max_disp, stride2)
        y1 = i * stride1 + max_disp - pad
        x1 = j * stride1 + max_disp - pad
        if not scatter:
            out[s, tc, i, j] = K.correlation_sum(a, b, s, y1, x1, oy, ox, ksize,
                                                 is_multiply) * norm
            continue
        g = out[s, tc, i, j] * norm
        for kh in range(ksize):
            for kw in range(ksize):
                ya, xa, yb, xb, in_a, in_b = S.correlation_tap(y1, x1, oy, ox, kh, kw, h, w)
                for ch in range(channels):
                    ga, gb = K.correlation_pair_grads(a, b, s, ch, ya, xa, yb, xb, in_a, in_b,
                                                      is_multiply)
                    if want_a and in_a:
                        cuda.atomic.add(da, (s, ch, ya, xa), g * ga)
                    if want_b and in_b:
                        cuda.atomic.add(db, (s, ch, yb, xb), g * gb)


def correlation(a, b, out, kernel_size, max_displacement, stride1, stride2, pad_size,
                is_multiply):
    launch(_correlation_k, out.size, a, b, out, int(kernel_size), int(max_displacement),
           int(stride1), int(stride2), int(pad_size), bool(is_multiply), False, a, b, False,
           False)


def correlation_backward(a, b, dy, da, db, kernel_size, max_displacement, stride1, stride2,
                         pad_size, is_multiply, req_a, req_b):
    want_a, want_b = req_a != "null", req_b != "null"
    for grad, req in ((da, req_a), (db, req_b)):
        if req == "write":
            fill(grad, 0)
    launch(_correlation_k, dy.size, a, b, dy, int(kernel_size), int(max_displacement),
           int(stride1), int(stride2), int(pad_size), bool(is_multiply), True, da if want_a else
           a, db if want_b else b, want_a, want_b)
