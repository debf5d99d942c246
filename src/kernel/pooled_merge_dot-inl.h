// The compensation pass's merge on the bf16 dot product (contract
// PooledMergeDotFn in kernel/target_ops.h): the pass as a small attention of
// a q-block's rows over the skipped tiles' mean keys, run by the kernel's own
// micro-kernels (DotPath::qk and pv: vdpbf16ps, or AMX tiles), so it keeps
// the kernel's rate instead of running at the f32 FMA rate, which is half of
// it on a Zen 4 (the f32 pass cost 12% of a density-0.10 call there, this one
// about half of that). Included after kernel/bf16_dot_path-inl.h (and
// amx_path-inl.h) by the targets with a bf16 dot product. Sums run in a fixed
// order per target, so the bits do not depend on the thread.

static_assert(kPanel == kDotMergePanel, "the pass's key panels are the kernel's");
static_assert(kRows <= kMaxMergeRows, "the merge scratch holds kMaxMergeRows rows");

// R rows from row0: scores of every panel, the merge with each row's (o,
// lse) as in pooled_merge_rows, the weights to bf16 pairs, then P.V over the
// mean values, column chunk by column chunk, into acc (o's rows widened to
// dvp columns), divided by the sum on the way back to o.
template <typename DotPath, int R>
inline void pooled_merge_dot_rows(const PooledMergeDotArgs& a, std::int64_t row0) {
  const std::int64_t stride = a.n_padded, p_stride = a.n_padded / 2, pairs = a.d / 2;
  const std::uint32_t* q = a.q + row0 * a.q_stride;
  VF unused_max[R];
  for (std::int64_t p = 0; p < a.n_padded; p += kPanel) {
    DotPath::template qk<R>(q, a.q_stride, a.d, a.key_panels + p * pairs, a.scores + p, stride,
                            unused_max);
  }
  constexpr float kLog2e = 1.4426950408889634f;
  float alpha[R], inv[R];
  for (int r = 0; r < R; ++r) {
    float* lse = a.lse + (row0 + r) * a.lse_stride;
    float* row = a.scores + r * stride;
    VF best = splat(kNegInf);
    for (std::int64_t j = 0; j < a.n_padded; j += kLanes) {
      const VF s = load(row + j) * splat(a.scale) + load(a.bias + j);
      store(row + j, s);
      best = vmax(s, best);
    }
    const float top = std::max(*lse, reduce_max(best));
    const float exact = *lse == kNegInf ? 0.0f : exp2_scalar((*lse - top) * kLog2e);
    const float sum = exact + exp_row(row, a.n_padded, top, kLog2e, 0.0f);
    // The weights stay unnormalised (in [0, 1], the largest 1 unless the
    // exact part leads), so no pass divides them: the sum divides the
    // output once it is summed.
    alpha[r] = exact;
    inv[r] = 1.0f / sum;
    DotPath::store_probs(row, a.n_padded, a.probs + r * p_stride);
    *lse = top + std::log(sum);
    const float* o = a.o + (row0 + r) * a.o_stride;
    float* acc = a.acc + r * a.dvp;
    std::copy(o, o + a.dv, acc);
    std::fill(acc + a.dv, acc + a.dvp, 0.0f);
  }
  for (std::int64_t c0 = 0; c0 < a.dvp; c0 += kPanel) {
    DotPath::template pv<R>(a.probs, p_stride, a.n_padded, a.value_pairs + c0, a.dvp, a.acc + c0,
                            a.dvp, alpha);
  }
  for (int r = 0; r < R; ++r) {
    const float* acc = a.acc + r * a.dvp;
    float* o = a.o + (row0 + r) * a.o_stride;
    for (std::int64_t c = 0; c < a.dv; ++c) o[c] = acc[c] * inv[r];
  }
}

template <typename DotPath>
void pooled_merge_dot(const PooledMergeDotArgs& a) {
  for (std::int64_t r0 = 0; r0 < a.rows; r0 += kRows) {
    const int rows = static_cast<int>(std::min<std::int64_t>(kRows, a.rows - r0));
    with_rows(rows, [&]<int R>() { pooled_merge_dot_rows<DotPath, R>(a, r0); });
  }
}
