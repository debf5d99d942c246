// tilesplash._core.tune_shape: the device-independent fields of a tuning key,
// so that the flex backend's key (python/tilesplash/_flex/tuning.py) is the
// core's, not a re-derivation of it.
#include "tilesplash/tuning.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>

#include "bindings.h"
#include "tilesplash/mask.h"

namespace tilesplash::python {

void bind_tuning(nb::module_& m) {
  using namespace nb::literals;
  m.def(
      "tune_shape",
      [](const Mask& mask, std::int64_t q_len, std::int64_t kv_len) {
        TuneShape shape;
        {
          nb::gil_scoped_release release;
          shape = make_tune_shape(mask, q_len, kv_len);
        }
        nb::dict result;
        result["mask_family"] = shape.mask_family;
        result["density"] = shape.density;
        result["q_bucket"] = shape.q_bucket;
        result["kv_bucket"] = shape.kv_bucket;
        return result;
      },
      "mask"_a, "q_len"_a, "kv_len"_a,
      "The mask-and-length fields every backend's tuning key shares (TuneShape, tuning.h).");
}

}  // namespace tilesplash::python
