"""Imports every operator family so that its declarations register (one line per family)."""
# Families register on import; keep one line per file of lightmod/operator/.
from . import (
    contrib_ops,  # noqa: F401,E402
    conv,  # noqa: F401,E402
    ctc,  # noqa: F401,E402
    detection,  # noqa: F401,E402
    elemwise,  # noqa: F401,E402
    im2col_ops,  # noqa: F401,E402
    image_ops,  # noqa: F401,E402
    linalg,  # noqa: F401,E402
    loss,  # noqa: F401,E402
    nn,  # noqa: F401,E402
    norm,  # noqa: F401,E402
    optimizer_op,  # noqa: F401,E402
    pooling,  # noqa: F401,E402
    random_ops,  # noqa: F401,E402
    reduce,  # noqa: F401,E402
    rnn_op,  # noqa: F401,E402
    sequence,  # noqa: F401,E402
    spatial,  # noqa: F401,E402
    tensor,  # noqa: F401,E402
)
