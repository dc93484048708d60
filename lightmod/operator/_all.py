"""Imports every operator family so that its declarations register (one line per family)."""
# Families register on import; keep one line per file of lightmod/operator/.
from . import elemwise  # noqa: F401,E402
from . import nn  # noqa: F401,E402
from . import loss  # noqa: F401,E402
from . import tensor  # noqa: F401,E402
from . import reduce  # noqa: F401,E402
from . import optimizer_op  # noqa: F401,E402
from . import rnn_op  # noqa: F401,E402
from . import conv  # noqa: F401,E402
from . import pooling  # noqa: F401,E402
from . import norm  # noqa: F401,E402
from . import image_ops  # noqa: F401,E402
