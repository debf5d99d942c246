// tilesplash._core: the compiled half of the Python package (see bindings.h).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "bindings.h"
#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/threading.h"
#include "tilesplash/version.h"

namespace tilesplash::python {

StridedTensor to_strided(const TensorDesc& desc, const char* name) {
  const auto& [address, dtype, shape, strides] = desc;
  const std::optional<DType> parsed = parse_dtype(dtype);
  if (!parsed) throw std::invalid_argument(std::string(name) + ": unsupported dtype " + dtype);
  return {reinterpret_cast<const void*>(address), *parsed, shape, strides};
}

MutableStridedTensor to_mutable_strided(const TensorDesc& desc, const char* name) {
  const StridedTensor t = to_strided(desc, name);
  return {const_cast<void*>(t.data), t.dtype, t.shape, t.strides};
}

Layout to_layout(const std::string& text) {
  const std::optional<Layout> layout = parse_layout(text);
  if (!layout) {
    throw std::invalid_argument("layout: expected 'bhnd', 'bnhd' or 'hnd', got '" + text + "'");
  }
  return *layout;
}

Precision to_precision(const std::string& text) {
  const std::optional<Precision> precision = parse_precision(text);
  if (!precision) {
    throw std::invalid_argument("precision: expected 'default' or 'int8', got '" + text + "'");
  }
  return *precision;
}

namespace {

// As Python's type(value).__name__, the form the package's own messages use.
std::string type_name_of(nb::handle value) {
  return nb::cast<std::string>(value.type().attr("__name__"));
}

}  // namespace

std::int64_t int_arg(nb::handle value, const char* name) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) {
    throw nb::type_error(
        (std::string(name) + ": expected an int, got " + type_name_of(value)).c_str());
  }
  nb::object index = nb::steal(PyNumber_Index(value.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    throw std::invalid_argument(std::string(name) + ": " + nb::str(index).c_str() +
                                " is beyond the 64-bit integer range");
  }
  return result;
}

std::string str_arg(nb::handle value, const char* name) {
  if (!nb::isinstance<nb::str>(value)) {
    throw nb::type_error(
        (std::string(name) + ": expected a str, got " + type_name_of(value)).c_str());
  }
  return nb::cast<std::string>(value);
}

nb::dict to_dict(const Fields& fields) {
  const auto number = [](double value) -> nb::object {
    return std::isfinite(value) ? nb::cast(value) : nb::none();
  };
  nb::dict result;
  for (const auto& [key, value] : fields) {
    result[key.c_str()] = std::visit(
        [&](const auto& v) -> nb::object {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, double>) {
            return number(v);
          } else if constexpr (std::is_same_v<T, NamedNumbers>) {
            nb::dict named;
            for (const auto& [name, x] : v) named[name.c_str()] = number(x);
            return named;
          } else {
            return nb::cast(v);
          }
        },
        value);
  }
  return result;
}

LayoutArgs layout_args(const TensorDesc& q, const TensorDesc& k, const TensorDesc& v,
                       const TensorDesc& out, std::uintptr_t lse, const std::string& layout) {
  return {to_layout(layout),
          to_strided(q, "q"),
          to_strided(k, "k"),
          to_strided(v, "v"),
          to_mutable_strided(out, "out"),
          reinterpret_cast<float*>(lse)};
}

}  // namespace tilesplash::python

NB_MODULE(_core, m) {
  namespace nb = nanobind;
  using namespace tilesplash;
  m.doc() = "tilesplash's compiled core; use the tilesplash package, not this module.";
  // Geometries and masks held in module globals of user code outlive this
  // module at interpreter exit; that is not a leak worth a warning.
  nb::set_leak_warnings(false);
  m.attr("LIBRARY_VERSION") = kVersion;
  m.attr("MAX_THREADS") = kMaxThreads;
  m.attr("MAX_BLOCK_Q") = kernel_limits::kMaxBlockQ;
  m.attr("BLOCK_KV_MULTIPLE") = kernel_limits::kBlockKvMultiple;
  m.attr("MAX_BLOCK_KV") = kernel_limits::kMaxBlockKv;
  m.def("active_isa", &active_isa,
        "The SIMD target the kernel runs (avx512bf16, avx512, avx2, generic).");
  m.def("available_isas", &available_isas, "SIMD targets this CPU can run, best first.");
  python::bind_threading(m);
  python::bind_mask(m);
  python::bind_video(m);
  python::bind_plan(m);
  python::bind_attention(m);
  python::bind_video_attention(m);
  python::bind_window(m);
  python::bind_merge(m);
  python::bind_clusters(m);
  python::bind_methods(m);
  python::bind_tuning(m);
}
