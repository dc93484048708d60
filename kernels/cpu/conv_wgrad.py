"""The weight and bias gradients of a convolution as a direct reduction (no column matrix).

For a convolution whose vertical stride is 1 (1-D and 2-D data), the weight gradient is
``dW[f, c, ky, kx] = sum over n, oy, ox of dy[n, f, oy, ox] * xpad[n, c, oy + ky*DH, ox*SW + kx*DW]``.
Per image, ``shift_rows`` copies the (zero-padded) input once per kernel column kx into
``xs[kx, c, yp, ox] = xpad[c, yp, ox*SW + kx*DW]``: rows of the output's width OW. Then the
input a tap (c, ky, kx) multiplies with output position p = oy*OW + ox is
``xs[kx, c, ky*DH*OW + p]``: a constant offset from p, so every tap is a dot product of two
contiguous runs of O = OH*OW elements, and so is the bias gradient (a dot product with ones).

One *pass* runs one loop over the positions of one image for a block of FB filters and the KW
taps of one kernel row (c, ky): per position FB loads of dy, KW loads of xs and FB*KW
multiply-adds into FB*KW scalar accumulators, which LLVM's loop vectoriser (with ``fastmath``,
which lets it reorder the sums) keeps in vector registers: 16 float32 positions per
instruction, FB*KW <= ACCUMULATORS of the 32 vector registers, the rest for the loads. Loads
per multiply-add fall as FB and KW grow, which a GEMM on the column matrix (F = 20 rows of dy
times 25 columns, K = n*O) cannot match: OpenBLAS packs both sides of that thin product and
runs it at a quarter of its peak.

The unrolled passes depend on FB and KW, so their source is generated per (KW, FB, filters
left over per group) and compiled with numba through ``kernels/fused.py``'s ``load_module``
(the file is written under the cache directory, so numba's disk cache keeps the compiled code
across processes: a second process loads it in a third of a second, where the first compiles
for about 3 s).

The batch is split into ``blocks`` runs of images fixed by the batch size alone (never by the
thread count); each block sums into its own partial gradient and the partials are added in
block order, so the result has the same bits on every call, serial or threaded.
"""
import numpy as np
from numba import njit

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import fused as _fused
from .. import threads as _threads
from .conv import _valid_range, copy_run, copy_run_strided, fill_run
from .jit import PARALLEL_MIN

__all__ = ["conv_wgrad_fits", "conv_wgrad_scratch", "conv_wgrad_direct"]

# Scalar accumulators per pass (FB filters x KW taps): AVX-512 has 32 vector registers, and a
# pass needs KW more for the input runs and one for the output gradient.
ACCUMULATORS = 24
# Widest kernel row the generated passes unroll (FB = 1 at most ACCUMULATORS taps).
MAX_KW = ACCUMULATORS
# Images are split into at most this many blocks, each with its own partial gradient: enough
# for the threads of a small machine to share them evenly, few enough that the partials stay
# small.
BLOCKS = 8
# Elements the shifted rows are aligned to (64 bytes of float32)
ALIGN = 16


# At most this many filters per pass: a generated module holds two passes per block size up
# to this, and more of them only lengthen its compilation (narrow kernel rows, where more
# filters would fit, are not run here: see conv.py's WGRAD_MIN_POSITIONS rule).
MAX_FILTER_BLOCK = 8


def filter_block(kw):
    """Filters per pass for kernel rows of kw taps."""
    return max(1, min(MAX_FILTER_BLOCK, ACCUMULATORS // kw))


def conv_wgrad_fits(x5, g, groups, f):
    """Whether conv_wgrad_direct computes the weight gradient of data x5 (n, C, D, H, W) with
    geometry g: vertical stride 1, no depth (1-D and 2-D data), kernel rows of at most
    MAX_KW taps."""
    kd, kh, kw = g[0:3]
    sh = g[4]
    pd = g[6]
    return (x5[2] == 1 and kd == 1 and pd == 0 and sh == 1 and 1 <= kw <= MAX_KW
            and x5[1] % groups == 0 and f % groups == 0 and kh >= 1)


def conv_wgrad_scratch(x5, g, f):
    """(blocks, elements of the shifted input rows (one flat array), of one block's weight
    partial, of its bias partial): the scratch conv_wgrad_direct takes."""
    n, c, _, h, _ = x5
    kw = g[2]
    ph = g[7]
    ow = g[14]
    blocks = min(n, BLOCKS)
    weights = f * c * g[1] * kw      # f * (c / groups) * kh * kw summed over the groups
    return blocks, blocks * _rows_size(kw * c * (h + 2 * ph) * ow) + ALIGN, weights, f


def _rows_size(size):
    """A block's shifted rows, rounded up to whole ALIGN-element runs."""
    return -(-size // ALIGN) * ALIGN


def _aligned_blocks(xs, blocks):
    """xs (flat) as (blocks, rows) starting on a 64-byte boundary: the rows of each block, and
    with an output width of whole 16-element runs every run a pass reads, start on one (the
    ResNet stem's passes ran 3% faster so)."""
    rows = (xs.size - ALIGN) // blocks
    start = ((-xs.ctypes.data) % 64) // xs.itemsize
    return xs[start:start + blocks * rows].reshape(blocks, rows)


@njit(cache=True, nogil=True)
def shift_rows(x, base, C, H, W, KW, PH, PW, DW, SW, Hp, OW, xs):
    """xs[kx, c, yp, ox] = x[base + (c*H + yp - PH)*W + ox*SW + kx*DW - PW] (0 in the
    padding) for one image of x (C, H, W) at flat offset ``base``."""
    zero = xs.dtype.type(0)
    for kx in range(KW):
        lo, hi = _valid_range(kx * DW - PW, SW, W, OW)
        for c in range(C):
            for yp in range(Hp):
                dst = ((kx * C + c) * Hp + yp) * OW
                y = yp - PH
                if y < 0 or y >= H:
                    fill_run(xs, dst, zero, OW)
                    continue
                fill_run(xs, dst, zero, lo)
                src = base + (c * H + y) * W + lo * SW + kx * DW - PW
                if SW == 1:
                    copy_run(xs, dst + lo, x, src, hi - lo)
                else:
                    copy_run_strided(xs, dst + lo, x, src, SW, hi - lo)
                fill_run(xs, dst + hi, zero, OW - hi)


@njit(cache=True, nogil=True)
def _sum_blocks(parts, blocks, out, accumulate):
    """out (+)= the sum of parts[0:blocks] (rows added in order: the same bits every call)."""
    size = out.size
    for j in range(size):
        s = parts[0, j]
        for b in range(1, blocks):
            s += parts[b, j]
        if accumulate:
            out[j] += s
        else:
            out[j] = s


# ---------------------------------------------------------------------------------------------
# The generated source
# ---------------------------------------------------------------------------------------------
def _pass_lines(fb, kw, bias):
    """One pass: FB = fb filters (dy rows d0 + i*O) times the kw taps of one kernel row
    (xs runs x0 + k*xk) over ``count`` positions, the sums added into part[w0 + i*CK + k];
    with ``bias`` also each filter's plain sum into bpart[b0 + i]."""
    name = "_pass%d%s" % (fb, "b" if bias else "")
    lines = ["@njit(cache=_CACHE, nogil=True, fastmath=True)",
             "def %s(dy, d0, O, xs, x0, xk, count, part, w0, CK, bpart, b0):" % name]
    lines += ["    d%d = uint64(d0 + %d * O)" % (i, i) for i in range(fb)]
    lines += ["    x%d = uint64(x0 + %d * xk)" % (k, k) for k in range(kw)]
    lines += ["    a%d_%d = dy.dtype.type(0)" % (i, k) for i in range(fb) for k in range(kw)]
    if bias:
        lines += ["    s%d = dy.dtype.type(0)" % i for i in range(fb)]
    lines.append("    for p in range(uint64(count)):")
    lines += ["        v%d = xs[x%d + p]" % (k, k) for k in range(kw)]
    for i in range(fb):
        lines.append("        g = dy[d%d + p]" % i)
        lines += ["        a%d_%d += g * v%d" % (i, k, k) for k in range(kw)]
        if bias:
            lines.append("        s%d += g" % i)
    lines += ["    part[w0 + %d * CK + %d] += a%d_%d" % (i, k, i, k)
              for i in range(fb) for k in range(kw)]
    if bias:
        lines += ["    bpart[b0 + %d] += s%d" % (i, i) for i in range(fb)]
    return lines + [""]


def _calls(indent, fb, bias):
    return ["%s_pass%d%s(dy, d0 + f0 * O, O, xs, x0, xk, O, part, w0 + f0 * CK, CK, bpart, "
            "b0 + f0)" % (indent, fb, "b" if bias else "")]


def _image_pass_lines(fblock, rest, kw):
    """Every pass of one image: per kernel row (c, ky), the filters in blocks of fblock and
    then the ``rest`` (the module serves Fg = m * fblock + rest filters per group)."""
    lines = ["@njit(cache=_CACHE, nogil=True)",
             "def _image_pass(dy, d0, O, xs, c0, Cg, KH, rowlen, xk, Fg, part, p0, CK, DH, OW,",
             "                bpart, b0, want_b):",
             "    for c in range(Cg):",
             "        for ky in range(KH):",
             "            x0 = (c0 + c) * rowlen + ky * DH * OW",
             "            w0 = p0 + (c * KH + ky) * %d" % kw,
             "            bias = want_b and c == 0 and ky == 0",
             "            f0 = 0",
             "            while f0 + %d <= Fg:" % fblock,
             "                if bias:"]
    lines += _calls(" " * 20, fblock, True)
    lines.append("                else:")
    lines += _calls(" " * 20, fblock, False)
    lines.append("                f0 += %d" % fblock)
    if rest:
        lines.append("            if bias:")
        lines += _calls(" " * 16, rest, True)
        lines.append("            else:")
        lines += _calls(" " * 16, rest, False)
    return lines + [""]


def _blocks_lines(kw, parallel):
    name = "blocks_parallel" if parallel else "blocks_serial"
    loop = "prange" if parallel else "range"
    return [
        "@njit(cache=_CACHE, nogil=True, parallel=%s)" % parallel,
        "def %s(x, dy, dwp, dbp, xsb, dims, geo, want_b, blocks):" % name,
        "    n, C, H, W, F, OH, OW, KH, groups = dims",
        "    PH, PW, DH, DW, SW = geo",
        "    Hp = H + 2 * PH",
        "    O = OH * OW",
        "    Cg = C // groups",
        "    Fg = F // groups",
        "    CK = Cg * KH * %d" % kw,
        "    rowlen = Hp * OW",
        "    xk = C * rowlen",
        "    zero = dwp.dtype.type(0)",
        "    for b in %s(blocks):" % loop,
        "        part = dwp[b]",
        "        bpart = dbp[b]",
        "        xs = xsb[b]",
        "        for j in range(part.size):",
        "            part[j] = zero",
        "        for j in range(bpart.size):",
        "            bpart[j] = zero",
        "        for i in range(b * n // blocks, (b + 1) * n // blocks):",
        "            shift_rows(x, i * C * H * W, C, H, W, %d, PH, PW, DW, SW, Hp, OW, xs)" % kw,
        "            for gi in range(groups):",
        "                _image_pass(dy, (i * F + gi * Fg) * O, O, xs, gi * Cg, Cg, KH, rowlen,"
        " xk,",
        "                            Fg, part, gi * Fg * CK, CK, DH, OW, bpart, gi * Fg, want_b)",
        ""]


def source(kw, fblock, rest):
    """The generated module for kernel rows of kw taps and m * fblock + rest filters per group
    (only the passes it runs: each one compiled adds to the first call's wait)."""
    lines = ["# generated by %s.source(%d, %d, %d)" % (__name__, kw, fblock, rest),
             "from numba import njit, prange, uint64",
             "from %s import shift_rows" % __name__,
             ""]
    for fb in sorted({fblock, rest} - {0}):
        lines += _pass_lines(fb, kw, False) + _pass_lines(fb, kw, True)
    lines += _image_pass_lines(fblock, rest, kw)
    lines += _blocks_lines(kw, False) + _blocks_lines(kw, True)
    return "\n".join(lines) + "\n"


_modules = {}


def _module(kw, fg):
    """The generated module for kernel rows of kw taps and fg filters per group."""
    fblock = min(filter_block(kw), fg)
    key = (kw, fblock, fg % fblock)
    mod = _modules.get(key)
    if mod is None:
        mod = _modules[key] = _fused.load_module("conv_wgrad_%d_%d_%d" % key, source(*key))
    return mod


def conv_wgrad_direct(x, dy, dw, db, x5, g, groups, xs, dw_parts, db_parts, req_w, req_b):
    """dw (F, C/groups, KH, KW) and db (F,) (req 'write' or 'add'; db may be None with req_b
    'null') of the convolution y (n, F, OH, OW) = x (n, C, H, W) * w, from dy, for a shape
    conv_wgrad_fits takes. Scratch as conv_wgrad_scratch says: xs (flat) for the shifted input
    rows, dw_parts and db_parts (blocks, elements) for the blocks' partial sums. False (nothing
    done) unless x, dy, dw and db are C-contiguous arrays of one float dtype."""
    arrays = (x, dy, dw, xs, dw_parts, db_parts) + ((db,) if req_b != "null" else ())
    if x.dtype not in (np.float32, np.float64) or any(
            a.dtype != x.dtype or not a.flags.c_contiguous for a in arrays):
        return False
    n, c, _, h, w = x5
    kh, kw = g[1], g[2]
    f = dw.shape[0]
    blocks = dw_parts.shape[0]
    want_b = req_b != "null"
    dims = (n, c, h, w, f, g[13], g[14], kh, groups)
    geo = (g[7], g[8], g[10], g[11], g[5])
    mod = _module(kw, f // groups)
    work = n * dw.size * g[13] * g[14]     # multiply-adds
    run = mod.blocks_serial
    if work >= PARALLEL_MIN and blocks > 1 and not _threads.in_serial() \
            and _threads.refresh() > 1:
        run = mod.blocks_parallel
    run(x.reshape(-1), dy.reshape(-1), dw_parts, db_parts, _aligned_blocks(xs, blocks), dims,
        geo, want_b, blocks)
    _sum_blocks(dw_parts, blocks, dw.reshape(-1), req_w == "add")
    if want_b:
        _sum_blocks(db_parts, blocks, db.reshape(-1), req_b == "add")
    return True
