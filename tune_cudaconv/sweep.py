"""Tile-size sweep of the implicit-GEMM conv kernels and the GEMM (scratch, not committed)."""
import json, sys, time
import numpy as np
from numba import cuda, float32
from lightmod.kernels.cuda import conv_implicit as ci
from lightmod.kernels.cuda import nn
from lightmod.operator.conv import geometry3, shape5

def timeit(fn, steps=10, repeat=3):
    fn(); cuda.synchronize()
    best = 1e9
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(steps):
            fn()
        cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / steps)
    return best

LAYERS = [("lenet1", 128, 1, 28, 20, 5, 0), ("lenet2", 128, 20, 12, 50, 5, 0),
          ("res56", 32, 64, 56, 64, 3, 1), ("res32", 32, 32, 32, 32, 3, 1)]
CANDS = [(64, 64, 8, 4, 4), (32, 128, 8, 4, 4), (64, 128, 8, 8, 4), (128, 64, 8, 8, 4),
         (64, 64, 16, 4, 4), (128, 128, 8, 8, 8), (32, 64, 8, 4, 2)]
out = {}
rng = np.random.default_rng(0)
for layer in LAYERS:
    name, n, c, s, f, k, pad = layer
    o = s + 2 * pad - k + 1
    x = cuda.to_device(rng.standard_normal((n, c, s, s)).astype(np.float32))
    w = cuda.to_device(rng.standard_normal((f, c, k, k)).astype(np.float32))
    y = cuda.device_array((n, f, o, o), np.float32)
    dy = cuda.to_device(rng.standard_normal((n, f, o, o)).astype(np.float32))
    dx = cuda.device_array((n, c, s, s), np.float32)
    dw = cuda.device_array((f, c, k, k), np.float32)
    dims = shape5((n, c, s, s)); g = geometry3((k, k), (1, 1), (pad, pad), (1, 1), (o, o))
    flops = 2.0 * n * f * o * o * c * k * k
    for cand in CANDS:
        try:
            tile = ci._Tile("t%dx%dx%d_%dx%d" % cand, *cand)
        except AssertionError:
            continue
        ci.TILES = (tile,)
        key = "float32_" + tile.name
        for table, make in ((ci._FORWARD, ci._forward_kernel), (ci._DATA, ci._data_kernel),
                            (ci._WEIGHT, ci._weight_kernel)):
            if key not in table:
                table[key] = make(float32, tile)
        partial = cuda.device_array(ci.implicit_weight_scratch(dims, g, 1, f), np.float32)
        r = {}
        try:
            r["fwd"] = flops / timeit(lambda: ci.implicit_conv_forward(x, w, y, dims, g, 1)) / 1e9
            r["data"] = flops / timeit(lambda: ci.implicit_conv_backward_data(dy, w, dx, dims, g, 1)) / 1e9
            r["weight"] = flops / timeit(lambda: ci.implicit_conv_backward_weight(x, dy, dw, dims, g, 1, partial)) / 1e9
        except Exception as e:
            r["error"] = str(e)[:200]
        out["%s %s" % (name, tile.name)] = r
        print(name, tile.name, {k2: (round(v) if isinstance(v, float) else v) for k2, v in r.items()}, flush=True)

GCANDS = [(64, 64, 8, 4, 4), (128, 128, 8, 8, 8), (128, 64, 8, 8, 4), (64, 64, 16, 4, 4), (32, 32, 8, 2, 2)]
for (m, nn_, kk) in [(4096, 4096, 4096), (256, 512, 784), (1024, 1024, 1024)]:
    a = cuda.to_device(rng.standard_normal((m, kk)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal((kk, nn_)).astype(np.float32))
    bt = cuda.to_device(rng.standard_normal((nn_, kk)).astype(np.float32))
    cmat = cuda.device_array((m, nn_), np.float32)
    for cand in GCANDS:
        try:
            tile = nn._GemmTile("g%dx%dx%d_%dx%d" % cand, *cand)
        except AssertionError:
            continue
        kern = nn._make_gemm(float32, tile)
        grid = (-(-nn_ // tile.bn), -(-m // tile.bm))
        r = {}
        r["nn"] = 2.0 * m * nn_ * kk / timeit(lambda: kern[grid, tile.threads](a, b, cmat, False, False, False)) / 1e9
        r["nt"] = 2.0 * m * nn_ * kk / timeit(lambda: kern[grid, tile.threads](a, bt, cmat, False, True, False)) / 1e9
        out["gemm %dx%dx%d %s" % (m, nn_, kk, tile.name)] = r
        print("gemm", m, nn_, kk, tile.name, {k2: round(v) for k2, v in r.items()}, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
