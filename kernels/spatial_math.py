"""What one output element of the spatial operators reads, written once for both kernel halves:
``kernels/cpu/spatial.py`` and ``kernels/cuda/spatial.py`` build these with
``kernels/math_build.py`` (``njit`` / ``cuda.jit(device=True)``). They take arrays, so they are
left undecorated here (the CUDA simulator cannot hand its arrays to CPU-compiled functions);
the scalar math they call is ``kernels/scalar_spatial.py``. Gradients that scatter stay in the
launchers: the CPU adds in place, the GPU with atomics.
"""
from .scalar_spatial import (
    bilinear_corner_point,
    correlation_grads,
    correlation_tap,
    correlation_value,
    inside,
)


def resize_value(x, p, i0, i1, fy, j0, j1, fx):
    """Plane p of x read bilinearly between rows i0, i1 and columns j0, j1."""
    top = (1.0 - fx) * x[p, i0, j0] + fx * x[p, i0, j1]
    bottom = (1.0 - fx) * x[p, i1, j0] + fx * x[p, i1, j1]
    return (1.0 - fy) * top + fy * bottom


def window_mean(x, p, r0, r1, c0, c1):
    """The mean of plane p of x over rows [r0, r1) and columns [c0, c1)."""
    s = 0.0
    for i in range(r0, r1):
        for j in range(c0, c1):
            s += x[p, i, j]
    return s / ((r1 - r0) * (c1 - c0))


def sample_value(x, s, ch, x0, y0, fx, fy):
    """Channel ch of sample s of x read bilinearly at (x0 + fx, y0 + fy); pixels outside the
    image read 0."""
    h, w = x.shape[2], x.shape[3]
    v = 0.0
    for q in range(4):
        xx, yy, weight, _, _ = bilinear_corner_point(x0, y0, fx, fy, q)
        if inside(xx, w) and inside(yy, h):
            v += x[s, ch, yy, xx] * weight
    return v


def sample_grid_grad(x, dy, dgrid, s, r, c, x0, y0, fx, fy, accumulate):
    """dgrid[s, :, r, c] (+)= the gradient of BilinearSampler's output at (r, c) (head
    gradient dy) by its grid point, sampled at (x0 + fx, y0 + fy)."""
    h, w = x.shape[2], x.shape[3]
    gx = 0.0
    gy = 0.0
    for ch in range(x.shape[1]):
        g = dy[s, ch, r, c]
        for q in range(4):
            xx, yy, _, dwx, dwy = bilinear_corner_point(x0, y0, fx, fy, q)
            if inside(xx, w) and inside(yy, h):
                v = g * x[s, ch, yy, xx]
                gx += v * dwx
                gy += v * dwy
    gx *= (w - 1.0) / 2.0
    gy *= (h - 1.0) / 2.0
    if accumulate:
        dgrid[s, 0, r, c] += gx
        dgrid[s, 1, r, c] += gy
    else:
        dgrid[s, 0, r, c] = gx
        dgrid[s, 1, r, c] = gy


def correlation_sum(a, b, s, y1, x1, oy, ox, ksize, is_multiply):
    """The sum over a ksize x ksize patch and every channel of the correlation terms of sample
    s, the first patch at (y1, x1), the second displaced by (oy, ox); pixels outside read 0."""
    h, w = a.shape[2], a.shape[3]
    acc = 0.0
    for kh in range(ksize):
        for kw in range(ksize):
            ya, xa, yb, xb, in_a, in_b = correlation_tap(y1, x1, oy, ox, kh, kw, h, w)
            for ch in range(a.shape[1]):
                va = a[s, ch, ya, xa] if in_a else 0.0
                vb = b[s, ch, yb, xb] if in_b else 0.0
                acc += correlation_value(va, vb, is_multiply)
    return acc


def correlation_pair_grads(a, b, s, ch, ya, xa, yb, xb, in_a, in_b, is_multiply):
    """The gradients of one correlation term by its two pixels (outside pixels read 0)."""
    va = a[s, ch, ya, xa] if in_a else 0.0
    vb = b[s, ch, yb, xb] if in_b else 0.0
    return correlation_grads(va, vb, is_multiply)
