// tilesplash._core.attention(): masked_attention (batched_attention.h) on
// the caller's arrays, with the GIL released. Without a context each calling
// thread has its own kernel runner and its own private threading context, so
// Python threads run attention side by side; with one, the call borrows a
// runner on that context (threading_context.h).
#include "tilesplash/attention.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>

#include "bindings.h"
#include "threading_context.h"
#include "tilesplash/batched_attention.h"

namespace tilesplash::python {

void bind_attention(nb::module_& m) {
  using namespace nb::literals;
  m.def(
      "attention",
      [](const TensorDesc& q, const TensorDesc& k, const TensorDesc& v, const TensorDesc& out,
         std::uintptr_t lse, const std::string& layout, const Mask& mask,
         std::optional<float> scale, std::optional<std::int64_t> block_q,
         std::optional<std::int64_t> block_kv, int threads, bool check_finite,
         PyThreadingContext* context, const std::string& precision, bool compensate) {
        const LayoutArgs args = layout_args(q, k, v, out, lse, layout);
        MaskedAttentionOptions options;
        options.attention.scale = scale;
        options.attention.threads = threads;
        options.attention.check_finite = check_finite;
        options.attention.precision = to_precision(precision);
        options.attention.compensate = compensate;
        options.block_q = block_q;
        options.block_kv = block_kv;
        MaskedAttentionResult result;
        {
          nb::gil_scoped_release release;
          if (context != nullptr) {
            PyThreadingContext::Lease lease(*context);
            result = masked_attention(lease.runner(), mask, args, options);
          } else {
            thread_local const std::unique_ptr<AttentionBackend> backend = make_backend("cpu");
            result = masked_attention(*backend, mask, args, options);
          }
        }
        nb::dict info;
        info["block_q"] = result.blocks.block_q;
        info["block_kv"] = result.blocks.block_kv;
        info["blocks_tuned"] = result.blocks_tuned;
        info["plan_seconds"] = result.plan_seconds;
        return info;
      },
      "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "layout"_a, "mask"_a, "scale"_a.none(),
      "block_q"_a.none(), "block_kv"_a.none(), "threads"_a, "check_finite"_a, "context"_a.none(),
      "precision"_a = "default", "compensate"_a = false);
  m.def(
      "reads_in_place",
      [](const TensorDesc& tensor, const std::string& layout) {
        return reads_in_place(to_strided(tensor, "tensor"), to_layout(layout));
      },
      "tensor"_a, "layout"_a);
}

}  // namespace tilesplash::python
