"""``mx.autograd``: record NDArray operations and differentiate them (see
lightmod/ndarray/autograd.py for how)."""
from .ndarray.autograd import (
                               Function,
                               backward,
                               grad,
                               is_recording,
                               is_training,
                               mark_variables,
                               pause,
                               predict_mode,
                               record,
                               set_recording,
                               set_training,
                               train_mode,
)

__all__ = ["is_recording", "is_training", "set_recording", "set_training", "record", "pause",
           "train_mode", "predict_mode", "mark_variables", "backward", "grad", "Function"]
