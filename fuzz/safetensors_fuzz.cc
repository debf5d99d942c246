// libFuzzer target for the .safetensors reader. Besides memory safety it
// checks that every rejection is a clean InputError, that a header which
// validates lets every listed tensor load or be refused cleanly, and that the
// loadable ones survive a write/read round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "io/io_common.h"

using tilesplash::InputError;
using tilesplash::Tensor;
namespace io = tilesplash::io;

namespace {

constexpr std::size_t kMaxTensorsTried = 16;  // keeps each input's cost bounded

void check_round_trip(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  if (tensors.empty()) return;
  std::string text = io::safetensors_header("roundtrip.safetensors", tensors);
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                               reinterpret_cast<const std::byte*>(text.data() + text.size()));
  for (const auto& [name, tensor] : tensors) {
    bytes.insert(bytes.end(), tensor.data.begin(), tensor.data.end());
  }
  const io::MemorySource source("roundtrip.safetensors", bytes);
  try {
    if (io::safetensors_names(source).size() != tensors.size()) {
      tilesplash::fuzz::bug("round trip changed the tensor count");
    }
    for (const auto& [name, tensor] : tensors) {
      const Tensor back = io::parse_safetensors(source, name);
      if (back.dtype != tensor.dtype || back.shape != tensor.shape || back.data != tensor.data) {
        tilesplash::fuzz::bug("round trip changed a tensor");
      }
    }
  } catch (const InputError& error) {
    tilesplash::fuzz::bug(error.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const io::MemorySource source("fuzz.safetensors", std::as_bytes(std::span(data, size)));
  std::vector<std::string> names;
  try {
    names = io::safetensors_names(source);
  } catch (const InputError& error) {
    tilesplash::fuzz::check_error_message(error, source.name());
    return 0;
  }
  // The header validated, so only "no name", "not found" and dtype errors remain.
  try {
    io::parse_safetensors(source, "");
  } catch (const InputError& error) {
    tilesplash::fuzz::check_error_message(error, source.name());
  }
  std::vector<std::pair<std::string, Tensor>> loaded;
  for (std::size_t i = 0; i < names.size() && i < kMaxTensorsTried; ++i) {
    try {
      Tensor tensor = io::parse_safetensors(source, names[i]);
      if (!names[i].empty()) loaded.emplace_back(names[i], std::move(tensor));
    } catch (const InputError& error) {
      tilesplash::fuzz::check_error_message(error, source.name());
    }
  }
  check_round_trip(loaded);
  return 0;
}
