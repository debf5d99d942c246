// Block-sparse flash-attention forward: the loops around a path's packing and
// micro-kernels (kernel/f32_path-inl.h, kernel/int8_path-inl.h, Bf16DotPath in
// kernel/bf16_dot_path-inl.h, AmxBf16Path in kernel/amx_path-inl.h). Included
// by kernel-inl.h inside a target's namespace.
//
// Work and memory. K and V of a group of heads are packed once per call (K in
// transposed key panels, V in column chunks). A work item is one (head,
// q-block); a worker takes the q-block's rows kTileRows at a time (the
// register tile's kRows, or a path's own: 16 for AMX tiles) and, for every
// tile the plan visits, runs the whole flash step on that group of rows:
// Q.K^T over the tile's key panels (the row max folded into the score
// store), the mask and the exponent on those rows of scores, and P.V over
// the output column chunks. The scores of the rows in flight (kTileRows *
// block_kv floats) never leave L1; the tile's K and V (2 * block_kv * d * 4
// bytes, 256 KiB at 256 keys and d = 128) stream from L2 once per row group,
// about 10 bytes per cycle at 32 flops per cycle (one 512-bit FMA per cycle,
// a Zen 4), a third of what L2 delivers; a core with two 512-bit FMA ports
// (Sapphire Rapids) needs twice that.
//
// Loop variants (KernelVariant, chosen by the tuner per CPU). row_groups > 1
// runs that many register tiles of rows as one pass: each key panel of Q.K^T
// serves all of them while it is in L1, and P.V walks V in slices of about
// 16 KiB that serve all of them in turn, so L2 delivers each byte once per
// pass instead of once per register tile. Every product is computed in the
// same order either way (acc goes through memory between slices, exactly), so
// the variants give bit-identical results. prefetch spreads prefetcht1 over the
// tile's passes for the K and V of the q-block's next tile, which otherwise
// come from L3 during the next tile's first pass.
// Each q-block's accumulators (block_q * dv floats) live in L2 across its
// tiles; rescaling them by the online softmax's alpha is folded into the P.V
// micro-kernel's first load.
//
// Tile modes. Full tiles run with no mask work; partial tiles clear scores
// with their plan bitmask; `element` mode evaluates the mask's vectorised
// predicate on every pair of every visited tile; `bitmask` mode runs every
// visited tile through the bitmask path. The last, ragged kv tile also clears
// the padding keys. Softmax scale: folded into the exponent (one FMA per
// score), exp2 is a polynomial (kernel/simd-inl.h).

template <typename Path>
struct FlashForward {
  using QkElem = typename Path::QkElem;  // packed Q rows and K panels
  using VElem = typename Path::VElem;    // packed V
  using Prob = typename Path::Prob;
  // A path that may run a tile's Q.K^T in f32 instead (Int8QkPath).
  static constexpr bool kFallback = requires { Path::kF32Fallback; };
  // Rows of one micro-kernel call (a row group).
  static constexpr int kTileRows = path_tile_rows<Path>();
  static_assert(!kFallback || kTileRows == kRows, "the f32 fall-back runs register tiles");

  // Per-worker scratch, by element type (kernel/scratch_layout.h).
  struct Scratch {
    ScratchSlot<QkElem> q;           // the q-block's rows, packed: block_q * q_row_elems
    ScratchSlot<float> scores;       // kMaxRowGroups * kTileRows rows of block_kv scores
    ScratchSlot<Prob> probs;         // the same rows as P.V reads them (if separate)
    ScratchSlot<std::uint8_t> keep;  // element mode: the predicate of one row
    ScratchSlot<float> acc;          // block_q * dvp accumulators
    ScratchSlot<RowState> state;     // block_q running max and sum
    ScratchSlot<float> alpha;        // kMaxRowGroups * kTileRows rescale factors
    ScratchSlot<float> ones;         // kTileRows factors of 1: P.V slices after a group's first
    ScratchSlot<float> row;          // one widened row, for packing
    std::size_t bytes = 0;
  };

  const ForwardParams& p;
  const TilePlan& plan;
  std::int64_t d, dv, dvp, block_q, block_kv, words;
  std::int64_t panels;        // key panels per head
  std::int64_t k_head_elems;  // packed K elements per head
  std::int64_t v_head_elems;
  std::int64_t q_stride;  // packed elements per Q row
  std::int64_t p_stride;  // Prob elements per probability row
  std::int64_t groups;    // register tiles of rows per pass (the variant's row_groups)
  std::int64_t v_slice;   // keys per P.V slice when groups > 1
  float exp_scale;        // scale * log2(e)
  Scratch scratch;
  Path path;

  explicit FlashForward(const ForwardParams& params)
      : p(params),
        plan(*params.plan),
        d(params.q.dim),
        dv(params.v.dim),
        dvp((params.v.dim + kPanel - 1) / kPanel * kPanel),
        block_q(params.plan->blocks().block_q),
        block_kv(params.plan->blocks().block_kv),
        words(params.plan->words_per_row()),
        panels((params.k.len + kPanel - 1) / kPanel),
        k_head_elems(panels * Path::k_panel_elems(params.q.dim)),
        v_head_elems(Path::v_head_elems(panels * kPanel, dvp)),
        q_stride(Path::q_row_elems(params.q.dim)),
        p_stride(Path::prob_row_elems(block_kv)),
        groups(std::clamp<std::int64_t>(params.variant.row_groups, 1, kMaxRowGroups)),
        v_slice(v_slice_keys()),
        exp_scale(params.scale * kLog2e),
        shift_(static_cast<std::size_t>(params.q.heads), 0.0f) {
    ScratchLayout layout;
    scratch.q = layout.add<QkElem>(block_q * q_stride);
    scratch.scores = layout.add<float>(kMaxRowGroups * kTileRows * block_kv);
    scratch.probs =
        layout.add<Prob>(Path::kSeparateProbs ? kMaxRowGroups * kTileRows * p_stride : 0);
    scratch.keep = layout.add<std::uint8_t>(block_kv);
    scratch.acc = layout.add<float>(block_q * dvp);
    scratch.state = layout.add<RowState>(block_q);
    scratch.alpha = layout.add<float>(kMaxRowGroups * kTileRows);
    scratch.ones = layout.add<float>(kTileRows);
    scratch.row = layout.add<float>(std::max(d, dvp));
    scratch.bytes = layout.bytes();
  }

  // Keys of one P.V slice: about 16 KiB of one column chunk of V, whole panels.
  static std::int64_t v_slice_keys() {
    constexpr std::int64_t kSliceBytes = 16 << 10;
    constexpr std::int64_t bytes_per_key =
        kPanel * static_cast<std::int64_t>(sizeof(VElem)) / Path::kKeysPerVRow;
    return std::max<std::int64_t>(kPanel, kSliceBytes / bytes_per_key / kPanel * kPanel);
  }

  void run(Workspace& ws, ThreadingContext& context) {
    const std::int64_t heads = p.q.heads;
    const int threads = p.threads;
    if (static_cast<int>(ws.per_worker.size()) < threads) ws.per_worker.resize(threads);
    if (p.mask_mode == MaskMode::kBitmask) {
      std::uint64_t* ones = ws.all_ones_bits.get<std::uint64_t>(block_q * words);
      std::fill(ones, ones + block_q * words, ~0ull);
      ones_bits_ = ones;
    }
    if (p.check_finite) check_q_finite(context);

    // Heads are processed in groups whose packed K/V fit a budget, so memory
    // stays O(N * d) per group rather than a second copy of every head.
    const std::int64_t head_bytes =
        static_cast<std::int64_t>(k_head_elems * sizeof(QkElem) + v_head_elems * sizeof(VElem));
    const std::int64_t budget = std::int64_t{512} << 20;
    const std::int64_t group =
        std::clamp<std::int64_t>(budget / std::max<std::int64_t>(head_bytes, 1), 1, heads);
    QkElem* packed_k = ws.packed_k.get<QkElem>(group * k_head_elems);
    VElem* packed_v = ws.packed_v.get<VElem>(group * v_head_elems);

    std::vector<std::int64_t> order;
    order_work_items(plan, 1, order);
    overflow_rows_ = 0;
    first_overflow_ = std::numeric_limits<std::int64_t>::max();
    for (std::int64_t head0 = 0; head0 < heads; head0 += group) {
      const std::int64_t count = std::min(group, heads - head0);
      path.prepare_heads(p, head0, count, context);
      pack_heads(head0, count, packed_k, packed_v, ws, context);
      const std::int64_t items = count * static_cast<std::int64_t>(order.size());
      context.run(threads, items, [&](std::int64_t item, int worker) {
        // Costliest q-blocks of every head first, heads interleaved.
        const std::int64_t rank = item / count;
        const std::int64_t head = head0 + item % count;
        compute_item(head, order[rank], packed_k + (head - head0) * k_head_elems,
                     packed_v + (head - head0) * v_head_elems,
                     ws.per_worker[worker].get<std::byte>(scratch.bytes));
      });
    }
    report_overflow();
    if (p.int8_report != nullptr && kFallback) {
      p.int8_report->tiles += tiles_.load();
      p.int8_report->f32_tiles += f32_tiles_.load();
    }
  }

  // Finite inputs whose q.k exceeds the f32 range have no f32 answer here;
  // refusing beats the NaN rows the arithmetic would give.
  void report_overflow() const {
    const std::int64_t count = overflow_rows_.load();
    if (count == 0 || !p.check_finite) return;  // unchecked: the caller vouches for its data
    const std::int64_t first = first_overflow_.load();
    throw std::invalid_argument("attention: q.k overflows float32 (|q.k| > 3.4e38) in " +
                                std::to_string(count) + " row" + (count == 1 ? "" : "s") +
                                " (first: head " + std::to_string(first / p.q.len) + ", q row " +
                                std::to_string(first % p.q.len) +
                                "); expected dot products within the f32 range: scale Q or K down");
  }

  void check_q_finite(ThreadingContext& context) {
    const std::int64_t blocks = plan.num_q_blocks();
    std::atomic<std::int64_t> first_bad{std::numeric_limits<std::int64_t>::max()};
    context.run(p.threads, p.q.heads * blocks, [&](std::int64_t item, int) {
      const std::int64_t head = item / blocks;
      const IndexRange rows = plan.q_range(item % blocks);
      for (std::int64_t row = rows.begin; row < rows.end; ++row) {
        if (!row_is_finite(p.q, head, row)) {
          atomic_min(first_bad, head * p.q.len + row);
          return;
        }
      }
    });
    report_non_finite("q", first_bad.load(), p.q.len);
  }

  void pack_heads(std::int64_t head0, std::int64_t count, QkElem* packed_k, VElem* packed_v,
                  Workspace& ws, ThreadingContext& context) {
    std::atomic<std::int64_t> bad_k{std::numeric_limits<std::int64_t>::max()};
    std::atomic<std::int64_t> bad_v{std::numeric_limits<std::int64_t>::max()};
    std::vector<std::atomic<int>> v_field(static_cast<std::size_t>(count));
    context.run(p.threads, count * panels, [&](std::int64_t item, int worker) {
      const std::int64_t h = item / panels;
      const std::int64_t panel = item % panels;
      const std::int64_t key0 = panel * kPanel;
      float* row = scratch.row.in(ws.per_worker[worker].get<std::byte>(scratch.bytes));
      QkElem* kp = packed_k + h * k_head_elems + panel * Path::k_panel_elems(d);
      const bool k_ok = path.pack_k_panel(p.k, head0 + h, key0, kp, row);
      const VPanel v_info = Path::pack_v_panel(p.v, head0 + h, key0, panels * kPanel, dvp,
                                               packed_v + h * v_head_elems, row);
      atomic_max(v_field[h], v_info.field);
      if (p.check_finite && !(k_ok && v_info.finite)) {
        // Find the exact row for the message; this is the rare error path.
        for (std::int64_t key = key0; key < std::min(key0 + kPanel, p.k.len); ++key) {
          if (!row_is_finite(p.k, head0 + h, key)) atomic_min(bad_k, (head0 + h) * p.k.len + key);
          if (!row_is_finite(p.v, head0 + h, key)) atomic_min(bad_v, (head0 + h) * p.v.len + key);
        }
      }
    });
    if (p.check_finite) {
      report_non_finite("k", bad_k.load(), p.k.len);
      report_non_finite("v", bad_v.load(), p.v.len);
    }
    // acc sums up to kv_len weights <= 1 times |V| < 2^(field - 126); when that
    // could pass 2^126, every weight is scaled by 2^-shift (exactly, in the
    // exponent) so acc stays finite while acc / l, the output, is unchanged.
    const int length_bits = std::bit_width(static_cast<std::uint64_t>(p.v.len));
    for (std::int64_t h = 0; h < count; ++h) {
      const int bound = v_field[h].load() - 126 + length_bits;
      shift_[head0 + h] = static_cast<float>(std::max(0, bound - 126));
    }
  }

  // What every pass of one (item, tile) shares.
  struct TileView {
    IndexRange rows, cols;
    std::int64_t nk, nkp;       // keys in the tile, rounded up to whole panels
    const QkElem* k;            // the tile's first K panel
    const VElem* v_head;        // the head's packed V
    const std::uint64_t* bits;  // plan bitmask rows, or null (no bitmask work)
    float shift;
  };

  TileView tile_view(const PlanTile& tile, IndexRange rows, const QkElem* kp, const VElem* vp,
                     float shift) const {
    TileView t;
    t.rows = rows;
    t.cols = plan.kv_range(tile.kv_block);
    t.nk = t.cols.size();
    t.nkp = (t.nk + kPanel - 1) / kPanel * kPanel;
    t.k = kp + t.cols.begin / kPanel * Path::k_panel_elems(d);
    t.v_head = vp;
    t.bits = nullptr;
    if (p.mask_mode != MaskMode::kElement) {
      if (!tile.is_full()) {
        t.bits = plan.partial_bits(tile.partial_id);
      } else if (p.mask_mode == MaskMode::kBitmask) {
        t.bits = ones_bits_;
      }
    }
    t.shift = shift;
    return t;
  }

  void compute_item(std::int64_t head, std::int64_t q_block, const QkElem* kp, const VElem* vp,
                    std::byte* base) {
    const IndexRange rows = plan.q_range(q_block);
    const std::int64_t nrows = rows.size();
    QkElem* q = scratch.q.in(base);
    float* acc = scratch.acc.in(base);
    RowState* state = scratch.state.in(base);
    for (std::int64_t r = 0; r < nrows; ++r) {
      path.load_q_row(p.q, head, rows.begin + r, q + r * q_stride);
    }
    std::fill(acc, acc + nrows * dvp, 0.0f);
    std::fill(state, state + nrows, RowState{kNegInf, 0.0f});
    float* ones = scratch.ones.in(base);
    std::fill(ones, ones + kTileRows, 1.0f);

    const std::span<const PlanTile> tiles = plan.tiles(q_block);
    const std::int64_t pass_rows = groups * kTileRows;
    const std::int64_t passes = (nrows + pass_rows - 1) / pass_rows;
    [[maybe_unused]] const auto q_bound = [&] {
      if constexpr (kFallback) {
        return Path::q_block_bound(q, nrows, q_stride, d);
      } else {
        return 0;
      }
    }();
    std::int64_t f32_tiles = 0;
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      const TileView t = tile_view(tiles[i], rows, kp, vp, shift_[head]);
      bool f32 = false;
      if constexpr (kFallback) f32 = path.tile_needs_f32(q_bound, t.k, t.nkp / kPanel, d);
      f32_tiles += f32 ? 1 : 0;
      TileSpans next;
      if (p.variant.prefetch && i + 1 < tiles.size()) {
        next = tile_spans(tile_view(tiles[i + 1], rows, kp, vp, shift_[head]));
      }
      for (std::int64_t pass = 0; pass < passes; ++pass) {
        if (next.count > 0) next.prefetch_part(pass, passes);
        const std::int64_t r0 = pass * pass_rows;
        run_pass(t, r0, std::min(pass_rows, nrows - r0), q, acc, state, base, f32);
      }
    }
    if constexpr (kFallback) {
      tiles_.fetch_add(static_cast<std::int64_t>(tiles.size()));
      f32_tiles_.fetch_add(f32_tiles);
    }
    finish_rows(head, rows, q, acc, state);
  }

  // The tile's packed K and V as contiguous spans of bytes, for prefetching.
  struct TileSpans {
    static constexpr int kMaxSpans = 1 + kernel_limits::kMaxHeadDim / kPanel;
    const char* begin[kMaxSpans];
    std::int64_t bytes[kMaxSpans];
    int count = 0;
    std::int64_t total = 0;

    void add(const void* at, std::int64_t size) {
      begin[count] = static_cast<const char*>(at);
      bytes[count++] = size;
      total += size;
    }
    // Part `part` of `parts` of the bytes, a cache line at a time into L2.
    void prefetch_part(std::int64_t part, std::int64_t parts) const {
      const std::int64_t from = total * part / parts;
      const std::int64_t to = total * (part + 1) / parts;
      std::int64_t offset = 0;
      for (int s = 0; s < count; ++s) {
        const std::int64_t lo = std::max(from, offset);
        const std::int64_t hi = std::min(to, offset + bytes[s]);
        for (std::int64_t b = lo; b < hi; b += 64) prefetch_l2(begin[s] + (b - offset));
        offset += bytes[s];
      }
    }
  };

  TileSpans tile_spans(const TileView& t) const {
    TileSpans spans;
    spans.add(t.k,
              t.nkp / kPanel * Path::k_panel_elems(d) * static_cast<std::int64_t>(sizeof(QkElem)));
    Path::v_tile_spans(t.v_head, panels * kPanel, t.cols.begin, t.nkp, dvp,
                       [&](const VElem* at, std::int64_t elems) {
                         spans.add(at, elems * static_cast<std::int64_t>(sizeof(VElem)));
                       });
    return spans;
  }

  // One register tile of rows within a pass: its rows and the key panels it
  // computes (inside a bitmasked tile only those some of its rows keep).
  struct RowGroup {
    std::int64_t r0 = 0;  // first row, in the q-block
    int rows = 0;
    std::int64_t k0 = 0, k1 = 0;  // keys [k0, k1), whole panels; empty: nothing to do
  };

  // The flash step for rows [r0, r0 + rows) of the item on one tile, as
  // register tiles of kTileRows rows (the last one shorter); `f32`: the path's
  // f32 Q.K^T instead of its own (kFallback).
  void run_pass(const TileView& t, std::int64_t r0, std::int64_t rows, const QkElem* q, float* acc,
                RowState* state, std::byte* base, bool f32) const {
    // Inside a bitmasked tile each register tile computes only the key panels
    // its bitmask rows keep: along a band's or causal mask's edge that is
    // about half the tile. The keys left out would get weight exactly 0, so
    // the result is the same; with no key kept at all the step changes nothing.
    RowGroup group[kMaxRowGroups];
    int n = 0;
    std::int64_t k_lo = t.nkp, k_hi = 0;
    for (std::int64_t g0 = 0; g0 < rows; g0 += kTileRows) {
      RowGroup g;
      g.r0 = r0 + g0;
      g.rows = static_cast<int>(std::min<std::int64_t>(kTileRows, rows - g0));
      g.k0 = 0;
      g.k1 = t.nkp;
      if (t.bits != nullptr) {
        const KeyRange kept = kept_key_panels(t.bits + g.r0 * words, g.rows, words, t.nkp);
        if (kept.begin == kept.end) continue;
        g.k0 = kept.begin;
        g.k1 = kept.end;
      }
      k_lo = std::min(k_lo, g.k0);
      k_hi = std::max(k_hi, g.k1);
      group[n++] = g;
    }
    if (n == 0) return;

    float* s = scratch.scores.in(base);
    float* alpha = scratch.alpha.in(base);
    const float* ones = scratch.ones.in(base);
    Prob* probs = Path::kSeparateProbs ? scratch.probs.in(base) : reinterpret_cast<Prob*>(s);
    const auto scores_of = [&](int g) { return s + g * kTileRows * block_kv; };
    const auto probs_of = [&](int g) { return probs + g * kTileRows * p_stride; };

    // Q.K^T, panel by panel: each panel serves every register tile of the
    // pass while it is in L1.
    VF max_lanes[kMaxRowGroups * kTileRows];
    for (int i = 0; i < n * kTileRows; ++i) max_lanes[i] = splat(kNegInf);
    for (std::int64_t panel = k_lo / kPanel; panel < k_hi / kPanel; ++panel) {
      const QkElem* kpanel = t.k + panel * Path::k_panel_elems(d);
      for (int g = 0; g < n; ++g) {
        if (panel * kPanel < group[g].k0 || panel * kPanel >= group[g].k1) continue;
        with_rows_up_to<kTileRows>(group[g].rows, [&]<int R>() {
          if constexpr (kFallback) {
            if (f32) {
              path.template qk_f32<R>(q + group[g].r0 * q_stride, q_stride, d, kpanel,
                                      scores_of(g) + panel * kPanel, block_kv,
                                      max_lanes + g * kTileRows);
              return;
            }
          }
          Path::template qk<R>(q + group[g].r0 * q_stride, q_stride, d, kpanel,
                               scores_of(g) + panel * kPanel, block_kv, max_lanes + g * kTileRows);
        });
      }
    }

    for (int g = 0; g < n; ++g) {
      softmax_rows(t, group[g], scores_of(g), probs_of(g), alpha + g * kTileRows,
                   max_lanes + g * kTileRows, state, base);
    }

    // P.V, chunk by chunk of output columns; with several register tiles, in
    // slices of keys that each serve all of them while they are in L1. A
    // tile's accumulators are rescaled by alpha in its first slice only.
    const std::int64_t slice = n == 1 ? k_hi - k_lo : v_slice;
    for (std::int64_t col = 0; col < dvp; col += kPanel) {
      for (std::int64_t s0 = k_lo; s0 < k_hi; s0 += slice) {
        const std::int64_t s1 = std::min(k_hi, s0 + slice);
        for (int g = 0; g < n; ++g) {
          const std::int64_t a = std::max(s0, group[g].k0);
          const std::int64_t b = std::min(s1, group[g].k1);
          if (a >= b) continue;
          const float* scale = a == group[g].k0 ? alpha + g * kTileRows : ones;
          with_rows_up_to<kTileRows>(group[g].rows, [&]<int R>() {
            Path::template pv<R>(
                probs_of(g) + Path::prob_row_elems(a), p_stride, b - a,
                Path::v_chunk(t.v_head, panels * kPanel, t.cols.begin + a, col, dvp),
                Path::v_key_stride(dvp), acc + group[g].r0 * dvp + col, dvp, scale);
          });
        }
      }
    }
  }

  // Between the products, for the rows of one register tile: the mask, the
  // online softmax step, and the probabilities as P.V reads them.
  void softmax_rows(const TileView& t, const RowGroup& g, float* s, Prob* probs, float* alpha,
                    const VF* max_lanes, RowState* state, std::byte* base) const {
    std::uint8_t* keep = scratch.keep.in(base);
    const std::int64_t k0 = g.k0, k1 = g.k1;
    const std::int64_t nk = std::min(t.nk, k1);  // in-range keys end
    const bool element = p.mask_mode == MaskMode::kElement;
    for (int r = 0; r < g.rows; ++r) {
      float* srow = s + r * block_kv;
      const std::uint64_t* bits = t.bits == nullptr ? nullptr : t.bits + (g.r0 + r) * words;
      // The fused max covers full tiles; masked or padded rows need their own.
      float tile_max = reduce_max(max_lanes[r]);
      if (element || bits != nullptr || nk < k1) {
        if (element) {
          plan.mask().eval_row(t.rows.begin + g.r0 + r, t.cols.begin, t.nk, keep);
          std::fill(keep + t.nk, keep + t.nkp, std::uint8_t{0});
          apply_keep(srow, keep, t.nkp);
        } else if (bits != nullptr) {
          apply_bits(srow, bits, k0, k1);
        }
        if (nk < k1) clear_columns_from(srow, nk, k1);
        tile_max = row_max(srow + k0, k1 - k0);
      }
      RowState& st = state[g.r0 + r];
      if (!softmax_row(srow + k0, k1 - k0, tile_max, st, alpha[r], exp_scale, t.shift) &&
          st.l == 0.0f && row_keeps_any(bits, element ? keep : nullptr, t.nk)) {
        st.l = kAllKeptOverflowed;
      }
      Path::store_probs(srow + k0, k1 - k0, probs + r * p_stride + Path::prob_row_elems(k0));
    }
  }

  void finish_rows(std::int64_t head, IndexRange rows, const QkElem* q, const float* acc,
                   const RowState* state) {
    constexpr double kLn2 = 0.6931471805599453;
    const double shift = shift_[head];
    for (std::int64_t r = 0; r < rows.size(); ++r) {
      const float m = state[r].m;
      const float l = state[r].l;
      // NaN (an Inf or NaN score), the overflow mark, or an infinite max.
      if (!(l >= 0.0f) || m == -kNegInf) {
        overflow_rows_.fetch_add(1);
        atomic_min(first_overflow_, head * p.q.len + rows.begin + r);
      }
      const bool kept = l > 0.0f && m != -kNegInf;
      store_out_row(p.out, head, rows.begin + r, acc + r * dvp, kept ? 1.0f / l : 0.0f);
      if (p.lse != nullptr) {
        // In double: m * scale alone may pass the f32 range when the log does
        // not. A path that shifted the scores (int8's smoothed K) adds back
        // what it took away.
        const double lse =
            (static_cast<double>(m) + Path::score_offset(q + r * q_stride, d)) * p.scale +
            std::log(l) + shift * kLn2;
        // Out-of-range double to float is undefined behaviour, not Inf: clamp.
        constexpr double kMax = std::numeric_limits<float>::max();
        p.lse[head * p.q.len + rows.begin + r] = !kept ? kNegInf
                                                 : std::fabs(lse) <= kMax
                                                     ? static_cast<float>(lse)
                                                     : std::copysign(-kNegInf, lse);
      }
    }
  }

  const std::uint64_t* ones_bits_ = nullptr;
  std::vector<float> shift_;  // per head: weights scaled by 2^-shift (see pack_heads)
  std::atomic<std::int64_t> overflow_rows_{0};
  std::atomic<std::int64_t> tiles_{0}, f32_tiles_{0};  // kFallback: tiles computed, in f32
  std::atomic<std::int64_t> first_overflow_{std::numeric_limits<std::int64_t>::max()};
};
