"""CUDA kernels of the spatial operators: the same functions and signatures as
``kernels/cpu/spatial.py``, one thread per output element calling
``kernels/scalar_spatial.py``; gradients that scatter add with atomics."""
from numba import cuda

from .. import scalar_spatial as S
from .memory import fill, launch_config

__all__ = ["bilinear_resize", "bilinear_resize_backward", "adaptive_avg_pool",
           "adaptive_avg_pool_backward", "grid_affine", "grid_affine_backward", "grid_warp",
           "grid_warp_backward", "bilinear_sample", "bilinear_sample_backward", "correlation",
           "correlation_backward"]


# --- BilinearResize2D ---------------------------------------------------------------------------
@cuda.jit
def _resize_k(x, y, align_corners):
    h, w = x.shape[1], x.shape[2]
    oh, ow = y.shape[1], y.shape[2]
    for t in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        p = t // (oh * ow)
        r = (t // ow) % oh
        c = t % ow
        i0, i1, fy = S.linear_source(r, h, oh, align_corners)
        j0, j1, fx = S.linear_source(c, w, ow, align_corners)
        top = (1.0 - fx) * x[p, i0, j0] + fx * x[p, i0, j1]
        bottom = (1.0 - fx) * x[p, i1, j0] + fx * x[p, i1, j1]
        y[p, r, c] = (1.0 - fy) * top + fy * bottom


@cuda.jit
def _resize_backward_k(dy, dx, align_corners):
    h, w = dx.shape[1], dx.shape[2]
    oh, ow = dy.shape[1], dy.shape[2]
    for t in range(cuda.grid(1), dy.size, cuda.gridsize(1)):
        p = t // (oh * ow)
        r = (t // ow) % oh
        c = t % ow
        i0, i1, fy = S.linear_source(r, h, oh, align_corners)
        j0, j1, fx = S.linear_source(c, w, ow, align_corners)
        g = dy[p, r, c]
        cuda.atomic.add(dx, (p, i0, j0), (1.0 - fy) * (1.0 - fx) * g)
        cuda.atomic.add(dx, (p, i0, j1), (1.0 - fy) * fx * g)
        cuda.atomic.add(dx, (p, i1, j0), fy * (1.0 - fx) * g)
        cuda.atomic.add(dx, (p, i1, j1), fy * fx * g)


def bilinear_resize(x, y, align_corners):
    """y (planes, oh, ow) = x (planes, h, w) resized bilinearly."""
    if y.size:
        _resize_k[launch_config(y.size)](x, y, bool(align_corners))


def bilinear_resize_backward(dy, dx, align_corners, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    if dy.size:
        _resize_backward_k[launch_config(dy.size)](dy, dx, bool(align_corners))


# --- AdaptiveAvgPooling2D -----------------------------------------------------------------------
@cuda.jit
def _adaptive_k(x, y):
    h, w = x.shape[1], x.shape[2]
    oh, ow = y.shape[1], y.shape[2]
    for t in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        p = t // (oh * ow)
        r = (t // ow) % oh
        c = t % ow
        r0, r1 = S.adaptive_window(r, h, oh)
        c0, c1 = S.adaptive_window(c, w, ow)
        s = 0.0
        for i in range(r0, r1):
            for j in range(c0, c1):
                s += x[p, i, j]
        y[p, r, c] = s / ((r1 - r0) * (c1 - c0))


@cuda.jit
def _adaptive_backward_k(dy, dx):
    h, w = dx.shape[1], dx.shape[2]
    oh, ow = dy.shape[1], dy.shape[2]
    for t in range(cuda.grid(1), dy.size, cuda.gridsize(1)):
        p = t // (oh * ow)
        r = (t // ow) % oh
        c = t % ow
        r0, r1 = S.adaptive_window(r, h, oh)
        c0, c1 = S.adaptive_window(c, w, ow)
        g = dy[p, r, c] / ((r1 - r0) * (c1 - c0))
        for i in range(r0, r1):
            for j in range(c0, c1):
                cuda.atomic.add(dx, (p, i, j), g)


def adaptive_avg_pool(x, y):
    if y.size:
        _adaptive_k[launch_config(y.size)](x, y)


def adaptive_avg_pool_backward(dy, dx, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    if dy.size:
        _adaptive_backward_k[launch_config(dy.size)](dy, dx)


# --- GridGenerator ------------------------------------------------------------------------------
@cuda.jit
def _affine_k(theta, grid):
    h, w = grid.shape[2], grid.shape[3]
    for t in range(cuda.grid(1), grid.shape[0] * h * w, cuda.gridsize(1)):
        s = t // (h * w)
        r = (t // w) % h
        c = t % w
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
        s = t // (h * w)
        r = (t // w) % h
        c = t % w
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
    if grid.size:
        _affine_k[launch_config(grid.size // 2)](theta, grid)


def grid_affine_backward(dgrid, dtheta, accumulate=False):
    if dtheta.size:
        _affine_backward_k[launch_config(dtheta.size)](dgrid, dtheta, bool(accumulate))


def grid_warp(flow, grid):
    if grid.size:
        _warp_k[launch_config(grid.size // 2)](flow, grid)


def grid_warp_backward(dgrid, dflow, accumulate=False):
    if dgrid.size:
        _warp_backward_k[launch_config(dgrid.size)](dgrid, dflow, bool(accumulate))


# --- BilinearSampler ----------------------------------------------------------------------------
@cuda.jit
def _sample_k(x, grid, y):
    channels, h, w = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = y.shape[2], y.shape[3]
    for t in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        s = t // (channels * oh * ow)
        ch = (t // (oh * ow)) % channels
        r = (t // ow) % oh
        c = t % ow
        x0, y0, fx, fy = S.bilinear_corner(S.source_pixel(grid[s, 0, r, c], w),
                                         S.source_pixel(grid[s, 1, r, c], h))
        v = 0.0
        for dy_ in range(2):
            yy = y0 + dy_
            wy = fy if dy_ else 1.0 - fy
            for dx_ in range(2):
                xx = x0 + dx_
                if S.inside(xx, w) and S.inside(yy, h):
                    v += x[s, ch, yy, xx] * wy * (fx if dx_ else 1.0 - fx)
        y[s, ch, r, c] = v


@cuda.jit
def _sample_backward_k(x, grid, dy, dx, dgrid, want_dx, want_dgrid, acc_dgrid):
    # one thread per sampled position: its grid gradient sums over the channels
    channels, h, w = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = dy.shape[2], dy.shape[3]
    for t in range(cuda.grid(1), dy.shape[0] * oh * ow, cuda.gridsize(1)):
        s = t // (oh * ow)
        r = (t // ow) % oh
        c = t % ow
        x0, y0, fx, fy = S.bilinear_corner(S.source_pixel(grid[s, 0, r, c], w),
                                         S.source_pixel(grid[s, 1, r, c], h))
        gx = 0.0
        gy = 0.0
        for ch in range(channels):
            g = dy[s, ch, r, c]
            for dy_ in range(2):
                yy = y0 + dy_
                wy = fy if dy_ else 1.0 - fy
                for dx_ in range(2):
                    xx = x0 + dx_
                    if S.inside(xx, w) and S.inside(yy, h):
                        wx = fx if dx_ else 1.0 - fx
                        if want_dx:
                            cuda.atomic.add(dx, (s, ch, yy, xx), g * wx * wy)
                        v = g * x[s, ch, yy, xx]
                        gx += v * wy * (1.0 if dx_ else -1.0)
                        gy += v * wx * (1.0 if dy_ else -1.0)
        if want_dgrid:
            gx *= (w - 1.0) / 2.0
            gy *= (h - 1.0) / 2.0
            if acc_dgrid:
                dgrid[s, 0, r, c] += gx
                dgrid[s, 1, r, c] += gy
            else:
                dgrid[s, 0, r, c] = gx
                dgrid[s, 1, r, c] = gy


def bilinear_sample(x, grid, y):
    if y.size:
        _sample_k[launch_config(y.size)](x, grid, y)


def bilinear_sample_backward(x, grid, dy, dx, dgrid, req_dx, req_dgrid):
    want_dx, want_dgrid = req_dx != "null", req_dgrid != "null"
    if req_dx == "write":
        fill(dx, 0)
    n = dy.shape[0] * dy.shape[2] * dy.shape[3]
    if n:
        _sample_backward_k[launch_config(n)](x, grid, dy, dx if want_dx else x,
                                              dgrid if want_dgrid else grid, want_dx,
                                              want_dgrid, req_dgrid == "add")


# --- Correlation --------------------------------------------------------------------------------
@cuda.jit
def _correlation_k(a, b, out, ksize, max_disp, stride1, stride2, pad, is_multiply, scatter,
                   da, db, want_a, want_b):
    # forward (scatter False): out = the sum; backward (True): out holds the head gradient
    # and its share is added into da / db
    channels, h, w = a.shape[1], a.shape[2], a.shape[3]
    top_c, top_h, top_w = out.shape[1], out.shape[2], out.shape[3]
    radius = max_disp // stride2
    width = 2 * radius + 1
    norm = 1.0 / (ksize * ksize * channels)
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        s = t // (top_c * top_h * top_w)
        tc = (t // (top_h * top_w)) % top_c
        i = (t // top_w) % top_h
        j = t % top_w
        oy = (tc // width - radius) * stride2
        ox = (tc % width - radius) * stride2
        y1 = i * stride1 + max_disp - pad
        x1 = j * stride1 + max_disp - pad
        g = out[s, tc, i, j] * norm
        acc = 0.0
        for kh in range(ksize):
            ya = y1 + kh
            yb = ya + oy
            for kw in range(ksize):
                xa = x1 + kw
                xb = xa + ox
                in_a = S.inside(ya, h) and S.inside(xa, w)
                in_b = S.inside(yb, h) and S.inside(xb, w)
                for ch in range(channels):
                    va = a[s, ch, ya, xa] if in_a else 0.0
                    vb = b[s, ch, yb, xb] if in_b else 0.0
                    if scatter:
                        ga, gb = S.correlation_grads(va, vb, is_multiply)
                        if want_a and in_a:
                            cuda.atomic.add(da, (s, ch, ya, xa), g * ga)
                        if want_b and in_b:
                            cuda.atomic.add(db, (s, ch, yb, xb), g * gb)
                    else:
                        acc += S.correlation_value(va, vb, is_multiply)
        if not scatter:
            out[s, tc, i, j] = acc * norm


def correlation(a, b, out, kernel_size, max_displacement, stride1, stride2, pad_size,
                is_multiply):
    if out.size:
        _correlation_k[launch_config(out.size)](a, b, out, int(kernel_size),
                                                 int(max_displacement), int(stride1),
                                                 int(stride2), int(pad_size), bool(is_multiply),
                                                 False, a, b, False, False)


def correlation_backward(a, b, dy, da, db, kernel_size, max_displacement, stride1, stride2,
                         pad_size, is_multiply, req_a, req_b):
    want_a, want_b = req_a != "null", req_b != "null"
    for grad, req in ((da, req_a), (db, req_b)):
        if req == "write":
            fill(grad, 0)
    if dy.size:
        _correlation_k[launch_config(dy.size)](a, b, dy, int(kernel_size), int(max_displacement),
                                                int(stride1), int(stride2), int(pad_size),
                                                bool(is_multiply), True, da if want_a else a,
                                                db if want_b else b, want_a, want_b)
