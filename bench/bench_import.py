"""Time a fresh `import lightmod` against a fresh `import mxnet` (MXNet 1.9.1), side by side.

    python bench/bench_import.py [--mxnet-python /path/to/mxnet-venv/bin/python] [--repeat 7]

Each import runs in a new interpreter; the runs alternate so machine load hits both alike.
Prints the medians and the ratio (target: lightmod at most half of MXNet's time), and checks
that importing lightmod imported neither numba nor numba.cuda.
"""
import argparse
import statistics
import subprocess
import sys
import time

CHECK = ("import sys, lightmod; "
         "bad = [m for m in ('numba', 'numba.cuda') if m in sys.modules]; "
         "assert not bad, bad")


def time_import(python, code):
    start = time.perf_counter()
    subprocess.run([python, "-c", code], check=True)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mxnet-python", help="a Python that has MXNet 1.9.1 installed")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    base, light, mx = [], [], []
    for _ in range(args.repeat):
        base.append(time_import(sys.executable, "pass"))
        light.append(time_import(sys.executable, CHECK))
        if args.mxnet_python:
            mx.append(time_import(args.mxnet_python, "import mxnet"))
    print("bare interpreter start: %.3f s (median of %d)" % (statistics.median(base), args.repeat))
    print("import lightmod:        %.3f s" % statistics.median(light))
    if mx:
        ratio = statistics.median(light) / statistics.median(mx)
        print("import mxnet 1.9.1:     %.3f s" % statistics.median(mx))
        print("ratio lightmod / mxnet: %.2f (target <= 0.50)" % ratio)


if __name__ == "__main__":
    main()
