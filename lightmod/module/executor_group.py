"""DataParallelExecutorGroup: one executor per device, a batch split between them.

The group binds the symbol once per context with that device's share of the batch
(``work_load_list``, MXNet's rounding), copies each incoming batch into the devices' input
arrays along every input's batch axis (taken from ``DataDesc.layout``), runs the executors, and
merges their outputs along each output's batch axis (its ``__layout__`` attribute).

Several ``cpu(i)`` contexts behave as separate replicas: each executor owns its arrays (they
report their own context); parameters are kept equal across replicas by the updates.

Sharing with ``shared_group`` (BucketingModule's buckets): every name in ``param_names`` uses
the shared executor's array *and* its gradient array (so ``grad_req='add'`` accumulates across
buckets), aux states are shared too, and the pools of non-parameter inputs
(``shared_data_arrays``, one dict per device) are the same dict objects.
"""
import logging
from collections import OrderedDict

from .. import arg_checks
from .. import context as ctx
from .. import ndarray as nd
from ..base import DTYPE_MX_TO_NP, MXNetError, NotBoundError
from ..io import DataDesc

__all__ = ["DataParallelExecutorGroup"]


def _split_input_slice(batch_size, work_load_list):
    """Split ``range(batch_size)`` into consecutive slices proportional to the work loads.

    Each share is ``round(w_i * B / sum(w))`` with Python's round (half to even); if the shares
    fall short of B the last device takes the rest. An empty slice is an error.
    """
    total_work_load = sum(work_load_list)
    batch_num_list = [round(work_load * batch_size / total_work_load)
                      for work_load in work_load_list]
    batch_num_sum = sum(batch_num_list)
    if batch_num_sum < batch_size:
        batch_num_list[-1] += batch_size - batch_num_sum
    slices = []
    end = 0
    for batch_num in batch_num_list:
        begin = int(min(end, batch_size))
        end = int(min(begin + batch_num, batch_size))
        if begin >= end:
            raise ValueError('Too many slices. Some splits are empty (batch size %d over '
                             'work loads %s).' % (batch_size, list(work_load_list)))
        slices.append(slice(begin, end))
    return slices


def _load_general(data, targets, major_axis):
    """Copy each source array into its per-device targets.

    ``targets[i]`` is a list of ``(slice, device_array)`` pairs (the source is cut along
    ``major_axis[i]``; a negative axis means "copy whole"), or a plain list of device arrays
    when the source is already a per-device list, or a single NDArray.
    """
    for d_src, d_targets, axis in zip(data, targets, major_axis):
        arg_checks.batch_array(d_src, "forward")
        if isinstance(d_targets, nd.NDArray):
            d_src.copyto(d_targets)
        elif isinstance(d_src, (list, tuple)):
            for src, dst in zip(d_src, d_targets):
                src.copyto(dst)
        else:
            for slice_idx, d_dst in d_targets:
                if axis < 0:
                    d_src.copyto(d_dst)
                    continue
                whole = slice_idx.start == 0 and d_src.shape[axis] == slice_idx.stop
                if whole:
                    d_src.copyto(d_dst)
                elif axis == 0:
                    d_src[slice_idx.start:slice_idx.stop].copyto(d_dst)
                else:
                    part = nd.slice_axis(d_src, axis=axis, begin=slice_idx.start,
                                         end=slice_idx.stop)
                    part.copyto(d_dst)


def _per_device_lists(batches, targets, field):
    """For a list of pre-sliced batches (one per device): sources and targets per input."""
    sources = [[getattr(b, field)[i] for b in batches] for i in range(len(targets))]
    dests = [[dst for _, dst in d_target] for d_target in targets]
    return sources, dests


def _load_data(batch, targets, major_axis):
    """Copy a batch's data (or a per-device list of batches) into the device arrays."""
    if isinstance(batch, list):
        sources, dests = _per_device_lists(batch, targets, "data")
        _load_general(sources, dests, major_axis)
    else:
        _load_general(batch.data, targets, major_axis)


def _load_label(batch, targets, major_axis):
    """Copy a batch's labels (or a per-device list of batches) into the device arrays."""
    if isinstance(batch, list):
        sources, dests = _per_device_lists(batch, targets, "label")
        _load_general(sources, dests, major_axis)
    else:
        _load_general(batch.label, targets, major_axis)


def _merge_multi_context(outputs, major_axis):
    """Merge per-device arrays: one device -> its array; several -> concat on the axis."""
    rets = []
    for tensors, axis in zip(outputs, major_axis):
        if axis >= 0:
            if len(tensors) == 1:
                rets.append(tensors[0])
            else:
                first = tensors[0].context
                rets.append(nd.concat(*[t.as_in_context(first) for t in tensors], dim=axis))
        else:
            # not batched: every device holds the same thing
            rets.append(tensors[0])
    return rets


def _prepare_group2ctxs(group2ctxs, ctx_len):
    """Normalise ``group2ctxs`` to one ``{group: Context}`` dict (or None) per device."""
    if group2ctxs is None:
        return [None] * ctx_len
    if isinstance(group2ctxs, list):
        if len(group2ctxs) != ctx_len:
            raise ValueError('length of group2ctxs should be %d (one dict per device), got %d'
                             % (ctx_len, len(group2ctxs)))
        return group2ctxs
    if isinstance(group2ctxs, dict):
        ret = [{} for _ in range(ctx_len)]
        for group, value in group2ctxs.items():
            if isinstance(value, ctx.Context):
                ctxs = [value] * ctx_len
            elif len(value) == 1:
                ctxs = list(value) * ctx_len
            else:
                if len(value) != ctx_len:
                    raise ValueError('length of group2ctxs[%s] should be %d or 1, got %d'
                                     % (group, ctx_len, len(value)))
                ctxs = list(value)
            for i in range(ctx_len):
                ret[i][group] = ctxs[i]
        return ret
    raise TypeError('group2ctxs should be a list of dicts of str to Context, or a dict of str '
                    'to Context or list of Context, got %s' % type(group2ctxs).__name__)


class DataParallelExecutorGroup:
    """Executors over several devices for one symbol (data parallelism).

    Parameters
    ----------
    symbol : Symbol
    contexts : list of Context
    workload : list of float
        Relative share of the batch per context.
    data_shapes, label_shapes : list of DataDesc or (name, shape)
    param_names : list of str
        The arguments that are parameters (shared between buckets, updated by the optimizer).
    for_training, inputs_need_grad : bool
    shared_group : DataParallelExecutorGroup, optional
        Share parameter and gradient arrays, aux states and input pools with this group.
    logger : logging.Logger
    fixed_param_names : list of str
        Parameters that get no gradient.
    grad_req : str, list or dict
        'write', 'add' or 'null' (for parameters, and for data when ``inputs_need_grad``); a
        list gives one entry per argument; a dict overrides the defaults per name.
    state_names : list of str
        Inputs that are neither data nor label and are set with ``set_states``.
    group2ctxs : dict or list of dicts
        Placement of ``ctx_group`` attributes per device.
    """

    def __init__(self, symbol, contexts, workload, data_shapes, label_shapes, param_names,
                 for_training, inputs_need_grad, shared_group=None, logger=logging,
                 fixed_param_names=None, grad_req='write', state_names=None, group2ctxs=None):
        self.param_names = param_names
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()

        self.symbol = symbol
        self.contexts = contexts
        self.workload = workload
        self.group2ctxs = _prepare_group2ctxs(group2ctxs, len(contexts))

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad

        self.logger = logger
        # bytes the executors allocated for themselves (shared arrays not counted)
        self._total_exec_bytes = 0
        self.fixed_param_names = fixed_param_names if fixed_param_names is not None else []
        self.state_names = state_names if state_names is not None else []

        if not for_training:
            grad_req = 'null'

        data_shapes = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in data_shapes]
        if label_shapes is not None:
            label_shapes = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in label_shapes]
        self.grad_req = self._make_grad_req(grad_req, [x.name for x in data_shapes])

        if shared_group is not None:
            self.shared_data_arrays = shared_group.shared_data_arrays
        else:
            self.shared_data_arrays = [{} for _ in contexts]

        # filled by bind_exec
        self.batch_size = None
        self.slices = None
        self.execs = []
        self._default_execs = None
        self.data_arrays = None
        self.label_arrays = None
        self.param_arrays = None
        self.state_arrays = None
        self.grad_arrays = None
        self.aux_arrays = None
        self.input_grad_arrays = None

        self.data_shapes = None
        self.label_shapes = None
        self.data_names = None
        self.label_names = None
        self.data_layouts = None
        self.label_layouts = None
        self.output_names = self.symbol.list_outputs()
        self.num_outputs = len(self.output_names)
        self.output_layouts = [DataDesc.get_batch_axis(self.symbol[index].attr('__layout__'))
                               for index in range(self.num_outputs)]

        self.bind_exec(data_shapes, label_shapes, shared_group)

    def _make_grad_req(self, grad_req, data_names):
        """The per-argument gradient requirement dict (MXNET_SEMANTICS 2.4)."""
        def default(name, req):
            if name in self.param_names:
                return 'null' if name in self.fixed_param_names else req
            if name in data_names:
                return req if self.inputs_need_grad else 'null'
            return 'null'

        if isinstance(grad_req, str):
            return {name: default(name, grad_req) for name in self.arg_names}
        if isinstance(grad_req, (list, tuple)):
            if len(grad_req) != len(self.arg_names):
                raise ValueError("grad_req list must have one entry per argument (%d: %s), got "
                                 "%d" % (len(self.arg_names), self.arg_names, len(grad_req)))
            return dict(zip(self.arg_names, grad_req))
        if isinstance(grad_req, dict):
            reqs = {name: default(name, 'write') for name in self.arg_names}
            reqs.update(grad_req)
            return reqs
        raise ValueError('grad_req must be one of str, list, tuple, or dict, got %s'
                         % type(grad_req).__name__)

    # --- binding ---------------------------------------------------------------------------------
    def decide_slices(self, data_shapes):
        """Batch axis of each input; sets ``batch_size`` and ``slices`` from the first one."""
        if not data_shapes:
            raise ValueError("the executor group needs at least one data input")
        major_axis = [DataDesc.get_batch_axis(x.layout) for x in data_shapes]
        for (name, shape), axis in zip(data_shapes, major_axis):
            if axis == -1:
                continue
            batch_size = shape[axis]
            if self.batch_size is not None:
                if batch_size != self.batch_size:
                    raise MXNetError('all data must have the same batch size: batch_size = %d, '
                                     'but %s has shape %s' % (self.batch_size, name, shape))
            else:
                self.batch_size = batch_size
                self.slices = _split_input_slice(self.batch_size, self.workload)
        return major_axis

    def _collect_arrays(self):
        """Gather the per-device array lists the module works with."""
        execs = self.execs
        if self.slices:
            self.data_arrays = [[(self.slices[i], e.arg_dict[name]) for i, e in enumerate(execs)]
                                for name, _ in self.data_shapes]
        else:
            self.data_arrays = [[(slice(i, i + 1), e.arg_dict[name])
                                 for i, e in enumerate(execs)]
                                for name, _ in self.data_shapes]
        self.state_arrays = [[e.arg_dict[name] for e in execs] for name in self.state_names]
        if self.label_shapes is not None:
            self.label_arrays = [[(self.slices[i], e.arg_dict[name])
                                  for i, e in enumerate(execs)]
                                 for name, _ in self.label_shapes]
        else:
            self.label_arrays = None

        param_idx = [i for i, name in enumerate(self.arg_names) if name in self.param_names]
        self.param_arrays = [[e.arg_arrays[i] for e in execs] for i in param_idx]
        if self.for_training:
            self.grad_arrays = [[e.grad_arrays[i] for e in execs] for i in param_idx]
        else:
            self.grad_arrays = None

        data_names = [x[0] for x in self.data_shapes]
        if self.inputs_need_grad:
            self.input_grad_arrays = [[e.grad_arrays[self.arg_names.index(name)] for e in execs]
                                      for name in data_names if name in self.arg_names]
        else:
            self.input_grad_arrays = None

        self.aux_arrays = [[e.aux_arrays[i] for e in execs] for i in range(len(self.aux_names))]

    def bind_exec(self, data_shapes, label_shapes, shared_group=None, reshape=False):
        """Bind (or, with ``reshape``, re-shape) one executor per device."""
        if not reshape and self.execs:
            raise MXNetError("bind_exec: executors are already bound; use reshape=True")
        self.batch_size = None
        self.data_layouts = self.decide_slices(data_shapes)
        if label_shapes is not None:
            # labels are checked against the data's batch size
            self.label_layouts = self.decide_slices(label_shapes)

        for i in range(len(self.contexts)):
            data_shapes_i = self._sliced_shape(data_shapes, i, self.data_layouts)
            if label_shapes is not None:
                label_shapes_i = self._sliced_shape(label_shapes, i, self.label_layouts)
            else:
                label_shapes_i = []
            if reshape:
                shapes = {d.name: d.shape for d in data_shapes_i + label_shapes_i}
                self.execs[i] = self._default_execs[i].reshape(allow_up_sizing=True, **shapes)
            else:
                self.execs.append(self._bind_ith_exec(i, data_shapes_i, label_shapes_i,
                                                      shared_group))

        self.data_shapes = data_shapes
        self.label_shapes = label_shapes
        self.data_names = [i.name for i in self.data_shapes]
        if label_shapes is not None:
            self.label_names = [i.name for i in self.label_shapes]
        self._collect_arrays()

    def reshape(self, data_shapes, label_shapes):
        """Re-derive every executor for new input shapes; parameters stay the same arrays."""
        if data_shapes == self.data_shapes and label_shapes == self.label_shapes:
            return
        if self._default_execs is None:
            self._default_execs = list(self.execs)
        self.bind_exec(data_shapes, label_shapes, reshape=True)

    def _bind_ith_exec(self, i, data_shapes, label_shapes, shared_group):
        """Bind the executor of device ``i`` (sharing with ``shared_group``'s executor i)."""
        shared_exec = None if shared_group is None else shared_group.execs[i]
        context = self.contexts[i]
        shared_data_arrays = self.shared_data_arrays[i]

        input_shapes = {d.name: d.shape for d in data_shapes}
        if label_shapes is not None:
            input_shapes.update({d.name: d.shape for d in label_shapes})

        # a data variable's own __dtype__ attribute wins over the DataDesc's dtype
        input_types = {x.name: x.dtype for x in data_shapes}
        attr_dict = self.symbol.attr_dict()
        for name in self.symbol.list_inputs():
            dtype_attr = attr_dict.get(name, {}).get('__dtype__')
            if name in input_types and dtype_attr is not None and dtype_attr != '-1':
                input_types[name] = DTYPE_MX_TO_NP[int(dtype_attr)]
        if label_shapes is not None:
            input_types.update({x.name: x.dtype for x in label_shapes})

        executor = self.symbol.simple_bind(ctx=context, grad_req=self.grad_req,
                                           type_dict=input_types,
                                           shared_arg_names=self.param_names,
                                           shared_exec=shared_exec,
                                           group2ctx=self.group2ctxs[i],
                                           shared_buffer=shared_data_arrays, **input_shapes)
        # the memory this executor allocated for itself (what MXNet reads from debug_str)
        self._total_exec_bytes += int(executor._total_exec_bytes)
        return executor

    def _sliced_shape(self, shapes, i, major_axis):
        """The descs of device ``i``: the batch axis cut to the device's slice."""
        sliced = []
        for desc, axis in zip(shapes, major_axis):
            shape = list(desc.shape)
            if axis >= 0:
                shape[axis] = self.slices[i].stop - self.slices[i].start
            sliced.append(DataDesc(desc.name, tuple(shape), desc.dtype, desc.layout))
        return sliced

    # --- parameters --------------------------------------------------------------------------
    def set_params(self, arg_params, aux_params, allow_extra=False):
        """Copy parameter values into every device's executor."""
        for exec_ in self.execs:
            exec_.copy_params_from(arg_params, aux_params, allow_extra_params=allow_extra)

    def get_params(self, arg_params, aux_params):
        """Write the average over devices of every parameter / aux state into the given dicts
        (in place, cast to each destination's dtype)."""
        for names, blocks, dest in ((self.param_names, self.param_arrays, arg_params),
                                    (self.aux_names, self.aux_arrays, aux_params)):
            for name, block in zip(names, blocks):
                total = block[0].copyto(ctx.cpu())
                for w in block[1:]:
                    total += w.copyto(ctx.cpu())
                if len(block) > 1:
                    total /= len(block)
                target = dest[name]
                if total.dtype != target.dtype:
                    total = total.astype(target.dtype)
                total.copyto(target)

    # --- computation -------------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        """Load the batch into the devices and run every executor's forward pass."""
        _load_data(data_batch, self.data_arrays, self.data_layouts)
        if is_train is None:
            is_train = self.for_training

        if isinstance(data_batch, list):
            if self.label_arrays is not None and data_batch and data_batch[0].label:
                _load_label(data_batch, self.label_arrays, self.label_layouts)
        elif self.label_arrays is not None and getattr(data_batch, "label", None):
            _load_label(data_batch, self.label_arrays, self.label_layouts)

        for exec_ in self.execs:
            exec_.forward(is_train=is_train)

    def get_output_shapes(self):
        """``[(name, shape)]`` of the merged outputs (batch axis = full batch)."""
        shapes = [out.shape for out in self.execs[0].outputs]
        concat_shapes = []
        for key, the_shape, axis in zip(self.output_names, shapes, self.output_layouts):
            the_shape = list(the_shape)
            if axis >= 0:
                the_shape[axis] = self.batch_size
            concat_shapes.append((key, tuple(the_shape)))
        return concat_shapes

    def get_outputs(self, merge_multi_context=True, begin=0, end=None):
        """Outputs ``begin:end``: merged, or per output a list over devices."""
        if end is None:
            end = self.num_outputs
        outputs = [[exec_.outputs[i] for exec_ in self.execs] for i in range(begin, end)]
        if merge_multi_context:
            outputs = _merge_multi_context(outputs, self.output_layouts[begin:end])
        return outputs

    def get_states(self, merge_multi_context=True):
        """The state input arrays, per state a list over devices (merging is not supported)."""
        if merge_multi_context:
            raise MXNetError('merge_multi_context=True is not supported for get_states yet; '
                             'call get_states(merge_multi_context=False)')
        return self.state_arrays

    def set_states(self, states=None, value=None):
        """Set the states from per-device lists (``states``) or fill them with ``value``."""
        if states is not None:
            if value is not None:
                raise ValueError('Only one of states & value can be specified.')
            _load_general(states, self.state_arrays, (0,) * len(states))
        else:
            if value is None:
                raise ValueError('At least one of states & value must be specified.')
            for d_dst in self.state_arrays:
                for dst in d_dst:
                    dst[:] = value

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs, in the bound data order."""
        if not self.inputs_need_grad:
            raise NotBoundError("bind with inputs_need_grad=True before get_input_grads()")
        if merge_multi_context:
            return _merge_multi_context(self.input_grad_arrays, self.data_layouts)
        return self.input_grad_arrays

    def backward(self, out_grads=None):
        """Run every executor's backward pass; head gradients are sliced per device."""
        if not self.for_training:
            raise NotBoundError('re-bind with for_training=True to run backward')
        if out_grads is None:
            out_grads = []
        elif isinstance(out_grads, nd.NDArray):
            out_grads = [out_grads]
        for i, (exec_, islice) in enumerate(zip(self.execs, self.slices)):
            out_grads_slice = []
            for grad, axis in zip(out_grads, self.output_layouts):
                if axis >= 0 and not (islice.start == 0 and grad.shape[axis] == islice.stop):
                    part = nd.slice_axis(grad, axis=axis, begin=islice.start, end=islice.stop)
                    out_grads_slice.append(part.as_in_context(self.contexts[i]))
                else:
                    out_grads_slice.append(grad.as_in_context(self.contexts[i]))
            exec_.backward(out_grads=out_grads_slice)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` once per device with that device's labels and outputs."""
        label_layouts = self.label_layouts if self.label_layouts is not None else []
        labels = labels if labels is not None else []
        for current_exec, (texec, islice) in enumerate(zip(self.execs, self.slices)):
            if not pre_sliced:
                labels_slice = []
                for label, axis in zip(labels, label_layouts):
                    if axis == 0:
                        labels_slice.append(label[islice])
                    elif axis > 0:
                        part = nd.slice_axis(label, axis=axis, begin=islice.start,
                                             end=islice.stop)
                        labels_slice.append(part.as_in_context(label.context))
                    else:
                        labels_slice.append(label)
            else:
                labels_slice = labels[current_exec]

            labels_ = OrderedDict(zip(self.label_names or [], labels_slice))
            preds = OrderedDict(zip(self.output_names, texec.outputs))
            eval_metric.update_dict(labels_, preds)

    def install_monitor(self, mon):
        """Install a monitor on every device's executor."""
        for exe in self.execs:
            mon.install(exe)
