// The inner loops of the router's incremental ladder scoring
// (routing/ladder_scorer.cc; contracts GatherDotFn and GatherAxpyFn in
// kernel/target_ops.h). Included by kernel-inl.h inside a target's namespace,
// so each target of targets.def compiles them with its own flags: the walk
// visits every sampled row against every kept key of a block, one row at a
// time, so these are matrix-vector loops over d and dv, vectorised across the
// head dim. Sums run in a fixed order per target (two vector chains, then the
// lanes), so a target gives the same bits on any thread.

// out[i] = scale * q . keys[index[i]] for i < n (rows of d floats).
inline void gather_dot(const float* __restrict q, const float* __restrict keys, std::int64_t d,
                       const std::int32_t* __restrict index, std::int64_t n, float scale,
                       float* __restrict out) {
  const std::int64_t full = d / kLanes * kLanes;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* k = keys + static_cast<std::int64_t>(index[i]) * d;
    VF a0{}, a1{};
    std::int64_t t = 0;
    for (; t + 2 * kLanes <= full; t += 2 * kLanes) {
      a0 += load(q + t) * load(k + t);
      a1 += load(q + t + kLanes) * load(k + t + kLanes);
    }
    if (t < full) a0 += load(q + t) * load(k + t);
    float sum = reduce_add(a0 + a1);
    for (std::int64_t c = full; c < d; ++c) sum += q[c] * k[c];
    out[i] = scale * sum;
  }
}

// acc[c] = acc[c] * alpha + sum_i p[i] * values[index[i]][c] for c < dv, keys
// in the order given (rows of dv floats).
inline void gather_axpy(const float* __restrict p, const float* __restrict values, std::int64_t dv,
                        const std::int32_t* __restrict index, std::int64_t n, float alpha,
                        float* __restrict acc) {
  const std::int64_t full = dv / kLanes * kLanes;
  for (std::int64_t c = 0; c < full; c += kLanes) {
    VF a = load(acc + c) * splat(alpha);
    for (std::int64_t i = 0; i < n; ++i) {
      a += splat(p[i]) * load(values + static_cast<std::int64_t>(index[i]) * dv + c);
    }
    store(acc + c, a);
  }
  for (std::int64_t c = full; c < dv; ++c) {
    float a = acc[c] * alpha;
    for (std::int64_t i = 0; i < n; ++i) {
      a += p[i] * values[static_cast<std::int64_t>(index[i]) * dv + c];
    }
    acc[c] = a;
  }
}
