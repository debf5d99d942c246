// Frame-major <-> token-major row permutation. A pure row gather: every
// destination row is one memcpy of its source row, walked in destination
// order so writes stream while reads hop between the F (or P) interleaved
// sources; the (f, p) pair is stepped incrementally instead of divided out per
// row. Work is split into chunks of rows across the threading context.
#include "geometry/permute.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tilesplash {
namespace detail {
namespace {

constexpr std::int64_t kChunkRows = 2048;

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("permute: " + message);
}

std::string str(std::int64_t value) { return std::to_string(value); }

void check_views(std::int64_t tokens, const char* what, const TensorView& src,
                 const MutableTensorView& dst) {
  if (src.data == nullptr) fail("src.data must not be null");
  if (dst.data == nullptr) fail("dst.data must not be null");
  if (src.len != tokens) {
    fail("src.len must equal " + std::string(what) + " (" + str(tokens) + "), got " + str(src.len));
  }
  if (dst.len != src.len)
    fail("dst.len must equal src.len (" + str(src.len) + "), got " + str(dst.len));
  if (dst.dtype != src.dtype) {
    fail("dst.dtype must equal src.dtype (" + std::string(to_string(src.dtype)) + "), got " +
         std::string(to_string(dst.dtype)));
  }
  if (src.heads < 1) fail("src.heads must be >= 1, got " + str(src.heads));
  if (dst.heads != src.heads) {
    fail("dst.heads must equal src.heads (" + str(src.heads) + "), got " + str(dst.heads));
  }
  if (src.dim < 1) fail("src.dim must be >= 1, got " + str(src.dim));
  if (dst.dim != src.dim)
    fail("dst.dim must equal src.dim (" + str(src.dim) + "), got " + str(dst.dim));
  if (src.row_stride < src.dim) {
    fail("src.row_stride must be >= dim (" + str(src.dim) + "), got " + str(src.row_stride));
  }
  if (dst.row_stride < dst.dim) {
    fail("dst.row_stride must be >= dim (" + str(dst.dim) + "), got " + str(dst.row_stride));
  }
}

void check(const VideoGeometry& g, const TensorView& src, const MutableTensorView& dst) {
  g.validate();
  check_views(g.tokens(), "the geometry's tokens", src, dst);
}

}  // namespace

void permute_rows(ThreadingContext& context, int threads, const VideoGeometry& g, TokenOrder to,
                  const TensorView& src, const MutableTensorView& dst) {
  check(g, src, dst);
  const std::int64_t elem = size_of(src.dtype);
  const std::size_t row_bytes = static_cast<std::size_t>(src.dim * elem);
  const std::int64_t n = g.tokens();
  const std::int64_t chunks = (n + kChunkRows - 1) / kChunkRows;
  const IndexRange video = g.video_range();
  const std::int64_t frames = g.frames;
  const std::int64_t patches = g.tokens_per_frame();
  // Destination video index t = a * inner + b comes from source index
  // b * outer + a: token-major t = p * F + f reads f * P + p, and back.
  const bool to_token = to == TokenOrder::kTokenMajor;
  const std::int64_t inner = to_token ? frames : patches;
  const std::int64_t outer = to_token ? patches : frames;

  context.run(threads, src.heads * chunks, [&](std::int64_t item, int) {
    const std::int64_t head = item / chunks;
    const std::int64_t begin = (item % chunks) * kChunkRows;
    const std::int64_t end = std::min(n, begin + kChunkRows);
    const auto* s = static_cast<const unsigned char*>(src.data) + head * src.head_stride * elem;
    auto* d = static_cast<unsigned char*>(dst.data) + head * dst.head_stride * elem;
    const auto copy = [&](std::int64_t to_row, std::int64_t from_row) {
      std::memcpy(d + to_row * dst.row_stride * elem, s + from_row * src.row_stride * elem,
                  row_bytes);
    };
    std::int64_t row = begin;
    for (; row < std::min(end, video.begin); ++row) copy(row, row);
    const std::int64_t video_end = std::min(end, video.end);
    if (row < video_end) {
      std::int64_t a = (row - video.begin) / inner;
      std::int64_t b = (row - video.begin) % inner;
      for (; row < video_end; ++row) {
        copy(row, video.begin + b * outer + a);
        if (++b == inner) {
          b = 0;
          ++a;
        }
      }
    }
    for (; row < end; ++row) copy(row, row);
  });
}

void gather_rows(ThreadingContext& context, int threads, const RowOrder& order,
                 const TensorView& src, const MutableTensorView& dst) {
  if (order.is_identity()) fail("gather_rows needs a permutation, not the identity");
  check_views(order.size(), "the order's size", src, dst);
  const std::int64_t elem = size_of(src.dtype);
  const std::size_t row_bytes = static_cast<std::size_t>(src.dim * elem);
  const std::int64_t n = order.size();
  const std::int64_t chunks = (n + kChunkRows - 1) / kChunkRows;
  const std::int64_t* source = order.sources().data();
  context.run(threads, src.heads * chunks, [&](std::int64_t item, int) {
    const std::int64_t head = item / chunks;
    const std::int64_t begin = (item % chunks) * kChunkRows;
    const std::int64_t end = std::min(n, begin + kChunkRows);
    const auto* s = static_cast<const unsigned char*>(src.data) + head * src.head_stride * elem;
    auto* d = static_cast<unsigned char*>(dst.data) + head * dst.head_stride * elem;
    for (std::int64_t row = begin; row < end; ++row) {
      std::memcpy(d + row * dst.row_stride * elem, s + source[row] * src.row_stride * elem,
                  row_bytes);
    }
  });
}

}  // namespace detail

namespace {

void permute_on(const VideoGeometry& g, TokenOrder to, const TensorView& src,
                const MutableTensorView& dst, int threads, ThreadingContext* context) {
  if (threads < 0)
    detail::fail("threads must be >= 0 (0: the context's threads), got " + detail::str(threads));
  detail::permute_rows(context != nullptr ? *context : *default_threading_context(), threads, g, to,
                       src, dst);
}

}  // namespace

void permute_to_token_major(const VideoGeometry& geometry, const TensorView& src,
                            const MutableTensorView& dst, int threads, ThreadingContext* context) {
  permute_on(geometry, TokenOrder::kTokenMajor, src, dst, threads, context);
}

void permute_to_frame_major(const VideoGeometry& geometry, const TensorView& src,
                            const MutableTensorView& dst, int threads, ThreadingContext* context) {
  permute_on(geometry, TokenOrder::kFrameMajor, src, dst, threads, context);
}

}  // namespace tilesplash
