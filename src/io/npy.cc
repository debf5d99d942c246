// The .npy format (NumPy's format.py, versions 1.0, 2.0 and 3.0): a 6-byte
// magic, a version, a little-endian header length, the header dict padded so
// that data starts on a 64-byte boundary, then the raw C-order array. Every
// field is checked against the file's size before anything is allocated.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "io/io_common.h"
#include "io/npy_header.h"

namespace tilesplash::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
constexpr std::uint64_t kMaxHeaderBytes = 1 << 20;  // NumPy's own default limit is 10000
constexpr std::size_t kAlign = 64;

std::string hex_bytes(std::span<const std::byte> bytes) {
  std::string out;
  for (const std::byte b : bytes) {
    char buffer[4];
    std::snprintf(buffer, sizeof buffer, "%02x", static_cast<unsigned>(b));
    if (!out.empty()) out += ' ';
    out += buffer;
  }
  return out;
}

// Maps a descr to a dtype. NumPy spells byte order '<' (little), '>' (big),
// '|' (not applicable) or '=' (native, which here is little-endian).
DType parse_descr(const std::string& descr, std::string_view file) {
  if (descr == "<f4" || descr == "=f4") return DType::kF32;
  if (descr == "<f2" || descr == "=f2") return DType::kF16;
  // ml_dtypes' bfloat16 is a 2-byte void to NumPy: np.save writes '<V2'.
  // 'bfloat16' comes from writers that store str(dtype) instead.
  if (descr == "<V2" || descr == "|V2" || descr == "=V2" || descr == "bfloat16") {
    return DType::kBF16;
  }
  if (!descr.empty() && descr[0] == '>') {
    fail(file, "big-endian dtype '" + descr +
                   "' is not supported (save with arr.astype(arr.dtype.newbyteorder('<')))");
  }
  fail(file, "unsupported dtype '" + descr +
                 "' (supported: '<f4' f32, '<f2' f16, '<V2' or 'bfloat16' bf16)");
}

std::string_view descr_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "<f4";
    case DType::kF16:
      return "<f2";
    case DType::kBF16:
      return "<V2";
  }
  return "?";
}

}  // namespace

Tensor parse_npy(const ByteSource& source) {
  const std::string& file = source.name();
  std::byte preamble[12] = {};
  const std::uint64_t have = std::min<std::uint64_t>(source.size(), sizeof preamble);
  source.read(0, std::span(preamble, have));
  const std::size_t magic_have = std::min<std::size_t>(have, kMagicSize);
  if (std::memcmp(preamble, kMagic, magic_have) != 0) {
    std::string problem = "not an .npy file (starts with " +
                          hex_bytes(std::span(preamble, magic_have)) +
                          ", expected 93 4e 55 4d 50 59 = \\x93NUMPY)";
    if (magic_have >= 2 && preamble[0] == std::byte{'P'} && preamble[1] == std::byte{'K'}) {
      problem += "; it looks like a zip archive (.npz), extract the array first";
    }
    fail(file, problem);
  }
  if (have < 8) {
    fail(file, "truncated: " + std::to_string(source.size()) +
                   " bytes, an .npy file starts with at least 10");
  }
  const int major = static_cast<int>(preamble[6]);
  const int minor = static_cast<int>(preamble[7]);
  if (major < 1 || major > 3 || minor != 0) {
    fail(file, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  }
  // Version 1.0 has a 2-byte header length, 2.0 and 3.0 a 4-byte one.
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::uint64_t header_start = 8 + length_bytes;
  if (source.size() < header_start) {
    fail(file, "truncated: " + std::to_string(source.size()) + " bytes, a version " +
                   std::to_string(major) + ".0 .npy file starts with at least " +
                   std::to_string(header_start));
  }
  const std::uint64_t header_bytes = load_le(std::span(preamble + 8, length_bytes));
  if (header_bytes > source.size() - header_start) {
    fail(file, "truncated: header length field says " + std::to_string(header_bytes) +
                   " bytes, file has " + std::to_string(source.size() - header_start) +
                   " after the " + std::to_string(header_start) + "-byte preamble");
  }
  if (header_bytes > kMaxHeaderBytes) {
    fail(file, "header length " + std::to_string(header_bytes) + " exceeds the " +
                   std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  std::string text(header_bytes, '\0');
  source.read(header_start, std::as_writable_bytes(std::span(text)));
  const NpyHeader header = parse_npy_header(text, file);

  Tensor tensor;
  tensor.dtype = parse_descr(header.descr, file);
  tensor.shape = header.shape;
  const std::int64_t data_bytes = checked_byte_count(tensor.shape, size_of(tensor.dtype));
  if (data_bytes < 0) {
    fail(file, "shape " + shape_to_string(tensor.shape) + " is too large (" +
                   std::string(to_string(tensor.dtype)) + " byte count overflows 64 bits)");
  }
  // In Fortran order only the element order differs, and with at most one
  // extent above 1 there is only one order.
  const auto long_extents = std::count_if(tensor.shape.begin(), tensor.shape.end(),
                                          [](std::int64_t extent) { return extent > 1; });
  if (header.fortran_order && long_extents > 1) {
    fail(file, "fortran_order True is not supported (save np.ascontiguousarray(arr) instead)");
  }
  const std::uint64_t data_start = header_start + header_bytes;
  const std::uint64_t available = source.size() - data_start;
  const auto needed = static_cast<std::uint64_t>(data_bytes);
  if (available < needed) {
    fail(file, "truncated: header says " + std::to_string(needed) + " bytes of data (shape " +
                   shape_to_string(tensor.shape) + " " + std::string(to_string(tensor.dtype)) +
                   "), file has " + std::to_string(available));
  }
  if (available > needed) {
    fail(file, std::to_string(available - needed) + " unexpected bytes after the data (shape " +
                   shape_to_string(tensor.shape) + " " + std::string(to_string(tensor.dtype)) +
                   " needs " + std::to_string(needed) + ")");
  }
  tensor.data.resize(needed);
  source.read(data_start, tensor.data);
  return tensor;
}

std::string npy_header(const Tensor& tensor) {
  std::string dict =
      "{'descr': '" + std::string(descr_of(tensor.dtype)) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < tensor.shape.size(); ++i) {
    if (i > 0) dict += ", ";
    dict += std::to_string(tensor.shape[i]);
  }
  dict += tensor.shape.size() == 1 ? ",), }" : "), }";
  // NumPy's padding, byte for byte: spaces and a final newline so that data
  // starts on a 64-byte boundary (a full 64 spaces when already aligned).
  const bool v1 = 10 + dict.size() + 1 + kAlign <= 0xffff;
  const std::size_t preamble = v1 ? 10 : 12;
  dict.append(kAlign - (preamble + dict.size() + 1) % kAlign, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(v1 ? 1 : 2);
  out += '\0';
  for (std::size_t i = 0; i < preamble - 8; ++i)
    out += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  return out + dict;
}

}  // namespace tilesplash::io
