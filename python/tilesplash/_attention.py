"""tilesplash.attention() and tilesplash.plan()."""

from __future__ import annotations

import numpy as np

from . import _core
from ._backends import resolve
from ._checks import MAX_THREADS, check_bool, check_int, check_scale
from ._mask import Mask, as_mask
from ._tensors import check_layout, check_qkv
from ._threading import check_context
from ._window import seq_len, window_args, window_core


def run_checked(backend, q, k, v, mask, layout, scale, threads, context, q_offset=0,
                kv_offset=0, q_total=None, kv_total=None):
    """attention()'s work for a private caller whose arguments are already checked
    (a sequence-parallel step: torch tensors, a resolved backend, a Mask): (out, lse)."""
    window = window_args(seq_len(q, layout), seq_len(k, layout), q_offset, kv_offset, q_total,
                         kv_total)
    return backend.attention(q, k, v, mask=backend.mask_argument(mask, "torch"), layout=layout,
                             scale=scale, block_q=None, block_kv=None, threads=threads,
                             window=window, context=context, precision="default", kind="torch")


def attention(q, k, v, *, mask="dense", layout="bhnd", scale=None, return_lse=False,
              block_q=None, block_kv=None, threads=0, q_offset=0, kv_offset=0, q_total=None,
              kv_total=None, context=None, backend="auto", precision="default",
              compensate=False):
    """Block-sparse attention softmax(scale * q k^T, masked) v.

    q, k, v: NumPy arrays or PyTorch tensors, all of one kind and one dtype
    (float32, float16, or bfloat16: ml_dtypes.bfloat16 for NumPy), in `layout`:
    "bhnd" [batch, heads, N, d] (PyTorch SDPA), "bnhd" [batch, N, heads, d]
    (diffusers, FlashAttention) or "hnd" [heads, N, d]. Views with other
    strides (a transpose of another layout, a slice) are read in place where
    the kernel allows, else copied once. k and v share N; v's head dim may
    differ from q's; head dims are multiples of 8 up to 256.

    mask: a SPEC string (as the CLI's --mask) or a tilesplash.Mask; it applies
    to the sequence indices (q row, k row). scale defaults to 1/sqrt(d), else
    in (2^-150, 2.3586574e38] (scale * log2(e) must fit float32).
    block_q / block_kv: tile sizes; by default the tuned choice for this shape
    (`tilesplash tune`), else 256 x 256. threads: 0 uses every core (or the
    context's thread count), at most 4096. context: a
    tilesplash.ThreadingContext to run on; None: the calling Python thread's
    own runner and workers, so calls from different threads run side by side
    either way.

    Returns the output with q's type (numpy in, numpy out; torch in, torch
    out), dtype and layout, [.., d_v], in native byte order (NumPy inputs may
    come in either); with return_lse=True a pair (out, lse),
    lse float32 [batch, heads, N_q] ([heads, N_q] for hnd), natural log of the
    scaled scores. Rows that keep no key give 0 and lse = -inf. No queries
    (or no batch entries or heads) give an empty output; no keys give zeros.

    q_offset, kv_offset, q_total, kv_total: a window of a larger map. q holds
    the global query rows [q_offset, q_offset + N_q) and k, v the global keys
    [kv_offset, kv_offset + N_kv) of a q_total x kv_total attention map (the
    totals default to offset + N); `mask` keeps its meaning on the global
    indices, and only the window of its plan is computed. This is what a
    sequence-parallel rank runs (tilesplash.distributed); a video mask needs
    the totals to equal its token count.

    backend: "auto" runs the native CPU kernel for NumPy arrays and CPU
    tensors and FlexAttention (tilesplash.flex, docs/gpu.md) for tensors on
    any other device (all three on q's device); "cpu" the native kernel only;
    "flex" FlexAttention on any device, the CPU included. FlexAttention runs
    the same plan (block_q x block_kv tiles, 128 x 128 by default; threads and
    context do not apply), compiled on GPUs and eager on the CPU.

    precision: "default" (products in the input dtype, f32 accumulation) or
    "int8": Q.K^T in 8 bits on the native kernel (SageAttention's recipe: K
    smoothed by its mean over the keys, Q per row and K per 64 keys quantized
    to int8, exact int32 sums with VNNI where the CPU has it; P.V as by
    default). Faster on CPUs with VNNI, within cosine 0.999 of f32 on the
    workloads docs/kernel.md measures; the LSE is that of the original scores.
    Not available on the flex backend.

    compensate: False (default) drops what the plan skips. True approximates
    it: every empty block_q x block_kv tile of the plan adds its n keys
    through their mean key and value, n * exp(scale * q . k_mean) * v_mean,
    merged with the exact part through the LSE (Sol-Attn's pooled proxy;
    docs/masks.md, "Compensation"). A plan that skips nothing gives exactly
    the uncompensated result; the returned lse includes the added term. It
    approximates *dense* attention over the skipped keys, so it suits masks
    that skip for speed (bands, video masks), not masks whose skipped pairs
    must stay out (causal). Native and flex backends (flex: torch ops after
    the FlexAttention call, docs/gpu.md).

    CPU torch tensors go through the registered op torch.ops.tilesplash.attention,
    so torch.compile compiles around it. The GIL is released while it runs.
    Raises TypeError / ValueError naming the argument on bad input, including
    NaN or Inf in q, k or v and tensors on different devices.
    """
    layout = check_layout(layout)
    backend = resolve(backend, q)
    kind = check_qkv(q, k, v, layout, any_device=backend.any_device)
    mask = backend.mask_argument(mask, kind)
    scale = check_scale(scale)
    return_lse = check_bool(return_lse, "return_lse")
    block_q, block_kv = backend.check_blocks(block_q, block_kv)
    threads = check_int(threads, "threads", 0, maximum=MAX_THREADS)
    context = check_context(context)
    precision = backend.check_precision(precision)
    compensate = backend.check_compensate(compensate)
    window = window_args(seq_len(q, layout), seq_len(k, layout), q_offset, kv_offset, q_total,
                         kv_total)
    out, lse = backend.attention(q, k, v, mask=mask, layout=layout, scale=scale, block_q=block_q,
                                 block_kv=block_kv, threads=threads, window=window,
                                 context=context, precision=precision, kind=kind,
                                 compensate=compensate)
    return (out, lse) if return_lse else out


class TilePlan:
    """How a mask cuts into tiles: which the kernel skips, runs mask-free or bitmasks.

    stats(): a dict with the keys of `tilesplash plan --json`. kinds(): numpy
    uint8 [q_blocks, kv_blocks], 0 empty, 1 partial, 2 full. For a temporal
    video mask the plan is its band in token-major order, the plan its heads
    actually run (stats() says so in plan_order / plan_note).
    """

    __slots__ = ("_plan", "_mask", "_window")

    def __init__(self, plan: _core.TilePlan, mask: Mask | None = None, window=None):
        self._plan = plan
        self._mask = Mask(plan.mask) if mask is None else mask
        self._window = window

    mask = property(lambda self: self._mask, doc="The mask as given (global for a window).")
    window = property(
        lambda self: self._window,
        doc="(q_offset, kv_offset, q_total, kv_total) of a window plan, else None.")
    q_len = property(lambda self: self._plan.q_len)
    kv_len = property(lambda self: self._plan.kv_len)
    block_q = property(lambda self: self._plan.block_q)
    block_kv = property(lambda self: self._plan.block_kv)
    q_blocks = property(lambda self: self._plan.q_blocks)
    kv_blocks = property(lambda self: self._plan.kv_blocks)

    def stats(self) -> dict:
        return self._plan.stats()

    def kinds(self) -> np.ndarray:
        return self._plan.kinds()

    def block_sparse(self) -> dict:
        """The plan as flat block-sparse arrays, what a GPU kernel takes (FlexAttention's
        BlockMask, Splash's MaskInfo, FlashInfer's BSR):

        "full_offsets" int64 [q_blocks + 1], "full_indices" int32: the kv-block indices
        of q-block i's full tiles are full_indices[full_offsets[i]:full_offsets[i + 1]],
        ascending; "partial_offsets", "partial_indices" likewise for partial tiles, and
        "partial_ids" int32 each partial tile's index into "bits", the deduplicated
        bitmask table, uint64 [distinct_partial, block_q, words_per_row] (bit j of word
        w of row r keeps query q0 + r and key k0 + 64 w + j; zero outside a ragged
        tile's in-range part; a read-only view of the plan's own memory). Also
        "q_len", "kv_len", "block_q", "block_kv", "q_blocks", "kv_blocks",
        "words_per_row". Empty tiles are in neither list.
        """
        arrays = self._plan.block_sparse()
        arrays["bits"].setflags(write=False)  # the plan's memory (an empty table is a fresh array)
        return arrays

    def row_intervals(self, max_intervals: int = 4):
        """Each query row's kept keys as at most `max_intervals` intervals: (starts, ends),
        int32 [max_intervals, q_len], row q keeping k iff starts[i, q] <= k < ends[i, q]
        for some i (unused intervals are [0, 0)); None when some row needs more. Exact on
        every in-range pair (read off the plan's tiles); what a GPU mask function loads
        per row instead of gathering a bitmask per pair."""
        return self._plan.row_intervals(check_int(max_intervals, "max_intervals", 1))

    def __repr__(self) -> str:
        s = self.stats()
        return (f"TilePlan({s['mask']!r}, {s['q_len']} x {s['kv_len']}, tiles "
                f"{s['block_q']} x {s['block_kv']}: {s['full']} full, {s['partial']} partial, "
                f"{s['empty']} empty)")


def plan(mask, q_len, kv_len=None, block_q=256, block_kv=256, *, q_offset=0, kv_offset=0,
         q_total=None, kv_total=None, original_order=False) -> TilePlan:
    """The tile plan of `mask` (SPEC or Mask) over q_len x kv_len (default q_len).

    By default a temporal video mask is planned as what its heads run (its band in
    token-major order) and an sta mask in tile-major order; original_order=True
    plans the mask exactly as given on the original token order instead (what a
    backend running the mask without permuting rows needs).

    With q_offset / kv_offset (and q_total / kv_total, as in attention()), the
    plan of the window [q_offset, q_offset + q_len) x [kv_offset, kv_offset +
    kv_len) of the global mask, tiles counted from the window's corner.
    """
    mask = as_mask(mask)
    q_len = check_int(q_len, "q_len", 1)
    kv_len = check_int(kv_len, "kv_len", 1, allow_none=True)
    block_q = check_int(block_q, "block_q", 1)
    block_kv = check_int(block_kv, "block_kv", 1)
    kv_len = q_len if kv_len is None else kv_len
    original_order = check_bool(original_order, "original_order")
    window = window_args(q_len, kv_len, q_offset, kv_offset, q_total, kv_total)
    core_mask = window_core(mask, q_len, kv_len, window)
    return TilePlan(_core.plan(core_mask, q_len, kv_len, block_q, block_kv, original_order), mask,
                    window if window[2] else None)


def set_plan_cache_capacity(capacity) -> None:
    """Plans the process-wide cache keeps (least recently used out first); 0 keeps all."""
    _core.set_plan_cache_capacity(check_int(capacity, "capacity", 0))
