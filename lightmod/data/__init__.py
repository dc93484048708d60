"""Small real data sets that ship inside lightmod (no download).

* ``digits``: the UCI "Optical Recognition of Handwritten Digits" test set (E. Alpaydin,
  C. Kaynak, 1998; CC BY 4.0, as redistributed by scikit-learn under BSD-3): 1,797 images of
  8x8 pixels with values 0..16, ten classes.
* ``declaration``: the text of the United States Declaration of Independence (1776, public
  domain), for the language-model example.
"""
import os

import numpy as np

__all__ = ["load_digits", "load_text", "data_path"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def data_path(name):
    """Absolute path of a file shipped in lightmod/data."""
    return os.path.join(_HERE, name)


def load_digits(split=None, val_fraction=0.2, seed=0, flat=False):
    """The 8x8 digits as float32 images scaled to [0, 1] and float32 labels.

    ``split=None`` returns ``(images, labels)`` for all 1,797 samples. ``split='train'`` or
    ``'val'`` returns one side of a fixed, stratification-free random split (``seed``), so the
    demo, the examples and the tests all see the same partition. Images have shape
    (N, 1, 8, 8), or (N, 64) with ``flat=True``.
    """
    with np.load(data_path("digits.npz")) as f:
        images = f["images"].astype(np.float32) / 16.0
        labels = f["labels"].astype(np.float32)
    images = images.reshape(len(images), 64) if flat else images.reshape(len(images), 1, 8, 8)
    if split is None:
        return images, labels
    if split not in ("train", "val"):
        raise ValueError("split must be None, 'train' or 'val', got %r" % (split,))
    order = np.random.default_rng(seed).permutation(len(images))
    n_val = int(round(len(images) * val_fraction))
    idx = order[n_val:] if split == "train" else order[:n_val]
    return images[idx], labels[idx]


def load_text(name="declaration", split_clauses=True, lower=True):
    """A shipped text as a list of token lists (words and punctuation marks).

    With ``split_clauses`` every clause (text up to ``, ; : .``) is one sequence, which gives
    a few hundred short sequences of varied length for bucketing examples.
    """
    import re
    path = data_path("%s.txt" % name)
    if not os.path.exists(path):
        raise ValueError("no shipped text named %r" % (name,))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if lower:
        text = text.lower()
    pieces = re.split(r"(?<=[,;:.])\s+", text) if split_clauses else text.splitlines()
    return [re.findall(r"[\w']+|[^\w\s]", piece) for piece in pieces if piece.strip()]
