"""``mx.contrib.svrg_optimization``: stochastic variance-reduced gradient training.

``SVRGModule`` trains like ``mx.mod.Module`` but corrects every mini-batch gradient with a
snapshot: ``g(w, batch) - g(w_snapshot, batch) + mean over all batches of g(w_snapshot)``. The
snapshot and its full-data gradient are refreshed every ``update_freq`` epochs
(``update_full_grads``). ``SVRGOptimizer`` is the optimizer the module installs around the
one the user asks for.
"""
from .svrg_module import SVRGModule
from .svrg_optimizer import AssignmentOptimizer, SVRGOptimizer

__all__ = ["SVRGModule", "SVRGOptimizer", "AssignmentOptimizer"]
