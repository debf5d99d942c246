// libFuzzer target for the .npy reader. Besides memory safety it checks that
// every rejection is a clean InputError and that whatever the reader accepts
// survives a write/read round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_check.h"
#include "io/io_common.h"

using tilesplash::InputError;
using tilesplash::Tensor;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const tilesplash::io::MemorySource source("fuzz.npy", std::as_bytes(std::span(data, size)));
  Tensor tensor;
  try {
    tensor = tilesplash::io::parse_npy(source);
  } catch (const InputError& error) {
    tilesplash::fuzz::check_error_message(error, source.name());
    return 0;
  }
  const std::string header = tilesplash::io::npy_header(tensor);
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(header.data()),
                               reinterpret_cast<const std::byte*>(header.data() + header.size()));
  bytes.insert(bytes.end(), tensor.data.begin(), tensor.data.end());
  try {
    const Tensor back =
        tilesplash::io::parse_npy(tilesplash::io::MemorySource("roundtrip.npy", bytes));
    if (back.dtype != tensor.dtype || back.shape != tensor.shape || back.data != tensor.data) {
      tilesplash::fuzz::bug("round trip changed the tensor");
    }
  } catch (const InputError& error) {
    tilesplash::fuzz::bug(error.what());
  }
  return 0;
}
