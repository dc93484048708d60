"""DataParallelExecutorGroup: one executor per device, a batch split between them.

Each device gets a consecutive part of the batch, sized by its work load. Every input has a
batch axis (the position of 'N' in its ``DataDesc.layout``; -1 means the input is not split)
and every output one too (its ``__layout__`` attribute). One helper, :func:`_batch_part`, cuts
a part out along such an axis: it serves the inputs going in, the head gradients of
``backward`` and the labels of ``update_metric``. Outputs coming back are concatenated along
their axis.

Several ``cpu(i)`` contexts behave as separate replicas: each executor owns its arrays (they
report their own context); parameters are kept equal across replicas by the updates.

With ``shared_group`` (BucketingModule's buckets) a new group reuses the shared group's
executors' parameter arrays *and* their gradient arrays (so ``grad_req='add'`` accumulates
across buckets) and aux states, and takes over its per-device pools of non-parameter input
memory (``shared_data_arrays``: the same dict objects).
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
    """Cut ``range(batch_size)`` into one consecutive slice per work load.

    A device's share is its load's fraction of the batch, rounded with Python's ``round``
    (ties to even); when the rounded shares add up to less than the batch, the last device
    takes the remainder. A share that comes out empty is a ValueError.
    """
    total_load = sum(work_load_list)
    sizes = [round(load * batch_size / total_load) for load in work_load_list]
    sizes[-1] += max(0, batch_size - sum(sizes))
    slices, begin = [], 0
    for size in sizes:
        end = int(min(begin + size, batch_size))
        if end <= begin:
            raise ValueError('Too many slices. Some splits are empty (batch size %d over '
                             'work loads %s).' % (batch_size, list(work_load_list)))
        slices.append(slice(begin, end))
        begin = end
    return slices


def _batch_part(array, axis, part):
    """The rows ``part`` (a slice) of ``array`` along its batch ``axis``.

    The array itself when it is not split (``axis < 0``) or when ``part`` covers all of it;
    a view for axis 0; a copy for any other axis.
    """
    if axis < 0 or (part.start == 0 and part.stop == array.shape[axis]):
        return array
    if axis == 0:
        return array[part.start:part.stop]
    return nd.slice_axis(array, axis=axis, begin=part.start, end=part.stop)


def _with_batch_size(shape, axis, size):
    """``shape`` with its batch axis set to ``size`` (unchanged when ``axis < 0``)."""
    if axis < 0:
        return tuple(shape)
    return tuple(shape[:axis]) + (size,) + tuple(shape[axis + 1:])


def _merge_devices(per_output, axes):
    """One array per output from the per-device arrays: one device's array as it is,
    several concatenated along the output's batch axis (on the first device's context).
    An output with no batch axis is the same on every device: the first is taken."""
    merged = []
    for copies, axis in zip(per_output, axes):
        if axis < 0 or len(copies) == 1:
            merged.append(copies[0])
            continue
        home = copies[0].context
        merged.append(nd.concat(*[c.as_in_context(home) for c in copies], dim=axis))
    return merged


def _prepare_group2ctxs(group2ctxs, ctx_len):
    """One ``{group: Context}`` dict (or None) per device from the user's ``group2ctxs``.

    A list must hold one dict per device. A dict maps each group to a Context, to a list of
    one Context (the same on every device) or to a list of one Context per device.
    """
    if group2ctxs is None:
        return [None] * ctx_len
    if isinstance(group2ctxs, list):
        if len(group2ctxs) != ctx_len:
            raise ValueError('length of group2ctxs should be %d (one dict per device), got %d'
                             % (ctx_len, len(group2ctxs)))
        return group2ctxs
    if not isinstance(group2ctxs, dict):
        raise TypeError('group2ctxs should be a list of dicts of str to Context, or a dict of '
                        'str to Context or list of Context, got %s' % type(group2ctxs).__name__)
    per_device = [{} for _ in range(ctx_len)]
    for group, placement in group2ctxs.items():
        if isinstance(placement, ctx.Context):
            placement = [placement]
        placement = list(placement)
        if len(placement) == 1:
            placement = placement * ctx_len
        elif len(placement) != ctx_len:
            raise ValueError('length of group2ctxs[%s] should be %d or 1, got %d'
                             % (group, ctx_len, len(placement)))
        for device_map, device_ctx in zip(per_device, placement):
            device_map[group] = device_ctx
    return per_device


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
        self.symbol = symbol
        self.contexts = contexts
        self.workload = workload
        self.group2ctxs = _prepare_group2ctxs(group2ctxs, len(contexts))
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.logger = logger

        self.param_names = param_names
        self.fixed_param_names = fixed_param_names or []
        self.state_names = state_names or []
        self.arg_names, self.aux_names = symbol._argument_and_aux_names()
        self.output_names = symbol.list_outputs()
        self.num_outputs = len(self.output_names)
        self.output_layouts = [DataDesc.get_batch_axis(symbol[k].attr('__layout__'))
                               for k in range(self.num_outputs)]

        data_shapes = [_as_desc(d) for d in data_shapes]
        if label_shapes is not None:
            label_shapes = [_as_desc(d) for d in label_shapes]
        self.grad_req = self._make_grad_req(grad_req if for_training else 'null',
                                            [d.name for d in data_shapes])
        # per device: the memory of non-parameter inputs, shared by every bucket
        self.shared_data_arrays = (shared_group.shared_data_arrays if shared_group is not None
                                   else [{} for _ in contexts])
        # bytes the executors allocated for themselves (shared arrays not counted)
        self._total_exec_bytes = 0

        self.execs = []
        self._default_execs = None
        self.batch_size = self.slices = None
        self.data_shapes = self.label_shapes = None
        self.data_names = self.label_names = None
        self.data_layouts = self.label_layouts = None
        self.data_arrays = self.label_arrays = self.state_arrays = None
        self.param_arrays = self.grad_arrays = self.aux_arrays = None
        self.input_grad_arrays = None
        self.bind_exec(data_shapes, label_shapes, shared_group)

    def _make_grad_req(self, grad_req, data_names):
        """The gradient request of every argument, as a dict.

        A string applies to trainable parameters (fixed ones get 'null') and, when
        ``inputs_need_grad``, to the data inputs; every other argument gets 'null'. A list
        gives each argument's request in argument order. A dict starts from the string form
        with 'write' and replaces the requests it names.
        """
        if isinstance(grad_req, (list, tuple)):
            if len(grad_req) != len(self.arg_names):
                raise ValueError("grad_req list must have one entry per argument (%d: %s), got "
                                 "%d" % (len(self.arg_names), self.arg_names, len(grad_req)))
            return dict(zip(self.arg_names, grad_req))
        if isinstance(grad_req, dict):
            requests = self._make_grad_req('write', data_names)
            requests.update(grad_req)
            return requests
        if not isinstance(grad_req, str):
            raise ValueError('grad_req must be one of str, list, tuple, or dict, got %s'
                             % type(grad_req).__name__)
        trained = set(self.param_names) - set(self.fixed_param_names)
        if self.inputs_need_grad:
            trained |= set(data_names) - set(self.param_names)
        return {name: grad_req if name in trained else 'null' for name in self.arg_names}

    # --- binding ---------------------------------------------------------------------------------
    def decide_slices(self, data_shapes):
        """Return the batch axis of every input in ``data_shapes``.

        The first split input fixes ``batch_size`` and the per-device ``slices``; a later one
        with another batch size is an MXNetError.
        """
        if not data_shapes:
            raise ValueError("the executor group needs at least one data input")
        axes = [DataDesc.get_batch_axis(desc.layout) for desc in data_shapes]
        for desc, axis in zip(data_shapes, axes):
            if axis < 0:
                continue
            size = desc.shape[axis]
            if self.batch_size is None:
                self.batch_size = size
                self.slices = _split_input_slice(size, self.workload)
            elif size != self.batch_size:
                raise MXNetError('all data must have the same batch size: batch_size = %d, '
                                 'but %s has shape %s' % (self.batch_size, desc.name, desc.shape))
        return axes

    def bind_exec(self, data_shapes, label_shapes, shared_group=None, reshape=False):
        """Bind one executor per device (or, with ``reshape``, re-shape the bound ones)."""
        if self.execs and not reshape:
            raise MXNetError("bind_exec: executors are already bound; use reshape=True")
        self.batch_size = None
        self.data_layouts = self.decide_slices(data_shapes)
        if label_shapes is not None:
            # the labels must agree with the data's batch size
            self.label_layouts = self.decide_slices(label_shapes)

        for device in range(len(self.contexts)):
            descs = self._device_descs(data_shapes, self.data_layouts, device)
            if label_shapes is not None:
                descs += self._device_descs(label_shapes, self.label_layouts, device)
            if reshape:
                shapes = {desc.name: desc.shape for desc in descs}
                self.execs[device] = self._default_execs[device].reshape(allow_up_sizing=True,
                                                                         **shapes)
            else:
                self.execs.append(self._bind_device(device, descs, len(data_shapes),
                                                    shared_group))

        self.data_shapes, self.label_shapes = data_shapes, label_shapes
        self.data_names = [desc.name for desc in data_shapes]
        if label_shapes is not None:
            self.label_names = [desc.name for desc in label_shapes]
        self._collect_arrays()

    def reshape(self, data_shapes, label_shapes):
        """Re-derive every executor for new input shapes; parameters stay the same arrays."""
        if data_shapes == self.data_shapes and label_shapes == self.label_shapes:
            return
        if self._default_execs is None:
            # reshapes always start from the executors bound first
            self._default_execs = list(self.execs)
        self.bind_exec(data_shapes, label_shapes, reshape=True)

    def _device_descs(self, descs, axes, device):
        """``descs`` as device ``device`` sees them: split axes cut to its share."""
        share = None
        if self.slices is not None:
            share = self.slices[device].stop - self.slices[device].start
        return [DataDesc(desc.name, _with_batch_size(desc.shape, axis, share), desc.dtype,
                         desc.layout) for desc, axis in zip(descs, axes)]

    def _bind_device(self, device, descs, num_data, shared_group):
        """Bind the executor of ``device`` for its input ``descs`` (the first ``num_data`` are
        data, the rest labels), sharing with ``shared_group``'s executor on that device."""
        declared = self.symbol.attr_dict()
        types = {}
        for position, desc in enumerate(descs):
            # a data variable's own __dtype__ attribute wins over the description's dtype
            dtype_attr = declared.get(desc.name, {}).get('__dtype__')
            if position < num_data and dtype_attr not in (None, '-1'):
                types[desc.name] = DTYPE_MX_TO_NP[int(dtype_attr)]
            else:
                types[desc.name] = desc.dtype
        executor = self.symbol.simple_bind(
            ctx=self.contexts[device], grad_req=self.grad_req, type_dict=types,
            shared_arg_names=self.param_names,
            shared_exec=None if shared_group is None else shared_group.execs[device],
            group2ctx=self.group2ctxs[device], shared_buffer=self.shared_data_arrays[device],
            **{desc.name: desc.shape for desc in descs})
        self._total_exec_bytes += int(executor._total_exec_bytes)
        return executor

    def _collect_arrays(self):
        """Index the executors' arrays by input, parameter and aux state, one list entry per
        device (the data and label lists pair each device array with its batch slice)."""
        execs = self.execs

        def per_device(name):
            return [executor.arg_dict[name] for executor in execs]

        slices = self.slices or [slice(k, k + 1) for k in range(len(execs))]
        self.data_arrays = [list(zip(slices, per_device(name))) for name in self.data_names]
        self.label_arrays = None
        if self.label_shapes is not None:
            self.label_arrays = [list(zip(self.slices, per_device(name)))
                                 for name in self.label_names]
        self.state_arrays = [per_device(name) for name in self.state_names]

        position = {name: k for k, name in enumerate(self.arg_names)}
        params = [position[name] for name in self.arg_names if name in self.param_names]
        self.param_arrays = [[e.arg_arrays[k] for e in execs] for k in params]
        self.grad_arrays = None
        if self.for_training:
            self.grad_arrays = [[e.grad_arrays[k] for e in execs] for k in params]
        self.input_grad_arrays = None
        if self.inputs_need_grad:
            self.input_grad_arrays = [[e.grad_arrays[position[name]] for e in execs]
                                      for name in self.data_names if name in position]
        self.aux_arrays = [[e.aux_arrays[k] for e in execs] for k in range(len(self.aux_names))]

    # --- parameters --------------------------------------------------------------------------
    def set_params(self, arg_params, aux_params, allow_extra=False):
        """Copy parameter values into every device's executor."""
        for executor in self.execs:
            executor.copy_params_from(arg_params, aux_params, allow_extra_params=allow_extra)

    def get_params(self, arg_params, aux_params):
        """Store the mean over devices of every parameter and aux state into the given dicts,
        in place and in each destination's dtype."""
        for name, copies in zip(self.param_names, self.param_arrays):
            _store_mean(copies, arg_params[name])
        for name, copies in zip(self.aux_names, self.aux_arrays):
            _store_mean(copies, aux_params[name])

    # --- computation -------------------------------------------------------------------------
    def _load_inputs(self, data_batch, field, placements, axes):
        """Copy the batch's ``field`` ('data' or 'label') into the device arrays.

        ``data_batch`` is one batch, cut here per device, or a list of batches that are
        already one per device.
        """
        if isinstance(data_batch, list):
            for position, targets in enumerate(placements):
                for device_batch, (_, target) in zip(data_batch, targets):
                    getattr(device_batch, field)[position].copyto(target)
            return
        for source, axis, targets in zip(getattr(data_batch, field), axes, placements):
            arg_checks.batch_array(source, "forward")
            for part, target in targets:
                _batch_part(source, axis, part).copyto(target)

    def forward(self, data_batch, is_train=None):
        """Load the batch into the devices and run every executor's forward pass."""
        self._load_inputs(data_batch, 'data', self.data_arrays, self.data_layouts)
        if self.label_arrays is not None:
            if isinstance(data_batch, list):
                has_labels = bool(data_batch and data_batch[0].label)
            else:
                has_labels = bool(getattr(data_batch, "label", None))
            if has_labels:
                self._load_inputs(data_batch, 'label', self.label_arrays, self.label_layouts)
        if is_train is None:
            is_train = self.for_training
        for executor in self.execs:
            executor.forward(is_train=is_train)

    def get_output_shapes(self):
        """``[(name, shape)]`` of the merged outputs (batch axis = full batch)."""
        return [(name, _with_batch_size(out.shape, axis, self.batch_size))
                for name, out, axis in zip(self.output_names, self.execs[0].outputs,
                                           self.output_layouts)]

    def get_outputs(self, merge_multi_context=True, begin=0, end=None):
        """Outputs ``begin:end``: merged, or per output a list over devices."""
        end = self.num_outputs if end is None else end
        per_output = [[executor.outputs[k] for executor in self.execs]
                      for k in range(begin, end)]
        if not merge_multi_context:
            return per_output
        return _merge_devices(per_output, self.output_layouts[begin:end])

    def get_states(self, merge_multi_context=True):
        """The state input arrays, per state a list over devices (merging is not supported)."""
        if merge_multi_context:
            raise MXNetError('merge_multi_context=True is not supported for get_states yet; '
                             'call get_states(merge_multi_context=False)')
        return self.state_arrays

    def set_states(self, states=None, value=None):
        """Set the states from per-device lists (``states``) or fill them with ``value``."""
        if states is None and value is None:
            raise ValueError('At least one of states & value must be specified.')
        if states is not None and value is not None:
            raise ValueError('Only one of states & value can be specified.')
        for position, targets in enumerate(self.state_arrays):
            if states is None:
                for target in targets:
                    target[:] = value
            elif position < len(states):
                for source, target in zip(states[position], targets):
                    source.copyto(target)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs, in the bound data order."""
        if not self.inputs_need_grad:
            raise NotBoundError("bind with inputs_need_grad=True before get_input_grads()")
        if merge_multi_context:
            return _merge_devices(self.input_grad_arrays, self.data_layouts)
        return self.input_grad_arrays

    def backward(self, out_grads=None):
        """Run every executor's backward pass with its part of the head gradients."""
        if not self.for_training:
            raise NotBoundError('re-bind with for_training=True to run backward')
        if isinstance(out_grads, nd.NDArray):
            out_grads = [out_grads]
        heads = out_grads or []
        for executor, part, device_ctx in zip(self.execs, self.slices, self.contexts):
            executor.backward(out_grads=[
                _batch_part(grad, axis, part).as_in_context(device_ctx)
                for grad, axis in zip(heads, self.output_layouts)])

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` once per device with that device's labels and outputs.

        ``pre_sliced`` labels are already one list per device; otherwise each label is cut
        to the device's part of the batch.
        """
        label_axes = self.label_layouts or []
        labels = labels if labels is not None else []
        for device, (executor, part) in enumerate(zip(self.execs, self.slices)):
            if pre_sliced:
                device_labels = labels[device]
            else:
                device_labels = [_batch_part(label, axis, part)
                                 for label, axis in zip(labels, label_axes)]
            eval_metric.update_dict(OrderedDict(zip(self.label_names or [], device_labels)),
                                    OrderedDict(zip(self.output_names, executor.outputs)))

    def install_monitor(self, mon):
        """Install a monitor on every device's executor."""
        for executor in self.execs:
            mon.install(executor)


def _as_desc(item):
    """A DataDesc from a DataDesc or a ``(name, shape)`` pair."""
    return item if isinstance(item, DataDesc) else DataDesc(*item)


def _store_mean(copies, target):
    """Write the mean of one array's device copies into the host array ``target``, converted
    to ``target``'s dtype."""
    mean = copies[0].copyto(ctx.cpu())
    if len(copies) > 1:
        for other in copies[1:]:
            mean += other.copyto(ctx.cpu())
        mean /= len(copies)
    if mean.dtype != target.dtype:
        mean = mean.astype(target.dtype)
    mean.copyto(target)
