// Tensor files: reading and writing Q, K, V and outputs as `.npy` (NumPy) and
// `.safetensors` (Hugging Face) so that activations dumped from a real model
// run through the kernel, and its outputs go back to Python, without glue code.
//
// Supported element types are the kernel's: f32, f16 and bf16. NumPy has no
// bf16 of its own; ml_dtypes registers bfloat16 as a 2-byte void type, so
// `np.save` writes the descriptor '<V2', which is what write_npy writes too and
// what read_npy takes as bf16 (as well as '|V2' and 'bfloat16', the latter
// from writers that store str(dtype)). Data is little-endian, C order.
//
// Files are untrusted input. Every problem — truncation, wrong magic, a header
// that lies about its length, huge or negative shapes, unsupported dtypes,
// inconsistent Q/K/V shapes — throws InputError with one line of the form
// "'<file>': <problem>" (the name quoted by quoted_name), and nothing is
// allocated beyond what the file's size can back. Command-line front ends print what() and exit
// with status 2. Writes are atomic: data goes to a temporary file beside the target, which is
// renamed over it only once complete, so a failed write leaves no file behind
// and an existing file untouched.
//
// Layouts (tensor_layout.h) name how a 3-d or 4-d tensor maps onto the
// kernel's strided [heads, len, dim] views: hnd [heads, N, d], bhnd [batch,
// heads, N, d] (PyTorch SDPA) and bnhd [batch, N, heads, d] (FlashAttention).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tilesplash/tensor.h"
#include "tilesplash/tensor_layout.h"

namespace tilesplash {

// Malformed or inconsistent input files. what() is a single line naming the
// file; front ends map it to exit status 2.
class InputError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An owning, dense, C-order (row-major) tensor.
struct Tensor {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;  // numel() * size_of(dtype) bytes, little-endian

  // Zero-filled. Throws std::invalid_argument on a negative extent or a byte
  // count that does not fit in int64.
  static Tensor zeros(DType dtype, std::vector<std::int64_t> shape);
  std::int64_t numel() const;  // 1 for a 0-d tensor
};

// Text made safe for a one-line message: control characters (C0, DEL, C1)
// and bytes that are not UTF-8 become \xNN, so that nothing quoted can break
// the line or send an escape sequence to a terminal.
std::string printable_text(std::string_view text);
// A file or tensor name as messages show it: printable_text in single quotes.
std::string quoted_name(std::string_view name);

// spec is "path.npy", "path.safetensors:tensor_name" or "path.safetensors"
// (allowed when the file holds exactly one tensor). Throws InputError.
Tensor read_tensor(const std::string& spec);
Tensor read_npy(const std::string& path);
// An empty name selects the only tensor; otherwise the error lists the names.
Tensor read_safetensors(const std::string& path, const std::string& name = "");
// Tensor names in header order with __metadata__ left out; validates the header.
std::vector<std::string> list_safetensors(const std::string& path);

// Throw std::invalid_argument when a tensor's data size disagrees with its
// shape (or a name is empty, duplicated or "__metadata__"), and
// std::runtime_error naming the path when the file system refuses; in every
// failure case the target path is left as it was.
void write_npy(const std::string& path, const Tensor& tensor);
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors);

// Extents of a tensor read in a layout; batch is 1 for hnd.
struct LayoutDims {
  std::int64_t batch = 1;
  std::int64_t heads = 0;
  std::int64_t len = 0;
  std::int64_t dim = 0;
};

// Throws InputError("<name>: ...") when the rank does not match the layout.
LayoutDims layout_dims(const Tensor& tensor, Layout layout, std::string_view name);
// The shape a tensor with these extents has in the layout (e.g. to allocate an
// output that mirrors the input's layout).
std::vector<std::int64_t> layout_shape(Layout layout, const LayoutDims& dims);

// The tensor as a StridedTensor (C order): what the whole-tensor entry
// points (batched_attention.h, routing_layout.h, merge.h) take.
StridedTensor strided(const Tensor& tensor);
MutableStridedTensor mutable_strided(Tensor& tensor);

// Deprecated: pass strided(tensor) to the whole-tensor entry points instead,
// which read every layout and batch size. Batch entry `batch` (batch_view),
// or all entries folded into one [batch * heads, len, dim] view (layout_view:
// bnhd with batch > 1 cannot fold and throws InputError).
[[deprecated("pass strided(tensor) to layout_attention / masked_attention")]] TensorView
layout_view(const Tensor& tensor, Layout layout, std::string_view name);
[[deprecated(
    "pass mutable_strided(tensor) to layout_attention / masked_attention")]] MutableTensorView
mutable_layout_view(Tensor& tensor, Layout layout, std::string_view name);
[[deprecated("pass strided(tensor) to layout_attention / masked_attention")]] TensorView batch_view(
    const Tensor& tensor, Layout layout, std::int64_t batch, std::string_view name);
[[deprecated(
    "pass mutable_strided(tensor) to layout_attention / masked_attention")]] MutableTensorView
mutable_batch_view(Tensor& tensor, Layout layout, std::int64_t batch, std::string_view name);

// Checks that Q, K and V agree in the layout before any work starts: same
// dtype, batch and heads; K and V the same length; K's head dim equal to Q's
// (V's may differ). names label the files in messages, e.g. {"q.npy",
// "k.npy", "v.npy"}. Throws InputError naming the offending file.
void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, Layout layout,
               const std::array<std::string, 3>& names = {"q", "k", "v"});

}  // namespace tilesplash
