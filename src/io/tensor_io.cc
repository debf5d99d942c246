// The public entry points of tensor_io.h that are not format-specific: the
// Tensor helpers, "path[:name]" spec dispatch, and write_npy's file handling
// (the header bytes come from npy.cc).
#include <limits>

#include "io/atomic_file.h"
#include "io/io_common.h"
#include "tilesplash/output_set.h"

namespace tilesplash {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

Tensor Tensor::zeros(DType dtype, std::vector<std::int64_t> shape) {
  const std::int64_t bytes = io::checked_byte_count(shape, size_of(dtype));
  if (bytes < 0) {
    throw std::invalid_argument("Tensor::zeros: shape " + shape_to_string(shape) +
                                " is negative or too large");
  }
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.data.resize(static_cast<std::size_t>(bytes));
  return tensor;
}

std::int64_t Tensor::numel() const {
  std::int64_t count = 1;
  for (const std::int64_t extent : shape) count *= extent;
  return count;
}

Tensor read_npy(const std::string& path) { return io::parse_npy(io::FileSource(path)); }

Tensor read_safetensors(const std::string& path, const std::string& name) {
  return io::parse_safetensors(io::FileSource(path), name);
}

std::vector<std::string> list_safetensors(const std::string& path) {
  return io::safetensors_names(io::FileSource(path));
}

std::string tensor_spec_file(const std::string& spec) {
  constexpr std::string_view kSafetensors = ".safetensors:";
  if (ends_with(spec, ".npy") || ends_with(spec, ".safetensors")) return spec;
  if (const auto at = spec.find(kSafetensors); at != std::string::npos) {
    return spec.substr(0, at + kSafetensors.size() - 1);
  }
  return spec;
}

Tensor read_tensor(const std::string& spec) {
  // The name follows the first ".safetensors:" so that tensor names may
  // themselves contain ':' (and '.safetensors').
  constexpr std::string_view kSafetensors = ".safetensors";
  if (ends_with(spec, ".npy")) return read_npy(spec);
  if (ends_with(spec, kSafetensors)) return read_safetensors(spec);
  if (const auto at = spec.find(std::string(kSafetensors) + ":"); at != std::string::npos) {
    const std::string path = spec.substr(0, at + kSafetensors.size());
    const std::string name = spec.substr(at + kSafetensors.size() + 1);
    if (name.empty()) io::fail(path, "empty tensor name after ':'");
    return read_safetensors(path, name);
  }
  if (const auto at = spec.find(".npy:"); at != std::string::npos) {
    io::fail(spec.substr(0, at + 4), "an .npy file holds one tensor; drop the ':" +
                                         io::printable(spec.substr(at + 5)) + "'");
  }
  io::fail(spec, "unknown tensor file type (expected path.npy or path.safetensors[:name])");
}

void write_npy(const std::string& path, const Tensor& tensor) {
  io::check_tensor_for_write(path, tensor);
  io::AtomicFile out(path);
  out.write(io::npy_header(tensor));
  out.write(tensor.data);
  out.commit();
}

}  // namespace tilesplash
