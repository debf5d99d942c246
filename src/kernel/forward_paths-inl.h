// The forward of one target: which path a call runs, from its precision and,
// for bf16 inputs, the product path resolved by make_forward_params
// (ForwardParams::bf16_dot). Included by kernel-inl.h inside a target's
// namespace; a target with a bf16 dot product passes its path as DotPath,
// the others void; a target whose int8 sums run elsewhere than dot4_u8s8
// (AMX tiles) passes that as Int8Sums (Int8QkPath's TileSums).
template <typename DotPath, typename Int8Sums = void>
void forward_paths(const ForwardParams& params, Workspace& workspace, ThreadingContext& context) {
  const bool int8 = params.precision == Precision::kInt8;
  if constexpr (!std::is_void_v<DotPath>) {
    if (params.q.dtype == DType::kBF16 && params.bf16_dot) {
      if (int8) {
        FlashForward<Int8QkPath<DotPath, Int8Sums>>(params).run(workspace, context);
      } else {
        FlashForward<DotPath>(params).run(workspace, context);
      }
      return;
    }
  }
  if (int8) {
    FlashForward<Int8QkPath<F32Path, Int8Sums>>(params).run(workspace, context);
  } else {
    FlashForward<F32Path>(params).run(workspace, context);
  }
}

// The operations every target exports; bf16_peak is the target's bf16 dot
// product loop (run null where bf16 is always widened).
template <typename DotPath, typename Int8Sums = void>
TargetOps target_ops_with(FmaLoop bf16_peak) {
  TargetOps ops;
  ops.forward = &forward_paths<DotPath, Int8Sums>;
  ops.f32_peak = fma_peak_loop();
  ops.bf16_peak = bf16_peak;
  ops.int8_peak = int8_peak_loop();
  ops.nearest_centroid = &nearest_centroid;
  ops.gather_dot = &gather_dot;
  ops.gather_axpy = &gather_axpy;
  ops.key_scores = &key_scores;
  ops.exp_weights = &exp_weights;
  ops.widen_rows = &widen_rows;
  ops.rows_axpy = &rows_axpy;
  ops.sum_rows = &sum_rows;
  ops.pooled_merge = &pooled_merge;
  ops.int8_dot = &int8_dot<Int8Sums>;
  if constexpr (!std::is_void_v<DotPath>) {
    ops.bf16_dot_name = DotPath::kName;
    ops.pooled_merge_dot = &pooled_merge_dot<DotPath>;
    ops.walk_dot = walk_dot_ops<DotPath>();
  }
  if constexpr (std::is_void_v<Int8Sums>) {
    ops.int8_dot_name = int8_dot_name();
  } else {
    ops.int8_dot_name = Int8Sums::kInt8Name;
  }
  return ops;
}
