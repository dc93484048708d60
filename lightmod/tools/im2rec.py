"""im2rec: make image lists (``.lst``) from a folder tree and pack them into RecordIO files
(``.rec`` + ``.idx``), with the flags of MXNet's ``tools/im2rec.py``.

    python -m lightmod.tools.im2rec --list --recursive PREFIX ROOT   # PREFIX.lst
    python -m lightmod.tools.im2rec PREFIX ROOT                      # PREFIX*.lst -> .rec/.idx
    lightmod im2rec ...                                              # the same

A ``.lst`` line is ``index<TAB>label(s)<TAB>relative path``. With ``--recursive`` every
sub-folder that holds images is one class, numbered in sorted walk order. Images that
cannot be read are skipped with a message and counted.
"""
import argparse
import os
import random
import sys
import time

__all__ = ["main", "list_images", "write_list", "read_list", "encode_item"]


def list_images(root, recursive, exts):
    """``(index, relative path, label)`` of the images under ``root``, in sorted order."""
    index = 0
    if recursive:
        classes = {}
        for path, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for fname in sorted(files):
                full = os.path.join(path, fname)
                if os.path.splitext(fname)[1].lower() in exts and os.path.isfile(full):
                    label = classes.setdefault(path, len(classes))
                    yield index, os.path.relpath(full, root), label
                    index += 1
        for path, label in sorted(classes.items(), key=lambda kv: kv[1]):
            print(os.path.relpath(path, root), label)
    else:
        for fname in sorted(os.listdir(root)):
            full = os.path.join(root, fname)
            if os.path.isfile(full) and os.path.splitext(fname)[1].lower() in exts:
                yield index, os.path.relpath(full, root), 0
                index += 1


def write_list(path, items):
    """Write ``(index, path, label...)`` items as a ``.lst`` file."""
    with open(path, "w") as out:
        for item in items:
            labels = "".join("%f\t" % float(v) for v in item[2:])
            out.write("%d\t%s%s\n" % (item[0], labels, item[1]))


def read_list(path):
    """Items ``[index, relative path, label, ...]`` of a ``.lst`` file; a malformed line raises
    ValueError naming the file and line."""
    with open(path) as fin:
        for lineno, line in enumerate(fin, 1):
            fields = [f.strip() for f in line.strip().split("\t")]
            if not fields or fields == [""]:
                continue
            if len(fields) < 3:
                raise ValueError("%s line %d: expected 'index<TAB>label(s)<TAB>path', got %r"
                                 % (path, lineno, line.rstrip("\n")))
            try:
                yield [int(fields[0]), fields[-1]] + [float(v) for v in fields[1:-1]]
            except ValueError:
                raise ValueError("%s line %d: index must be an integer and labels numbers, "
                                 "got %r" % (path, lineno, line.rstrip("\n"))) from None


def make_lists(args):
    exts = [e.lower() if e.startswith(".") else "." + e.lower() for e in args.exts]
    items = list(list_images(args.root, args.recursive, exts))
    if args.shuffle:
        random.seed(100)
        random.shuffle(items)
    total = len(items)
    per_chunk = (total + args.chunks - 1) // args.chunks if total else 0
    for c in range(args.chunks):
        chunk = items[c * per_chunk:(c + 1) * per_chunk]
        suffix = "_%d" % c if args.chunks > 1 else ""
        n_test = int(per_chunk * args.test_ratio)
        n_train = int(per_chunk * args.train_ratio)
        if args.train_ratio == 1.0:
            write_list(args.prefix + suffix + ".lst", chunk)
            continue
        if args.test_ratio:
            write_list(args.prefix + suffix + "_test.lst", chunk[:n_test])
        if args.train_ratio + args.test_ratio < 1.0:
            write_list(args.prefix + suffix + "_val.lst", chunk[n_test + n_train:])
        write_list(args.prefix + suffix + "_train.lst", chunk[n_test:n_test + n_train])


_OPTIONS = None


def _init_worker(options):
    global _OPTIONS
    _OPTIONS = options


def encode_item(item, options=None):
    """``(item, packed record bytes or None, message)`` for one list item."""
    from lightmod import recordio
    from lightmod.image.codec import cv2_module
    opts = options or _OPTIONS
    full = os.path.join(opts["root"], item[1])
    labels = item[2:]
    label = labels if (len(labels) > 1 and opts["pack_label"]) else (labels[0] if labels else 0.0)
    header = recordio.IRHeader(0, label, item[0], 0)
    if opts["pass_through"]:
        try:
            with open(full, "rb") as f:
                return item, recordio.pack(header, f.read()), None
        except OSError as err:
            return item, None, "cannot read %s: %s" % (full, err.strerror)
    cv2 = cv2_module()
    img = cv2.imread(full, opts["color"])
    if img is None:
        return item, None, "imread read blank (None) image for file: %s" % full
    if opts["center_crop"]:
        h, w = img.shape[:2]
        side = min(h, w)
        y0, x0 = (h - side) // 2, (w - side) // 2
        img = img[y0:y0 + side, x0:x0 + side]
    if opts["resize"]:
        h, w = img.shape[:2]
        size = opts["resize"]
        new = (size, h * size // w) if h > w else (w * size // h, size)
        img = cv2.resize(img, new)
    return item, recordio.pack_img(header, img, quality=opts["quality"],
                                   img_fmt=opts["encoding"]), None


def _pack_list(lst_path, args):
    from lightmod import recordio
    stem = os.path.splitext(lst_path)[0]
    items = list(read_list(lst_path))
    options = dict(root=args.root, pack_label=args.pack_label, pass_through=args.pass_through,
                   color=args.color, center_crop=args.center_crop, resize=args.resize,
                   quality=args.quality, encoding=args.encoding)
    writer = recordio.MXIndexedRecordIO(stem + ".idx", stem + ".rec", "w")
    skipped = written = 0
    start = time.time()
    if args.num_thread > 1:
        import multiprocessing
        with multiprocessing.get_context("spawn").Pool(args.num_thread, _init_worker,
                                                       (options,)) as pool:
            results = pool.imap(encode_item, items, chunksize=16)
            for item, packed, message in results:
                written, skipped = _store(writer, item, packed, message, written, skipped)
    else:
        for item in items:
            written, skipped = _store(writer, *encode_item(item, options), written, skipped)
    writer.close()
    print("%s: %d images packed into %s.rec, %d skipped (%.1f s)"
          % (lst_path, written, stem, skipped, time.time() - start))
    return skipped


def _store(writer, item, packed, message, written, skipped):
    if packed is None:
        print(message)
        return written, skipped + 1
    writer.write_idx(item[0], packed)
    if (written + 1) % 1000 == 0:
        print("packed %d images" % (written + 1))
    return written + 1, skipped


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="im2rec", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Create an image list, or pack the image lists of PREFIX into RecordIO "
                    "files")
    parser.add_argument("prefix", help="prefix of the .lst files (a folder: every .lst in it)")
    parser.add_argument("root", help="folder of the images")
    lists = parser.add_argument_group("Options for creating image lists")
    lists.add_argument("--list", action="store_true",
                       help="make image lists from ROOT instead of packing")
    lists.add_argument("--exts", nargs="+", default=[".jpeg", ".jpg", ".png"],
                       help="image file extensions to list")
    lists.add_argument("--chunks", type=int, default=1, help="number of chunks")
    lists.add_argument("--train-ratio", type=float, default=1.0, help="share of training images")
    lists.add_argument("--test-ratio", type=float, default=0, help="share of test images")
    lists.add_argument("--recursive", action="store_true",
                       help="walk sub-folders; each folder of images is one class")
    lists.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                       help="keep the sorted order instead of shuffling (seed 100)")
    recs = parser.add_argument_group("Options for creating database")
    recs.add_argument("--pass-through", action="store_true",
                      help="store the image files' bytes unchanged")
    recs.add_argument("--resize", type=int, default=0,
                      help="resize the shorter edge to this size (0: keep)")
    recs.add_argument("--center-crop", action="store_true", help="crop the centred square")
    recs.add_argument("--quality", type=int, default=95,
                      help="JPEG quality (1-100) or PNG compression (0-9)")
    recs.add_argument("--num-thread", type=int, default=1, help="number of encoding processes")
    recs.add_argument("--color", type=int, default=1, choices=[-1, 0, 1],
                      help="1: colour, 0: grayscale, -1: as stored (alpha included)")
    recs.add_argument("--encoding", type=str, default=".jpg", choices=[".jpg", ".png"],
                      help="encoding of the stored images")
    recs.add_argument("--pack-label", action="store_true",
                      help="store every label of a multi-label list line")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    args.prefix = os.path.abspath(args.prefix)
    args.root = os.path.abspath(args.root)
    if not os.path.isdir(args.root):
        print("im2rec: image folder %s does not exist" % args.root, file=sys.stderr)
        return 2
    if args.list:
        make_lists(args)
        return 0
    if os.path.isdir(args.prefix):
        folder, stem = args.prefix, ""
    else:
        folder, stem = os.path.dirname(args.prefix), os.path.basename(args.prefix)
    lists = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                   if f.startswith(stem) and f.endswith(".lst")
                   and os.path.isfile(os.path.join(folder, f)))
    if not lists:
        print("im2rec: no .lst file matches %s (make one with --list)" % args.prefix,
              file=sys.stderr)
        return 2
    for lst in lists:
        try:
            _pack_list(lst, args)
        except ValueError as err:
            print("im2rec: %s" % err, file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
