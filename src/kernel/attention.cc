#include "tilesplash/attention.h"

#include <algorithm>
#include <utility>

#include "compensation/compensation.h"
#include "kernel/forward_params.h"
#include "kernel/isa_dispatch.h"
#include "runtime/cpu_model.h"

namespace tilesplash {

std::string_view to_string(MaskMode mode) {
  switch (mode) {
    case MaskMode::kTile:
      return "tile";
    case MaskMode::kElement:
      return "element";
    case MaskMode::kBitmask:
      return "bitmask";
  }
  return "?";
}

std::optional<MaskMode> parse_mask_mode(std::string_view text) {
  if (text == "tile") return MaskMode::kTile;
  if (text == "element") return MaskMode::kElement;
  if (text == "bitmask") return MaskMode::kBitmask;
  return std::nullopt;
}

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::kDefault:
      return "default";
    case Precision::kInt8:
      return "int8";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view text) {
  if (text == "default") return Precision::kDefault;
  if (text == "int8") return Precision::kInt8;
  return std::nullopt;
}

std::string_view to_string(ProductPath path) {
  switch (path) {
    case ProductPath::kAuto:
      return "auto";
    case ProductPath::kDot:
      return "dot";
    case ProductPath::kWiden:
      return "widen";
  }
  return "?";
}

std::optional<ProductPath> parse_product_path(std::string_view text) {
  if (text == "auto") return ProductPath::kAuto;
  if (text == "dot") return ProductPath::kDot;
  if (text == "widen") return ProductPath::kWiden;
  return std::nullopt;
}

std::string to_string(const KernelVariant& variant) {
  return "rows" + std::to_string(6 * variant.row_groups) + (variant.prefetch ? "+prefetch" : "");
}

std::optional<KernelVariant> parse_kernel_variant(std::string_view text) {
  KernelVariant variant;
  constexpr std::string_view kPrefetch = "+prefetch";
  if (text.size() > kPrefetch.size() && text.ends_with(kPrefetch)) {
    variant.prefetch = true;
    text.remove_suffix(kPrefetch.size());
  }
  for (int groups = 1; groups <= kMaxRowGroups; groups *= 2) {
    if (text == "rows" + std::to_string(6 * groups)) {
      variant.row_groups = groups;
      return variant;
    }
  }
  return std::nullopt;
}

struct AttentionRunner::Impl {
  explicit Impl(std::shared_ptr<ThreadingContext> shared)
      : context(shared ? std::move(shared) : std::make_shared<ThreadingContext>()) {}
  std::shared_ptr<ThreadingContext> context;
  kernel::Workspace workspace;
  compensation::Workspace compensation;
};

AttentionRunner::AttentionRunner() : AttentionRunner(nullptr) {}
AttentionRunner::AttentionRunner(std::shared_ptr<ThreadingContext> context)
    : impl_(std::make_unique<Impl>(std::move(context))) {}
AttentionRunner::~AttentionRunner() = default;

const std::shared_ptr<ThreadingContext>& AttentionRunner::context() const { return impl_->context; }

int AttentionRunner::threads(int requested) const { return impl_->context->resolve(requested); }

std::string AttentionRunner::device_name() const { return runtime::cpu_model(); }

std::string AttentionRunner::code_path() const { return active_isa(); }

void AttentionRunner::forward(const TilePlan& plan, const AttentionArgs& args,
                              const AttentionOptions& options) {
  const kernel::ForwardParams params =
      kernel::make_forward_params(plan, args, options, impl_->context->threads());
  const kernel::ForwardFn forward = kernel::active_target().forward;
  if (options.compensate) {
    compensation::compensated_forward(params, forward, impl_->workspace, impl_->compensation,
                                      *impl_->context);
    return;
  }
  forward(params, impl_->workspace, *impl_->context);
}

void attention_forward(const TilePlan& plan, const AttentionArgs& args,
                       const AttentionOptions& options) {
  thread_local AttentionRunner runner(default_threading_context());
  runner.forward(plan, args, options);
}

namespace kernel {

void order_work_items(const TilePlan& plan, std::int64_t heads, std::vector<std::int64_t>& order) {
  const std::int64_t blocks = plan.num_q_blocks();
  order.resize(static_cast<std::size_t>(heads * blocks));
  for (std::int64_t i = 0; i < heads * blocks; ++i) order[i] = i;
  // A partial tile costs a little more than a full one (mask work).
  auto cost = [&](std::int64_t item) {
    std::int64_t total = 0;
    for (const PlanTile& tile : plan.tiles(item % blocks)) total += tile.is_full() ? 8 : 9;
    return total;
  };
  std::vector<std::int64_t> costs(order.size());
  for (std::int64_t i = 0; i < heads * blocks; ++i) costs[i] = cost(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return costs[a] > costs[b]; });
}

}  // namespace kernel
}  // namespace tilesplash
