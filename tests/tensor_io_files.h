// Byte-level builders for .npy and .safetensors files, written here in C++ so
// the tensor-file tests need no Python: valid files exactly as NumPy, ml_dtypes
// and the safetensors package lay them out, and the raw pieces to corrupt them.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace tilesplash::test {

// A fresh directory per test (ctest runs tests in parallel processes), removed
// with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("tilesplash_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(std::string_view name) const { return (path_ / name).string(); }
  // File names in the directory, to catch leftover temporary files.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string le_bytes(std::uint64_t value, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// The dict NumPy's format.py writes: sorted keys, repr() values, trailing ", ".
inline std::string npy_dict(std::string_view descr, std::string_view shape,
                            std::string_view fortran = "False") {
  return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + std::string(fortran) +
         ", 'shape': " + std::string(shape) + ", }";
}

// A whole .npy file: magic, version, header length, the header padded as NumPy
// pads it (spaces and '\n' to a 64-byte boundary), then `data`. `pad` false
// writes the header as given, for headers that must not gain a newline.
inline std::string npy_file(std::string_view header, std::string_view data, int major = 1,
                            bool pad = true) {
  const std::size_t preamble = major == 1 ? 10 : 12;
  std::string text(header);
  if (pad) {
    text.append(64 - (preamble + text.size() + 1) % 64, ' ');
    text += '\n';
  }
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  out += le_bytes(text.size(), major == 1 ? 2 : 4);
  return out + text + std::string(data);
}

// A whole .safetensors file: 8-byte length, the JSON header padded with spaces
// to a multiple of 8 (as the reference writer does), then `data`.
inline std::string safetensors_file(std::string_view json, std::string_view data) {
  std::string header(json);
  header.append((8 - header.size() % 8) % 8, ' ');
  return le_bytes(header.size(), 8) + header + std::string(data);
}

// Little-endian float32 values as raw bytes.
inline std::string f32_bytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

}  // namespace tilesplash::test
