"""tilesplash.merge_attention(): partial attention results merged through their LSEs."""

from __future__ import annotations

import numpy as np

from . import _core
from ._lse_merge import merge_lse
from ._tensors import (
    batch_heads_len,
    check_array,
    check_layout,
    is_torch,
    native,
    numpy_desc,
    numpy_out_desc,
    torch_desc,
    torch_module,
)

_DTYPE_NAMES = ("float32", "float16", "bfloat16")


def merge_attention(outputs, lses, *, layout="bhnd", dtype=None, check_finite=True):
    """Exact merge of attention results of the same queries over disjoint key sets.

    outputs: a list of outputs of attention(..., return_lse=True) (NumPy arrays
    or PyTorch tensors, all of one kind, shape and device, in `layout`; dtypes
    float32 / float16 / bfloat16, which may differ); lses: their float32 LSEs,
    [batch, heads, N] ([heads, N] for hnd). Returns (out, lse) with
    LSE = log(sum_i exp(LSE_i)) and out = sum_i exp(LSE_i - LSE) * outputs[i],
    out in `dtype` (default: outputs[0]'s), native byte order. Rows whose LSEs are all -inf give
    0 and -inf, never NaN; a part with LSE -inf adds nothing to its row.

    Each row is merged in float64, parts in the order given: the same inputs
    give the same bits. Tensors off the CPU (CUDA, ...) are merged with torch
    ops on their device, in float64 too, by the same rules. Raises ValueError / TypeError naming the argument on
    mismatched shapes, kinds or dtypes, a NaN or +inf LSE, and (check_finite)
    a NaN / Inf output value in a row whose LSE is finite.
    """
    layout = check_layout(layout)
    if not isinstance(check_finite, bool):
        raise TypeError(f"check_finite: expected a bool, got {type(check_finite).__name__}")
    if not isinstance(outputs, (list, tuple)) or not outputs:
        raise TypeError("outputs: expected a non-empty list of arrays")
    if not isinstance(lses, (list, tuple)):
        raise TypeError("lses: expected a list of float32 arrays, one per output")
    if len(lses) != len(outputs):
        raise ValueError(f"lses: expected one LSE per output ({len(outputs)}), got {len(lses)}")
    device = None
    if is_torch(outputs[0]) and outputs[0].device.type != "cpu":
        device = outputs[0].device
    kind = check_array(outputs[0], "outputs[0]", layout, device=device)
    shape = tuple(outputs[0].shape)
    for i, x in enumerate(outputs[1:], start=1):
        check_array(x, f"outputs[{i}]", layout, kind, device)
        if tuple(x.shape) != shape:
            raise ValueError(f"outputs[{i}]: expected the shape of outputs[0] {shape}, got "
                             f"{tuple(x.shape)}")
    lse_shape = batch_heads_len(outputs[0], layout)
    lse_arrays = [_lse_array(kind, lse, f"lses[{i}]", lse_shape, device)
                  for i, lse in enumerate(lses)]
    out_dtype = _result_dtype(kind, outputs[0], dtype)
    if device is not None:
        return _merge_on_device(outputs, lse_arrays, layout, out_dtype, check_finite)
    if kind == "torch":
        torch = torch_module()
        out = torch.empty(shape, dtype=out_dtype)
        lse = torch.empty(lse_shape, dtype=torch.float32)
        descs = [torch_desc(x, f"outputs[{i}]") for i, x in enumerate(outputs)]
        out_desc, lse_address = torch_desc(out, "out"), lse.data_ptr()
        lse_addresses = [x.data_ptr() for x in lse_arrays]
        held = None
    else:
        out = np.empty(shape, dtype=out_dtype)
        lse = np.empty(lse_shape, dtype=np.float32)
        pairs = [numpy_desc(x, f"outputs[{i}]") for i, x in enumerate(outputs)]
        descs, held = [d for d, _ in pairs], [x for _, x in pairs]
        out_desc = numpy_out_desc(out, "out")
        lse_address = lse.__array_interface__["data"][0]
        lse_addresses = [x.__array_interface__["data"][0] for x in lse_arrays]
    _core.merge_attention(descs, lse_addresses, out_desc, lse_address, layout, check_finite)
    del held, lse_arrays  # alive until the core has returned
    return out, lse


def _merge_on_device(outputs, lses, layout, out_dtype, check_finite):
    """merge_attention's rules in float64 torch ops on the tensors' device."""
    torch = torch_module()
    for i, lse in enumerate(lses):
        if bool((torch.isnan(lse) | (lse == float("inf"))).any()):
            raise ValueError(f"lses[{i}]: NaN or +inf; expected finite values or -inf")
    out, lse = merge_lse(outputs, lses, layout, torch.float64, check_finite)
    return out.to(out_dtype), lse.float()


def _lse_array(kind, lse, name, shape, device=None):
    """A C-contiguous float32 array or tensor of `shape` holding lse (on `device`
    for a merge off the CPU)."""
    if kind == "torch":
        torch = torch_module()
        if not is_torch(lse):
            raise TypeError(f"{name}: expected a torch.Tensor like outputs, got "
                            f"{type(lse).__name__}")
        if device is None and lse.device.type != "cpu":
            raise ValueError(f"{name}: expected a CPU tensor, got a tensor on device "
                             f"'{lse.device}'")
        if device is not None and lse.device != device:
            raise ValueError(f"{name}: expected a tensor on the outputs' device '{device}', got "
                             f"a tensor on device '{lse.device}'")
        if lse.dtype != torch.float32:
            raise TypeError(f"{name}: expected float32 (as attention(..., return_lse=True) "
                            f"returns), got {lse.dtype}")
        array = lse.contiguous()
    else:
        if not isinstance(lse, np.ndarray):
            raise TypeError(f"{name}: expected a numpy.ndarray like outputs, got "
                            f"{type(lse).__name__}")
        if native(lse.dtype) != np.float32:  # either byte order: converted below
            raise TypeError(f"{name}: expected float32 (as attention(..., return_lse=True) "
                            f"returns), got {lse.dtype}")
        array = np.ascontiguousarray(lse, dtype=np.dtype("=f4"))
    if tuple(array.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)} ([batch, heads, N] of the "
                         f"outputs' layout), got {tuple(array.shape)}")
    return array


def _result_dtype(kind, first, dtype):
    if dtype is None:
        return first.dtype if kind == "torch" else native(first.dtype)
    if kind == "torch":
        torch = torch_module()
        if dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"dtype: expected torch.float32, float16 or bfloat16, got {dtype}")
        return dtype
    found = np.dtype(dtype)
    if found.name not in _DTYPE_NAMES:
        raise TypeError(f"dtype: expected float32, float16 or bfloat16, got {found.name}")
    return native(found)
