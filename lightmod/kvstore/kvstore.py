"""The local and device kvstores (MXNet 1.9.1's ``KVStoreLocal`` seen from Python).

A store keeps one copy of each key's value. ``push`` sums the pushed arrays (one per device);
with an updater the sum goes to ``updater(key, merged, stored)``, which changes ``stored`` in
place, otherwise the sum replaces the stored value. ``pull`` copies the stored value into every
output. 'local' types keep and reduce values on the CPU; 'device' types (and 'nccl') on the
device of the first value, and may compress gradients (MXNet's 2-bit scheme).

Keys are ints or strings, one kind per store. An updater gets int keys as ``int`` and string
keys as ``bytes`` (what MXNet's C callback hands over; ``Updater`` turns them back into str).
Row-sparse values are dense-backed NDArrays whose ``stype`` is 'row_sparse'.
"""
import numpy as np

from .. import optimizer as opt
from ..base import MXNetError, atomic_write, string_types
from ..context import Context
from ..ndarray import NDArray, zeros
from .base import KVStoreBase, _optimizer_capability, _SingleProcessStore

__all__ = ["KVStore", "create"]


def _pairs(key, value, what):
    """Flatten (key | keys, value | values) into [(key, [arrays])], checking the key types
    like MXNet's ``_ctype_key_value``; returns (pairs, uses_str_keys)."""
    if isinstance(key, (tuple, list)):
        if len(key) != len(value):
            raise AssertionError("%s: %d keys but %d values" % (what, len(key), len(value)))
        pairs, use_str = [], None
        for k, v in zip(key, value):
            sub, sub_str = _pairs(k, v, what)
            if use_str is not None and use_str != sub_str:
                raise AssertionError("%s: inconsistent types of keys detected." % what)
            use_str = sub_str
            pairs += sub
        return pairs, bool(use_str)
    if isinstance(key, bool) or not isinstance(key, (int,) + string_types):
        raise AssertionError("%s: unexpected type for keys: %s" % (what, type(key)))
    arrays = [value] if isinstance(value, NDArray) else list(value)
    for a in arrays:
        if not isinstance(a, NDArray):
            raise AssertionError("%s: values for key %r must be NDArrays, got %s"
                                 % (what, key, type(a).__name__))
    return [(key, arrays)], isinstance(key, string_types)


def _grouped(pairs):
    """Arrays of the same key pushed in one call are reduced together (first-seen order)."""
    groups = {}
    for key, arrays in pairs:
        groups.setdefault(key, []).extend(arrays)
    return groups


class KVStore(_SingleProcessStore):
    """A single-process kvstore; create it with ``mx.kv.create('local' | 'device' | ...)``."""

    def __init__(self, kv_type="local"):
        self._type = kv_type
        self._device = "device" in kv_type or kv_type == "nccl"
        self._store = {}
        self._merge = {}          # key -> reusable reduction buffer
        self._key_type = None     # 'int' or 'str' once the first key is seen
        self._updater = None
        self._compression = None  # {'type': '2bit', 'threshold': float}
        self._residuals = {}      # (key, position) -> (residual, sent) of 2-bit compression

    # --- properties ----------------------------------------------------------------------------
    @property
    def type(self):
        return self._type

    def is_capable(self, capability):
        return _optimizer_capability(capability, runs_optimizer=True)

    def _barrier(self):
        """All workers wait here; a local store has only one."""

    barrier = _barrier

    def _send_command_to_servers(self, head, body):
        """A local store has no servers: nothing to send."""

    # --- keys ----------------------------------------------------------------------------------
    def _check_key_type(self, use_str, what):
        kind = "str" if use_str else "int"
        if self._key_type is None:
            self._key_type = kind
        elif self._key_type != kind:
            raise MXNetError("%s: this kvstore uses %s keys, got %s keys (mixed key types are "
                             "not allowed)" % (what, self._key_type, kind))

    def _stored(self, key, what):
        value = self._store.get(key)
        if value is None:
            raise MXNetError("%s: key %r has not been inited" % (what, key))
        return value

    def _home(self, value):
        """Where the store keeps a key: the value's device for device types, cpu(0) for the
        others (MXNet keeps them in pinned CPU memory of device 0)."""
        return value.context if self._device else Context("cpu", 0)

    # --- init / push / pull ----------------------------------------------------------------------
    def init(self, key, value):
        """Initialise key(s) with value(s) (a copy is stored)."""
        pairs, use_str = _pairs(key, value, "init")
        self._check_key_type(use_str, "init")
        for k, arrays in pairs:
            for a in arrays:
                if k in self._store:
                    raise MXNetError("init: duplicate init of key %r" % (k,))
                self._store[k] = a.copyto(self._home(a))

    def push(self, key, value, priority=0):
        """Push value(s): the arrays of one key are summed (and, in a distributed store, summed
        over all workers), then handed to the updater (or they replace the stored value)."""
        pairs, use_str = _pairs(key, value, "push")
        self._check_key_type(use_str, "push")
        for k, arrays in _grouped(pairs).items():
            stored = self._stored(k, "push")
            total = self._sum_over_workers(k, self._reduce(k, arrays, stored), stored.context)
            if self._updater is not None:
                self._updater(k.encode("utf-8") if isinstance(k, str) else k, total, stored)
            elif total is not stored:
                total.copyto(stored)

    def _sum_over_workers(self, key, merged, home):
        """The pushed total of a key; a single process's own sum is the total (the distributed
        store adds the other workers' sums here)."""
        return merged

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the stored value(s) into out; row_sparse outs are skipped unless
        ``ignore_sparse=False``."""
        if out is None:
            raise AssertionError("pull: out must be given")
        pairs, use_str = _pairs(key, out, "pull")
        self._check_key_type(use_str, "pull")
        for k, arrays in pairs:
            stored = self._stored(k, "pull")
            for o in arrays:
                if ignore_sparse and o.stype != "default":
                    continue
                stored.copyto(o)

    def pushpull(self, key, value, out=None, priority=0):
        """push(key, value) then pull(key, out) (into ``value`` itself without ``out``)."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key, value, out, priority=0):
        """init(key, value) then pull(key, out)."""
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Pull only the rows ``row_ids`` (repeats allowed, any shape) into row_sparse outs;
        the other rows of each out become zero."""
        if out is None:
            raise AssertionError("row_sparse_pull: out must be given")
        if row_ids is None:
            raise AssertionError("row_sparse_pull: row_ids must be given")
        if isinstance(row_ids, NDArray):
            row_ids = [row_ids]
        if not isinstance(row_ids, list):
            raise AssertionError("row_ids should be NDArray or list of NDArray")
        first_out = out
        single_rowid = len(row_ids) == 1 and isinstance(out, list)
        if single_rowid:
            first_out = [out[0]]
        pairs, use_str = _pairs(key, first_out, "row_sparse_pull")
        rid_pairs, _ = _pairs(key, row_ids, "row_sparse_pull")
        self._check_key_type(use_str, "row_sparse_pull")
        outs = [(k, o) for k, arrays in pairs for o in arrays]
        rids = [r for _, arrays in rid_pairs for r in arrays]
        if len(rids) != len(outs):
            raise AssertionError("the number of row_ids doesn't match the number of values")
        for (k, o), rid in zip(outs, rids):
            if o.stype != "row_sparse":
                raise MXNetError("row_sparse_pull: out for key %r must be row_sparse, got %s"
                                 % (k, o.stype))
            stored = self._stored(k, "row_sparse_pull")
            host = stored._host_view()
            rows = np.unique(rid._host_view().astype(np.int64).reshape(-1))
            if rows.size and (rows[0] < 0 or rows[-1] >= host.shape[0]):
                raise MXNetError("row_sparse_pull: row id out of range [0, %d) for key %r"
                                 % (host.shape[0], k))
            picked = np.zeros(host.shape, dtype=np.dtype(o.dtype))
            picked[rows] = host[rows]
            o[:] = picked
        if single_rowid:
            for other in out[1:]:
                out[0].copyto(other)

    # --- reduction and gradient compression ----------------------------------------------------
    def _reduce(self, key, arrays, stored):
        """The sum of ``arrays`` on the store's side (compressed first when configured)."""
        if self._compression is not None:
            arrays = [self._compress(key, i, a) for i, a in enumerate(arrays)]
        if len(arrays) == 1 and self._compression is None:
            return arrays[0]
        home = stored.context
        buf = self._merge.get(key)
        first = arrays[0]
        if buf is None or buf.shape != first.shape or buf.dtype != first.dtype \
                or buf.context != home:
            buf = self._merge[key] = first.copyto(home)
        else:
            first.copyto(buf)
        buf._stype = "row_sparse" if all(a.stype == "row_sparse" for a in arrays) else "default"
        for a in arrays[1:]:
            if isinstance(buf._data, np.ndarray):
                np.add(buf._data, a._host_view(), out=buf._data, casting="unsafe")
            else:
                buf += a.as_in_context(home)
        return buf

    def set_gradient_compression(self, compression_params):
        """Compress pushed gradients: ``{'type': '2bit', 'threshold': 0.5}`` (device types).

        Each pushed array adds into its own residual; +threshold / -threshold is sent where the
        residual reaches it (and taken off the residual), 0 elsewhere."""
        if "device" not in self.type and "dist" not in self.type:
            raise MXNetError("Gradient compression is not supported for this type of kvstore "
                             "('%s'; use a 'device' or 'dist' kvstore)" % self.type)
        if not isinstance(compression_params, dict):
            raise AssertionError("unexpected type for param_dict: %s"
                                 % type(compression_params))
        params = dict(compression_params)
        kind = str(params.pop("type", "none")).lower()
        threshold = float(params.pop("threshold", 0.5))
        if params:
            raise MXNetError("set_gradient_compression: unknown parameter(s) %s (accepted: "
                             "type, threshold)" % sorted(params))
        if kind == "none":
            self._compression = None
            return
        if kind != "2bit":
            raise MXNetError("set_gradient_compression: unknown type '%s' (supported: '2bit', "
                             "'none')" % kind)
        if not threshold > 0:
            raise MXNetError("set_gradient_compression: threshold must be greater than 0, got "
                             "%s" % threshold)
        self._compression = {"type": kind, "threshold": threshold}
        self._residuals = {}

    def _compress(self, key, position, array):
        if array.stype != "default":
            raise MXNetError("gradient compression does not support %s values (key %r)"
                             % (array.stype, key))
        from .. import kernels
        slot = (key, position)
        residual, sent = self._residuals.get(slot, (None, None))
        if residual is None or residual.shape != array.shape or residual.context != array.context:
            residual = zeros(array.shape, array.context, dtype=array.dtype)
            sent = zeros(array.shape, array.context, dtype=array.dtype)
            self._residuals[slot] = (residual, sent)
        kernels.for_context(array.context).quantize_2bit(
            array._data, residual._data, sent._data, self._compression["threshold"])
        return sent

    # --- optimizer -----------------------------------------------------------------------------
    def set_optimizer(self, optimizer):
        """Update the stored values with ``optimizer`` at every push (through an Updater)."""
        self._set_updater(opt.get_updater(optimizer))

    def _set_updater(self, updater):
        """Use ``updater(key, merged_value, stored_value)`` at every push (tests use it)."""
        self._updater = updater

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write the updater's states (MXNet's .states pickle) to ``fname``."""
        if self._updater is None or not hasattr(self._updater, "get_states"):
            raise MXNetError("save_optimizer_states: this kvstore has no optimizer "
                             "(call set_optimizer first)")
        atomic_write(fname, self._updater.get_states(dump_optimizer))

    def load_optimizer_states(self, fname):
        """Load states written by save_optimizer_states (here or by MXNet)."""
        if self._updater is None or not hasattr(self._updater, "set_states"):
            raise MXNetError("load_optimizer_states: this kvstore has no optimizer "
                             "(call set_optimizer first)")
        with open(fname, "rb") as fin:
            self._updater.set_states(fin.read())


def create(name="local"):
    """A new kvstore of type ``name`` ('local', 'device', 'nccl', 'local_allreduce_cpu', ...,
    or a registered plug-in such as the distributed store)."""
    if not isinstance(name, string_types):
        raise TypeError("name must be a string")
    name = name.lower()
    klass = KVStoreBase.kv_registry.get(name)
    if klass is not None:
        return klass(name) if name in [n.lower() for n in getattr(klass, "kvstore_types", ())] \
            else klass()
    if "dist" in name:
        raise MXNetError("kvstore type '%s' needs lightmod's distributed store, which is not "
                         "registered (registered types: %s)"
                         % (name, ", ".join(sorted(KVStoreBase.kv_registry)) or "none"))
    return KVStore(name)
