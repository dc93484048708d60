"""``ctc_loss`` (aliases ``CTCLoss``, ``contrib.ctc_loss``, ``contrib.CTCLoss``): the
connectionist temporal classification loss of MXNet 1.9.1.

data (frames, batch, alphabet) holds unnormalised activations (a softmax over the alphabet is
applied inside), label (batch, label length) the target sequences. With blank_label 'first'
the blank is class 0 and labels are padded with 0; with 'last' the blank is the last class and
labels are padded with -1. use_data_lengths / use_label_lengths add inputs giving each
sequence's frame count and label length. The output is the loss per sequence, -log p(label |
data); the gradient with respect to data is the head gradient of each sequence times
softmax(data) minus the posterior of each symbol (the label gets none).
"""
import numpy as np

from .common import data_grad_needed
from .conv import scratch
from .registry import Bool, Enum, Operator, register


@register
class CTCLoss(Operator):
    name = "ctc_loss"
    aliases = ("CTCLoss", "_contrib_ctc_loss", "_contrib_CTCLoss")
    inputs = ("data", "label")
    optional_inputs = ("data_lengths", "label_lengths")
    params = {"use_data_lengths": Bool(False, doc="Whether the data lengths are decided by "
                                                  "`data_lengths`. If false, the lengths are "
                                                  "equal to the max sequence length."),
              "use_label_lengths": Bool(False, doc="Whether the label lengths are decided by "
                                                   "`label_lengths`, or derived from "
                                                   "`padding_mask`. If false, the lengths are "
                                                   "derived from the first occurrence of the "
                                                   "value of `padding_mask`."),
              "blank_label": Enum("first", "last", default="first",
                                  doc="Set the label that is reserved for blank label.")}

    def list_inputs(self, p):
        names = ["data", "label"]
        if p.use_data_lengths:
            names.append("data_lengths")
        if p.use_label_lengths:
            names.append("label_lengths")
        return names

    def infer_shape(self, p, in_shapes):
        shapes = list(in_shapes)
        data, label = shapes[0], shapes[1]
        if data is None:
            return shapes, [None]
        data = tuple(data)
        if len(data) != 3:
            raise self.error("data must be 3-dimensional (frames, batch, alphabet), got shape %s",
                             data)
        frames, batch = data[0], data[1]
        if label is not None:
            label = tuple(label)
            if len(label) != 2 or (label[0] and batch and label[0] != batch):
                raise self.error("label must have shape (batch, label length) = (%d, ...), got "
                                 "%s", batch, label)
            if frames and label[1] and label[1] > frames:
                raise self.error("the label length (%d, label %s) cannot exceed the number of "
                                 "frames (%d, data %s)", label[1], label, frames, data)
        for i in range(2, len(shapes)):
            name = self.list_inputs(p)[i]
            if shapes[i] is None:
                shapes[i] = (batch,)
            elif tuple(shapes[i]) != (batch,):
                raise self.error("%s must have shape (%d,), got %s", name, batch,
                                 tuple(shapes[i]))
        return shapes, [(batch,)]

    def infer_type(self, p, in_types):
        dtype = in_types[0]
        if dtype is not None and dtype not in ("float16", "float32", "float64"):
            raise self.error("data must be floating point, got %s", dtype)
        return [dtype] + [t if t is not None else dtype for t in in_types[1:]], [dtype]

    def _check_values(self, p, k, frames, alphabet, label, data_lengths, label_lengths):
        """A length beyond the data or the label, or a label class outside the alphabet, would
        make the recursion read outside its arrays: raise instead. Labels count up to their
        length (label_lengths), else every entry is checked (padding included: 0 with the
        blank first, -1 with the blank last)."""
        width = int(label.shape[1])
        for flag, name, values, top in ((p.use_data_lengths, "data_lengths", data_lengths,
                                         frames),
                                        (p.use_label_lengths, "label_lengths", label_lengths,
                                         width)):
            if not flag:
                continue
            host = np.trunc(np.asarray(k.to_host(values), dtype=np.float64))
            bad = ~((host >= 0) & (host <= top))
            if bad.any():
                raise self.error("%s must lie in [0, %d], got %s at sequence %d", name, top,
                                 host[bad][0], int(np.argmax(bad)))
        classes = np.trunc(np.asarray(k.to_host(label), dtype=np.float64))
        if p.use_label_lengths:
            ends = np.trunc(np.asarray(k.to_host(label_lengths), dtype=np.float64))
            classes = classes[np.arange(width)[None, :] < ends[:, None]]
        low = 0 if p.blank_label == "first" else -1
        bad = ~((classes >= low) & (classes < alphabet))
        if bad.any():
            raise self.error("label holds %s, outside the classes [%d, %d) of data with "
                             "blank_label='%s'", classes[bad][0], low, alphabet, p.blank_label)

    def _run(self, p, k, state, inputs, loss, grad, head, want_grad):
        data, label = inputs[0], inputs[1]
        frames, batch, alphabet = tuple(data.shape)
        states = 2 * tuple(label.shape)[1] + 1
        extra = list(inputs[2:])
        data_lengths = extra.pop(0) if p.use_data_lengths else loss
        label_lengths = extra.pop(0) if p.use_label_lengths else loss
        self._check_values(p, k, frames, alphabet, label, data_lengths, label_lengths)
        first = p.blank_label == "first"
        k.ctc_loss(data, label, data_lengths, label_lengths, p.use_data_lengths,
                   p.use_label_lengths, 0 if first else alphabet - 1, 0 if first else -1,
                   loss, grad, head,
                   scratch(k, state, "logp", (batch, frames, alphabet), "float64"),
                   scratch(k, state, "alpha", (batch, frames, states), "float64"),
                   scratch(k, state, "beta", (batch, frames, states), "float64"), want_grad)

    def forward(self, p, k, inputs, outputs, is_train, state):
        self._run(p, k, state, inputs, outputs[0], inputs[0], outputs[0], False)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        dst = in_grads[0]
        grad = dst if req[0] == "write" else scratch(k, state, "grad", dst.shape, dst.dtype)
        loss = scratch(k, state, "loss", tuple(outputs[0].shape), outputs[0].dtype)
        self._run(p, k, state, inputs, loss, grad, out_grads[0], True)
        if req[0] == "add":
            k.assign(dst, grad, "add")
