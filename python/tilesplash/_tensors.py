"""Array arguments: what the extension is handed, and every check it needs first.

NumPy arrays and PyTorch CPU tensors are passed to the compiled core as plain
descriptors (address, dtype, shape, element strides). The caller's frame keeps
the arrays alive for the whole call, the core never keeps a pointer after it
returns, and every type, dtype and device problem is caught here, where it can
name the Python argument.
"""

from __future__ import annotations

import sys

import numpy as np

from . import _core

LAYOUTS = {"bhnd": 4, "bnhd": 4, "hnd": 3}
LAYOUT_AXES = {"bhnd": "[batch, heads, N, d]", "bnhd": "[batch, N, heads, d]", "hnd": "[heads, N, d]"}
EXPECTED_DTYPES = "float32, float16 or bfloat16 (numpy bfloat16 through ml_dtypes)"

_NUMPY_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def torch_module():
    """torch when it has been imported by anyone, else None: never imports it."""
    return sys.modules.get("torch")


def is_torch(x) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def check_layout(layout) -> str:
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout: expected 'bhnd', 'bnhd' or 'hnd', got {layout!r}")
    return layout


def _torch_dtype_name(dtype) -> str | None:
    torch = torch_module()
    return {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}.get(dtype)


def dtype_name(x, name: str) -> str:
    """"f32", "f16" or "bf16"; TypeError for anything else."""
    if is_torch(x):
        found = _torch_dtype_name(x.dtype)
        shown = str(x.dtype)
    else:
        found = _NUMPY_DTYPES.get(x.dtype.name)
        shown = x.dtype.name
    if found is None:
        raise TypeError(f"{name}: dtype {shown} is not supported; expected {EXPECTED_DTYPES}")
    return found


def check_array(x, name: str, layout: str, kind: str | None = None, device=None) -> str:
    """Checks one argument; returns its kind, "numpy" or "torch".

    device: None for the native kernel (CPU tensors only); else the device a
    torch tensor must be on (q's, for a backend that runs on any device)."""
    if is_torch(x):
        found = "torch"
        if device is None and x.device.type != "cpu":
            raise ValueError(f"{name}: expected a CPU tensor, got a tensor on device '{x.device}' "
                             "(backend='auto' or 'flex' runs other devices through FlexAttention)")
        if device is not None and x.device != device:
            raise ValueError(f"{name}: expected a tensor on q's device '{device}', got a tensor on "
                             f"device '{x.device}'")
        if x.layout != torch_module().strided:
            raise TypeError(f"{name}: expected a dense (strided) tensor, got layout {x.layout}")
    elif isinstance(x, np.ndarray):
        found = "numpy"
    else:
        raise TypeError(
            f"{name}: expected a numpy.ndarray or a torch.Tensor, got {type(x).__module__}."
            f"{type(x).__qualname__}"
        )
    if kind is not None and found != kind:
        first = "numpy.ndarray" if kind == "numpy" else "torch.Tensor"
        raise TypeError(f"{name}: expected a {first} like q, got a {found} array")
    dtype_name(x, name)
    rank = LAYOUTS[layout]
    if x.ndim != rank:
        raise ValueError(
            f"{name}: layout {layout} {LAYOUT_AXES[layout]} needs a {rank}-d tensor, got shape "
            f"{tuple(x.shape)}"
        )
    return found


def check_qkv(q, k, v, layout: str, any_device: bool = False) -> str:
    """Kinds, dtypes and ranks of q, k, v; returns "numpy" or "torch".

    any_device: torch tensors may be on any device, all three on q's (a
    FlexAttention call); else they must be CPU tensors (the native kernel)."""
    device = q.device if any_device and is_torch(q) else None
    kind = check_array(q, "q", layout, device=device)
    check_array(k, "k", layout, kind, device)
    check_array(v, "v", layout, kind, device)
    q_dtype = dtype_name(q, "q")
    for name, x in (("k", k), ("v", v)):
        if dtype_name(x, name) != q_dtype:
            raise TypeError(f"{name}: dtype {x.dtype} does not match q ({q.dtype}); expected {q.dtype}")
    return kind


def batch_heads_len(x, layout: str) -> tuple[int, ...]:
    """The [batch, heads, N] (hnd: [heads, N]) prefix of the LSE shape."""
    s = tuple(x.shape)
    if layout == "bhnd":
        return (s[0], s[1], s[2])
    if layout == "bnhd":
        return (s[0], s[2], s[1])
    return (s[0], s[1])


def out_shape(q, v) -> tuple[int, ...]:
    return tuple(q.shape[:-1]) + (v.shape[-1],)


def native(dtype: np.dtype) -> np.dtype:
    """`dtype` in this machine's byte order. Every output is allocated native: the
    core reads and writes native values only, so an input in the other byte
    order (astype(">f4")) is converted on the way in, and its result is native."""
    dtype = np.dtype(dtype)
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def numpy_desc(x: np.ndarray, name: str):
    """(address, dtype, shape, strides) of a NumPy input; may return a copy (native
    byte order, whole-element strides) to keep alive while the core reads it."""
    if not x.dtype.isnative:
        x = x.astype(native(x.dtype))
    size = x.dtype.itemsize
    if any(s % size for s in x.strides):
        x = np.ascontiguousarray(x)
    desc = (
        x.__array_interface__["data"][0],
        dtype_name(x, name),
        [int(e) for e in x.shape],
        [s // size for s in x.strides],
    )
    return desc, x


def numpy_out_desc(x: np.ndarray, name: str):
    """The descriptor of an output array this call allocated. Never a copy: the
    core writes into exactly the array that is returned, so an output that
    would need converting (another byte order, odd strides) is a bug here."""
    if not (x.dtype.isnative and x.flags.c_contiguous and x.flags.writeable):
        raise RuntimeError(f"tilesplash: internal error: output {name} ({x.dtype}, "
                           f"strides {x.strides}) is not a native C-contiguous array")
    desc, held = numpy_desc(x, name)
    assert held is x
    return desc


def torch_desc(x, name: str):
    return (x.data_ptr(), dtype_name(x, name), [int(e) for e in x.shape], [int(s) for s in x.stride()])


def call_arrays(kind: str, q, k, v, layout: str):
    """What one call into the core needs: descriptors of q, k, v and of a new
    output, the address of a new float32 LSE, the output and LSE themselves,
    and the arrays (copies of odd NumPy views) to hold until the call returns."""
    if kind == "torch":
        torch = torch_module()
        out = torch.empty(out_shape(q, v), dtype=q.dtype)
        lse = torch.empty(batch_heads_len(q, layout), dtype=torch.float32)
        descs = [torch_desc(x, name) for x, name in ((q, "q"), (k, "k"), (v, "v"), (out, "out"))]
        return descs, lse.data_ptr(), out, lse, ()
    out = np.empty(out_shape(q, v), dtype=native(q.dtype))
    lse = np.empty(batch_heads_len(q, layout), dtype=np.float32)
    pairs = [numpy_desc(x, name) for x, name in ((q, "q"), (k, "k"), (v, "v"))]
    descs = [desc for desc, _ in pairs] + [numpy_out_desc(out, "out")]
    return descs, lse.__array_interface__["data"][0], out, lse, [held for _, held in pairs]
