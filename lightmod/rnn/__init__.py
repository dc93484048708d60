"""``mx.rnn``: symbolic RNN cells, the bucketing sentence iterator and RNN checkpoint helpers
(MXNet 1.9.1's names)."""
from . import rnn_cell
from .rnn_cell import *  # noqa: F401,F403
from . import rnn
from .rnn import *  # noqa: F401,F403
from . import io
from .io import *  # noqa: F401,F403
from ..io import DataIter, DataBatch, DataDesc  # noqa: F401  (mx.rnn re-exports them)

__all__ = rnn_cell.__all__ + rnn.__all__ + io.__all__
