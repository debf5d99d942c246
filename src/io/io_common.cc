// Error formatting, byte sources and checked size arithmetic for src/io. Kept
// apart from the format code so that both parsers report problems the same way.
#include "io/io_common.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

namespace tilesplash::io {

void fail(std::string_view file, const std::string& problem) {
  throw InputError(quoted_name(file) + ": " + problem);
}

namespace {

// Length of the well-formed UTF-8 sequence starting at text[at], or 0.
std::size_t utf8_length(std::string_view text, std::size_t at) {
  const auto lead = static_cast<unsigned char>(text[at]);
  std::size_t length = 0;
  std::uint32_t code = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, code = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, code = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, code = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() - at < length) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[at + i]);
    if ((next & 0xc0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8; the
  // C1 controls (U+0080 to U+009F, CSI among them) are escaped like C0's.
  const std::uint32_t minimum[] = {0, 0, 0xa0, 0x800, 0x10000};
  if (code < minimum[length] || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return 0;
  return length;
}

}  // namespace

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const auto byte = static_cast<unsigned char>(text[at]);
    if (byte >= 0x20 && byte < 0x7f) {
      out += text[at++];
      continue;
    }
    // Keep valid UTF-8 (tensor names may be in any script); escape the rest.
    if (const std::size_t length = byte >= 0x80 ? utf8_length(text, at) : 0; length > 0) {
      out += text.substr(at, length);
      at += length;
      continue;
    }
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
    ++at;
  }
  return out;
}

std::uint64_t FileSource::checked_size(const std::string& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error) fail(path, "cannot open: " + error.message());
  // Directories open fine as streams on Linux and only fail on the first read,
  // and pipes have no size to check headers against.
  if (!std::filesystem::is_regular_file(status)) fail(path, "not a regular file");
  const std::uint64_t size = std::filesystem::file_size(path, error);
  if (error) fail(path, "cannot read size: " + error.message());
  return size;
}

FileSource::FileSource(const std::string& path)
    : ByteSource(path, checked_size(path)), stream_(path, std::ios::binary) {
  if (!stream_) fail(path, std::string("cannot open: ") + std::strerror(errno));
}

void FileSource::read(std::uint64_t offset, std::span<std::byte> out) const {
  if (out.empty()) return;
  if (offset > size() || out.size() > size() - offset) {
    fail(name(), "truncated: need " + std::to_string(out.size()) + " bytes at offset " +
                     std::to_string(offset) + ", file has " + std::to_string(size()));
  }
  stream_.clear();
  stream_.seekg(static_cast<std::streamoff>(offset));
  stream_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (stream_.gcount() != static_cast<std::streamsize>(out.size())) {
    // The size was checked at open time, so the file changed underneath us.
    fail(name(),
         "read failed at offset " + std::to_string(offset) + " (file changed while reading?)");
  }
}

void MemorySource::read(std::uint64_t offset, std::span<std::byte> out) const {
  if (offset > bytes_.size() || out.size() > bytes_.size() - offset) {
    fail(name(), "truncated: need " + std::to_string(out.size()) + " bytes at offset " +
                     std::to_string(offset) + ", input has " + std::to_string(bytes_.size()));
  }
  if (!out.empty()) std::memcpy(out.data(), bytes_.data() + offset, out.size());
}

std::int64_t checked_byte_count(const std::vector<std::int64_t>& shape, std::int64_t item_size) {
  std::int64_t total = item_size;
  bool zero = false;
  for (const std::int64_t extent : shape) {
    if (extent < 0) return -1;
    if (extent == 0) zero = true;
  }
  // A zero extent makes the tensor empty, but the other extents must still be
  // representable: a shape like (0, 2^62, 2^62) is as suspicious as without the 0.
  for (const std::int64_t extent : shape) {
    if (extent == 0) continue;
    if (total > std::numeric_limits<std::int64_t>::max() / extent) return -1;
    total *= extent;
  }
  return zero ? 0 : total;
}

std::uint64_t load_le(std::span<const std::byte> bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) {
    value = (value << 8) | static_cast<std::uint64_t>(bytes[i]);
  }
  return value;
}

void check_tensor_for_write(std::string_view path, const Tensor& tensor) {
  const std::int64_t bytes = checked_byte_count(tensor.shape, size_of(tensor.dtype));
  if (bytes < 0) {
    throw std::invalid_argument(quoted_name(path) + ": shape " + shape_to_string(tensor.shape) +
                                " is negative or too large");
  }
  if (static_cast<std::uint64_t>(bytes) != tensor.data.size()) {
    throw std::invalid_argument(quoted_name(path) + ": shape " + shape_to_string(tensor.shape) +
                                " " + std::string(to_string(tensor.dtype)) + " needs " +
                                std::to_string(bytes) + " bytes of data, tensor has " +
                                std::to_string(tensor.data.size()));
  }
}

}  // namespace tilesplash::io

namespace tilesplash {

std::string printable_text(std::string_view text) { return io::printable(text); }

std::string quoted_name(std::string_view name) {
  // Appended, not "'" + ...: GCC 12's -Wrestrict misfires on the operator+ form.
  std::string text(1, '\'');
  text.append(io::printable(name));
  text.push_back('\'');
  return text;
}

}  // namespace tilesplash
