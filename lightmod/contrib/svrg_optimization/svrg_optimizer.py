"""The optimizers SVRGModule installs (MXNet's ``_SVRGOptimizer`` and ``_AssignmentOptimizer``).

``SVRGOptimizer`` holds the optimizer the user chose and hands every parameter to it, except
the full-gradient entries (keys whose name contains ``full``, which SVRGModule adds for
``<param>_full``): those go to ``AssignmentOptimizer``, which stores the pushed value as it is,
so that a kvstore can sum full gradients across devices and workers.
"""
from ... import optimizer as opt

__all__ = ["SVRGOptimizer", "AssignmentOptimizer"]

# Optimizer.__init__'s own keywords: the wrapper keeps these, the wrapped optimizer gets all.
_BASE_KEYWORDS = ("rescale_grad", "param_idx2name", "wd", "clip_gradient", "learning_rate",
                  "lr_scheduler", "sym", "begin_num_update", "multi_precision", "param_dict")


class AssignmentOptimizer(opt.Optimizer):
    """``weight <- grad``: the stored value becomes the pushed one (no rescaling)."""

    def update(self, index, weight, grad, state):
        weight[:] = grad


class SVRGOptimizer(opt.Optimizer):
    """Dispatches updates: full-gradient keys to assignment, the rest to ``default_optimizer``
    (a name, created with every keyword given here, or an Optimizer)."""

    def __init__(self, default_optimizer, **kwargs):
        super().__init__(**{k: v for k, v in kwargs.items() if k in _BASE_KEYWORDS})
        if isinstance(default_optimizer, str):
            default_optimizer = opt.create(default_optimizer, **kwargs)
        self.default_opt = default_optimizer
        self.aux_opt = AssignmentOptimizer()

    def _name_of(self, index):
        """A key's parameter name: keys are names (kvstore string keys) or indices."""
        if isinstance(index, str):
            return index
        if index not in self.idx2name:
            raise KeyError("SVRGOptimizer: no parameter name for index %r" % (index,))
        return self.idx2name[index]

    def _target(self, index):
        return self.aux_opt if "full" in self._name_of(index) else self.default_opt

    def create_state(self, index, weight):
        return self._target(index).create_state(index, weight)

    def update(self, index, weight, grad, state):
        self._target(index).update(index, weight, grad, state)


# MXNet's names for them. MXNet also registers them with mx.optimizer; lightmod does not:
# neither can be built without SVRGModule's arguments, and the registry is what generic code
# (serialisation, the optimizer property tests) instantiates with defaults.
_AssignmentOptimizer = AssignmentOptimizer
_SVRGOptimizer = SVRGOptimizer
