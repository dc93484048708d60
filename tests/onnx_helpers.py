"""Shared checks of the ONNX tests: export, onnx.checker, ONNX Runtime against lightmod's forward,
and the round trip through import_model."""
import numpy as np

import lightmod as mx

onnx = __import__("pytest").importorskip("onnx")
ort = __import__("pytest").importorskip("onnxruntime")

RTOL = 1e-5


def random_params(sym, shapes, seed=0, int_inputs=()):
    """Random arg/aux parameters for every input not named in ``shapes`` (labels excluded)."""
    rng = np.random.RandomState(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape_partial(**shapes)
    args, aux = {}, {}
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name in shapes or name.endswith("label") or not shape:
            continue
        # weights scaled by their fan-in, as trained networks have them: with unscaled weights
        # deep nets saturate and float32 rounding alone moves the softmax by more than 1e-5
        scale = np.sqrt(3.0 / np.prod(shape[1:])) if len(shape) > 1 else 0.5
        args[name] = mx.nd.array(rng.uniform(-scale, scale, shape).astype(np.float32))
    for name, shape in zip(sym.list_auxiliary_states(), aux_shapes):
        # running variances must be positive
        aux[name] = mx.nd.array(rng.uniform(0.5, 1.5, shape).astype(np.float32))
    return args, aux


def lightmod_forward(sym, args, aux, feeds, label_shapes=None):
    """Inference outputs of ``sym`` on ``feeds`` (numpy arrays by input name); ``label_shapes``
    gives the shapes of labels that inference cannot deduce (their values are not read)."""
    bound = dict(args)
    bound.update({k: mx.nd.array(v, dtype=v.dtype) for k, v in feeds.items()})
    known = {k: v.shape for k, v in feeds.items()}
    known.update(label_shapes or {})
    arg_shapes, _, _ = sym.infer_shape_partial(**known)
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name not in bound:       # labels: not read by the inference forward
            bound[name] = mx.nd.zeros(shape)
    exe = sym.bind(mx.cpu(), bound, aux_states=dict(aux), grad_req="null")
    return [o.asnumpy() for o in exe.forward(is_train=False)]


def ort_run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_close(got, want, what, rtol=RTOL, atol=1e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, "%s: shape %s vs %s" % (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def check_export(sym, feeds_list, tmp_path, args=None, aux=None, opset=13, dynamic=True,
                 round_trip=True, rtol=RTOL, atol=1e-6, name="model", label_shapes=None):
    """Export ``sym`` for the first feeds, then compare ONNX Runtime (and the re-imported model)
    with lightmod's forward on every feeds dict. Returns the ONNX path."""
    first = feeds_list[0]
    if args is None:
        args, aux = random_params(sym, {k: v.shape for k, v in first.items()})
    path = tmp_path / ("%s_opset%d.onnx" % (name, opset))
    mx.onnx.export_model(sym, [args, aux or {}], [v.shape for v in first.values()],
                         [v.dtype for v in first.values()], onnx_file_path=str(path),
                         dynamic=dynamic, opset_version=opset)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == opset
    if round_trip:
        sym2, args2, aux2 = mx.contrib.onnx.import_model(str(path))
    for feeds in feeds_list:
        labels = label_shapes(feeds) if label_shapes else None
        want = lightmod_forward(sym, args, aux or {}, feeds, labels)
        got = ort_run(path, feeds)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, "ONNX Runtime output %d, batch %s" % (i, list(feeds.values())[0].shape),
                         rtol, atol)
        if round_trip:
            back = lightmod_forward(sym2, args2, aux2, feeds)
            for i, (b, w) in enumerate(zip(back, want)):
                assert_close(b, w, "re-imported output %d" % i, rtol, atol)
    return path
