// The .npy header is the repr() of a Python dict, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// This is a small, strict parser for exactly the literals such a header can
// hold (strings, True/False, None, integers, tuples and lists), with bounded
// nesting, so that no input can make it recurse deeply or misread quietly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tilesplash::io {

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

// Throws InputError("<file>: ...") on a syntax error, a missing, unknown or
// duplicate key, a value of the wrong type, or a negative or 64-bit-overflowing
// shape entry. Does not interpret descr.
NpyHeader parse_npy_header(std::string_view text, std::string_view file);

}  // namespace tilesplash::io
