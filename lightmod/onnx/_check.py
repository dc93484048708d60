"""Export a checkpoint and check the file against ONNX Runtime (``lightmod export-onnx``)."""
import numpy as np

from ..base import MXNetError
from ._deps import require_onnx, require_onnxruntime
from ._export import export_model

__all__ = ["export_and_compare"]


def export_and_compare(prefix, epoch, shapes, onnx_file_path, opset_version=13, dynamic=False,
                       seed=0):
    """Export checkpoint ``prefix``/``epoch`` for the input ``shapes`` ({name: shape}), run the
    file in ONNX Runtime and lightmod's forward on the same random inputs.

    Returns ``[(output name, largest absolute difference, largest |lightmod| value)]``.
    """
    from .. import model as model_mod
    from .. import ndarray as nd
    from ..context import cpu
    onnx = require_onnx()
    ort = require_onnxruntime()
    sym, args, aux = model_mod.load_checkpoint(prefix, epoch)
    params = dict(args)
    params.update(aux)
    data_names = [n for n in sym.list_inputs() if n not in params]
    unknown = [n for n in shapes if n not in data_names]
    if unknown:
        raise MXNetError("export-onnx: --shape names %s, but the model's data inputs are %s"
                         % (unknown, data_names))
    names = [n for n in data_names if n in shapes]
    export_model(sym, params, [shapes[n] for n in names], np.float32, onnx_file_path,
                 dynamic=dynamic, opset_version=opset_version)
    onnx.checker.check_model(onnx.load(onnx_file_path))
    rng = np.random.RandomState(seed)
    feeds = {n: rng.uniform(0, 1, shapes[n]).astype(np.float32) for n in names}
    sess = ort.InferenceSession(onnx_file_path, providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    bound = {k: v for k, v in args.items()}
    bound.update({k: nd.array(v) for k, v in feeds.items()})
    arg_shapes, _, _ = sym.infer_shape_partial(**{k: v.shape for k, v in feeds.items()})
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name not in bound:          # a loss head's label: the inference forward ignores it
            if shape is None:
                raise MXNetError("export-onnx: give the shape of input '%s' with --shape" % name)
            bound[name] = nd.zeros(shape)
    exe = sym.bind(cpu(), bound, aux_states=aux, grad_req="null")
    want = [o.asnumpy() for o in exe.forward(is_train=False)]
    report = []
    for out_name, g, w in zip(sym.list_outputs(), got, want):
        report.append((out_name, float(np.max(np.abs(g - w))) if w.size else 0.0,
                       float(np.max(np.abs(w))) if w.size else 0.0))
    return report
