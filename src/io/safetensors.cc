// The .safetensors format: an 8-byte little-endian header length, a JSON
// header mapping tensor names to {dtype, shape, data_offsets} (offsets relative
// to the data section that follows), and an optional "__metadata__" object.
// nlohmann-json stays inside this file. The header is validated as a whole —
// every entry's offsets must lie inside the file and agree with its shape —
// because one lying entry means the file cannot be trusted, while an
// unsupported dtype matters only for the tensor actually requested.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/atomic_file.h"
#include "io/io_common.h"

namespace tilesplash::io {
namespace {

using Json = nlohmann::ordered_json;  // keeps header order for name listings

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr int kMaxDepth = 4;  // top object > tensor entry > shape array; __metadata__ > value
constexpr std::size_t kMaxListedNames = 20;

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

struct Header {
  std::vector<Entry> entries;
  std::uint64_t data_start = 0;
};

// Bytes per element for every dtype the format defines in whole bytes; the
// sub-byte float types have no byte size and skip the size check.
std::int64_t item_size(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "BOOL" || dtype == "U8" || dtype == "I8" || dtype == "F8_E5M2" ||
      dtype == "F8_E4M3" || dtype == "F8_E8M0") {
    return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

std::string in_quotes(std::string_view name) { return quoted_name(name); }

std::string name_list(const Header& header) {
  std::string out;
  for (std::size_t i = 0; i < header.entries.size() && i < kMaxListedNames; ++i) {
    if (i > 0) out += ", ";
    out += printable(header.entries[i].name);
  }
  if (header.entries.size() > kMaxListedNames) {
    out += ", and " + std::to_string(header.entries.size() - kMaxListedNames) + " more";
  }
  return out;
}

// Rejects duplicate keys (nlohmann would silently keep the last one) and
// nesting no valid header has, before the parser builds anything from it.
class HeaderCallback {
 public:
  explicit HeaderCallback(std::string_view file) : file_(file) {}
  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxDepth) fail(file_, "JSON header nests deeper than a safetensors header");
        if (event == Json::parse_event_t::object_start) keys_.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        keys_.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!keys_.back().insert(parsed.get<std::string>()).second) {
          fail(file_, "duplicate key " + in_quotes(parsed.get<std::string>()) + " in JSON header");
        }
        break;
      default:
        break;
    }
    return true;
  }

 private:
  std::string_view file_;
  std::vector<std::set<std::string>> keys_;
};

std::uint64_t offset_value(const Json& value, std::string_view file, const std::string& where) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) fail(file, where + " must not be negative");
  fail(file, where + " must be non-negative integers");
}

Entry parse_entry(const std::string& name, const Json& value, std::uint64_t data_bytes,
                  std::string_view file) {
  const std::string where = "tensor " + in_quotes(name);
  if (!value.is_object()) fail(file, where + ": entry must be a JSON object");
  Entry entry;
  entry.name = name;
  const auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) fail(file, where + ": missing string 'dtype'");
  entry.dtype = dtype->get<std::string>();
  const auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) fail(file, where + ": missing array 'shape'");
  for (const Json& extent : *shape) {
    if (extent.is_number_integer() && !extent.is_number_unsigned()) {
      fail(file, where + ": shape entry " + extent.dump() + " is negative");
    }
    if (!extent.is_number_unsigned()) fail(file, where + ": shape entries must be integers");
    const auto number = extent.get<std::uint64_t>();
    if (number > static_cast<std::uint64_t>(INT64_MAX)) {
      fail(file, where + ": shape entry " + std::to_string(number) + " does not fit in 64 bits");
    }
    entry.shape.push_back(static_cast<std::int64_t>(number));
  }
  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2) {
    fail(file, where + ": 'data_offsets' must be an array [begin, end]");
  }
  entry.begin = offset_value((*offsets)[0], file, where + ": data_offsets");
  entry.end = offset_value((*offsets)[1], file, where + ": data_offsets");
  const std::string range =
      "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
  if (entry.begin > entry.end) fail(file, where + ": " + range + " end before they begin");
  if (entry.end > data_bytes) {
    fail(file, where + ": " + range + " are out of range (truncated? the data section has " +
                   std::to_string(data_bytes) + " bytes)");
  }
  if (const std::int64_t size = item_size(entry.dtype); size > 0) {
    const std::int64_t bytes = checked_byte_count(entry.shape, size);
    if (bytes < 0) {
      fail(file, where + ": shape " + shape_to_string(entry.shape) + " " + entry.dtype +
                     " is too large (byte count overflows 64 bits)");
    }
    if (static_cast<std::uint64_t>(bytes) != entry.end - entry.begin) {
      fail(file, where + ": " + range + " hold " + std::to_string(entry.end - entry.begin) +
                     " bytes, shape " + shape_to_string(entry.shape) + " " + entry.dtype +
                     " needs " + std::to_string(bytes));
    }
  }
  return entry;
}

// As the reference implementation requires: the tensors, in offset order,
// tile the data section exactly, with no byte shared by two tensors and none
// left to no tensor (a hole or trailing bytes). Either would mean the header
// does not describe the file.
void check_layout(const Header& header, std::uint64_t data_bytes, std::string_view file) {
  std::vector<const Entry*> order;
  for (const Entry& entry : header.entries) order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  std::uint64_t covered = 0;  // the data section's bytes [0, covered) belong to a tensor
  const Entry* previous = nullptr;
  for (const Entry* entry : order) {
    const std::string range =
        "data_offsets [" + std::to_string(entry->begin) + ", " + std::to_string(entry->end) + "]";
    if (entry->begin < covered) {
      fail(file, "tensor " + in_quotes(entry->name) + ": " + range + " overlap tensor " +
                     in_quotes(previous->name) + " (bytes up to " + std::to_string(covered) +
                     "); expected every tensor to start where the previous one ends");
    }
    if (entry->begin > covered) {
      fail(file, "tensor " + in_quotes(entry->name) + ": " + range + " leave bytes [" +
                     std::to_string(covered) + ", " + std::to_string(entry->begin) +
                     ") of the data section to no tensor; expected every tensor to start where "
                     "the previous one ends");
    }
    covered = entry->end;
    previous = entry;
  }
  if (covered != data_bytes) {
    fail(file, "the data section has " + std::to_string(data_bytes) +
                   " bytes but its tensors end at " + std::to_string(covered) +
                   "; expected no bytes after the last tensor");
  }
}

Header read_header(const ByteSource& source) {
  const std::string& file = source.name();
  if (source.size() < 8) {
    fail(file, "truncated: " + std::to_string(source.size()) +
                   " bytes, a .safetensors file starts with an 8-byte header length");
  }
  std::byte length[8];
  source.read(0, length);
  const std::uint64_t header_bytes = load_le(length);
  if (header_bytes > kMaxHeaderBytes) {
    fail(file, "header length " + std::to_string(header_bytes) + " exceeds the " +
                   std::to_string(kMaxHeaderBytes) + "-byte limit (not a .safetensors file?)");
  }
  if (header_bytes > source.size() - 8) {
    fail(file, "truncated: header length field says " + std::to_string(header_bytes) +
                   " bytes, file has " + std::to_string(source.size() - 8) +
                   " after the 8-byte length");
  }
  std::string text(header_bytes, '\0');
  source.read(8, std::as_writable_bytes(std::span(text)));
  Json json;
  try {
    json = Json::parse(text, HeaderCallback(file));
  } catch (const Json::exception& error) {
    // Drop the "[json.exception.parse_error.101] " prefix; keep the position.
    std::string message = error.what();
    if (const auto close = message.find("] "); close != std::string::npos)
      message.erase(0, close + 2);
    if (message.size() > 200) {
      std::size_t cut = 200;  // on a character boundary, not inside a UTF-8 sequence
      while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xc0) == 0x80) --cut;
      message = message.substr(0, cut) + "...";
    }
    fail(file, "invalid JSON header: " + printable(message));
  }
  if (!json.is_object()) fail(file, "JSON header is not an object");

  Header header;
  header.data_start = 8 + header_bytes;
  const std::uint64_t data_bytes = source.size() - header.data_start;
  for (const auto& [name, value] : json.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(file, "__metadata__ must be a JSON object");
      continue;
    }
    header.entries.push_back(parse_entry(name, value, data_bytes, file));
  }
  check_layout(header, data_bytes, file);
  return header;
}

}  // namespace

Tensor parse_safetensors(const ByteSource& source, const std::string& name) {
  const std::string& file = source.name();
  const Header header = read_header(source);
  const Entry* entry = nullptr;
  if (name.empty()) {
    if (header.entries.empty()) fail(file, "holds no tensors");
    if (header.entries.size() > 1) {
      fail(file, "holds " + std::to_string(header.entries.size()) + " tensors, pick one with " +
                     printable(file) + ":NAME (have: " + name_list(header) + ")");
    }
    entry = &header.entries.front();
  } else {
    for (const Entry& candidate : header.entries) {
      if (candidate.name == name) entry = &candidate;
    }
    if (entry == nullptr) {
      fail(file, "tensor " + in_quotes(name) + " not found (have: " +
                     (header.entries.empty() ? std::string("none") : name_list(header)) + ")");
    }
  }
  Tensor tensor;
  if (entry->dtype == "F32") {
    tensor.dtype = DType::kF32;
  } else if (entry->dtype == "F16") {
    tensor.dtype = DType::kF16;
  } else if (entry->dtype == "BF16") {
    tensor.dtype = DType::kBF16;
  } else {
    fail(file, "tensor " + in_quotes(entry->name) + " has dtype " + in_quotes(entry->dtype) +
                   ", supported: F32, F16, BF16");
  }
  tensor.shape = entry->shape;
  tensor.data.resize(entry->end - entry->begin);
  source.read(header.data_start + entry->begin, tensor.data);
  return tensor;
}

std::vector<std::string> safetensors_names(const ByteSource& source) {
  std::vector<std::string> names;
  for (const Entry& entry : read_header(source).entries) names.push_back(entry.name);
  return names;
}

std::string safetensors_header(const std::string& path,
                               const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::set<std::string> seen;
  Json header = Json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__") {
      throw std::invalid_argument(quoted_name(path) + ": invalid tensor name " + in_quotes(name));
    }
    if (!seen.insert(name).second) {
      throw std::invalid_argument(quoted_name(path) + ": duplicate tensor name " + in_quotes(name));
    }
    check_tensor_for_write(path, tensor);
    const std::uint64_t end = offset + tensor.data.size();
    header[name] = {{"dtype", dtype_name(tensor.dtype)},
                    {"shape", tensor.shape},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception&) {
    throw std::invalid_argument(quoted_name(path) + ": tensor names must be valid UTF-8");
  }
  // Pad with spaces, as the reference writer does, so the data is 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace tilesplash::io

namespace tilesplash {

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors) {
  const std::string header = io::safetensors_header(path, tensors);
  io::AtomicFile out(path);
  out.write(header);
  for (const auto& [name, tensor] : tensors) out.write(tensor.data);
  out.commit();
}

}  // namespace tilesplash
