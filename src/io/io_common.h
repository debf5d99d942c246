// Pieces shared by the .npy and .safetensors readers and writers: one error
// helper so every message has the "<file>: <problem>" shape, byte sources that
// let the parsers run on files and, for the fuzzers, on memory, and the
// overflow-checked size arithmetic that keeps a lying header from turning into
// a huge allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tilesplash/tensor_io.h"

namespace tilesplash::io {

[[noreturn]] void fail(std::string_view file, const std::string& problem);

// Text from a file, made safe for a one-line message: control bytes become \xNN.
std::string printable(std::string_view text);

// Random access to the bytes of one input, which knows its size up front so
// that every length field can be checked before anything is read or allocated.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  const std::string& name() const { return name_; }
  std::uint64_t size() const { return size_; }
  // Fills `out` from `offset`; throws InputError if the input ends first.
  virtual void read(std::uint64_t offset, std::span<std::byte> out) const = 0;

 protected:
  ByteSource(std::string name, std::uint64_t size) : name_(std::move(name)), size_(size) {}

 private:
  std::string name_;
  std::uint64_t size_;
};

// A regular file, read with plain stream reads (no mmap: the data is copied
// into the Tensor anyway). Throws InputError if it cannot be opened.
class FileSource final : public ByteSource {
 public:
  explicit FileSource(const std::string& path);
  void read(std::uint64_t offset, std::span<std::byte> out) const override;

 private:
  static std::uint64_t checked_size(const std::string& path);
  mutable std::ifstream stream_;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string name, std::span<const std::byte> bytes)
      : ByteSource(std::move(name), bytes.size()), bytes_(bytes) {}
  void read(std::uint64_t offset, std::span<std::byte> out) const override;

 private:
  std::span<const std::byte> bytes_;
};

// numel * item_size, or -1 when an extent is negative or the product
// overflows int64; callers turn -1 into a message naming the shape.
std::int64_t checked_byte_count(const std::vector<std::int64_t>& shape, std::int64_t item_size);

// Little-endian integer loads from raw header bytes.
std::uint64_t load_le(std::span<const std::byte> bytes);

// The formats' parsers, on any byte source (files in tensor_io.cc, memory in
// the fuzzers). `name` empty: the only tensor in the file.
Tensor parse_npy(const ByteSource& source);
Tensor parse_safetensors(const ByteSource& source, const std::string& name);
std::vector<std::string> safetensors_names(const ByteSource& source);

// The exact bytes the writers put before the data (the tensors' data follow in
// order), exposed for the fuzzers' round-trip checks. safetensors_header
// throws std::invalid_argument("<path>: ...") for bad names or sizes.
std::string npy_header(const Tensor& tensor);
std::string safetensors_header(const std::string& path,
                               const std::vector<std::pair<std::string, Tensor>>& tensors);

// Throws std::invalid_argument("<path>: ...") if data size and shape disagree.
void check_tensor_for_write(std::string_view path, const Tensor& tensor);

}  // namespace tilesplash::io
