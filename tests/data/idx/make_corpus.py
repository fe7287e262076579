#!/usr/bin/env python3
"""Writes the malformed-IDX corpus (issue 8) next to this script, plus corpus.tsv, the manifest the
[train] tests read: file, reader (images = 28x28 images, images-anydims = any rows/cols, labels =
labels 0..9, dataset = a directory for load_fashion_mnist) and a fragment the error message must
contain. Every file is tiny; gzip output is deterministic (mtime 0). Run once: python3 make_corpus.py
"""
import gzip
import os
import shutil
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES, LABELS = 0x00000803, 0x00000801
cases = []  # (relative path, reader, fragment)


def be32(*values):
    return b"".join(struct.pack(">I", v) for v in values)


def image_file(count, rows=28, cols=28, payload=None, magic=IMAGES):
    if payload is None:
        payload = bytes((i * 7) % 256 for i in range(count * rows * cols))
    return be32(magic, count, rows, cols) + payload


def label_file(labels, count=None, magic=LABELS):
    return be32(magic, len(labels) if count is None else count) + bytes(labels)


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def write(name, data, reader, fragment):
    path = os.path.join(HERE, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if reader:
        cases.append((name, reader, fragment))


one = image_file(1)

# ---- images: magic and type byte -------------------------------------------------------------
write("images-empty.idx", b"", "images", "truncated header")
write("images-short-magic.idx", b"\x00\x00", "images", "truncated header")
write("images-bad-magic-png.idx", b"\x89PNG\r\n\x1a\n" + bytes(16), "images", "bad magic at offset 0")
write("images-bad-magic-labels.idx", label_file([1, 2, 3]), "images", "bad magic at offset 0: expected 0x00000803")
write("images-bad-magic-4dims.idx", be32(0x00000804, 1, 28, 28, 1) + bytes(784), "images", "bad magic")
write("images-bad-magic-prefix.idx", image_file(1, magic=0x01000803), "images", "bad magic")
write("images-type-float32.idx", image_file(1, magic=0x00000D03), "images", "unsupported element type at offset 2")
write("images-type-int32.idx", image_file(1, magic=0x00000C03), "images", "found 0x0c")
write("images-type-signed-byte.idx", image_file(1, magic=0x00000903), "images", "unsupported element type")
write("images-truncated-header.idx", be32(IMAGES, 1), "images", "truncated header")
# ---- images: dimensions ----------------------------------------------------------------------
write("images-count-zero.idx", be32(IMAGES, 0, 28, 28), "images", "dimension 0 (number of images)")
write("images-count-huge.idx", be32(IMAGES, 0xFFFFFFFF, 28, 28) + bytes(784), "images", "found 4294967295")
write("images-count-over-cap.idx", be32(IMAGES, 10_000_001, 28, 28) + bytes(784), "images", "expected 1..10000000")
write("images-rows-zero.idx", be32(IMAGES, 1, 0, 28), "images", "dimension 1 (rows)")
write("images-cols-zero.idx", be32(IMAGES, 1, 28, 0), "images", "dimension 2 (columns)")
write("images-rows-27.idx", image_file(1, rows=27), "images", "expected 28, found 27")
write("images-rows-huge.idx", be32(IMAGES, 1, 0xFFFFFFFF, 28), "images", "found 4294967295")
write("images-anydims-rows-zero.idx", be32(IMAGES, 1, 0, 5), "images-anydims", "expected > 0, found 0")
write("images-anydims-overflow.idx", be32(IMAGES, 10_000_000, 0xFFFFFFFF, 0xFFFFFFFF), "images-anydims",
      "payload size overflows")
write("images-anydims-overflow-2pow63.idx", be32(IMAGES, 2, 0x80000000, 0x80000000), "images-anydims",
      "payload size overflows")
write("images-anydims-huge-declared.idx", be32(IMAGES, 3, 65536, 65536) + bytes(64), "images-anydims",
      "truncated payload")
# ---- images: payload size --------------------------------------------------------------------
write("images-huge-count-tiny-payload.idx", be32(IMAGES, 10_000_000, 28, 28) + bytes(784), "images",
      "truncated payload")
write("images-header-only.idx", be32(IMAGES, 1, 28, 28), "images", "truncated payload")
write("images-truncated-payload.idx", image_file(2)[:16 + 784 + 100], "images", "truncated payload")
write("images-truncated-by-one.idx", one[:-1], "images", "truncated payload")
write("images-extended-by-one.idx", one + b"\x00", "images", "trailing bytes after the payload")
write("images-extended-extra-image.idx", be32(IMAGES, 1, 28, 28) + bytes(2 * 784), "images", "trailing bytes")
# ---- images: gzip ----------------------------------------------------------------------------
one_gz = gz(one)
write("images-gz-truncated-half.idx.gz", one_gz[: len(one_gz) // 2], "images", "truncated gzip stream")
write("images-gz-truncated-trailer.idx.gz", one_gz[:-4], "images", "truncated gzip stream")
write("images-gz-header-only.idx.gz", one_gz[:10], "images", "truncated gzip stream")
write("images-gz-magic-only.idx.gz", b"\x1f\x8b", "images", "gzip")
bad_crc = bytearray(one_gz)
bad_crc[-8] ^= 0xFF  # CRC-32 of the trailer
write("images-gz-bad-crc.idx.gz", bytes(bad_crc), "images", "corrupt gzip data")
# A gzip header then a deflate block of the reserved type 3.
write("images-gz-bad-block.idx.gz", one_gz[:10] + b"\x07" + bytes(16), "images", "corrupt gzip data")
write("images-gz-expands-past-declared.idx.gz", gz(one + bytes(100_000)), "images",
      "gzip stream expands past the declared size")
write("images-gz-extended-by-one.idx.gz", gz(one + b"\x01"), "images", "trailing bytes after the payload")
write("images-gz-truncated-payload.idx.gz", gz(be32(IMAGES, 2, 28, 28) + bytes(784)), "images",
      "truncated payload")
write("images-gz-huge-count.idx.gz", gz(be32(IMAGES, 10_000_000, 28, 28) + bytes(784)), "images",
      "inflate to at most")
write("images-gz-trailing-garbage.idx.gz", one_gz + b"JUNK", "images", "trailing bytes after the gzip stream")
write("images-gz-second-member-extends.idx.gz", one_gz + gz(b"\x00"), "images", "trailing bytes after the payload")
write("images-gz-bad-magic.idx.gz", gz(label_file([0, 1])), "images", "bad magic at offset 0 of the decompressed data")
write("images-gz-type-float32.idx.gz", gz(image_file(1, magic=0x00000D03)), "images", "unsupported element type")
# ---- labels ----------------------------------------------------------------------------------
write("labels-bad-magic-images.idx", image_file(1), "labels",
      "bad magic at offset 0: expected 0x00000801 (IDX labels), found 0x00000803 (IDX images)")
write("labels-type-int16.idx", label_file([1, 2], magic=0x00000B01), "labels", "unsupported element type")
write("labels-truncated-header.idx", be32(LABELS)[:4] + b"\x00\x00", "labels", "truncated header")
write("labels-count-zero.idx", be32(LABELS, 0), "labels", "dimension 0 (number of labels)")
write("labels-count-huge.idx", be32(LABELS, 0xFFFFFFFF) + bytes(10), "labels", "found 4294967295")
write("labels-label-10.idx", label_file(list(range(10)) + [10]), "labels", "label at offset 18 (sample 10)")
write("labels-label-255.idx", label_file([0, 255, 3]), "labels", "expected 0..9, found 255")
write("labels-truncated.idx", label_file([1] * 5, count=10), "labels", "truncated payload")
write("labels-extended.idx", label_file([1] * 4, count=3), "labels", "trailing bytes after the payload")
write("labels-gz-label-12.idx.gz", gz(label_file([3, 12])), "labels", "found 12")
write("labels-gz-expands-past-declared.idx.gz", gz(label_file([1] * 3) + bytes(50_000)), "labels",
      "expands past the declared size")
labels_gz = gz(label_file(list(range(10)) * 3))
write("labels-gz-truncated.idx.gz", labels_gz[:-6], "labels", "truncated gzip stream")
# ---- image/label count mismatch (a directory load_fashion_mnist reads) -----------------------
shutil.rmtree(os.path.join(HERE, "count-mismatch"), ignore_errors=True)
write("count-mismatch/train-images-idx3-ubyte", image_file(2), None, None)
write("count-mismatch/train-labels-idx1-ubyte", label_file([1, 2, 3]), None, None)
cases.append(("count-mismatch", "dataset", "count mismatch"))
shutil.rmtree(os.path.join(HERE, "count-mismatch-gz"), ignore_errors=True)
write("count-mismatch-gz/t10k-images-idx3-ubyte.gz", gz(image_file(3)), None, None)
write("count-mismatch-gz/t10k-labels-idx1-ubyte.gz", gz(label_file([1, 2])), None, None)
cases.append(("count-mismatch-gz", "dataset-test", "count mismatch"))
# ---- valid seeds (fuzzing corpora start from these; the tests load them) ---------------------
write("valid/images-2.idx", image_file(2), None, None)
write("valid/images-2.idx.gz", gz(image_file(2)), None, None)
write("valid/labels-3.idx", label_file([0, 9, 5]), None, None)
write("valid/labels-3.idx.gz", gz(label_file([0, 9, 5])), None, None)

with open(os.path.join(HERE, "corpus.tsv"), "w") as f:
    f.write("# file\treader\texpected message fragment (generated by make_corpus.py)\n")
    for name, reader, fragment in cases:
        f.write(f"{name}\t{reader}\t{fragment}\n")
print(f"{len(cases)} malformed cases written to {HERE}")
