"""Data pipeline throughput: lightmod vs MXNet 1.9.1, side by side.

    python bench/bench_image_iter.py --mxnet-python /work/mxnet-venv/bin/python
                                     [--images 2000] [--threads 1 2] [--repeats 3]
                                     [--libsvm-rows 100000] [--cache DIR]

ImageRecordIter: decode + augment + batch of a .rec file of ``--images`` JPEGs (shorter side
256 px, quality 90, written once with lightmod's pack_img) with data_shape=(3,224,224),
rand_crop, rand_mirror, mean/std, batch 64, at each ``preprocess_threads`` value; images per
second over two epochs after a warm-up epoch. LibSVMIter: rows per second of construction plus
one pass over a generated file (``--libsvm-rows`` rows, 20 features each of 100,000), batch 256:
"cold" is the process's first iterator (lightmod pays numba's start-up there), "warm" the best
of three more, as in a training script whose model has already started numba.

Each measurement is a fresh subprocess; lightmod and MXNet alternate so both see the same
machine load, and the median over ``--repeats`` is reported with the process CPU time.
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are removed from the workers' environment.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def make_rec(path, count):
    """``count`` JPEGs of 256 x 256..384 px: smooth colour fields plus texture and noise, so
    they compress like photographs (~20-40 kB each)."""
    import cv2

    from lightmod import recordio
    rng = np.random.RandomState(0)
    writer = recordio.MXIndexedRecordIO(path[:-4] + ".idx", path, "w")
    for k in range(count):
        w = int(rng.randint(256, 385))
        small = rng.randint(0, 256, size=(8, 8 * w // 256 + 1, 3)).astype(np.uint8)
        img = cv2.resize(small, (w, 256), interpolation=cv2.INTER_CUBIC).astype(np.int16)
        img += rng.randint(-12, 13, size=img.shape).astype(np.int16)
        img = np.clip(img, 0, 255).astype(np.uint8)
        writer.write_idx(k, recordio.pack_img((0, float(k % 10), k, 0), img, quality=90))
    writer.close()


def make_libsvm(path, rows):
    rng = np.random.RandomState(1)
    with open(path, "w") as f:
        for _ in range(rows):
            cols = np.sort(rng.choice(100000, 20, replace=False))
            vals = rng.uniform(-1, 1, 20)
            f.write("%d %s\n" % (rng.randint(0, 2),
                                 " ".join("%d:%.5f" % (c, v) for c, v in zip(cols, vals))))


# ---------------------------------------------------------------------------------------------
# workers (run in the framework's own interpreter)
# ---------------------------------------------------------------------------------------------
def worker_image(mx, rec, threads):
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 224, 224), batch_size=64,
                               rand_crop=True, rand_mirror=True, mean_r=123.68, mean_g=116.28,
                               mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375,
                               preprocess_threads=threads, prefetch_buffer=4, shuffle=False)
    for _ in it:  # warm-up epoch (compilation, page cache)
        pass
    it.reset()
    images = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for _epoch in range(2):
        for batch in it:
            batch.data[0].wait_to_read()
            images += batch.data[0].shape[0] - batch.pad
        it.reset()
    return dict(per_s=images / (time.perf_counter() - wall),
                cpu_ms_per_item=1e3 * (time.process_time() - cpu) / images)


def worker_libsvm(mx, path, rows):
    """Rows/s of construction + one pass: 'cold' is the process's first LibSVMIter (lightmod
    then pays numba's start-up), 'warm' the best of three more on the same file (the machine
    is shared: the best run is the one least disturbed)."""
    def one_pass():
        wall, cpu = time.perf_counter(), time.process_time()
        it = mx.io.LibSVMIter(data_libsvm=path, data_shape=(100000,), batch_size=256)
        seen = 0
        for batch in it:
            seen += batch.data[0].shape[0] - batch.pad
        del it
        return dict(per_s=seen / (time.perf_counter() - wall),
                    cpu_ms_per_item=1e3 * (time.process_time() - cpu) / seen)
    cold = one_pass()
    warm = max((one_pass() for _ in range(3)), key=lambda r: r["per_s"])
    return dict(cold=cold, warm=warm)


def worker_main(args):
    if args.worker == "mxnet":
        import mxnet as mx
    else:
        sys.path.insert(0, REPO)
        import lightmod as mx
    if args.what == "image":
        result = worker_image(mx, args.path, args.threads[0])
    else:
        result = worker_libsvm(mx, args.path, args.rows)
    print("RESULT " + json.dumps(result))


# ---------------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------------
def run_worker(python, framework, what, path, threads=1, rows=0):
    env = dict(os.environ)
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(name, None)
    env["MXNET_CPU_WORKER_NTHREADS"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)
    cmd = [python, os.path.abspath(__file__), "--worker", framework, "--what", what, "--path",
           path, "--threads", str(threads), "--rows", str(rows)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError("%s worker failed:\n%s" % (framework, out.stderr[-3000:]))


def compare(args, what, path, threads=1, rows=0, key=None):
    runs = {"lightmod": [], "mxnet": []}
    for _ in range(args.repeats):
        runs["lightmod"].append(run_worker(sys.executable, "lightmod", what, path, threads, rows))
        if args.mxnet_python:
            runs["mxnet"].append(run_worker(args.mxnet_python, "mxnet", what, path, threads,
                                            rows))
    summaries = {}
    for sub in ([None] if key is None else key):
        summary = {}
        for name, results in runs.items():
            picked = [r if sub is None else r[sub] for r in results]
            if picked:
                summary[name] = (statistics.median(r["per_s"] for r in picked),
                                 statistics.median(r["cpu_ms_per_item"] for r in picked))
        summaries[sub] = summary
    return summaries


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mxnet-python", default=None)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--libsvm-rows", type=int, default=100000)
    parser.add_argument("--cache", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                        "lightmod-bench-image"))
    parser.add_argument("--skip-image", action="store_true")
    parser.add_argument("--skip-libsvm", action="store_true")
    parser.add_argument("--worker", choices=["lightmod", "mxnet"], help=argparse.SUPPRESS)
    parser.add_argument("--what", choices=["image", "libsvm"], help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args)

    os.makedirs(args.cache, exist_ok=True)
    print("load average %.2f %.2f %.2f, %d CPUs" % (os.getloadavg() + (os.cpu_count(),)))
    rows_out = []
    if not args.skip_image:
        rec = os.path.join(args.cache, "bench_%d.rec" % args.images)
        if not os.path.exists(rec):
            make_rec(rec, args.images)
        size_mb = os.path.getsize(rec) / 1e6
        print("ImageRecordIter: %s (%d JPEGs, %.1f MB), data_shape (3,224,224), rand_crop, "
              "rand_mirror, mean/std, batch 64" % (rec, args.images, size_mb))
        for threads in args.threads:
            res = compare(args, "image", rec, threads=threads)[None]
            rows_out.append(("ImageRecordIter images/s, %d thread(s)" % threads, res))
    if not args.skip_libsvm:
        path = os.path.join(args.cache, "bench_%d.libsvm" % args.libsvm_rows)
        if not os.path.exists(path):
            make_libsvm(path, args.libsvm_rows)
        res = compare(args, "libsvm", path, rows=args.libsvm_rows, key=("cold", "warm"))
        for sub in ("cold", "warm"):
            rows_out.append(("LibSVMIter rows/s, %s (%d rows x 20 nnz)" % (sub, args.libsvm_rows),
                             res[sub]))
    print("%-45s %14s %14s %8s   %s" % ("measure", "lightmod", "MXNet 1.9.1", "ratio",
                                        "CPU ms/item lightmod / MXNet"))
    for label, res in rows_out:
        lm = res["lightmod"]
        mxr = res.get("mxnet")
        ratio = "%.2fx" % (lm[0] / mxr[0]) if mxr else "-"
        print("%-45s %14.0f %14s %8s   %.3f / %s" % (
            label, lm[0], "%.0f" % mxr[0] if mxr else "-", ratio, lm[1],
            "%.3f" % mxr[1] if mxr else "-"))
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
