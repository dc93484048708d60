"""The same seeded training run gives the same bits whatever else the machine does: alone,
beside CPU-burning processes, and as two Modules trained at once in two threads; with
OpenBLAS's Haswell kernels, whose results depend on the thread count. And the first use of the
operator table from many threads at once is safe.

Each run is a child process (the thread count is fixed once per process).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

_TRAIN = textwrap.dedent(r"""
    import hashlib, json, sys, threading
    import numpy as np
    import lightmod as mx
    from lightmod.kernels import threads as T

    def train():
        rng = np.random.RandomState(0)
        x = rng.standard_normal((96, 1, 12, 12)).astype(np.float32)
        y = rng.randint(0, 10, 96).astype(np.float32)
        net = mx.sym.Convolution(mx.sym.Variable("data"), kernel=(3, 3), num_filter=8, name="c1")
        net = mx.sym.Activation(mx.sym.BatchNorm(net, name="bn1"), act_type="relu")
        net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=96, name="fc1")
        net = mx.sym.FullyConnected(mx.sym.Activation(net, act_type="relu"), num_hidden=10,
                                    name="fc2")
        net = mx.sym.SoftmaxOutput(net, name="softmax")
        # initial values from numpy's seeded generator: threads drawing from one shared
        # generator would each get other values
        arg_shapes, _, aux_shapes = net.infer_shape(data=(32, 1, 12, 12))
        arg = {n: mx.nd.array(rng.uniform(-0.2, 0.2, s)) for n, s in
               zip(net.list_arguments(), arg_shapes) if n not in ("data", "softmax_label")}
        aux = {n: mx.nd.zeros(s) if n.endswith("mean") else mx.nd.ones(s)
               for n, s in zip(net.list_auxiliary_states(), aux_shapes)}
        mod = mx.mod.Module(net)
        it = mx.io.NDArrayIter(x, y, batch_size=32)
        mod.fit(it, num_epoch=2, optimizer="sgd", arg_params=arg, aux_params=aux,
                optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
        arg, aux = mod.get_params()
        digest = hashlib.sha256()
        for name in sorted(arg):
            digest.update(arg[name].asnumpy().tobytes())
        for name in sorted(aux):
            digest.update(aux[name].asnumpy().tobytes())
        import numba
        return digest.hexdigest(), numba.get_num_threads()

    results = [train()]
    if sys.argv[1] == "threads":        # then two more at once, in two threads
        results += [None, None]
        def run(i):
            results[i] = train()
        workers = [threading.Thread(target=run, args=(i,)) for i in (1, 2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    policy = T.describe() if hasattr(T, "describe") else {}
    print(json.dumps({"results": results, "blas": T.blas_threads(), "policy": policy}))
""")

_BURN = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"


def _env():
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", OMP_NUM_THREADS="2")
    for name in ("LIGHTMOD_NUM_THREADS", "LIGHTMOD_THREAD_POLICY", "NUMBA_NUM_THREADS",
                 "OPENBLAS_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS"):
        env.pop(name, None)
    return env


def _train(mode):
    proc = subprocess.run([sys.executable, "-c", _TRAIN, mode], capture_output=True, text=True,
                          env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs to have two threads")
def test_same_bits_alone_beside_busy_processes_and_in_two_threads():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs in the affinity set")
    alone = _train("single")
    burners = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(2)]
    try:
        busy = _train("threads")      # one run, then two at once in two threads
    finally:
        for b in burners:
            b.kill()
            b.wait()
    reference = alone["results"][0][0]
    assert [r[0] for r in busy["results"]] == [reference] * 3
    # the count came from OMP_NUM_THREADS and stayed fixed, busy neighbours or not
    for report in (alone, busy):
        assert all(r[1] == 2 for r in report["results"])
        assert report["policy"]["threads"] == 2
        assert report["policy"]["source"] == "OMP_NUM_THREADS"
        if report["blas"] is not None:
            assert report["blas"] == 2


_FIRST_USE = textwrap.dedent(r"""
    import threading
    import lightmod as mx
    barrier = threading.Barrier(8)
    errors = []
    def build(i):
        barrier.wait()
        try:
            net = mx.sym.Convolution(mx.sym.Variable("data"), kernel=(3, 3), num_filter=2)
            net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=3)
            mx.nd.FullyConnected(mx.nd.ones((1, 4)), mx.nd.ones((3, 4)), num_hidden=3,
                                 no_bias=True)
        except Exception as err:
            errors.append("%s: %s" % (type(err).__name__, err))
    threads = [threading.Thread(target=build, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mx.sym.Convolution is mx.sym.Convolution
    print(len(errors), errors[:1])
""")


def test_first_use_of_the_operator_table_from_many_threads():
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", _FIRST_USE], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith("0 []"), proc.stdout


def test_load_policy_is_opt_in_and_reported():
    code = ("from lightmod.kernels import threads as T; d = T.describe(); "
            "print(d['policy'], d['threads'], d['source'])")
    env = _env()
    env.update(LIGHTMOD_THREAD_POLICY="load", MXNET_CPU_WORKER_NTHREADS="1")
    env.pop("OMP_NUM_THREADS")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.split() == ["load", "1", "MXNET_CPU_WORKER_NTHREADS"], out.stderr
    env["LIGHTMOD_THREAD_POLICY"] = "sometimes"
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert bad.returncode != 0 and "LIGHTMOD_THREAD_POLICY" in bad.stderr
