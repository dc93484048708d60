"""DetModule: a Module for detection-style fine-tuning, freezing parameters by substring.

Detection code bases built on MXNet (mx-rcnn and its descendants) carry a ``DetModule`` that is
a Module whose frozen parameters are chosen by name fragments: every argument containing one of
``fixed_param`` is frozen, unless it also contains one of ``excluded_param``. Frozen parameters
get no gradient and no update but are still initialised, loaded and saved. Its ``fit`` runs the
epoch-end callbacks (checkpointing) on the first worker only.
"""
import logging

from .. import context as ctx
from .. import profiler
from ..fit_callbacks import StopTraining
from .base_module import _call_all
from .module import Module, _from_checkpoint

__all__ = ["DetModule"]


def select_fixed_params(arg_names, fixed_param=None, excluded_param=None):
    """Arguments containing a ``fixed_param`` fragment and no ``excluded_param`` fragment,
    in ``arg_names`` order, each once."""
    fixed = []
    for name in arg_names:
        if not fixed_param or not any(part in name for part in fixed_param):
            continue
        if excluded_param and any(part in name for part in excluded_param):
            continue
        fixed.append(name)
    return fixed


class DetModule(Module):
    """A Module with parameters frozen by name fragment.

    Parameters
    ----------
    symbol : Symbol
    data_names, label_names : list of str or None
        None means no such inputs (unlike Module, whose defaults are 'data'/'softmax_label').
    logger : Logger
    context : Context or list of Context
        One executor per context, equal work loads.
    fixed_param : list of str
        Fragments: every argument whose name contains one of them is frozen...
    excluded_param : list of str
        ...unless it contains one of these.
    """

    def __init__(self, symbol, data_names=None, label_names=None, logger=logging,
                 context=ctx.cpu(), fixed_param=None, excluded_param=None):
        fixed_param_names = select_fixed_params(symbol.list_arguments(), fixed_param,
                                                excluded_param)
        logger.info(f"fixed parameters: {fixed_param_names}")
        super().__init__(symbol, data_names=data_names, label_names=label_names, logger=logger,
                         context=context, fixed_param_names=fixed_param_names)

    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, **kwargs):
        """A DetModule from a checkpoint (see :meth:`Module.load`)."""
        return _from_checkpoint(DetModule, prefix, epoch, load_optimizer_states, kwargs)

    def fit(self, train_data, eval_data=None, eval_metric='acc', epoch_end_callback=None,
            batch_end_callback=None, profile=False, **kwargs):
        """:meth:`BaseModule.fit`, with the epoch-end callbacks run only where the kvstore rank
        is 0 (or there is no kvstore), so that one worker writes the checkpoints. With
        ``profile=True`` the profiler's trace is dumped after the 10th batch of each epoch."""
        if profile:
            user_batch_end = batch_end_callback

            def profiling_batch_end(param):
                stop = _call_all(user_batch_end, param)
                if param.nbatch + 1 == 10:
                    self.logger.info("Profiling ends")
                    profiler.dump()
                if stop:
                    raise StopTraining("a batch-end callback asked to stop")
            batch_end_callback = profiling_batch_end
        if epoch_end_callback is not None:
            callbacks = epoch_end_callback

            def rank0_epoch_end(*args):
                if self._kvstore is not None and self._kvstore.rank != 0:
                    return
                if _call_all(callbacks, *args):
                    raise StopTraining("an epoch-end callback asked to stop")
            kwargs['epoch_end_callback'] = rank0_epoch_end
        super().fit(train_data, eval_data=eval_data, eval_metric=eval_metric,
                    batch_end_callback=batch_end_callback, **kwargs)
