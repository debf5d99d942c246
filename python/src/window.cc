// tilesplash._core.window_mask() and classify_window(): a global mask seen
// through an offset window (plan_window.h), for attention over one shard's
// queries against a block of keys, and the cheap emptiness test that lets
// ring attention skip a step.
#include <nanobind/nanobind.h>

#include <cstdint>

#include "bindings.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan_window.h"

namespace tilesplash::python {

void bind_window(nb::module_& m) {
  using namespace nb::literals;
  m.def(
      "window_mask",
      [](const Mask& mask, std::int64_t q_begin, std::int64_t q_end, std::int64_t kv_begin,
         std::int64_t kv_end, std::int64_t q_len, std::int64_t kv_len) {
        return window_mask(mask, {{q_begin, q_end}, {kv_begin, kv_end}, q_len, kv_len});
      },
      "mask"_a, "q_begin"_a, "q_end"_a, "kv_begin"_a, "kv_end"_a, "q_len"_a, "kv_len"_a);
  m.def(
      "classify_window",
      [](const Mask& mask, std::int64_t q_begin, std::int64_t q_end, std::int64_t kv_begin,
         std::int64_t kv_end) {
        nb::gil_scoped_release release;
        return static_cast<int>(classify_window(mask, {q_begin, q_end}, {kv_begin, kv_end}));
      },
      "mask"_a, "q_begin"_a, "q_end"_a, "kv_begin"_a, "kv_end"_a);
}

}  // namespace tilesplash::python
