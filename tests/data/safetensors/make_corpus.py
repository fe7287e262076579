#!/usr/bin/env python3
"""Writes the safetensors test corpus: malformed/ (files every reader must reject) and valid/.

Run once from anywhere; the outputs are committed. Only the standard library is needed for the
malformed files and valid/ember_order.safetensors. valid/reference_torch.safetensors is written by
the reference implementation (the `safetensors` package with PyTorch) when both import; otherwise the
committed copy is kept. When `safetensors` imports, every file is also run through the reference
reader and its verdict is printed and recorded in malformed/EXPECTED.tsv (column 3).
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MALFORMED = os.path.join(HERE, "malformed")
VALID = os.path.join(HERE, "valid")


def pad(text):
    return text + b" " * ((8 - len(text) % 8) % 8)


def st(header, data=b"", length=None, padded=True):
    """A file: u64 LE length, header (dict -> compact JSON, or raw bytes), data."""
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if padded:
        text = pad(text)
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


GOOD = {"a": t("F32", [2, 2], 0, 16)}
DATA16 = bytes(range(16))

# name -> (bytes, fragment ember's FormatError message must contain)
CASES = {
    "empty": (b"", "expected at least 8 bytes"),
    "seven_bytes": (b"\x10\x00\x00\x00\x00\x00\x00", "expected at least 8 bytes"),
    "header_length_past_eof": (st({}, length=1000), "past the end of the file"),
    "header_length_over_cap": (st({}, length=100_000_008), "cap"),
    "header_length_u64_max": (st({}, length=2**64 - 1), "cap"),
    "header_length_zero": (struct.pack("<Q", 0), "an empty header"),
    "header_not_json_text": (st(b"hello, world"), "start with '{'"),
    "header_not_json_braced": (st(b"{hello}"), "not valid JSON"),
    "header_is_array": (st(b"[1, 2, 3]"), "start with '{'"),
    "header_utf8_bom": (st(b"\xef\xbb\xbf{}"), "found byte 0xef"),
    "header_invalid_utf8": (st(b'{"\xff\xfe":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'), "found byte 0xff"),
    "header_overlong_utf8": (st(b'{"\xc0\xaf":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'), "found byte 0xc0"),
    "header_surrogate_utf8": (st(b'{"\xed\xa0\x80":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'), "found byte 0xed"),
    "header_nul_then_garbage": (st(b'{}\x00{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}', DATA16), "found byte 0x00"),
    "header_truncated_json": (st(b'{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}', DATA16), "not valid JSON"),
    "header_trailing_garbage": (st(b'{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}x', DATA16), "not valid JSON"),
    "header_nul_padding": (st(b'{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}' + b"\x00" * 6, DATA16, padded=False), "found byte 0x00"),
    "dtype_unknown": (st({"a": t("F33", [2, 2], 0, 16)}, DATA16), "unknown dtype"),
    "dtype_unsupported_bf16": (st({"a": t("BF16", [8], 0, 16)}, DATA16), "not supported by ember"),
    "dtype_not_string": (st({"a": t(5, [2, 2], 0, 16)}, DATA16), 'expected "dtype" to be a string'),
    "field_missing": (st({"a": {"dtype": "F32", "shape": [2, 2]}}, DATA16), "missing field"),
    "field_unexpected": (st({"a": dict(t("F32", [2, 2], 0, 16), offsets=[0, 16])}, DATA16), "unexpected field"),
    "field_duplicate": (st(b'{"a":{"dtype":"F32","dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}', DATA16), "appears twice"),
    "shape_negative": (st({"a": t("F32", [-2, 2], 0, 16)}, DATA16), "found -2"),
    "shape_float": (st({"a": t("F32", [2.0, 2], 0, 16)}, DATA16), "found 2.0"),
    "shape_not_array": (st({"a": t("F32", 4, 0, 16)}, DATA16), 'expected "shape" to be an array'),
    "shape_nested": (st({"a": t("F32", [[2, 2]], 0, 16)}, DATA16), "found an array"),
    "shape_numel_overflow": (st({"a": t("F32", [2**32, 2**32, 2**32], 0, 0)}), "too large to address"),
    "shape_zero_with_huge_dims": (st({"a": t("F32", [0, 2**62, 2**62], 0, 0)}), "too large to address"),
    "shape_bytes_overflow": (st({"a": t("F64", [2**62], 0, 0)}), "more than 2^63 bytes"),
    "shape_dim_beyond_u64": (st(b'{"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,0]}}'), "found 18446744073709551616"),
    "span_mismatch_short": (st({"a": t("F32", [2, 2], 0, 12)}, DATA16[:12]), "expected data_offsets to span 16 bytes"),
    "span_mismatch_long": (st({"a": t("F32", [2, 2], 0, 20)}, DATA16 + b"\x00" * 4), "expected data_offsets to span 16 bytes"),
    "offsets_reversed": (st({"a": t("U8", [0], 16, 0)}, DATA16), "reversed"),
    "offsets_three": (st({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8, 16]}}, DATA16), "more than 2 entries"),
    "offsets_one": (st({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [16]}}, DATA16), "found 1 entries"),
    "offsets_negative": (st({"a": t("U8", [4], -4, 0)}, DATA16), "found -4"),
    "offsets_past_end": (st({"a": t("F32", [4], 0, 16)}, DATA16[:8]), "run past the end of the file"),
    "offsets_near_u64_max": (st({"a": t("F32", [1], 2**64 - 8, 2**64 - 4)}, DATA16), "run past the end of the file"),
    "offsets_overlap": (st({"a": t("F32", [4], 0, 16), "b": t("F32", [4], 8, 24)}, DATA16 + DATA16[:8]), "overlap"),
    "offsets_empty_inside_other": (st({"a": t("F32", [4], 0, 16), "e": t("F32", [0], 8, 8)}, DATA16), "overlap"),
    "offsets_gap": (st({"a": t("F32", [4], 0, 16), "b": t("F32", [4], 20, 36)}, DATA16 * 2 + b"\x00" * 4), "a gap of 4 bytes"),
    "offsets_not_from_zero": (st({"a": t("F32", [4], 4, 20)}, b"\x00" * 4 + DATA16), "start at buffer offset 0"),
    "trailing_bytes": (st(GOOD, DATA16 + b"extra"), "5 trailing bytes"),
    "duplicate_names": (st(b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', DATA16), "appears twice"),
    "duplicate_metadata_block": (st(b'{"__metadata__":{"x":"1"},"__metadata__":{"y":"2"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}', DATA16), "at most once"),
    "duplicate_metadata_key": (st(b'{"__metadata__":{"x":"1","x":"2"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}', DATA16), "appears twice"),
    "metadata_not_object": (st({"__metadata__": "pt", **GOOD}, DATA16), "object of string -> string"),
    "metadata_value_not_string": (st({"__metadata__": {"epoch": 3}, **GOOD}, DATA16), "expected a string value"),
    "entry_not_object": (st({"a": [1, 2]}), "expected an object"),
    "entry_null": (st({"a": None}), "expected an object"),
}


def reference_verdict(path):
    """'rejects' / 'accepts' by the reference reader, or None when it is not installed."""
    try:
        from safetensors import safe_open  # noqa: F401
    except ImportError:
        return None
    from safetensors import safe_open
    try:
        with safe_open(path, framework="numpy") as f:
            for k in f.keys():
                f.get_tensor(k)
        return "accepts"
    except Exception:  # the reference raises SafetensorError and others
        return "rejects"


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def write_malformed():
    os.makedirs(MALFORMED, exist_ok=True)
    rows = []
    for name, (data, fragment) in CASES.items():
        path = os.path.join(MALFORMED, name + ".safetensors")
        write(path, data)
        verdict = reference_verdict(path)
        rows.append(f"{name}.safetensors\t{fragment}\t{verdict or 'unchecked'}")
        print(f"{name:34s} reference {verdict or 'unchecked'}")
    with open(os.path.join(MALFORMED, "EXPECTED.tsv"), "w") as f:
        f.write("# file\tfragment of ember's FormatError\treference reader's verdict\n")
        f.write("\n".join(rows) + "\n")


def ember_order_file():
    """What ember's writer must produce for tests/train/test_safetensors.cpp's insertion-ordered set:
    tensors in insertion order (no alignment sort), compact JSON, space padding, metadata first."""
    tensors = [
        ("e.u8", "U8", [4], bytes([0, 1, 127, 255])),
        ("c.f32", "F32", [2, 3], struct.pack("<6f", *[i * 0.25 - 0.5 for i in range(6)])),
        ("a.f64", "F64", [2], struct.pack("<2d", 0.5, -1.25)),
        ("d.i32", "I32", [2], struct.pack("<2i", -7, 123456)),
        ("f.empty", "F32", [0, 3], b""),
        ("b.i64", "I64", [3], struct.pack("<3q", -1, 0, 2**40 + 7)),
        ("g.scalar", "F64", [], struct.pack("<d", 3.25)),
    ]
    text = b'{"__metadata__":{"epoch":"7","format":"pt"}'
    data, offset = b"", 0
    for name, dtype, shape, raw in tensors:
        text += b"," + json.dumps(name).encode() + b":" + json.dumps(
            {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}, separators=(",", ":")).encode()
        data += raw
        offset += len(raw)
    return st(text + b"}", data)


def write_valid():
    os.makedirs(VALID, exist_ok=True)
    path = os.path.join(VALID, "ember_order.safetensors")
    write(path, ember_order_file())
    print(f"ember_order.safetensors reference {reference_verdict(path) or 'unchecked'}")
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError:
        print("torch or safetensors not importable: keeping the committed reference_torch.safetensors")
        return
    tensors = {
        "a.f64": torch.tensor([[0.5, -1.25], [1e-300, 6.02e23]], dtype=torch.float64),
        "b.i64": torch.tensor([-1, 0, 2**40 + 7], dtype=torch.int64),
        "c.f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.25 - 0.5,
        "d.i32": torch.tensor([-7, 123456], dtype=torch.int32),
        "e.u8": torch.tensor([0, 1, 127, 255], dtype=torch.uint8),
        "f.empty": torch.zeros(0, 3, dtype=torch.float32),
        "g.scalar": torch.tensor(3.25, dtype=torch.float64),
    }
    path = os.path.join(VALID, "reference_torch.safetensors")
    save_file(tensors, path, metadata={"format": "pt"})  # one key: the writer's map order is not fixed
    import safetensors
    print(f"reference_torch.safetensors written by safetensors {safetensors.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    write_malformed()
    write_valid()
    sys.exit(0)
