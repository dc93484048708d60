"""Module: a Symbol bound to one or more devices, trained with an optimizer.

Lifecycle: ``bind`` (executors for given input shapes) -> ``init_params`` (or ``set_params``,
or ``Module.load``) -> ``init_optimizer`` -> ``forward``/``backward``/``update``.

Two copies of the parameters exist. The devices hold the working copies inside the executor
group; the module keeps host copies in ``_arg_params``/``_aux_params``, the very dicts that
``get_params`` hands out. ``update()`` only marks the host copies stale (``_params_dirty``); the
next ``get_params`` overwrites them in place with the mean of the device copies.
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
from ..model import (
    _check_loaded_optimizer_states,
    _create_kvstore,
    _initialize_kvstore,
    _update_params,
    _update_params_on_kvstore,
    checkpoint_states_file,
    load_checkpoint,
    write_checkpoint,
)
from ..ndarray import zeros
from .base_module import (
    BaseModule,
    _attribute_view,
    _check_lifecycle,
    _declared_inputs,
    _keeps_optimizer,
    _parse_data_desc,
)
from .executor_group import DataParallelExecutorGroup

__all__ = ["Module"]


def _from_checkpoint(module_class, prefix, epoch, load_optimizer_states, kwargs):
    """``load`` of Module and its subclasses: ``module_class(symbol=<prefix-symbol.json>,
    **kwargs)`` holding the parameters of ``prefix-%04d.params`` as initialised ones, and
    reading ``prefix-%04d.states`` in ``init_optimizer`` when ``load_optimizer_states``."""
    symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
    loaded = module_class(symbol=symbol, **kwargs)
    loaded._arg_params, loaded._aux_params = arg_params, aux_params
    loaded.params_initialized = True
    if load_optimizer_states:
        loaded._preload_opt_states = checkpoint_states_file(prefix, epoch)
    return loaded


def _context_list(context, work_load_list):
    """The contexts as a list and one work load per context (equal loads by default)."""
    contexts = [context] if isinstance(context, ctx.Context) else context
    if work_load_list is None:
        return contexts, [1] * len(contexts)
    if len(work_load_list) != len(contexts):
        raise ValueError("work_load_list has %d entries for %d contexts"
                         % (len(work_load_list), len(contexts)))
    return contexts, work_load_list


def _batch_input_shapes(data_batch):
    """The full-batch shape of every data input of ``data_batch``.

    A list of batches (one per device, already split) counts as one batch whose leading axis
    is the sum of theirs; all of them must agree on every shape.
    """
    if not isinstance(data_batch, list):
        return tuple(array.shape for array in data_batch.data)
    if not data_batch:
        raise ValueError("forward(): encountered an empty list of data batches")
    shapes = []
    for position, first in enumerate(data_batch[0].data):
        for other in data_batch:
            if other.data[position].shape != first.shape:
                raise ValueError("All data batches in a list need to have the same shape "
                                 "(%s vs. %s)" % (first.shape, other.data[position].shape))
        shapes.append((first.shape[0] * len(data_batch),) + first.shape[1:])
    return tuple(shapes)


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
        self._context, self._work_load_list = _context_list(context, work_load_list)
        self._group2ctxs = group2ctxs
        self._compression_params = compression_params
        self._symbol = symbol

        arguments, self._aux_names = symbol._argument_and_aux_names()
        (self._data_names, self._label_names, self._state_names,
         self._fixed_param_names) = _declared_inputs(symbol, data_names, label_names,
                                                     state_names, fixed_param_names, arguments)
        # every argument the batch or set_states does not feed is a parameter
        fed = set(self._data_names) | set(self._label_names) | set(self._state_names)
        self._param_names = [name for name in arguments if name not in fed]
        self._output_names = symbol.list_outputs()

        # host copies of the parameters; created by bind, loaded by load()
        self._arg_params = self._aux_params = None
        self._params_dirty = False
        # optimizer side, filled by init_optimizer or borrow_optimizer
        self._optimizer = self._kvstore = self._update_on_kvstore = self._updater = None
        self._optimizer_positions = None
        self._preload_opt_states = None
        self._grad_req = None
        self._exec_group = self._data_shapes = self._label_shapes = None

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

    # --- names and shapes ----------------------------------------------------------------------
    data_names = _attribute_view("_data_names", "Inputs fed from ``DataBatch.data``.")
    label_names = _attribute_view("_label_names", "Inputs fed from ``DataBatch.label``.")
    output_names = _attribute_view("_output_names", "The symbol's outputs.")
    data_shapes = _attribute_view("_data_shapes", "The bound data descriptions.", bound=True)
    label_shapes = _attribute_view("_label_shapes", "The bound label descriptions (None "
                                   "without labels).", bound=True)

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
        """Give every parameter and aux state a value, then copy them all to the devices.

        The host arrays are filled in name order, so random initialisers draw in a fixed
        sequence. When a source dict (``arg_params`` or ``aux_params``) is given, a name found
        there is copied from it; a name it lacks is an error (RuntimeError) unless
        ``allow_missing``, in which case ``initializer`` fills it. Calling this again without
        ``force_init`` only warns.
        """
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "init_params call ignored.", stacklevel=2)
            return
        _check_lifecycle(self, "init_params()")
        attrs = self._symbol.attr_dict()

        for host, given in ((self._arg_params, arg_params), (self._aux_params, aux_params)):
            for name in sorted(host):
                target, desc = host[name], InitDesc(name, attrs.get(name, None))
                if given is None:
                    initializer(desc, target)
                elif name in given:
                    if given[name] is not target:
                        arg_checks.same_shape(name, given[name], target, "init_params/set_params")
                        given[name].copyto(target)
                elif not allow_missing:
                    raise RuntimeError("%s is not presented" % desc)
                elif initializer is not None:
                    initializer(desc, target)

        self.params_initialized = True
        self._params_dirty = False
        self._exec_group.set_params(self._arg_params, self._aux_params, allow_extra=allow_extra)

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter values.

        Strict form (``allow_missing=False``): it is ``init_params`` without an initializer,
        so each parameter must be in the dicts and unknown names are ignored. Lenient form
        (``allow_missing=True``): the dicts are written straight into the devices; parameters
        they lack keep their values, and unknown names are a ValueError unless ``allow_extra``.
        """
        if allow_missing and self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
        elif allow_missing:
            _check_lifecycle(self, "set_params()")
            self._exec_group.set_params(arg_params, aux_params, allow_extra=allow_extra)
            # only the devices saw the new values: the host copies must be refreshed before use
            self._params_dirty = self.params_initialized = True
        else:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=False, force_init=force_init,
                             allow_extra=allow_extra)

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
        if inputs_need_grad and not for_training:
            raise ValueError("bind(): inputs_need_grad=True requires for_training=True")

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes,
            self._label_shapes, self._param_names, for_training, inputs_need_grad,
            self._group_to_share(shared_module), logger=self.logger,
            fixed_param_names=self._fixed_param_names, grad_req=grad_req,
            group2ctxs=self._group2ctxs, state_names=self._state_names)
        self._total_exec_bytes = self._exec_group._total_exec_bytes

        if shared_module is not None:
            # a bucket: the host copies and the optimizer belong to the shared module
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
            if shared_module.optimizer_initialized:
                self.borrow_optimizer(shared_module)
        elif self.params_initialized:
            # bound again after init or load: the new executors get the host values
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            self._allocate_host_params()
        self.binded = True

    def _reset_bind(self):
        """Forget the executors (parameters and optimizer are kept)."""
        self.binded = False
        self._exec_group = self._data_shapes = self._label_shapes = None

    def _group_to_share(self, shared_module):
        """The executor group of ``shared_module`` after checking it can be shared, or None."""
        if shared_module is None:
            return None
        if not isinstance(shared_module, Module):
            raise TypeError("shared_module must be a Module, got %s"
                            % type(shared_module).__name__)
        _check_lifecycle(shared_module, "binding another module to it (shared_module)",
                         params=True)
        group = shared_module._exec_group
        if len(group.execs) < len(self._context):
            raise ValueError("shared_module has %d executors, fewer than this module's %d "
                             "contexts" % (len(group.execs), len(self._context)))
        return group

    def _allocate_host_params(self):
        """Zero host arrays matching the first device's parameters and aux states."""
        if self._arg_params is not None or self._aux_params is not None:
            raise ValueError("bind(): parameters were assigned without params_initialized")
        group = self._exec_group
        self._arg_params = {}
        for name, copies in zip(self._param_names, group.param_arrays):
            self._arg_params[name] = zeros(shape=copies[0].shape, dtype=copies[0].dtype,
                                           stype=copies[0].stype)
        self._aux_params = {}
        for name, copies in zip(self._aux_names, group.aux_arrays):
            self._aux_params[name] = zeros(copies[0].shape, dtype=copies[0].dtype)

    def reshape(self, data_shapes, label_shapes=None):
        """Re-shape the executors for new input shapes; parameters are kept."""
        _check_lifecycle(self, "reshape()")
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        self._exec_group.reshape(self._data_shapes, self._label_shapes)

    # --- optimizer ---------------------------------------------------------------------------
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install the optimizer and choose where updates run.

        The kvstore decides: updates run on the store when it says so, otherwise in this
        module through an updater. Gradients are scaled by ``1/(total batch size x number of
        workers of a synchronous distributed store)``, fixed at this point. A string optimizer
        is created here with the symbol (learning-rate and weight-decay multipliers) and the
        index-to-name map; an Optimizer object is kept as given, with a warning when its
        ``rescale_grad`` differs and its ``idx2name`` filled in when empty.
        """
        if _keeps_optimizer(self, force_init, 'optimizer already initialized, ignoring...'):
            return
        if self._params_dirty:
            self._sync_params_from_devices()

        kvstore, update_on_kvstore = _create_kvstore(kvstore, len(self._context),
                                                     self._arg_params)
        workers = 1
        if kvstore and 'dist' in kvstore.type and '_sync' in kvstore.type:
            workers = kvstore.num_workers
        rescale_grad = 1.0 / (self._exec_group.batch_size * workers)

        names = self._exec_group.param_names
        if update_on_kvstore:
            idx2name = dict(enumerate(names))
        else:
            # the updater sees one key per (parameter, device) pair
            devices = len(self._context)
            idx2name = {index * devices + device: name for index, name in enumerate(names)
                        for device in range(devices)}
        self._optimizer = self._make_optimizer(optimizer, optimizer_params, rescale_grad,
                                               idx2name)
        self._kvstore, self._update_on_kvstore = kvstore, update_on_kvstore
        # a parameter's key in the updater is its index here, also for buckets borrowing it
        self._optimizer_positions = {name: index for index, name in enumerate(names)}
        self._attach_kvstore()
        self._updater = None if update_on_kvstore else opt.get_updater(self._optimizer)
        self.optimizer_initialized = True

        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def _attach_kvstore(self):
        """Hand the kvstore its compression, its optimizer when it runs the updates, and the
        host copies of the parameters as its starting values."""
        store = self._kvstore
        if not store:
            return
        if self._compression_params:
            store.set_gradient_compression(self._compression_params)
        if self._update_on_kvstore:
            store.set_optimizer(self._optimizer)
        _initialize_kvstore(kvstore=store, param_arrays=self._exec_group.param_arrays,
                            arg_params=self._arg_params, param_names=self._param_names,
                            update_on_kvstore=self._update_on_kvstore)

    def _make_optimizer(self, optimizer, optimizer_params, rescale_grad, idx2name):
        """The Optimizer object for ``init_optimizer`` (see there for the rules)."""
        if isinstance(optimizer, str):
            params = dict(optimizer_params)
            params.setdefault('rescale_grad', rescale_grad)
            return opt.create(optimizer, sym=self.symbol, param_idx2name=idx2name, **params)
        if not isinstance(optimizer, opt.Optimizer):
            raise TypeError("optimizer must be a str or an Optimizer, got %s"
                            % type(optimizer).__name__)
        if optimizer.rescale_grad != rescale_grad:
            warnings.warn(
                "Optimizer created manually outside Module but rescale_grad "
                "is not normalized to 1.0/batch_size/num_workers (%s vs. %s). "
                "Is this intended?" % (optimizer.rescale_grad, rescale_grad), stacklevel=3)
        if not optimizer.idx2name:
            optimizer.idx2name = dict(idx2name)
        return optimizer

    def borrow_optimizer(self, shared_module):
        """Use ``shared_module``'s optimizer, kvstore and updater (bucketing)."""
        _check_lifecycle(shared_module, "borrow_optimizer() from it", bound=False,
                         optimizer=True)
        for attr in ('_optimizer', '_kvstore', '_update_on_kvstore', '_updater'):
            setattr(self, attr, getattr(shared_module, attr))
        self._optimizer_positions = self._share_optimizer_keys(
            getattr(shared_module, "_optimizer_positions", None))
        self.optimizer_initialized = True

    def _share_optimizer_keys(self, positions):
        """Key this module's parameters in a borrowed optimizer as its creator does.

        ``positions`` maps each parameter name to its index in the module that created the
        optimizer. A bucket may hold a subset of those parameters, in another order, or
        parameters the creator lacks: those get the next free indices (and entries in the
        optimizer's ``idx2name`` when updates run here). Keying by each bucket's own order,
        as MXNet does, would mix up the optimizer states of buckets with different
        parameter lists.
        """
        if positions is None or self._exec_group is None:
            return positions
        devices = len(self._context)
        for name in self._exec_group.param_names:
            if name in positions:
                continue
            positions[name] = len(positions)
            if not self._update_on_kvstore:
                for device in range(devices):
                    self._optimizer.idx2name[positions[name] * devices + device] = name
        return positions

    # --- computation -------------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        """Forward computation; re-shapes the executors first if the batch's shapes differ
        from the bound ones. ``is_train=None`` means "as bound" (``for_training``)."""
        _check_lifecycle(self, "forward()", params=True)
        batch_shapes = _batch_input_shapes(data_batch)
        if batch_shapes != tuple(desc.shape for desc in self._data_shapes):
            self.reshape(*self._descs_for(data_batch, batch_shapes))
        self._exec_group.forward(data_batch, is_train)

    def _descs_for(self, data_batch, batch_shapes):
        """Data and label descriptions of a batch whose shapes differ from the bound ones.

        The batch's own ``provide_data``/``provide_label`` win; otherwise the bound
        descriptions are kept with the batch's shapes (labels only if bound with labels).
        """
        data_descs = getattr(data_batch, "provide_data", None)
        if not data_descs:
            data_descs = [DataDesc(desc.name, shape, desc.dtype, desc.layout)
                          for desc, shape in zip(self._data_shapes, batch_shapes)]
        label_descs = getattr(data_batch, "provide_label", None)
        if not label_descs:
            labels = getattr(data_batch, "label", None)
            label_descs = None
            if labels and self._label_shapes is not None:
                label_descs = [DataDesc(desc.name, array.shape, desc.dtype, desc.layout)
                               for desc, array in zip(self._label_shapes, labels)]
        return data_descs, label_descs

    def backward(self, out_grads=None):
        """Backward computation; ``out_grads`` are head gradients of non-loss outputs."""
        _check_lifecycle(self, "backward()", params=True)
        self._exec_group.backward(out_grads=out_grads)

    def update(self):
        """Apply the optimizer to the last gradients (on the kvstore or here)."""
        _check_lifecycle(self, "update()", params=True, optimizer=True)
        self._params_dirty = True
        group = self._exec_group
        if self._update_on_kvstore:
            _update_params_on_kvstore(group.param_arrays, group.grad_arrays, self._kvstore,
                                      group.param_names)
        else:
            positions = getattr(self, "_optimizer_positions", None)
            keys = None if positions is None else [positions[name] for name in group.param_names]
            _update_params(group.param_arrays, group.grad_arrays, updater=self._updater,
                           num_device=len(self._context), kvstore=self._kvstore,
                           param_names=group.param_names, param_positions=keys)

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
        """Overwrite the host copies with the mean of the device copies.

        When the kvstore runs the updates, a row_sparse parameter's device copy holds only the
        rows last pulled, so its full value is pulled from the store instead.
        """
        self._exec_group.get_params(self._arg_params, self._aux_params)
        if self._kvstore and self._update_on_kvstore:
            for name in sorted(self._arg_params):
                host = self._arg_params[name]
                if host.stype == 'row_sparse':
                    every_row = nd.arange(0, host.shape[0], dtype='int64')
                    self._kvstore.row_sparse_pull(name, host, row_ids=every_row)
        self._params_dirty = False

    # --- optimizer states --------------------------------------------------------------------
    def save_optimizer_states(self, fname):
        """Write the optimizer states (the updater's pickle) to ``fname``, atomically."""
        _check_lifecycle(self, "save_optimizer_states()", bound=False, optimizer=True)
        updater = self._updater
        if self._update_on_kvstore:
            updater = getattr(self._kvstore, "_updater", None)
            if updater is None:
                # a store without a local updater keeps the states itself (distributed servers)
                self._kvstore.save_optimizer_states(fname)
                return
            atomic_write(fname, updater.get_states(dump_optimizer=False))
            return
        atomic_write(fname, updater.get_states())

    def load_optimizer_states(self, fname):
        """Read optimizer states written by :meth:`save_optimizer_states`."""
        _check_lifecycle(self, "load_optimizer_states()", bound=False, optimizer=True)
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
        else:
            with open(fname, 'rb') as stream:
                self._updater.set_states(stream.read())
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
        if not (self._kvstore and self._update_on_kvstore):
            warnings.warn(UserWarning("Parameters are not updated in the KVStore. "
                                      "No need to call sparse_row_id_fn."), stacklevel=2)
            return
        wanted = sparse_row_id_fn(data_batch)
        if not isinstance(wanted, dict):
            raise TypeError("Expected dict output from sparse_row_id_fn, got %s"
                            % type(wanted).__name__)
        names = self._exec_group.param_names
        for name, rows in wanted.items():
            index = names.index(name)
            copies = self._exec_group.param_arrays[index]
            if copies[0].stype == 'row_sparse':
                # earlier parameters first: a larger index gets a lower priority
                self._kvstore.row_sparse_pull(name, copies, row_ids=rows, priority=-index)
            else:
                warnings.warn(UserWarning("%s.stype is not 'row_sparse'. No need to "
                                          "perform row_sparse_pull." % name), stacklevel=2)
