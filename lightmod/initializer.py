"""Weight initializers (``mx.init`` / ``mx.initializer``), MXNet 1.9.1 behaviour.

An initializer is called as ``init(InitDesc(name, attrs), arr)`` and fills ``arr`` in place:

* if ``attrs['__init__']`` names an initializer (a registry name or its JSON ``dumps()``),
  that initializer's ``_init_weight`` fills the array whatever its name is — this is how
  BatchNorm's moving statistics and PReLU's gamma get their values;
* otherwise the name's suffix decides: ``weight`` → ``_init_weight`` (the initializer's own
  rule), ``bias``/``beta``/``min`` → 0, ``gamma``/``max`` → 1; any other name raises
  ValueError("Unknown initialization pattern ...").

Calling with a plain string name is MXNet's deprecated legacy path (it also knows
``moving_mean``/``moving_var`` and ``upsampling`` → bilinear). Every random draw comes from
``lightmod.rng.get_rng()``, so ``mx.random.seed(s)`` makes initialisation reproducible.
"""
import json
import logging
import re
import warnings
from math import sqrt

import numpy as np

from . import registry
from . import rng as _random
from .base import string_types
from .ndarray.ndarray import NDArray
from .ndarray.ndarray import zeros as nd_zeros
from .operator.rnn_op import packed_input_size, packed_pieces, param_size

__all__ = ["InitDesc", "Initializer", "register", "alias", "create", "Load", "Mixed", "Zero",
           "One", "Constant", "Uniform", "Normal", "Orthogonal", "Xavier", "MSRAPrelu",
           "Bilinear", "LSTMBias", "FusedRNN"]


class InitDesc(str):
    """A parameter name (a ``str``) carrying the variable's ``attrs`` and the ``global_init``
    of the whole initialisation (used by composite initializers such as FusedRNN)."""

    def __new__(cls, name, attrs=None, global_init=None):
        desc = super().__new__(cls, name)
        desc.attrs = attrs or {}
        desc.global_init = global_init
        return desc


def _shape_of(arr):
    return tuple(arr.shape)


def _host_copy(arr):
    """The array's values as numpy (NDArray or numpy array)."""
    return arr.asnumpy() if isinstance(arr, NDArray) else np.asarray(arr)


def _fill(arr, values):
    """Write ``values`` (numpy array or scalar) into ``arr`` in the array's dtype."""
    if isinstance(values, np.ndarray):
        values = values.astype(np.dtype(arr.dtype), copy=False)
    arr[:] = values


def _filler(value):
    """An ``_init_*`` method that sets every element to ``value``."""
    def fill(self, _, arr):
        arr[:] = value
    return fill


# The name patterns, in the order they are tried. An InitDesc's name is matched by suffix only;
# the deprecated plain-string names know more suffixes and two prefixes as well.
_BY_SUFFIX = {"weight": "_init_weight", "bias": "_init_bias", "gamma": "_init_gamma",
              "beta": "_init_beta", "min": "_init_zero", "max": "_init_one",
              "weight_quantize": "_init_quantized_weight", "bias_quantize": "_init_quantized_bias"}
_LEGACY_BY_SUFFIX = {"bias": "_init_bias", "gamma": "_init_gamma", "beta": "_init_beta",
                     "weight": "_init_weight", "moving_mean": "_init_zero",
                     "moving_var": "_init_one", "moving_inv_var": "_init_zero",
                     "moving_avg": "_init_zero", "min": "_init_zero", "max": "_init_one"}


def _matching_suffix(name, table):
    return next((suffix for suffix in table if name.endswith(suffix)), None)


def _legacy_method(name):
    """The ``_init_*`` method a deprecated plain-string call uses for ``name``."""
    if name.startswith("upsampling"):
        return "_init_bilinear"
    if name.startswith("stn_loc"):
        if name.endswith("weight"):
            return "_init_zero"
        if name.endswith("bias"):
            return "_init_loc_bias"
    suffix = _matching_suffix(name, _LEGACY_BY_SUFFIX)
    return "_init_default" if suffix is None else _LEGACY_BY_SUFFIX[suffix]


class Initializer:
    """Base class of initializers; subclasses implement ``_init_weight(name, arr)``.

    Constructor keywords are kept in ``_kwargs``; ``dumps()`` serialises the initializer as
    the JSON ``[lower-cased class name, kwargs]`` that ``create`` (and the ``__init__``
    variable attribute) understands.
    """

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func = None

    def set_verbosity(self, verbose=False, print_func=None):
        """Log every initialised array with ``print_func(arr)`` (default: norm/sqrt(size))."""
        self._verbose = verbose
        if print_func is None:
            def asum_stat(x):
                host = _host_copy(x).astype(np.float32)
                return str(np.float32(np.linalg.norm(host.ravel()) / sqrt(host.size)))
            print_func = asum_stat
        self._print_func = print_func
        return self

    def _verbose_print(self, desc, init, arr):
        if self._verbose and self._print_func:
            logging.info("Initialized %s as %s: %s", desc, init, self._print_func(arr))

    def dumps(self):
        """JSON ``[name, kwargs]`` that ``create`` turns back into an equal initializer."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, desc, arr):
        if not isinstance(desc, InitDesc):
            return self._legacy_init(desc, arr)
        if desc.global_init is None:
            desc.global_init = self
        method, label = self._method_for(desc)
        method(desc, arr)
        if label is not None:
            self._verbose_print(desc, label, arr)
        return None

    def _method_for(self, desc):
        """The bound method that fills ``desc``'s array, and the label verbose logging shows.

        A variable's own ``__init__`` attribute wins over its name (its initializer's
        ``_init_weight`` runs whatever the name says); otherwise the name's suffix decides."""
        chosen = desc.attrs.get("__init__", "")
        if chosen:
            return create(chosen)._init_weight, chosen
        suffix = _matching_suffix(desc, _BY_SUFFIX)
        if suffix is None:
            return self._init_default, None
        return getattr(self, _BY_SUFFIX[suffix]), suffix

    def _legacy_init(self, name, arr):
        """Initialise by a plain string name (deprecated in MXNet, still supported)."""
        warnings.warn("Calling initializer with init(str, NDArray) has been deprecated. "
                      "please use init(mx.init.InitDesc(...), NDArray) instead.",
                      DeprecationWarning, stacklevel=3)
        if not isinstance(name, string_types):
            raise TypeError("name must be string (got %s)" % type(name).__name__)
        if not isinstance(arr, NDArray):
            raise TypeError("arr must be NDArray (got %s)" % type(arr).__name__)
        getattr(self, _legacy_method(name))(name, arr)

    def _init_bilinear(self, _, arr):
        _fill(arr, _bilinear_kernel(_shape_of(arr)))

    def _init_loc_bias(self, _, arr):
        # a spatial transformer's localisation net starts at the identity transform
        if _shape_of(arr)[0] != 6:
            raise AssertionError("stn_loc bias must have 6 entries, got shape %s"
                                 % (_shape_of(arr),))
        _fill(arr, np.array([1.0, 0, 0, 0, 1.0, 0]))

    _init_zero = _filler(0.0)
    _init_one = _filler(1.0)
    _init_bias = _filler(0.0)
    _init_quantized_bias = _filler(0)
    _init_gamma = _filler(1.0)
    _init_beta = _filler(0.0)

    def _init_weight(self, name, arr):
        """The initializer's rule for weights; every concrete initializer overrides it."""
        raise NotImplementedError("Must override it")

    def _init_quantized_weight(self, _, arr):
        # MXNet draws ONE integer in [-127, 127) and fills the whole array with it
        arr[:] = np.int8(_random.get_rng().integers(-127, 127))

    def _init_default(self, name, _):
        raise ValueError(
            "Unknown initialization pattern for %s. Default initialization is now limited to "
            '"weight", "bias", "gamma" (1.0), and "beta" (0.0).Please use '
            "mx.sym.Variable(init=mx.init.*) to set initialization pattern" % name)

    def __eq__(self, other):
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self._kwargs == other._kwargs

    __hash__ = None  # equal-by-value objects, unhashable as in MXNet


_register = registry.get_register_func(Initializer, "initializer")
alias = registry.get_alias_func(Initializer, "initializer")
create = registry.get_create_func(Initializer, "initializer")


def register(klass):
    """Register an Initializer subclass under its lower-cased class name.

    After ``@mx.init.register class MyInit(mx.init.Initializer)``, ``create('myinit')`` and a
    variable attribute ``__init__='["myinit", {...}]'`` both build it.
    """
    return _register(klass)


def _bilinear_kernel(shape):
    """Bilinear upsampling weights: each (H, W) slice is the outer product of the 1-D tent
    centred like MXNet's (f = ceil(W/2), c = (2f - 1 - f % 2) / 2f)."""
    if len(shape) != 4:
        raise ValueError("Bilinear initializer needs a 4-D (N, C, H, W) weight, got shape %s"
                         % (shape,))
    f = np.ceil(shape[3] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    tent_x = 1 - np.abs(np.arange(shape[3]) / f - c)
    tent_y = 1 - np.abs(np.arange(shape[2]) / f - c)
    plane = (tent_y[:, None] * tent_x[None, :]).astype(np.float32)
    return np.broadcast_to(plane, shape)


class Load:
    """Initialise from saved parameters, falling back to ``default_init``.

    ``param`` is a dict ``{name: NDArray}`` or a ``.params`` file name; the ``arg:``/``aux:``
    prefixes of checkpoint files are stripped.
    """

    def __init__(self, param, default_init=None, verbose=False):
        if isinstance(param, str):
            from .ndarray import load
            param = load(param)
        if not isinstance(param, dict):
            raise AssertionError("Load: param must be a dict of name -> NDArray or a file name, "
                                 "got %s" % type(param).__name__)
        # checkpoint files tag names "arg:"/"aux:"; parameters are looked up without the tag
        self.param = {key[4:] if key[:4] in ("arg:", "aux:") else key: value
                      for key, value in param.items()}
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name, arr):
        saved = self.param.get(name)
        if saved is None:
            if self.default_init is None:
                raise AssertionError("Cannot Initialize %s. Not found in loaded param and no "
                                     "default Initializer is provided." % name)
            self.default_init(name, arr)
            source = "by default"
        else:
            if _shape_of(saved) != _shape_of(arr):
                raise AssertionError("Parameter %s cannot be initialized from loading. Shape "
                                     "mismatch, target %s vs loaded %s"
                                     % (name, _shape_of(arr), _shape_of(saved)))
            arr[:] = saved
            source = "by loading"
        if self.verbose:
            logging.info("Initialized %s %s", name, source)


class Mixed:
    """Initialise each parameter with the first initializer whose regex matches its name."""

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise AssertionError("Mixed: %d patterns but %d initializers"
                                 % (len(patterns), len(initializers)))
        self.map = list(zip([re.compile(p) for p in patterns], initializers))

    def __call__(self, name, arr):
        chosen = next((init for pattern, init in self.map if pattern.match(name)), None)
        if chosen is not None:
            return chosen(name, arr)
        raise ValueError("Parameter name %s did not match any pattern. Consider add a \".*\" "
                         "pattern at the and with default Initializer." % name)


class _FillWith(Initializer):
    """Fill every weight with the class's ``fill_value``; takes no arguments."""
    fill_value = 0

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        arr[:] = self.fill_value


@register
@alias("zeros")
class Zero(_FillWith):
    """Fill with 0."""
    fill_value = 0


@register
@alias("ones")
class One(_FillWith):
    """Fill with 1."""
    fill_value = 1


@register
class Constant(Initializer):
    """Fill with ``value`` (a scalar or an array broadcast to the weight's shape)."""

    def __init__(self, value):
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _, arr):
        arr[:] = self.value

    def dumps(self):
        # array values are stored back as lists (MXNet does so too, but then fails on a
        # second dumps(); lists are left alone here)
        value = self._kwargs["value"]
        if isinstance(value, np.ndarray):
            self._kwargs["value"] = value.tolist()
        elif isinstance(value, NDArray):
            self._kwargs["value"] = value.asnumpy().tolist()
        return json.dumps([type(self).__name__.lower(), self._kwargs])


@register
class Uniform(Initializer):
    """Uniform on [-scale, scale]."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        _fill(arr, _random.get_rng().uniform(-self.scale, self.scale, size=_shape_of(arr)))


@register
class Normal(Initializer):
    """Normal with mean 0 and standard deviation ``sigma``."""

    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        _fill(arr, _random.get_rng().normal(0.0, self.sigma, size=_shape_of(arr)))


@register
class Orthogonal(Initializer):
    """``scale`` times an orthonormal matrix (rows or columns, whichever fits) from the SVD of
    a random (shape[0], prod(shape[1:])) matrix drawn uniform on [-1, 1] or standard normal."""

    def __init__(self, scale=1.414, rand_type="uniform"):
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _, arr):
        shape = _shape_of(arr)
        if self.rand_type not in ("uniform", "normal"):
            raise ValueError("Orthogonal: unknown rand_type %r (expected 'uniform' or 'normal')"
                             % (self.rand_type,))
        flat = (shape[0], int(np.prod(shape[1:])))
        rng = _random.get_rng()
        draw = rng.uniform(-1.0, 1.0, size=flat) if self.rand_type == "uniform" \
            else rng.normal(0.0, 1.0, size=flat)
        left, _, right = np.linalg.svd(draw, full_matrices=False)
        # the factor with the sample's own shape has orthonormal rows or columns
        basis = left if left.shape == flat else right
        _fill(arr, self.scale * basis.reshape(shape))


@register
class Xavier(Initializer):
    """Glorot/Xavier: uniform on [-s, s] or normal with std s, s = sqrt(magnitude / factor).

    fan_in = shape[1]·prod(shape[2:]), fan_out = shape[0]·prod(shape[2:]); ``factor_type``
    'avg' uses (fan_in + fan_out)/2, 'in' fan_in, 'out' fan_out. Needs a weight of at least
    two dimensions.
    """

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _scale(self, name, shape):
        if len(shape) < 2:
            raise ValueError(f"Xavier initializer cannot be applied to vector {name}. It requires at"
                             " least 2D.")
        receptive = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
        fans = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}
        if self.factor_type not in fans:
            raise ValueError("Incorrect factor type")
        return np.sqrt(self.magnitude / fans[self.factor_type])

    def _init_weight(self, name, arr):
        shape = _shape_of(arr)
        bound = self._scale(name, shape)
        if self.rnd_type not in ("uniform", "gaussian"):
            raise ValueError("Unknown random type")
        rng = _random.get_rng()
        if self.rnd_type == "gaussian":
            _fill(arr, rng.normal(0.0, bound, size=shape))
        else:
            _fill(arr, rng.uniform(-bound, bound, size=shape))


@register
class MSRAPrelu(Xavier):
    """He/MSRA initialisation for PReLU nets: gaussian Xavier with magnitude 2/(1+slope²)."""

    def __init__(self, factor_type="avg", slope=0.25):
        magnitude = 2.0 / (1 + slope ** 2)
        super().__init__("gaussian", factor_type, magnitude)
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Bilinear upsampling kernels for Deconvolution weights (N, C, H, W)."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _fill(arr, _bilinear_kernel(_shape_of(arr)))


@register
class LSTMBias(Initializer):
    """LSTM bias: zeros except the forget gate's quarter (the second), set to
    ``forget_bias``; MXNet's gate order is [in, forget, cell, out]."""

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name, arr):
        gate = _shape_of(arr)[0] // 4
        arr[:] = 0.0
        arr[gate:2 * gate] = self.forget_bias


@register
class FusedRNN(Initializer):
    """Initializer of a FusedRNNCell's packed parameter vector.

    The vector is unpacked into per-layer, per-gate weights and biases (``l0_i2h_i_weight``...);
    each one is filled by ``init`` (an Initializer, its JSON, or None for the global
    initializer of the call) according to its name, LSTM forget-gate biases (both the i2h and
    the h2h one, as in MXNet) are set to ``forget_bias``, and the vector is packed again.
    Unlike MXNet 1.9.1, a FusedRNN whose ``init`` is not None can be rebuilt from its JSON.
    """

    def __init__(self, init, num_hidden, num_layers, mode, bidirectional=False,
                 forget_bias=1.0):
        if isinstance(init, string_types):
            init = create(init)
        super().__init__(init=init.dumps() if init is not None else None,
                         num_hidden=num_hidden, num_layers=num_layers, mode=mode,
                         bidirectional=bidirectional, forget_bias=forget_bias)
        self._init = init  # the object; _kwargs keeps its JSON

    def _init_weight(self, desc, arr):
        conf = self._kwargs
        global_init = getattr(desc, "global_init", None)
        inner = self._init if self._init is not None else global_init
        if inner is None:
            raise ValueError("FusedRNN(init=None) fills %s with the global initializer, but "
                             "it was called without one (call it through an Initializer)"
                             % desc)
        layout = (conf["mode"], conf["num_layers"], conf["bidirectional"])
        num_input = packed_input_size(*layout, conf["num_hidden"], arr.size)
        if param_size(*layout, num_input, conf["num_hidden"]) != arr.size:
            raise ValueError("FusedRNN: %s has %d values, which is no packed size of a %d-layer "
                             "%s with %d hidden units" % (desc, arr.size, conf["num_layers"],
                                                          conf["mode"], conf["num_hidden"]))
        packed = arr.asnumpy().reshape(-1)
        for name, offset, shape in packed_pieces(*layout, num_input, conf["num_hidden"]):
            size = int(np.prod(shape))
            if conf["mode"] == "lstm" and name.endswith("_f_bias"):
                packed[offset:offset + size] = conf["forget_bias"]
                continue
            piece = nd_zeros(shape, dtype=arr.dtype)
            inner(InitDesc(name, global_init=global_init), piece)
            packed[offset:offset + size] = piece.asnumpy().reshape(-1)
        arr[:] = packed.reshape(arr.shape)
