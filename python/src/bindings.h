// The nanobind extension tilesplash._core: one bind_* function per bound
// library module, and the tensor descriptors the Python layer passes in.
// Python owns every array: it allocates outputs, validates types, dtypes and
// devices, and hands the extension plain descriptors (address, dtype, shape,
// element strides) that stay valid for the call because the caller's frame
// holds the arrays. The extension releases the GIL around all library work
// and lets std::invalid_argument surface as ValueError with its message.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "tilesplash/batched_attention.h"
#include "tilesplash/fields.h"
#include "tilesplash/tensor.h"

namespace tilesplash::python {

namespace nb = nanobind;

// (address, dtype name "f32" | "bf16" | "f16", shape, strides in elements).
using TensorDesc =
    std::tuple<std::uintptr_t, std::string, std::vector<std::int64_t>, std::vector<std::int64_t>>;

StridedTensor to_strided(const TensorDesc& desc, const char* name);
MutableStridedTensor to_mutable_strided(const TensorDesc& desc, const char* name);
Layout to_layout(const std::string& text);
// "default" or "int8" (std::invalid_argument naming `precision` otherwise).
Precision to_precision(const std::string& text);
// Arguments taken as Python objects so that a wrong type names the argument
// (nanobind's own overload error lists the signature instead): TypeError
// "<name>: expected an int, got float"; an int beyond int64 is a ValueError.
std::int64_t int_arg(nb::handle value, const char* name);
std::string str_arg(nb::handle value, const char* name);
// The library's arguments for one call; lse: the address of a float32 buffer.
LayoutArgs layout_args(const TensorDesc& q, const TensorDesc& k, const TensorDesc& v,
                       const TensorDesc& out, std::uintptr_t lse, const std::string& layout);

// The library's named values (plan_fields, head_fields) as a dict, in order:
// a NaN number becomes None, NamedNumbers a dict.
nb::dict to_dict(const Fields& fields);

void bind_mask(nb::module_& m);
void bind_video(nb::module_& m);
void bind_plan(nb::module_& m);
void bind_attention(nb::module_& m);
void bind_video_attention(nb::module_& m);
void bind_threading(nb::module_& m);
void bind_window(nb::module_& m);
void bind_merge(nb::module_& m);
void bind_clusters(nb::module_& m);
void bind_methods(nb::module_& m);
void bind_tuning(nb::module_& m);

}  // namespace tilesplash::python
