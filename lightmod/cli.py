"""The ``lightmod`` command: demo, info, summary, inspect, run, im2rec, export-onnx."""
import argparse
import logging
import os
import platform
import runpy
import sys
import time

from .base import MXNetError

__all__ = ["main"]


def _demo(args):
    import numpy

    import lightmod as mx
    from lightmod import fit_callbacks
    from lightmod.data import load_digits

    logging.basicConfig(level=logging.INFO, format="%(message)s", force=True)
    # NDArrayIter shuffles with numpy's global generator (as MXNet's does), the initializer
    # draws from lightmod's: the same seed must fix both
    mx.random.seed(args.seed)
    numpy.random.seed(args.seed)
    x_train, y_train = load_digits("train", flat=True)
    x_val, y_val = load_digits("val", flat=True)
    train = mx.io.NDArrayIter(x_train, y_train, batch_size=args.batch_size, shuffle=True)
    val = mx.io.NDArrayIter(x_val, y_val, batch_size=args.batch_size)

    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=128, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=64, name="fc2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    net = mx.sym.SoftmaxOutput(net, name="softmax")

    print("lightmod %s demo: MLP 64-128-64-10 on the 8x8 handwritten digits shipped with "
          "lightmod (%d train / %d validation images)" % (mx.__version__, len(x_train),
                                                          len(x_val)))
    os.makedirs(args.out, exist_ok=True)
    prefix = os.path.join(args.out, "digits-mlp")
    history = fit_callbacks.History()
    batch_cbs = [history]
    if not args.no_progress:
        batch_cbs.append(fit_callbacks.TqdmProgressBar(fallback=False, leave=True))
    mod = mx.mod.Module(net, context=mx.cpu())
    start = time.time()
    mod.fit(train, eval_data=val, eval_metric=["acc", "ce"], num_epoch=args.epochs,
            optimizer="sgd", optimizer_params={"learning_rate": 0.05, "momentum": 0.9, "wd": 1e-4},
            initializer=mx.init.Xavier(), batch_end_callback=batch_cbs,
            epoch_end_callback=[history, mx.callback.do_checkpoint(prefix, args.epochs)],
            eval_end_callback=history)
    elapsed = time.time() - start
    acc = dict(mod.score(val, "acc"))["accuracy"]
    print("Final validation accuracy: %.4f (%d epochs in %.1f s)" % (acc, args.epochs, elapsed))
    print("Checkpoint: %s-symbol.json, %s-%04d.params" % (prefix, prefix, args.epochs))
    png = os.path.join(args.out, "training-curves.png")
    try:
        fit_callbacks.plot_history(history, png, title="lightmod demo: digits MLP")
        print("Training curves: %s" % png)
    except mx.MXNetError as err:
        print("Training curves not drawn: %s" % err)
    if acc < args.min_accuracy:
        print("Validation accuracy %.4f is below --min-accuracy %.2f: training did not work"
              % (acc, args.min_accuracy), file=sys.stderr)
        return 1
    return 0


def _info(args):
    import numpy

    import lightmod
    print("lightmod   %s (tracks the MXNet 1.9.1 API)" % lightmod.__version__)
    print("python     %s (%s)" % (platform.python_version(), sys.executable))
    print("numpy      %s" % numpy.__version__)
    try:
        import numba
        print("numba      %s" % numba.__version__)
        try:
            layer = numba.threading_layer()
        except ValueError:
            # numba picks the layer when the first parallel kernel runs
            layer = "chosen at first parallel kernel (config: %s)" % numba.config.THREADING_LAYER
        from lightmod.kernels import threads
        policy = threads.describe()
        blas = policy["blas_threads"]
        print("threading  %s, %d threads (%s, from %s)%s"
              % (layer, policy["threads"], "load-following: bits may vary from run to run"
                 if policy["policy"] == "load" else "fixed for the process", policy["source"],
                 "" if blas is None else "; OpenBLAS %d threads" % blas))
        from lightmod.kernels.cpu import gemm
        print("products   %s" % ("up to %d parts each, on lightmod's own threads"
                                 % threads.product_threads() if gemm.available() else
                                 "numpy's OpenBLAS threads (no product team on this platform)"))
    except ImportError:
        print("numba      not installed")
    from lightmod.kernels import cuda_support
    sim = cuda_support.simulator_enabled()
    if not cuda_support.numba_cuda_installed():
        print("cuda       numba-cuda not installed (pip install 'lightmod[cuda]')")
    else:
        n = cuda_support.num_gpus()
        print("cuda       %s%s" % ("%d GPU(s) visible" % n if n else "no GPU visible",
                                  " (NUMBA_ENABLE_CUDASIM=1: simulator)" if sim else ""))
    try:
        import mpi4py
        print("mpi        mpi4py %s" % mpi4py.__version__)
    except ImportError:
        print("mpi        mpi4py not installed (pip install 'lightmod[mpi]')")
    return 0


def _parse_shape(item):
    """``NAME=D1,D2,...`` -> (name, dims); CliError otherwise."""
    name, sep, dims = item.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or min(shape) <= 0:
        raise CliError("--shape %r: expected NAME=D1,D2,... with positive integers, e.g. "
                       "data=1,3,28,28" % item)
    return name, shape


_PARAM_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_moving_mean", "_moving_var",
                   "_label", "_parameters", "_state", "_state_cell")


def _summary(args):
    import lightmod as mx
    _need_file(args.symbol_json, "symbol file")
    sym = mx.sym.load(args.symbol_json)
    shape = dict(_parse_shape(item) for item in args.shape or [])
    inputs = sym.list_inputs()
    if not shape:
        # without shapes nothing can be counted ("Total params: 0" would be a wrong answer)
        data = [n for n in inputs if not n.endswith(_PARAM_SUFFIXES)] or inputs
        raise CliError("summary needs the input shapes to count parameters: give --shape "
                       "NAME=D1,D2,... for the data inputs (%s), e.g. --shape %s=1,64"
                       % (", ".join(data), data[0] if data else "data"))
    unknown = sorted(set(shape) - set(inputs))
    if unknown:
        raise CliError("--shape names %s, which the symbol does not take (its inputs: %s)"
                       % (", ".join(unknown), ", ".join(inputs)))
    mx.viz.print_summary(sym, shape=shape)
    return 0


def _inspect(args):
    import numpy as np

    import lightmod as mx
    _need_file(args.params, "params file")
    loaded = mx.nd.load(args.params)
    items = loaded.items() if isinstance(loaded, dict) else enumerate(loaded)
    total = 0
    for name, arr in items:
        total += arr.size
        host = arr.asnumpy()
        stats = ""
        if host.size and np.issubdtype(host.dtype, np.number):
            stats = "mean %.4g  std %.4g" % (float(host.astype(np.float64).mean()),
                                             float(host.astype(np.float64).std()))
        print("%-40s %-18s %-8s %-10s %s" % (name, tuple(arr.shape), np.dtype(arr.dtype).name,
                                             arr.stype, stats))
    print("%d arrays, %d values" % (len(loaded), total))
    return 0


def _run(args):
    _need_file(args.script, "script")
    # Nothing is imported for the program: the first `import mxnet` (here or in any process
    # the program starts, which inherit the variable) resolves to lightmod.
    import lightmod_mxnet_alias
    os.environ[lightmod_mxnet_alias.ENV_VAR] = "1"
    lightmod_mxnet_alias.install()
    sys.argv = [args.script] + list(args.script_args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    runpy.run_path(args.script, run_name="__main__")
    return 0


def _im2rec(args):
    from lightmod.tools import im2rec
    return im2rec.main(args.im2rec_args)


def _export_onnx(args):
    from lightmod.onnx._check import export_and_compare
    shapes = {}
    for item in args.shape:
        name, _, dims = item.partition("=")
        shapes[name] = tuple(int(d) for d in dims.split(",") if d)
    report = export_and_compare(args.prefix, args.epoch, shapes, args.output,
                                opset_version=args.opset, dynamic=args.dynamic)
    print("Exported %s-symbol.json / %s-%04d.params to %s (opset %d)"
          % (args.prefix, args.prefix, args.epoch, args.output, args.opset))
    worst = 0.0
    for name, diff, scale in report:
        rel = diff / scale if scale else diff
        worst = max(worst, rel)
        print("%s: largest difference ONNX Runtime vs lightmod %.3g (relative %.3g)"
              % (name, diff, rel))
    return 0 if worst <= 1e-4 else 1


class CliError(Exception):
    """A bad command line or input file: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # argparse would print the usage too; one line says what is wrong (--help has the rest)
        self.exit(2, "%s: error: %s (see %s --help)\n" % (self.prog, message, self.prog))


def _need_file(path, what):
    if not os.path.isfile(path):
        raise CliError("%s %s does not exist" % (what, path) if not os.path.exists(path)
                       else "%s %s is not a file" % (what, path))


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a positive integer, got %r" % text) from None
    if value <= 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got %d" % value)
    return value


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number in [0, 1], got %r" % text) from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("expected a number in [0, 1], got %r" % text)
    return value


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["im2rec"]:
        # every flag, --help included, belongs to im2rec's own parser
        return _im2rec(argparse.Namespace(im2rec_args=argv[1:]))
    parser = _Parser(prog="lightmod", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("demo", help="train an MLP on the shipped 8x8 digits (a few seconds)")
    p.add_argument("--epochs", type=_positive_int, default=10)
    p.add_argument("--batch-size", type=_positive_int, default=32)
    p.add_argument("--out", default="lightmod-demo", help="folder for checkpoint and PNG")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds the initializer and the shuffling: same seed, same numbers")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--min-accuracy", type=_fraction, default=0.8,
                   help="exit status 1 below this validation accuracy (default 0.8: every "
                        "seed tried reaches 0.93 or more, a broken install about 0.1)")
    p.set_defaults(func=_demo)

    p = sub.add_parser("info", help="versions, numba threading, CUDA and MPI availability")
    p.set_defaults(func=_info)

    p = sub.add_parser("summary", help="layers, shapes and parameter counts of a symbol file")
    p.add_argument("symbol_json", help="PREFIX-symbol.json")
    p.add_argument("--shape", action="append",
                   help="input shape, e.g. --shape data=1,3,28,28 (repeatable)")
    p.set_defaults(func=_summary)

    p = sub.add_parser("inspect", help="list the arrays of a .params file")
    p.add_argument("params", help="PREFIX-0001.params or any nd.save file")
    p.set_defaults(func=_inspect)

    p = sub.add_parser("run", help="run an unmodified MXNet 1.x script on lightmod")
    p.add_argument("script")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=_run)

    p = sub.add_parser("im2rec", add_help=False,
                       help="make .lst image lists and pack them into .rec/.idx (MXNet's im2rec "
                            "flags; lightmod im2rec --help)")
    p.add_argument("im2rec_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=_im2rec)

    p = sub.add_parser("export-onnx", help="export a checkpoint to ONNX and check it with "
                                           "ONNX Runtime (needs the onnx extra)")
    p.add_argument("prefix", help="checkpoint prefix (PREFIX-symbol.json)")
    p.add_argument("epoch", type=int, help="checkpoint epoch (PREFIX-EPOCH.params)")
    p.add_argument("--shape", action="append", required=True,
                   help="input shape, e.g. --shape data=1,3,224,224 (repeatable)")
    p.add_argument("-o", "--output", default="model.onnx", help="the ONNX file to write")
    p.add_argument("--opset", type=int, default=13, choices=(12, 13))
    p.add_argument("--dynamic", action="store_true", help="leave the input dims open")
    p.set_defaults(func=_export_onnx)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        if args.command == "run":
            raise
        # the reader went away (``lightmod info | head``): stop quietly, as a shell tool does,
        # with nothing left to flush into the closed pipe at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (CliError, MXNetError, OSError, ValueError) as err:
        if args.command == "run" and not isinstance(err, CliError):
            raise       # the script's own error: its traceback is what its author needs
        message = str(err) or type(err).__name__
        print("lightmod %s: error: %s" % (args.command, " ".join(message.split())),
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
