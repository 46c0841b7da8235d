#!/usr/bin/python3
"""Minimal safetensors reader/writer built on numpy only.

File layout (safetensors spec):
    8 bytes   little-endian u64 N = length of the JSON header
    N bytes   UTF-8 JSON: {name: {"dtype": "BF16"|"F16"|"F32"|..., "shape": [...],
                                   "data_offsets": [begin, end]}, "__metadata__": {str: str}}
              (offsets are relative to the start of the data section; padded with spaces
              so the data section starts 8-byte aligned)
    rest      raw little-endian tensor bytes

BF16 has no numpy dtype: it is carried as uint16 bit patterns.  `f32_to_bf16_bits`
rounds fp32 to the nearest bf16 (ties to even), `bf16_bits_to_f32` widens back.

Public API:
    read_safetensors(path, upcast=True) -> (dict name -> np.ndarray, metadata dict)
        upcast=True returns BF16/F16 tensors as float32 arrays; upcast=False returns BF16
        as uint16 bit patterns and F16 as float16.
    write_safetensors(path, tensors, metadata=None, dtype=None)
        tensors: dict name -> np.ndarray (float arrays are converted to `dtype`
        ("bf16"|"f16"|"f32") when given; uint16 arrays passed with dtype="bf16-bits"
        are written as BF16 unchanged).
    write_sharded(dir, tensors, n_shards, dtype, metadata=None)
        writes model-0000i-of-0000n.safetensors + model.safetensors.index.json
        (or model.safetensors when n_shards == 1).
    load_checkpoint_dir(dir, upcast=True) -> dict name -> array (handles the index file).
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from atomic_write import atomic_open  # noqa: E402  (exported models are written crash-safe)

_NP_OF = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # bit patterns
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


def f32_to_bf16_bits(a):
    """fp32 -> bf16 bit patterns (uint16), round to nearest, ties to even. NaN stays NaN."""
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    u = a.view(np.uint32).astype(np.uint64)
    lsb = (u >> 16) & 1
    r = ((u + 0x7FFF + lsb) >> 16) & 0xFFFF
    nan = np.isnan(a)
    if nan.any():
        r = np.where(nan, (u >> 16) | 0x40, r)
    return r.astype(np.uint16)


def bf16_bits_to_f32(b):
    b = np.ascontiguousarray(np.asarray(b, dtype=np.uint16))
    return (b.astype(np.uint32) << 16).view(np.float32)


def _encode(arr, dtype):
    """Return (safetensors dtype string, contiguous little-endian array to dump)."""
    if dtype is None:
        if arr.dtype == np.float32:
            dtype = "f32"
        elif arr.dtype == np.float16:
            dtype = "f16"
        elif arr.dtype == np.float64:
            dtype = "f64"
        else:
            for k, v in _NP_OF.items():
                if k != "BF16" and v == arr.dtype.newbyteorder("<"):
                    return k, np.ascontiguousarray(arr.astype(v))
            raise ValueError("unsupported array dtype %s" % arr.dtype)
    dtype = dtype.lower()
    if dtype == "bf16":
        return "BF16", f32_to_bf16_bits(arr)
    if dtype == "bf16-bits":
        return "BF16", np.ascontiguousarray(arr.astype("<u2"))
    if dtype == "f16":
        return "F16", np.ascontiguousarray(np.asarray(arr, dtype=np.float32).astype("<f2"))
    if dtype == "f32":
        return "F32", np.ascontiguousarray(np.asarray(arr).astype("<f4"))
    if dtype == "f64":
        return "F64", np.ascontiguousarray(np.asarray(arr).astype("<f8"))
    raise ValueError("unsupported dtype %r" % dtype)


def write_safetensors(path, tensors, metadata=None, dtype=None):
    header = {}
    blobs = []
    off = 0
    for name in tensors:
        st, data = _encode(np.asarray(tensors[name]), dtype)
        raw = data.tobytes()
        header[name] = {"dtype": st, "shape": list(data.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    pad = (8 - (8 + len(hj)) % 8) % 8
    hj += b" " * pad
    with atomic_open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for raw in blobs:
            f.write(raw)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n).decode("utf-8"))
    return n, header


def read_safetensors(path, upcast=True):
    with open(path, "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        dt = info["dtype"]
        if dt not in _NP_OF:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dt))
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        a = np.frombuffer(buf, dtype=_NP_OF[dt], count=(e - b) // _NP_OF[dt].itemsize,
                          offset=base + b).reshape(shape)
        if upcast:
            if dt == "BF16":
                a = bf16_bits_to_f32(a).reshape(shape)
            elif dt == "F16":
                a = a.astype(np.float32)
        out[name] = a
    return out, meta


def shard_name(i, n):
    return "model-%05d-of-%05d.safetensors" % (i + 1, n)


def write_sharded(out_dir, tensors, n_shards=1, dtype=None, metadata=None):
    """Write tensors into n_shards files (round-robin by order, contiguous groups)."""
    os.makedirs(out_dir, exist_ok=True)
    names = list(tensors)
    if n_shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors,
                          metadata=metadata or {"format": "pt"}, dtype=dtype)
        return ["model.safetensors"]
    n_shards = min(n_shards, len(names))
    groups = [names[i * len(names) // n_shards:(i + 1) * len(names) // n_shards]
              for i in range(n_shards)]
    weight_map = {}
    total = 0
    files = []
    for i, g in enumerate(groups):
        fn = shard_name(i, n_shards)
        part = {k: tensors[k] for k in g}
        write_safetensors(os.path.join(out_dir, fn), part,
                          metadata=metadata or {"format": "pt"}, dtype=dtype)
        for k in g:
            weight_map[k] = fn
        _, h = read_header(os.path.join(out_dir, fn))
        total += sum(v["data_offsets"][1] - v["data_offsets"][0]
                     for kk, v in h.items() if kk != "__metadata__")
        files.append(fn)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with atomic_open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    return files


def load_checkpoint_dir(model_dir, upcast=True):
    """Load every tensor of a HF checkpoint directory (single file or sharded)."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    out = {}
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        for fn in sorted(set(wm.values())):
            t, _ = read_safetensors(os.path.join(model_dir, fn), upcast=upcast)
            out.update(t)
        missing = set(wm) - set(out)
        if missing:
            raise ValueError("index lists tensors not found in shards: %s" % sorted(missing)[:5])
        return out
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        t, _ = read_safetensors(single, upcast=upcast)
        return t
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError("no .safetensors in %s" % model_dir)
    for fn in files:
        t, _ = read_safetensors(os.path.join(model_dir, fn), upcast=upcast)
        out.update(t)
    return out
