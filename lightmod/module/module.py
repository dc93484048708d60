"""Module: a Symbol bound to one or more devices, trained with an optimizer.

Lifecycle: ``bind`` (executors for given input shapes) -> ``init_params`` (or ``set_params``,
or ``Module.load``) -> ``init_optimizer`` -> ``forward``/``backward``/``update``.

The module keeps a CPU copy of the parameters (``_arg_params``/``_aux_params``, the dicts
``get_params`` returns); the devices hold the working copies. ``update()`` makes the cache stale
(``_params_dirty``); ``get_params`` refreshes it in place with the average over devices.
"""
import logging
import warnings

from .. import arg_checks
from .. import context as ctx
from .. import ndarray as nd
from .. import optimizer as opt
from ..base import NotBoundError, atomic_write
from ..initializer import InitDesc, Uniform
from ..io import DataDesc
from ..model import (_check_loaded_optimizer_states, _create_kvstore, _initialize_kvstore,
                     _update_params, _update_params_on_kvstore, checkpoint_states_file,
                     load_checkpoint, write_checkpoint)
from ..ndarray import zeros
from .base_module import BaseModule, _check_input_names, _check_lifecycle, _parse_data_desc
from .executor_group import DataParallelExecutorGroup

__all__ = ["Module"]


def _from_checkpoint(module_class, prefix, epoch, load_optimizer_states, kwargs):
    """``load`` of Module and its subclasses: ``module_class(symbol=<prefix-symbol.json>,
    **kwargs)`` holding the parameters of ``prefix-%04d.params`` as initialised ones, and
    reading ``prefix-%04d.states`` in ``init_optimizer`` when ``load_optimizer_states``."""
    sym, args, auxs = load_checkpoint(prefix, epoch)
    mod = module_class(symbol=sym, **kwargs)
    mod._arg_params = args
    mod._aux_params = auxs
    mod.params_initialized = True
    if load_optimizer_states:
        mod._preload_opt_states = checkpoint_states_file(prefix, epoch)
    return mod


class Module(BaseModule):
    """A module over one Symbol.

    Parameters
    ----------
    symbol : Symbol
    data_names : list of str
        Inputs fed from ``DataBatch.data`` (default ``('data',)``).
    label_names : list of str
        Inputs fed from ``DataBatch.label`` (default ``('softmax_label',)``; names the symbol
        lacks only warn, so ``None`` and the default both work for label-less nets).
    logger : Logger
    context : Context or list of Context
        One executor per context; the batch is split between them.
    work_load_list : list of number
        Relative batch share per context (default: equal).
    fixed_param_names : list of str
        Parameters that are not trained (no gradient, no update).
    state_names : list of str
        Inputs that are neither data nor label; set them with ``set_states``.
    group2ctxs : dict or list of dict
        Placement of ``ctx_group`` attributes (see DataParallelExecutorGroup).
    compression_params : dict
        Gradient compression for the kvstore (``{'type': '2bit', 'threshold': 0.5}``).
    """

    def __init__(self, symbol, data_names=('data',), label_names=('softmax_label',),
                 logger=logging, context=ctx.cpu(), work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None,
                 compression_params=None):
        arg_checks.symbol(symbol, "Module")
        arg_checks.contexts(context, "Module")
        super().__init__(logger=logger)

        if isinstance(context, ctx.Context):
            context = [context]
        self._context = context
        if work_load_list is None:
            work_load_list = [1] * len(self._context)
        if len(work_load_list) != len(self._context):
            raise ValueError("work_load_list has %d entries for %d contexts"
                             % (len(work_load_list), len(self._context)))
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs

        self._symbol = symbol

        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []

        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)

        arg_names = symbol.list_arguments()
        input_names = data_names + label_names + state_names
        self._param_names = [x for x in arg_names if x not in input_names]
        self._fixed_param_names = fixed_param_names
        self._aux_names = symbol.list_auxiliary_states()
        self._data_names = data_names
        self._label_names = label_names
        self._state_names = state_names
        self._output_names = symbol.list_outputs()

        self._arg_params = None
        self._aux_params = None
        self._params_dirty = False

        self._compression_params = compression_params
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._preload_opt_states = None
        self._grad_req = None

        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    # --- checkpoints ---------------------------------------------------------------------------
    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, **kwargs):
        """A Module from ``prefix-symbol.json`` and ``prefix-%04d.params``.

        The parameters count as initialised; bind it before use. With
        ``load_optimizer_states`` the ``prefix-%04d.states`` file is read when
        ``init_optimizer`` runs. ``kwargs`` go to the Module constructor.
        """
        return _from_checkpoint(Module, prefix, epoch, load_optimizer_states, kwargs)

    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False, remove_amp_cast=True):
        """Write ``prefix-symbol.json``, ``prefix-%04d.params`` and, if asked, the optimizer
        states ``prefix-%04d.states``, as one unit (``mx.model.write_checkpoint``)."""
        write_checkpoint(prefix, epoch,
                         lambda fname: self._symbol.save(fname, remove_amp_cast=remove_amp_cast),
                         self.save_params,
                         self.save_optimizer_states if save_optimizer_states else None)
        logging.info('Saved checkpoint to "%s-%04d.params"', prefix, epoch)

    def _reset_bind(self):
        """Forget the executors (parameters and optimizer are kept)."""
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    # --- names and shapes ----------------------------------------------------------------------
    @property
    def data_names(self):
        return self._data_names

    @property
    def label_names(self):
        return self._label_names

    @property
    def output_names(self):
        return self._output_names

    @property
    def data_shapes(self):
        _check_lifecycle(self, "data_shapes")
        return self._data_shapes

    @property
    def label_shapes(self):
        _check_lifecycle(self, "label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self):
        _check_lifecycle(self, "output_shapes")
        return self._exec_group.get_output_shapes()

    # --- parameters --------------------------------------------------------------------------
    def get_params(self):
        """``(arg_params, aux_params)``: the module's own cache dicts, refreshed from the
        devices (average over devices) when stale. Copy them to keep a snapshot."""
        _check_lifecycle(self, "get_params()", params=True, bound=False)
        if self._params_dirty:
            self._sync_params_from_devices()
        return self._arg_params, self._aux_params

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise parameters and aux states, then copy them to every device.

        Names are visited in sorted order (which fixes the sequence of random draws). A name in
        ``arg_params``/``aux_params`` is copied from there; a name missing from a given dict
        raises RuntimeError unless ``allow_missing`` (then ``initializer`` fills it). Already
        initialised and not ``force_init``: a warning, nothing else.
        """
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "init_params call ignored.", stacklevel=2)
            return
        _check_lifecycle(self, "init_params()")

        def _impl(name, arr, cache):
            if cache is not None:
                if name in cache:
                    cache_arr = cache[name]
                    if cache_arr is not arr:
                        arg_checks.same_shape(name, cache_arr, arr, "init_params/set_params")
                        cache_arr.copyto(arr)
                else:
                    if not allow_missing:
                        raise RuntimeError("%s is not presented" % name)
                    if initializer is not None:
                        initializer(name, arr)
            else:
                initializer(name, arr)

        attrs = self._symbol.attr_dict()
        for name, arr in sorted(self._arg_params.items()):
            _impl(InitDesc(name, attrs.get(name, None)), arr, arg_params)
        for name, arr in sorted(self._aux_params.items()):
            _impl(InitDesc(name, attrs.get(name, None)), arr, aux_params)

        self.params_initialized = True
        self._params_dirty = False
        self._exec_group.set_params(self._arg_params, self._aux_params, allow_extra=allow_extra)

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter values.

        ``allow_missing=False``: every parameter must be in the dicts (RuntimeError otherwise);
        extra names are ignored. ``allow_missing=True``: the dicts go straight to the devices;
        extra names raise ValueError unless ``allow_extra``, missing ones keep their values.
        """
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init,
                             allow_extra=allow_extra)
            return

        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
            return
        _check_lifecycle(self, "set_params()")
        self._exec_group.set_params(arg_params, aux_params, allow_extra=allow_extra)
        # the devices now hold values the cache has not seen
        self._params_dirty = True
        self.params_initialized = True

    # --- binding -----------------------------------------------------------------------------
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Create the executors for ``data_shapes`` (and ``label_shapes``).

        ``force_rebind`` drops existing executors (parameters and optimizer are kept; note that
        un-synced device updates are lost unless ``get_params()`` ran first). With
        ``shared_module`` (a bound, initialised Module) the parameters, their gradients and the
        input memory pools are shared with it (bucketing).
        """
        if force_rebind:
            self._reset_bind()

        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return

        if not for_training and inputs_need_grad:
            raise ValueError("bind(): inputs_need_grad=True requires for_training=True")

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req

        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)

        if shared_module is not None:
            if not isinstance(shared_module, Module):
                raise TypeError("shared_module must be a Module, got %s"
                                % type(shared_module).__name__)
            _check_lifecycle(shared_module, "binding another module to it (shared_module)",
                             params=True)
            shared_group = shared_module._exec_group
            if len(shared_group.execs) < len(self._context):
                raise ValueError("shared_module has %d executors, fewer than this module's %d "
                                 "contexts" % (len(shared_group.execs), len(self._context)))
        else:
            shared_group = None

        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes,
            self._label_shapes, self._param_names, for_training, inputs_need_grad,
            shared_group, logger=self.logger, fixed_param_names=self._fixed_param_names,
            grad_req=grad_req, group2ctxs=self._group2ctxs, state_names=self._state_names)
        self._total_exec_bytes = self._exec_group._total_exec_bytes
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            # re-binding: copy the cached parameters into the new executors
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            if self._arg_params is not None or self._aux_params is not None:
                raise ValueError("bind(): parameters were assigned without params_initialized")
            self._arg_params = {
                name: zeros(shape=x[0].shape, dtype=x[0].dtype, stype=x[0].stype)
                for name, x in zip(self._param_names, self._exec_group.param_arrays)}
            self._aux_params = {
                name: zeros(x[0].shape, dtype=x[0].dtype)
                for name, x in zip(self._aux_names, self._exec_group.aux_arrays)}

        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)

        self.binded = True

    def reshape(self, data_shapes, label_shapes=None):
        """Re-shape the executors for new input shapes; parameters are kept."""
        _check_lifecycle(self, "reshape()")
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        self._exec_group.reshape(self._data_shapes, self._label_shapes)

    # --- optimizer ---------------------------------------------------------------------------
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install the optimizer and decide where updates run (MXNET_SEMANTICS 2.6).

        ``rescale_grad`` is ``1/(total batch size x dist workers)`` and stays fixed afterwards.
        A string optimizer is created with the symbol (lr/wd multipliers, no weight decay for
        non-weight params) and ``idx2name``; an Optimizer object is used as given (only a
        warning if its rescale_grad differs; ``idx2name`` filled in if empty).
        """
        _check_lifecycle(self, "init_optimizer()", params=True)
        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring...')
            return

        if self._params_dirty:
            self._sync_params_from_devices()

        (kvstore, update_on_kvstore) = _create_kvstore(kvstore, len(self._context),
                                                       self._arg_params)

        batch_size = self._exec_group.batch_size
        if kvstore and 'dist' in kvstore.type and '_sync' in kvstore.type:
            batch_size *= kvstore.num_workers
        rescale_grad = 1.0 / batch_size

        idx2name = {}
        if update_on_kvstore:
            idx2name.update(enumerate(self._exec_group.param_names))
        else:
            num_device = len(self._context)
            for k in range(num_device):
                idx2name.update({i * num_device + k: n
                                 for i, n in enumerate(self._exec_group.param_names)})
        if isinstance(optimizer, str):
            optimizer_params = dict(optimizer_params)
            if 'rescale_grad' not in optimizer_params:
                optimizer_params['rescale_grad'] = rescale_grad
            optimizer = opt.create(optimizer, sym=self.symbol, param_idx2name=idx2name,
                                   **optimizer_params)
        else:
            if not isinstance(optimizer, opt.Optimizer):
                raise TypeError("optimizer must be a str or an Optimizer, got %s"
                                % type(optimizer).__name__)
            if optimizer.rescale_grad != rescale_grad:
                warnings.warn(
                    "Optimizer created manually outside Module but rescale_grad "
                    "is not normalized to 1.0/batch_size/num_workers (%s vs. %s). "
                    "Is this intended?" % (optimizer.rescale_grad, rescale_grad), stacklevel=2)
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name.copy()

        self._optimizer = optimizer
        self._kvstore = kvstore
        self._update_on_kvstore = update_on_kvstore
        self._updater = None
        # the updater's key of each parameter, shared with modules that borrow the optimizer
        self._optimizer_positions = {n: i for i, n in enumerate(self._exec_group.param_names)}

        if kvstore:
            if self._compression_params:
                kvstore.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kvstore.set_optimizer(self._optimizer)
            # copy initialized local parameters to kvstore
            _initialize_kvstore(kvstore=kvstore, param_arrays=self._exec_group.param_arrays,
                                arg_params=self._arg_params, param_names=self._param_names,
                                update_on_kvstore=update_on_kvstore)
        if not update_on_kvstore:
            self._updater = opt.get_updater(optimizer)

        self.optimizer_initialized = True

        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module):
        """Use ``shared_module``'s optimizer, kvstore and updater (bucketing)."""
        _check_lifecycle(shared_module, "borrow_optimizer() from it", bound=False,
                         optimizer=True)
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        # A bucket may hold a subset of the shared module's parameters, in another order:
        # key each parameter's optimizer state by its position in the module that created
        # the optimizer (MXNet keys it by the position in each bucket, so buckets with
        # different parameter lists would mix up their optimizer states).
        positions = getattr(shared_module, "_optimizer_positions", None)
        if positions is not None and self._exec_group is not None:
            for name in self._exec_group.param_names:
                if name not in positions:
                    positions[name] = len(positions)
                    if not self._update_on_kvstore:
                        num_device = len(self._context)
                        for k in range(num_device):
                            self._optimizer.idx2name[positions[name] * num_device + k] = name
        self._optimizer_positions = positions
        self.optimizer_initialized = True

    # --- computation -------------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        """Forward computation; re-shapes the executors first if the batch's shapes differ
        from the bound ones. ``is_train=None`` means "as bound" (``for_training``)."""
        _check_lifecycle(self, "forward()", params=True)

        curr_data_shapes = tuple(i.shape for i in self._data_shapes)
        if isinstance(data_batch, list):
            if not data_batch:
                raise ValueError("forward(): encountered an empty list of data batches")
            new_data_shapes = []
            for i in range(len(data_batch[0].data)):
                shape = data_batch[0].data[i].shape
                for db in data_batch:
                    if shape != db.data[i].shape:
                        raise ValueError("All data batches in a list need to have the same "
                                         "shape (%s vs. %s)" % (shape, db.data[i].shape))
                new_batch_size = len(data_batch) * shape[0]
                new_data_shapes.append((new_batch_size,) + shape[1:])
            new_data_shapes = tuple(new_data_shapes)
        else:
            new_data_shapes = tuple(i.shape for i in data_batch.data)

        if curr_data_shapes != new_data_shapes:
            if hasattr(data_batch, "provide_data") and data_batch.provide_data:
                new_dshape = data_batch.provide_data
            else:
                new_dshape = [DataDesc(i.name, shape, i.dtype, i.layout)
                              for i, shape in zip(self._data_shapes, new_data_shapes)]

            if hasattr(data_batch, "provide_label") and data_batch.provide_label:
                new_lshape = data_batch.provide_label
            elif (hasattr(data_batch, "label") and data_batch.label
                  and self._label_shapes is not None):
                new_lshape = [DataDesc(i.name, j.shape, i.dtype, i.layout)
                              for i, j in zip(self._label_shapes, data_batch.label)]
            else:
                new_lshape = None

            self.reshape(new_dshape, new_lshape)

        self._exec_group.forward(data_batch, is_train)

    def backward(self, out_grads=None):
        """Backward computation; ``out_grads`` are head gradients of non-loss outputs."""
        _check_lifecycle(self, "backward()", params=True)
        self._exec_group.backward(out_grads=out_grads)

    def update(self):
        """Apply the optimizer to the last gradients (on the kvstore or here)."""
        _check_lifecycle(self, "update()", params=True, optimizer=True)
        self._params_dirty = True
        if self._update_on_kvstore:
            _update_params_on_kvstore(self._exec_group.param_arrays,
                                      self._exec_group.grad_arrays,
                                      self._kvstore, self._exec_group.param_names)
        else:
            positions = getattr(self, "_optimizer_positions", None)
            _update_params(self._exec_group.param_arrays,
                           self._exec_group.grad_arrays,
                           updater=self._updater,
                           num_device=len(self._context),
                           kvstore=self._kvstore,
                           param_names=self._exec_group.param_names,
                           param_positions=None if positions is None else
                           [positions[n] for n in self._exec_group.param_names])

    def get_outputs(self, merge_multi_context=True):
        """Outputs of the last forward: merged over devices, or per output a device list."""
        _check_lifecycle(self, "get_outputs()", params=True)
        return self._exec_group.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs (bound data order); needs ``inputs_need_grad``."""
        _check_lifecycle(self, "get_input_grads()", params=True)
        if not self.inputs_need_grad:
            raise NotBoundError("bind with inputs_need_grad=True before get_input_grads()")
        return self._exec_group.get_input_grads(merge_multi_context=merge_multi_context)

    def get_states(self, merge_multi_context=True):
        """State arrays per state and device (only ``merge_multi_context=False``)."""
        _check_lifecycle(self, "get_states()", params=True)
        return self._exec_group.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        """Set states from per-device lists, or fill them all with ``value``."""
        _check_lifecycle(self, "set_states()", params=True)
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` with the last outputs, once per device."""
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    def _sync_params_from_devices(self):
        """Refresh the CPU cache from the devices (average); row_sparse params come from the
        kvstore when updates run there."""
        self._exec_group.get_params(self._arg_params, self._aux_params)
        if self._kvstore and self._update_on_kvstore:
            for param_name, param_val in sorted(self._arg_params.items()):
                if param_val.stype == 'row_sparse':
                    row_ids = nd.arange(0, param_val.shape[0], dtype='int64')
                    self._kvstore.row_sparse_pull(param_name, param_val, row_ids=row_ids)
        self._params_dirty = False

    # --- optimizer states --------------------------------------------------------------------
    def save_optimizer_states(self, fname):
        """Write the optimizer states (the updater's pickle) to ``fname``, atomically."""
        _check_lifecycle(self, "save_optimizer_states()", bound=False, optimizer=True)
        if self._update_on_kvstore:
            updater = getattr(self._kvstore, "_updater", None)
            if updater is None:
                # the states live elsewhere (a distributed store's servers)
                self._kvstore.save_optimizer_states(fname)
                return
            atomic_write(fname, updater.get_states(dump_optimizer=False))
        else:
            atomic_write(fname, self._updater.get_states())

    def load_optimizer_states(self, fname):
        """Read optimizer states written by :meth:`save_optimizer_states`."""
        _check_lifecycle(self, "load_optimizer_states()", bound=False, optimizer=True)
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
        else:
            with open(fname, 'rb') as fin:
                self._updater.set_states(fin.read())
        _check_loaded_optimizer_states(self)

    def install_monitor(self, mon):
        """Install ``mon`` on every device's executor."""
        _check_lifecycle(self, "install_monitor()")
        self._exec_group.install_monitor(mon)

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Pull the rows of row_sparse parameters the next batch needs from the kvstore.

        ``sparse_row_id_fn(data_batch)`` returns ``{param_name: row_ids}``; only useful when
        updates run on the kvstore.
        """
        _check_lifecycle(self, "prepare()")
        if sparse_row_id_fn is None:
            return
        if not self._kvstore or not self._update_on_kvstore:
            warnings.warn(UserWarning("Parameters are not updated in the KVStore. "
                                      "No need to call sparse_row_id_fn."))
            return
        row_ids = sparse_row_id_fn(data_batch)
        if not isinstance(row_ids, dict):
            raise TypeError("Expected dict output from sparse_row_id_fn, got %s"
                            % type(row_ids).__name__)
        for param_name, row_id in row_ids.items():
            param_idx = self._exec_group.param_names.index(param_name)
            param_val = self._exec_group.param_arrays[param_idx]
            if param_val[0].stype != 'row_sparse':
                warnings.warn(UserWarning("%s.stype is not 'row_sparse'. No need to "
                                          "perform row_sparse_pull." % param_name))
            else:
                self._kvstore.row_sparse_pull(param_name, param_val, row_ids=row_id,
                                              priority=-param_idx)
