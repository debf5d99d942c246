// Argument checks for attention calls. Every message names the argument and
// the value it should have had, because these reach users through the CLI.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernel/forward_params.h"
#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/threading.h"

namespace tilesplash::kernel {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("attention: " + message);
}

std::string str(std::int64_t value) { return std::to_string(value); }

template <typename View>
void check_view(const char* name, const View& view) {
  // Extents first: an empty tensor has no data, and "null data" would hide why.
  if (view.heads < 1) fail(std::string(name) + ".heads must be >= 1, got " + str(view.heads));
  if (view.len < 1) fail(std::string(name) + ".len must be >= 1, got " + str(view.len));
  if (view.dim < 1) {
    fail(std::string(name) + ".dim must be " + kernel_limits::head_dim_rule() + ", got " +
         str(view.dim));
  }
  if (view.device.type != DeviceType::kCpu) {
    fail(std::string(name) + ".device must be cpu (the cpu backend reads host memory), got " +
         to_string(view.device));
  }
  if (view.data == nullptr) fail(std::string(name) + ".data must not be null");
  if (view.row_stride < view.dim) {
    fail(std::string(name) + ".row_stride must be >= dim (" + str(view.dim) + "), got " +
         str(view.row_stride));
  }
  if (view.heads > 1 && view.head_stride < 1) {
    fail(std::string(name) + ".head_stride must be >= 1, got " + str(view.head_stride));
  }
}

void check_dim(const char* name, std::int64_t dim) {
  if (!kernel_limits::valid_head_dim(dim)) {
    fail(std::string(name) + " must be " + kernel_limits::head_dim_rule() + ", got " + str(dim));
  }
}

// The views against each other and the plan: heads, lengths, dims, dtypes.
void check_views(const TilePlan& plan, const AttentionArgs& args) {
  const TensorView& q = args.q;
  const TensorView& k = args.k;
  const TensorView& v = args.v;
  const MutableTensorView& out = args.out;
  check_view("q", q);
  check_view("k", k);
  check_view("v", v);
  check_view("out", out);
  if (k.heads != q.heads)
    fail("k.heads must equal q.heads (" + str(q.heads) + "), got " + str(k.heads));
  if (v.heads != q.heads)
    fail("v.heads must equal q.heads (" + str(q.heads) + "), got " + str(v.heads));
  if (out.heads != q.heads) {
    fail("out.heads must equal q.heads (" + str(q.heads) + "), got " + str(out.heads));
  }
  if (q.len != plan.q_len())
    fail("q.len must equal plan.q_len (" + str(plan.q_len()) + "), got " + str(q.len));
  if (k.len != plan.kv_len()) {
    fail("k.len must equal plan.kv_len (" + str(plan.kv_len()) + "), got " + str(k.len));
  }
  if (v.len != k.len) fail("v.len must equal k.len (" + str(k.len) + "), got " + str(v.len));
  if (out.len != q.len) fail("out.len must equal q.len (" + str(q.len) + "), got " + str(out.len));
  check_dim("q.dim (head dim)", q.dim);
  if (k.dim != q.dim) fail("k.dim must equal q.dim (" + str(q.dim) + "), got " + str(k.dim));
  check_dim("v.dim", v.dim);
  if (out.dim != v.dim) fail("out.dim must equal v.dim (" + str(v.dim) + "), got " + str(out.dim));
  if (k.dtype != q.dtype || v.dtype != q.dtype) {
    fail("q, k and v must share one dtype, got " + std::string(to_string(q.dtype)) + ", " +
         std::string(to_string(k.dtype)) + ", " + std::string(to_string(v.dtype)));
  }
  if (out.dtype != DType::kF32 && out.dtype != q.dtype) {
    fail("out.dtype must be f32 or the input dtype (" + std::string(to_string(q.dtype)) +
         "), got " + std::string(to_string(out.dtype)));
  }
}

}  // namespace

ForwardParams make_forward_params(const TilePlan& plan, const AttentionArgs& args,
                                  const AttentionOptions& options, int default_threads) {
  check_views(plan, args);
  const TensorView& q = args.q;
  const BlockSizes blocks = plan.blocks();
  if (!kernel_limits::valid_block_kv(blocks.block_kv)) {
    fail("plan block_kv must be " + kernel_limits::block_kv_rule() + ", got " +
         str(blocks.block_kv));
  }
  if (!kernel_limits::valid_block_q(blocks.block_q)) {
    fail("plan block_q must be " + kernel_limits::block_q_rule() + ", got " + str(blocks.block_q));
  }
  if (options.threads < 0 || options.threads > kMaxThreads) {
    fail("threads must be in [0, " + str(kMaxThreads) + "] (0 = the context's threads), got " +
         str(options.threads));
  }

  ForwardParams params;
  params.plan = &plan;
  params.q = q;
  params.k = args.k;
  params.v = args.v;
  params.out = args.out;
  params.lse = args.lse;
  params.scale = options.scale.value_or(1.0f / std::sqrt(static_cast<float>(q.dim)));
  if (!kernel_limits::valid_scale(params.scale)) {
    char shown[32];
    std::snprintf(shown, sizeof(shown), "%.8g", static_cast<double>(params.scale));
    fail("scale must be " + kernel_limits::scale_rule() + ", got " + shown);
  }
  params.mask_mode = options.mask_mode;
  params.threads = options.threads > 0 ? options.threads : default_threads;
  params.check_finite = options.check_finite;
  if (options.precision != Precision::kDefault && options.precision != Precision::kInt8) {
    fail("precision must be default or int8");
  }
  params.precision = options.precision;
  params.int8_report = options.int8_report;
  // The product path matters for bf16 only, but a forced one is checked on
  // every call, so a wrong setting is not hidden by the dtype of the moment.
  if (q.dtype == DType::kBF16 || options.product_path != ProductPath::kAuto) {
    params.bf16_dot = choose_product_path(options.product_path).path == ProductPath::kDot;
  }
  if (options.variant) {
    const int groups = options.variant->row_groups;
    if (groups != 1 && groups != 2 && groups != 4) {
      fail("variant.row_groups must be 1, 2 or 4, got " + str(groups));
    }
    params.variant = *options.variant;
  }
  return params;
}

}  // namespace tilesplash::kernel
