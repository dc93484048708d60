"""The data-set helpers of ``mx.test_utils``: ``download``, ``get_mnist``, ``get_mnist_ubyte``,
``get_mnist_pkl``, ``get_cifar10`` and ``get_mnist_iterator``.

They return what MXNet 1.9.1's helpers return and put files under the same names, but they work
without a network when the files are already on the machine:

1. a file already at the path a helper writes to (``dirname``/``fname``, or the working folder)
   is used as it is;
2. otherwise the folders listed in the environment variable ``LIGHTMOD_DATA`` (separated by
   ``os.pathsep``) are searched for a file of the same name, which is copied into place;
3. only then is the URL fetched, with the standard library (``urllib``). When that fails the
   error names the file and the folders to put it in.
"""
import gzip
import logging
import os
import shutil
import struct
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile

import numpy as np

from .base import MXNetError

# a module logger: logging.info() on the root logger would configure logging before
# the program's own basicConfig() and silence it
_LOG = logging.getLogger(__name__)

DATA_ENV = "LIGHTMOD_DATA"
_MNIST_URL = "http://data.mxnet.io/data/mnist/"
_MNIST_ZIP_URL = "http://data.mxnet.io/mxnet/data/mnist.zip"
_MNIST_PKL_URL = "http://deeplearning.net/data/mnist/mnist.pkl.gz"
_CIFAR_ZIP_URL = "http://data.mxnet.io/mxnet/data/cifar10.zip"
_MNIST_UBYTE = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                "t10k-labels-idx1-ubyte")
_CIFAR_FILES = ("train.rec", "test.rec", "train.lst", "test.lst")


def _data_folders():
    value = os.environ.get(DATA_ENV, "")
    return [folder for folder in value.split(os.pathsep) if folder]


def _find_local(name):
    """Path of a file called ``name`` in one of the LIGHTMOD_DATA folders, or None."""
    for folder in _data_folders():
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def _where_to_put(fname):
    folders = _data_folders()
    hint = "put %r into %r" % (os.path.basename(fname), os.path.dirname(os.path.abspath(fname)))
    if folders:
        return hint + " or into one of the %s folders %s" % (DATA_ENV, folders)
    return hint + " (or into a folder named by the environment variable %s)" % DATA_ENV


def download(url, fname=None, dirname=None, overwrite=False, retries=5):
    """Download ``url`` to ``fname`` (default: the URL's last part) in ``dirname`` and return the
    file's path.

    Without ``dirname`` the file goes where ``fname`` points (the working folder for a bare
    name); ``dirname`` is created when missing. An existing file is kept unless ``overwrite``.
    A file of the same name in a ``LIGHTMOD_DATA`` folder is copied instead of fetching. The
    fetch is tried ``retries + 1`` times; when all fail an MXNetError names the file and where
    to put it.
    """
    if retries < 0:
        raise MXNetError("download: retries must be at least 0, got %r" % (retries,))
    if fname is None:
        fname = url.split("/")[-1]
    if not fname:
        raise MXNetError("download: cannot guess a file name from url %r; pass fname" % (url,))
    if dirname is None:
        dirname = os.path.dirname(fname)
    else:
        fname = os.path.join(dirname, fname)
    if dirname:
        os.makedirs(dirname, exist_ok=True)
    if not overwrite and os.path.exists(fname):
        _LOG.info("%s exists, skipping download", fname)
        return fname
    local = _find_local(os.path.basename(fname))
    if local is not None and os.path.abspath(local) != os.path.abspath(fname):
        partial = _partial_name(fname)
        try:
            shutil.copyfile(local, partial)
            os.replace(partial, fname)
        finally:
            if os.path.exists(partial):
                os.remove(partial)
        _LOG.info("copied %s from %s", fname, local)
        return fname
    last_error = None
    for attempt in range(retries + 1):
        try:
            _fetch(url, fname)
            _LOG.info("downloaded %s into %s successfully", url, fname)
            return fname
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last_error = exc
            if attempt < retries:
                _LOG.info("download of %s failed (%s), retrying", url, exc)
                time.sleep(min(0.5 * (attempt + 1), 2.0))
    raise MXNetError("download: could not fetch %s (%s). Without network access, %s"
                     % (url, last_error, _where_to_put(fname)))


def _partial_name(fname):
    """A temporary name next to ``fname`` that no other process uses: processes fetching or
    copying the same file at once (test workers, several jobs) must not write into one
    another's file, and the final rename puts a whole file in place."""
    return "%s.%s.part" % (fname, uuid.uuid4().hex[:16])


def _fetch(url, fname):
    partial = _partial_name(fname)
    try:
        with urllib.request.urlopen(url, timeout=30) as response, open(partial, "xb") as out:
            status = getattr(response, "status", 200)
            if status is not None and status != 200:
                raise OSError("HTTP status %s" % status)
            shutil.copyfileobj(response, out, 1 << 16)
        os.replace(partial, fname)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def _read_gz_idx(path, header_format):
    with gzip.open(path, "rb") as f:
        header = struct.unpack(header_format, f.read(struct.calcsize(header_format)))
        return header, f.read()


def get_mnist():
    """MNIST as numpy arrays: a dict with ``train_data``, ``train_label``, ``test_data`` and
    ``test_label``. Images are float32 of shape (N, 1, rows, cols) scaled by 1/255, labels int8.
    The four ``*-idx?-ubyte.gz`` files are downloaded into the working folder.
    """
    def read(label_name, image_name):
        _, raw = _read_gz_idx(download(_MNIST_URL + label_name), ">II")
        label = np.frombuffer(raw, dtype=np.int8)
        (_, _, rows, cols), raw = _read_gz_idx(download(_MNIST_URL + image_name), ">IIII")
        image = np.frombuffer(raw, dtype=np.uint8)
        if image.size != len(label) * rows * cols:
            raise MXNetError("get_mnist: %s holds %d pixels, expected %d images of %dx%d"
                             % (image_name, image.size, len(label), rows, cols))
        return label, image.reshape(len(label), 1, rows, cols).astype(np.float32) / 255
    train_label, train_data = read("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz")
    test_label, test_data = read("t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz")
    return {"train_data": train_data, "train_label": train_label,
            "test_data": test_data, "test_label": test_label}


def get_mnist_pkl():
    """Place ``data/mnist.pkl.gz`` (in the working folder), downloading it when missing."""
    os.makedirs("data", exist_ok=True)
    if not os.path.exists(os.path.join("data", "mnist.pkl.gz")):
        download(_MNIST_PKL_URL, dirname="data")


def _place_from_local(name, folder):
    """Copy ``name`` (or decompress ``name.gz``) from a LIGHTMOD_DATA folder into ``folder``."""
    target = os.path.join(folder, name)
    local = _find_local(name)
    opener = open
    if local is None:
        local, opener = _find_local(name + ".gz"), gzip.open
        if local is None:
            return False
    partial = _partial_name(target)
    try:
        with opener(local, "rb") as src, open(partial, "xb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return True


def _place_archive(folder, names, url):
    missing = [n for n in names if not os.path.exists(os.path.join(folder, n))]
    missing = [n for n in missing if not _place_from_local(n, folder)]
    if missing:
        archive = download(url, dirname="data")
        # unpacked in a folder of this process's own, then each file renamed into place: a
        # process finding a file there finds it whole
        scratch = tempfile.mkdtemp(prefix=".unpack.", dir="data")
        try:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(scratch)
            for where, _, files in os.walk(scratch):
                for name in files:
                    path = os.path.join(where, name)
                    target = os.path.join("data", os.path.relpath(path, scratch))
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    os.replace(path, target)
        except zipfile.BadZipFile as exc:
            raise MXNetError("%s is not a zip archive (%s): remove it and retry" % (archive, exc)) from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def get_mnist_ubyte():
    """Place the four raw MNIST idx files in ``data/`` (in the working folder): taken from a
    LIGHTMOD_DATA folder (raw or ``.gz``) when there, otherwise by downloading and unpacking
    ``mnist.zip``."""
    os.makedirs("data", exist_ok=True)
    _place_archive("data", _MNIST_UBYTE, _MNIST_ZIP_URL)


def get_cifar10():
    """Place CIFAR-10's ``train.rec``, ``test.rec``, ``train.lst`` and ``test.lst`` in
    ``data/cifar/``, from a LIGHTMOD_DATA folder or by downloading and unpacking ``cifar10.zip``."""
    os.makedirs(os.path.join("data", "cifar"), exist_ok=True)
    _place_archive(os.path.join("data", "cifar"), _CIFAR_FILES, _CIFAR_ZIP_URL)


def get_mnist_iterator(batch_size, input_shape, num_parts=1, part_index=0):
    """MNIST training (shuffled) and validation MNISTIters over ``data/``'s idx files; images
    are flat unless ``input_shape`` has three dimensions."""
    from .io.mnist import MNISTIter
    get_mnist_ubyte()
    flat = len(input_shape) != 3
    common = dict(input_shape=input_shape, batch_size=batch_size, flat=flat, num_parts=num_parts,
                  part_index=part_index)
    train = MNISTIter(image=os.path.join("data", "train-images-idx3-ubyte"),
                      label=os.path.join("data", "train-labels-idx1-ubyte"), shuffle=True, **common)
    val = MNISTIter(image=os.path.join("data", "t10k-images-idx3-ubyte"),
                    label=os.path.join("data", "t10k-labels-idx1-ubyte"), **common)
    return train, val
