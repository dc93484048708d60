"""SVRGModule: a Module trained with stochastic variance-reduced gradients.

The module keeps a second Module over the same symbol, the *snapshot*, whose parameters are
copied from the trained ones whenever the full gradient is refreshed. Each training batch runs
through both; before the optimizer step the trained module's gradient becomes

    g(w, batch) - g(snapshot, batch) + full

where ``full`` is the snapshot's gradient averaged over the batches of the whole training set
(``update_full_grads``, every ``update_freq`` epochs inside ``fit``). Gradients are the raw
per-batch sums the executors produce; the optimizer's ``rescale_grad`` (1 / batch size)
applies afterwards, as for any Module.

Numbers follow MXNet 1.9.1's SVRGModule, including two details of its bookkeeping: the
full-gradient sums start from the previous average instead of zero, and a padded last batch
counts as ``1 - pad / batch_size`` of a batch. With several devices, each device's average is
pushed to the kvstore under ``<param>_full``, summed there, and divided by the device count.
"""
import logging
import time

from ... import metric as _metric
from ... import ndarray as nd
from ...base import _as_list
from ...context import cpu
from ...initializer import Uniform
from ...model import BatchEndParam, _create_kvstore
from ...module import Module
from .svrg_optimizer import SVRGOptimizer

__all__ = ["SVRGModule"]


class SVRGModule(Module):
    """A Module trained with SVRG; ``update_freq`` (a positive int) is the number of epochs
    between two full-gradient refreshes. The other arguments are Module's."""

    def __init__(self, symbol, data_names=('data',), label_names=('softmax_label',),
                 logger=logging, context=cpu(), work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None,
                 compression_params=None, update_freq=None):
        super().__init__(symbol, data_names=data_names, label_names=label_names,
                         logger=logger, context=context, work_load_list=work_load_list,
                         fixed_param_names=fixed_param_names, state_names=state_names,
                         group2ctxs=group2ctxs, compression_params=compression_params)
        if not isinstance(update_freq, int) or isinstance(update_freq, bool):
            raise TypeError("update_freq in SVRGModule must be an integer to represent the "
                            "frequency for calculating full gradients, got %r" % (update_freq,))
        if update_freq <= 0:
            raise ValueError("update_freq in SVRGModule must be a positive integer to represent "
                             "the frequency for calculating full gradients, got %d" % update_freq)
        self.update_freq = update_freq
        # the snapshot: same symbol and devices, its own executors
        self._mod_aux = Module(symbol, data_names, label_names, logger, context,
                               work_load_list, fixed_param_names, state_names, group2ctxs,
                               compression_params)
        self._param_dict = None          # per device: {param name: averaged full gradient}
        self._ctx_len = len(self._context)

    # --- binding follows the trained module --------------------------------------------------
    def _reset_bind(self):
        super()._reset_bind()
        self._mod_aux._reset_bind()

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Bind the module and, for training, its snapshot."""
        super().bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind,
                     shared_module, grad_req)
        if for_training:
            self._mod_aux.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                               force_rebind, shared_module, grad_req)

    def reshape(self, data_shapes, label_shapes=None):
        super().reshape(data_shapes, label_shapes=label_shapes)
        self._mod_aux.reshape(data_shapes, label_shapes=label_shapes)

    def prepare(self, data_batch, sparse_row_id_fn=None):
        super().prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self._mod_aux.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)

    # --- optimizer -----------------------------------------------------------------------------
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install an SVRGOptimizer around ``optimizer`` (see Module.init_optimizer)."""
        arg_params = self.get_params()[0]
        self._param_dict = [{name: nd.zeros(value.shape, ctx=ctx)
                             for name, value in arg_params.items()} for ctx in self._context]
        wrapped = self._svrg_optimizer(kvstore, optimizer, optimizer_params)
        super().init_optimizer(kvstore=kvstore, optimizer=wrapped,
                               optimizer_params=optimizer_params, force_init=force_init)
        if self._kvstore:
            # one more key per parameter, where the devices' full gradients meet
            group = self._exec_group
            for idx, name in enumerate(group.param_names):
                self._kvstore.init(name + "_full", nd.zeros(self._arg_params[name].shape))
                if self._update_on_kvstore:
                    self._kvstore.pull(name + "_full", group.param_arrays[idx], priority=-idx)

    def _svrg_optimizer(self, kvstore, optimizer, optimizer_params):
        """The SVRGOptimizer with Module's rescale_grad and index-to-name table, plus one
        ``<param>_full`` name after the last index for every parameter."""
        store, update_on_kvstore = _create_kvstore(kvstore, self._ctx_len, self._arg_params)
        batch_size = self._exec_group.batch_size
        if store and 'dist' in store.type and '_sync' in store.type:
            batch_size *= store.num_workers
        names = self._exec_group.param_names
        if update_on_kvstore:
            idx2name = dict(enumerate(names))
        else:
            idx2name = {i * self._ctx_len + k: n for k in range(self._ctx_len)
                        for i, n in enumerate(names)}
        for name in self._param_dict[0]:
            idx2name[max(idx2name) + 1] = name + "_full"
        params = dict(optimizer_params)
        params.setdefault("rescale_grad", 1.0 / batch_size)
        params["param_idx2name"] = idx2name
        return SVRGOptimizer(default_optimizer=optimizer, **params)

    # --- one batch -----------------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        """Forward through the module and, when training, through the snapshot."""
        super().forward(data_batch, is_train)
        if is_train:
            self._mod_aux.forward(data_batch, is_train)

    def backward(self, out_grads=None):
        super().backward(out_grads)
        if self._mod_aux.binded:
            self._mod_aux.backward(out_grads)

    def update(self):
        """Replace the gradients by their SVRG correction, then run the optimizer."""
        self._update_svrg_gradients()
        super().update()

    def _update_svrg_gradients(self):
        mine = self._exec_group.grad_arrays
        snapshot = self._mod_aux._exec_group.grad_arrays
        for dev in range(self._ctx_len):
            full = self._param_dict[dev]
            for idx, name in enumerate(self._exec_group.param_names):
                grad = mine[idx][dev]
                grad -= snapshot[idx][dev]
                grad += full[name]

    # --- the full gradient ---------------------------------------------------------------------
    def update_full_grads(self, train_data):
        """Copy the current parameters into the snapshot and average its gradient over every
        batch of ``train_data`` (summed across devices and workers through the kvstore)."""
        snapshot = self._mod_aux
        snapshot.set_params(*self.get_params())
        names = self._exec_group.param_names
        train_data.reset()
        seen = 0.0
        for batch in train_data:
            snapshot.forward_backward(batch)
            for dev, sums in enumerate(self._param_dict):
                # the sums start from the previous average (MXNet 1.9.1 never clears them)
                for grads_of_param, name in zip(snapshot._exec_group.grad_arrays, names):
                    sums[name] = sums[name] + grads_of_param[dev]
            # a padded batch counts for its real samples only
            seen += 1.0 - batch.pad / train_data.batch_size
        for name in names:
            averages = [sums[name] / seen for sums in self._param_dict]
            for sums, average in zip(self._param_dict, averages):
                sums[name] = average
            if self._kvstore:
                self._sum_over_devices(name, averages)

    def _sum_over_devices(self, name, per_device):
        """Average the devices' (and workers') full gradients of one parameter."""
        key = name + "_full"
        self._kvstore.push(key, per_device)
        self._kvstore._barrier()
        self._kvstore.pull(key, per_device)
        for dev in range(self._ctx_len):
            self._param_dict[dev][name] = per_device[dev] / self._ctx_len

    # --- training loop -------------------------------------------------------------------------
    def fit(self, train_data, eval_data=None, eval_metric='acc',
            epoch_end_callback=None, batch_end_callback=None, kvstore='local',
            optimizer='sgd', optimizer_params=(('learning_rate', 0.01),),
            eval_end_callback=None, eval_batch_end_callback=None, initializer=Uniform(0.01),
            arg_params=None, aux_params=None, allow_missing=False, force_rebind=False,
            force_init=False, begin_epoch=0, num_epoch=None, validation_metric=None,
            monitor=None, sparse_row_id_fn=None):
        """Module.fit with a full-gradient refresh at every epoch divisible by update_freq."""
        assert num_epoch is not None, 'please specify number of epochs'
        self.bind(train_data.provide_data, train_data.provide_label, for_training=True,
                  force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer, arg_params, aux_params, allow_missing, force_init)
        self.init_optimizer(kvstore, optimizer, optimizer_params)
        train_metric = eval_metric if isinstance(eval_metric, _metric.EvalMetric) else \
            _metric.create(eval_metric)
        for epoch in range(begin_epoch, num_epoch):
            started = time.time()
            if epoch % self.update_freq == 0:
                self.update_full_grads(train_data)
            self._train_epoch(epoch, train_data, train_metric, batch_end_callback, monitor,
                              sparse_row_id_fn)
            for name, value in train_metric.get_name_value():
                self.logger.info('Epoch[%d] Train-%s=%f', epoch, name, value)
            self.logger.info('Epoch[%d] Time cost=%.3f', epoch, time.time() - started)
            arg_params, aux_params = self.get_params()
            self.set_params(arg_params, aux_params)     # devices agree on aux states
            for callback in _as_list(epoch_end_callback or []):
                callback(epoch, self.symbol, arg_params, aux_params)
            if not eval_data:
                continue
            scores = self.score(eval_data, validation_metric or eval_metric,
                                score_end_callback=eval_end_callback,
                                batch_end_callback=eval_batch_end_callback, epoch=epoch)
            for name, value in scores:
                self.logger.info('Epoch[%d] Validation-%s=%f', epoch, name, value)

    def _train_epoch(self, epoch, train_data, metric, batch_end_callback, monitor,
                     sparse_row_id_fn):
        """One pass over ``train_data``: an SVRG step per batch; the next batch is prepared
        before the batch-end callbacks run (as Module.fit does)."""
        metric.reset()
        train_data.reset()
        callbacks = _as_list(batch_end_callback) if batch_end_callback is not None else []
        for nbatch, (batch, following) in enumerate(_with_next(train_data)):
            if monitor is not None:
                monitor.tic()
            self.forward_backward(batch)
            self.update()
            labels = [b.label for b in batch] if isinstance(batch, list) else batch.label
            self.update_metric(metric, labels, pre_sliced=isinstance(batch, list))
            if following is not None:
                self.prepare(following, sparse_row_id_fn=sparse_row_id_fn)
            if monitor is not None:
                monitor.toc_print()
            info = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=metric,
                                 locals=locals())
            for callback in callbacks:
                callback(info)


def _with_next(iterable):
    """(item, the item after it or None) for every item."""
    items = iter(iterable)
    current = next(items, None)
    while current is not None:
        following = next(items, None)
        yield current, following
        current = following
