// Grow-only, 64-byte aligned scratch memory. Freshly mapped pages are slow to
// touch on some VMs (about 11 us per 4 KiB page here), so workspaces keep their
// memory across calls and only grow.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace tilesplash::runtime {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
  }

  // At least `bytes` bytes; previous contents are not preserved on growth.
  template <typename T>
  T* get(std::size_t count) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes > bytes_) {
      std::free(data_);
      const std::size_t rounded = (bytes + 63) / 64 * 64;
      data_ = std::aligned_alloc(64, rounded);
      if (data_ == nullptr) {
        bytes_ = 0;
        throw std::bad_alloc();
      }
      bytes_ = rounded;
    }
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace tilesplash::runtime
