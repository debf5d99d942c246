// Scratch memory laid out by element type: a kernel call asks for typed
// arrays (floats, packed bf16 pairs, mask bytes, row states) and gets back
// slots with byte offsets, each 64-byte aligned, so no part of the kernel
// assumes an element size when it carves one buffer into several.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tilesplash::kernel {

template <typename T>
struct ScratchSlot {
  std::size_t offset = 0;  // bytes from the buffer start
  std::size_t count = 0;   // elements
  T* in(std::byte* base) const { return reinterpret_cast<T*>(base + offset); }
};

class ScratchLayout {
 public:
  static constexpr std::size_t kAlign = 64;  // a cache line, and an AVX-512 vector

  template <typename T>
  ScratchSlot<T> add(std::int64_t count) {
    static_assert(alignof(T) <= kAlign);
    ScratchSlot<T> slot{bytes_, static_cast<std::size_t>(count < 0 ? 0 : count)};
    bytes_ += (slot.count * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    return slot;
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_ = 0;
};

}  // namespace tilesplash::kernel
