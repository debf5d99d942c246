// tilesplash._core.merge_attention(): the LSE merge of merge.h on whole
// tensors in a layout, with the GIL released.
#include "tilesplash/merge.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings.h"

namespace tilesplash::python {

void bind_merge(nb::module_& m) {
  using namespace nb::literals;
  m.def(
      "merge_attention",
      [](const std::vector<TensorDesc>& outputs, const std::vector<std::uintptr_t>& lses,
         const TensorDesc& out, std::uintptr_t lse, const std::string& layout, bool check_finite) {
        std::vector<StridedTensor> parts;
        std::vector<const float*> part_lses;
        for (std::size_t i = 0; i < outputs.size(); ++i) {
          const std::string name = "outputs[" + std::to_string(i) + "]";
          parts.push_back(to_strided(outputs[i], name.c_str()));
        }
        for (const std::uintptr_t address : lses) {
          part_lses.push_back(reinterpret_cast<const float*>(address));
        }
        const Layout parsed = to_layout(layout);
        const MutableStridedTensor target = to_mutable_strided(out, "out");
        nb::gil_scoped_release release;
        merge_attention(parsed, parts, part_lses, target, reinterpret_cast<float*>(lse),
                        {.check_finite = check_finite});
      },
      "outputs"_a, "lses"_a, "out"_a, "lse"_a, "layout"_a, "check_finite"_a);
}

}  // namespace tilesplash::python
