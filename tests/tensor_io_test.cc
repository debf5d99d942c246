// Tensor files that should load: round trips for every dtype x layout x file
// format, byte compatibility with what NumPy, ml_dtypes and safetensors write,
// the layout views against hand-computed offsets, spec parsing, and the
// all-or-nothing guarantee of the writers.
#include "tilesplash/tensor_io.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>

#include "support/layout_views.h"
#include "tensor_io_files.h"

namespace tilesplash {
namespace {

using test::TempDir;

enum class Format { kNpy, kSafetensors };

// A code unique to each logical element, stored as raw bits so that the check
// is exact in every dtype and independent of float rounding.
std::uint32_t element_code(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c) {
  return static_cast<std::uint32_t>(1 + ((b * 16 + h) * 16 + n) * 16 + c);
}

// Flat element index of (b, h, n, c), written out per layout from the layout
// definitions rather than from the library's strides.
std::int64_t flat_index(Layout layout, const LayoutDims& d, std::int64_t b, std::int64_t h,
                        std::int64_t n, std::int64_t c) {
  switch (layout) {
    case Layout::kHND:
      return (h * d.len + n) * d.dim + c;
    case Layout::kBHND:
      return ((b * d.heads + h) * d.len + n) * d.dim + c;
    case Layout::kBNHD:
      return ((b * d.len + n) * d.heads + h) * d.dim + c;
  }
  return -1;
}

std::uint32_t load_bits(const void* base, DType dtype, std::int64_t index) {
  const auto* bytes = static_cast<const std::byte*>(base) + index * size_of(dtype);
  if (dtype == DType::kF32) {
    std::uint32_t bits;
    std::memcpy(&bits, bytes, 4);
    return bits;
  }
  std::uint16_t bits;
  std::memcpy(&bits, bytes, 2);
  return bits;
}

void store_bits(Tensor& tensor, std::int64_t index, std::uint32_t bits) {
  auto* bytes = tensor.data.data() + index * size_of(tensor.dtype);
  if (tensor.dtype == DType::kF32) {
    std::memcpy(bytes, &bits, 4);
  } else {
    const auto half = static_cast<std::uint16_t>(bits);
    std::memcpy(bytes, &half, 2);
  }
}

template <typename View>
std::uint32_t view_bits(const View& view, std::int64_t head, std::int64_t row, std::int64_t col) {
  return load_bits(view.data, view.dtype, head * view.head_stride + row * view.row_stride + col);
}

class RoundTripTest : public testing::TestWithParam<std::tuple<DType, Layout, Format>> {};

TEST_P(RoundTripTest, WritesReadsAndViewsEveryElement) {
  const auto [dtype, layout, format] = GetParam();
  const LayoutDims dims{layout == Layout::kHND ? 1 : 2, 3, 5, 8};
  Tensor tensor = Tensor::zeros(dtype, layout_shape(layout, dims));
  for (std::int64_t b = 0; b < dims.batch; ++b)
    for (std::int64_t h = 0; h < dims.heads; ++h)
      for (std::int64_t n = 0; n < dims.len; ++n)
        for (std::int64_t c = 0; c < dims.dim; ++c)
          store_bits(tensor, flat_index(layout, dims, b, h, n, c), element_code(b, h, n, c));

  TempDir dir;
  std::string spec;
  if (format == Format::kNpy) {
    spec = dir.file("t.npy");
    write_npy(spec, tensor);
  } else {
    const std::string path = dir.file("t.safetensors");
    Tensor other = Tensor::zeros(DType::kF32, {2});
    write_safetensors(path, {{"other", other}, {"x", tensor}});
    spec = path + ":x";
  }
  const Tensor back = read_tensor(spec);
  EXPECT_EQ(back.dtype, dtype);
  EXPECT_EQ(back.shape, tensor.shape);
  ASSERT_EQ(back.data, tensor.data);

  const LayoutDims got = layout_dims(back, layout, spec);
  EXPECT_EQ(got.batch, dims.batch);
  EXPECT_EQ(got.heads, dims.heads);
  EXPECT_EQ(got.len, dims.len);
  EXPECT_EQ(got.dim, dims.dim);
  // The library's strided views read every element where the layout puts it.
  for (std::int64_t b = 0; b < dims.batch; ++b) {
    const TensorView view = test::entry_of(back, layout, b);
    ASSERT_EQ(view.heads, dims.heads);
    ASSERT_EQ(view.len, dims.len);
    ASSERT_EQ(view.dim, dims.dim);
    for (std::int64_t h = 0; h < dims.heads; ++h)
      for (std::int64_t n = 0; n < dims.len; ++n)
        for (std::int64_t c = 0; c < dims.dim; ++c)
          ASSERT_EQ(view_bits(view, h, n, c), element_code(b, h, n, c)) << b << h << n << c;
  }
  const detail::LayoutAxes axes = detail::layout_axes(back.shape, {}, layout, spec);
  // bnhd's heads of different batch entries are not one stride apart.
  ASSERT_EQ(detail::batch_folds(axes), layout != Layout::kBNHD || dims.batch == 1);
  if (!detail::batch_folds(axes)) return;
  const TensorView folded = test::entry_of(back, layout, 0, dims.batch);
  ASSERT_EQ(folded.heads, dims.batch * dims.heads);
  for (std::int64_t b = 0; b < dims.batch; ++b)
    for (std::int64_t h = 0; h < dims.heads; ++h)
      for (std::int64_t n = 0; n < dims.len; ++n)
        for (std::int64_t c = 0; c < dims.dim; ++c)
          ASSERT_EQ(view_bits(folded, b * dims.heads + h, n, c), element_code(b, h, n, c));
}

std::string round_trip_name(const testing::TestParamInfo<std::tuple<DType, Layout, Format>>& info) {
  const auto& [dtype, layout, format] = info.param;
  return std::string(to_string(dtype)) + "_" + std::string(to_string(layout)) + "_" +
         (format == Format::kNpy ? "npy" : "safetensors");
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, RoundTripTest,
                         testing::Combine(testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                                          testing::Values(Layout::kHND, Layout::kBHND,
                                                          Layout::kBNHD),
                                          testing::Values(Format::kNpy, Format::kSafetensors)),
                         round_trip_name);

TEST(TensorIoTest, BnhdBatchOneFoldsIntoOneView) {
  Tensor tensor = Tensor::zeros(DType::kF32, {1, 5, 3, 8});
  MutableTensorView view = test::mutable_entry_of(tensor, Layout::kBNHD);
  EXPECT_EQ(view.heads, 3);
  EXPECT_EQ(view.head_stride, 8);
  EXPECT_EQ(view.row_stride, 24);
  EXPECT_EQ(view.data, tensor.data.data());
  const StridedTensor strided_view = strided(tensor);
  EXPECT_EQ(strided_view.data, tensor.data.data());
  EXPECT_EQ(strided_view.shape, tensor.shape);
  EXPECT_TRUE(strided_view.strides.empty());  // C order
}

// The deprecated per-entry views still work, through the same strided views.
TEST(TensorIoTest, DeprecatedViewsForwardToTheStridedViews) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  Tensor tensor = Tensor::zeros(DType::kF32, {2, 5, 3, 8});
  EXPECT_EQ(batch_view(tensor, Layout::kBNHD, 1, "x").data,
            test::entry_of(tensor, Layout::kBNHD, 1).data);
  EXPECT_EQ(mutable_batch_view(tensor, Layout::kBNHD, 1, "x").row_stride, 24);
  EXPECT_THROW(layout_view(tensor, Layout::kBNHD, "x"), InputError);
  EXPECT_THROW(batch_view(tensor, Layout::kBNHD, 2, "x"), InputError);
  EXPECT_THROW(batch_view(tensor, Layout::kBNHD, -1, "x"), InputError);
  EXPECT_THROW(layout_view(tensor, Layout::kHND, "x"), InputError);
  Tensor bhnd = Tensor::zeros(DType::kF32, {2, 3, 5, 8});
  EXPECT_EQ(mutable_layout_view(bhnd, Layout::kBHND, "x").heads, 6);
#pragma GCC diagnostic pop
}

TEST(TensorIoTest, WriteNpyMatchesNumpyBytes) {
  TempDir dir;
  Tensor tensor = Tensor::zeros(DType::kF32, {2, 3});
  for (int i = 0; i < 6; ++i) store_bits(tensor, i, 0x3f800000u + i);
  write_npy(dir.file("a.npy"), tensor);
  std::string data(reinterpret_cast<const char*>(tensor.data.data()), tensor.data.size());
  // np.save(np.zeros((2, 3), '<f4')) writes exactly this 128-byte header.
  const std::string expected = test::npy_file(test::npy_dict("<f4", "(2, 3)"), data);
  EXPECT_EQ(expected.size() - data.size(), 128u);
  EXPECT_EQ(test::read_bytes(dir.file("a.npy")), expected);

  // One-dimensional shapes are written "(7,)", zero-dimensional ones "()".
  write_npy(dir.file("b.npy"), Tensor::zeros(DType::kF16, {7}));
  EXPECT_EQ(test::read_bytes(dir.file("b.npy")),
            test::npy_file(test::npy_dict("<f2", "(7,)"), std::string(14, '\0')));
  write_npy(dir.file("c.npy"), Tensor::zeros(DType::kF32, {}));
  EXPECT_EQ(test::read_bytes(dir.file("c.npy")),
            test::npy_file(test::npy_dict("<f4", "()"), std::string(4, '\0')));
}

TEST(TensorIoTest, Bf16NpyUsesTheMlDtypesDescriptor) {
  TempDir dir;
  Tensor tensor = Tensor::zeros(DType::kBF16, {2});
  store_bits(tensor, 0, float_to_bf16(1.5f));
  store_bits(tensor, 1, float_to_bf16(-2.0f));
  write_npy(dir.file("a.npy"), tensor);
  const std::string bytes = test::read_bytes(dir.file("a.npy"));
  // ml_dtypes registers bfloat16 with kind 'V', so np.save writes '<V2'.
  EXPECT_NE(bytes.find("'descr': '<V2'"), std::string::npos) << bytes;

  // Descriptors other writers use for the same bits.
  const std::string data = bytes.substr(bytes.size() - 4);
  for (const char* descr : {"<V2", "|V2", "bfloat16"}) {
    test::write_bytes(dir.file("b.npy"), test::npy_file(test::npy_dict(descr, "(2,)"), data));
    const Tensor back = read_npy(dir.file("b.npy"));
    EXPECT_EQ(back.dtype, DType::kBF16) << descr;
    EXPECT_EQ(bf16_to_float(static_cast<std::uint16_t>(load_bits(back.data.data(), back.dtype, 0))),
              1.5f);
    EXPECT_EQ(bf16_to_float(static_cast<std::uint16_t>(load_bits(back.data.data(), back.dtype, 1))),
              -2.0f);
  }
}

TEST(TensorIoTest, ReadsOtherValidNpyVariants) {
  TempDir dir;
  const std::string data = test::f32_bytes({1, 2, 3, 4, 5, 6});
  const struct {
    std::string header;
    int major;
  } variants[] = {
      {test::npy_dict("<f4", "(2, 3)"), 2},  // version 2.0: 4-byte length
      {test::npy_dict("<f4", "(2, 3)"), 3},  // version 3.0: UTF-8 header
      {"{\"descr\": \"<f4\", \"shape\": (2,3), \"fortran_order\": False}", 1},  // any order, quotes
      {"{'descr':'<f4','fortran_order':False,'shape':(2L, 3L)}", 1},            // Python 2 longs
      {"\t{ 'shape' : ( 2 , 3 , ) , 'descr' : '=f4' , 'fortran_order' : False }", 1},
  };
  for (const auto& variant : variants) {
    test::write_bytes(dir.file("a.npy"), test::npy_file(variant.header, data, variant.major));
    const Tensor back = read_npy(dir.file("a.npy"));
    EXPECT_EQ(back.shape, (std::vector<std::int64_t>{2, 3})) << variant.header;
    EXPECT_EQ(back.dtype, DType::kF32);
    EXPECT_EQ(back.data.size(), 24u);
  }
  // Fortran order changes nothing when at most one extent exceeds 1.
  test::write_bytes(dir.file("f.npy"),
                    test::npy_file(test::npy_dict("<f4", "(1, 6)", "True"), data));
  EXPECT_EQ(read_npy(dir.file("f.npy")).shape, (std::vector<std::int64_t>{1, 6}));
  // Empty tensors are fine.
  test::write_bytes(dir.file("e.npy"), test::npy_file(test::npy_dict("<f2", "(0, 4)"), ""));
  EXPECT_EQ(read_npy(dir.file("e.npy")).numel(), 0);
}

TEST(TensorIoTest, ReadsSafetensorsAsTheReferenceWriterLaysThemOut) {
  TempDir dir;
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"v":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]},)"
      R"("k":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("ids":{"dtype":"I64","shape":[1],"data_offsets":[20,28]}})";
  const std::string data =
      test::f32_bytes({1, 2, 3, 4}) + test::le_bytes(0x4000'3f80, 4) + test::le_bytes(7, 8);
  const std::string path = dir.file("m.safetensors");
  test::write_bytes(path, test::safetensors_file(json, data));
  EXPECT_EQ(list_safetensors(path), (std::vector<std::string>{"v", "k", "ids"}));
  const Tensor k = read_tensor(path + ":k");
  EXPECT_EQ(k.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(k.data.size(), 16u);
  float third;
  std::memcpy(&third, k.data.data() + 8, 4);
  EXPECT_EQ(third, 3.0f);
  const Tensor v = read_safetensors(path, "v");
  EXPECT_EQ(v.dtype, DType::kBF16);
  EXPECT_EQ(bf16_to_float(static_cast<std::uint16_t>(load_bits(v.data.data(), v.dtype, 1))), 2.0f);

  // A file with one tensor needs no name.
  write_safetensors(dir.file("one.safetensors"), {{"q", k}});
  EXPECT_EQ(read_tensor(dir.file("one.safetensors")).data, k.data);
}

TEST(TensorIoTest, SafetensorsOffsetsMayComeInAnyOrder) {
  TempDir dir;
  const std::string json = R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                           R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string path = dir.file("o.safetensors");
  test::write_bytes(path, test::safetensors_file(json, test::f32_bytes({0, 1, 2, 3})));
  const Tensor a = read_tensor(path + ":a");
  const Tensor b = read_tensor(path + ":b");
  float a1, b0;
  std::memcpy(&a1, a.data.data() + 4, 4);
  std::memcpy(&b0, b.data.data(), 4);
  EXPECT_EQ(a1, 1.0f);
  EXPECT_EQ(b0, 2.0f);
}

// As the reference safetensors library: the tensors, in offset order, must
// tile the data section exactly. Overlaps, holes between tensors and bytes
// after the last one are refused, naming the tensor and the bytes.
TEST(TensorIoTest, SafetensorsTensorsMustTileTheDataSection) {
  TempDir dir;
  const auto entry = [](const char* name, int begin, int end) {
    return std::string("\"") + name + R"(":{"dtype":"F32","shape":[)" +
           std::to_string((end - begin) / 4) + R"(],"data_offsets":[)" + std::to_string(begin) +
           "," + std::to_string(end) + "]}";
  };
  const struct {
    std::string json;
    int data_bytes;
    std::string expected;  // empty: accepted
  } cases[] = {
      {"{" + entry("a", 0, 8) + "," + entry("b", 8, 16) + "}", 16, ""},
      {"{" + entry("a", 0, 8) + "," + entry("e", 8, 8) + "," + entry("b", 8, 16) + "}", 16, ""},
      {"{" + entry("e", 0, 0) + "}", 0, ""},
      {"{" + entry("a", 0, 12) + "," + entry("b", 8, 16) + "}", 16,
       "tensor 'b': data_offsets [8, 16] overlap tensor 'a' (bytes up to 12)"},
      {"{" + entry("a", 0, 16) + "," + entry("b", 0, 16) + "}", 16,
       "tensor 'b': data_offsets [0, 16] overlap tensor 'a'"},
      {"{" + entry("a", 0, 16) + "," + entry("e", 8, 8) + "}", 16,
       "tensor 'e': data_offsets [8, 8] overlap tensor 'a'"},
      {"{" + entry("a", 0, 8) + "," + entry("b", 12, 16) + "}", 16,
       "tensor 'b': data_offsets [12, 16] leave bytes [8, 12) of the data section to no tensor"},
      {"{" + entry("b", 4, 8) + "}", 8,
       "tensor 'b': data_offsets [4, 8] leave bytes [0, 4) of the data section to no tensor"},
      {"{" + entry("a", 0, 8) + "}", 12,
       "the data section has 12 bytes but its tensors end at 8; expected no bytes after"},
      {R"({"__metadata__":{}})", 4, "the data section has 4 bytes but its tensors end at 0"},
  };
  for (const auto& c : cases) {
    const std::string path = dir.file("t.safetensors");
    test::write_bytes(path, test::safetensors_file(c.json, std::string(c.data_bytes, '\0')));
    if (c.expected.empty()) {
      EXPECT_NO_THROW(list_safetensors(path)) << c.json;
      continue;
    }
    try {
      list_safetensors(path);
      ADD_FAILURE() << "accepted " << c.json;
    } catch (const InputError& error) {
      const std::string message = error.what();
      EXPECT_EQ(message.rfind(quoted_name(path) + ": " + c.expected, 0), 0u) << message;
    }
  }
}

TEST(TensorIoTest, WriteSafetensorsHeaderIsAlignedAndOrdered) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_safetensors(
      path, {{"b", Tensor::zeros(DType::kF16, {3})}, {"a", Tensor::zeros(DType::kF32, {1})}});
  const std::string bytes = test::read_bytes(path);
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ(length % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + length + 10);
  EXPECT_EQ(
      bytes.substr(8, length).find(R"({"b":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"),
      0u);
  EXPECT_EQ(list_safetensors(path), (std::vector<std::string>{"b", "a"}));
}

TEST(TensorIoTest, SafetensorsNamesMayContainColons) {
  TempDir dir;
  const std::string path = dir.file("c.safetensors");
  write_safetensors(path, {{"layer:0.q", Tensor::zeros(DType::kF32, {1})},
                           {"layer:0.k", Tensor::zeros(DType::kF16, {2})}});
  EXPECT_EQ(read_tensor(path + ":layer:0.k").dtype, DType::kF16);
}

TEST(TensorIoTest, LayoutNamesRoundTrip) {
  for (const Layout layout : {Layout::kHND, Layout::kBHND, Layout::kBNHD}) {
    EXPECT_EQ(parse_layout(to_string(layout)), layout);
  }
  EXPECT_FALSE(parse_layout("BHND").has_value());
  EXPECT_FALSE(parse_layout("nhd").has_value());
  EXPECT_EQ(shape_to_string({2, 0, 7}), "[2, 0, 7]");
  EXPECT_EQ(shape_to_string({}), "[]");
}

TEST(TensorIoTest, CheckQkvAcceptsCrossAttentionShapes) {
  // Different query and key lengths and a different value head dim are valid.
  const Tensor q = Tensor::zeros(DType::kBF16, {2, 64, 4, 16});
  const Tensor k = Tensor::zeros(DType::kBF16, {2, 32, 4, 16});
  const Tensor v = Tensor::zeros(DType::kBF16, {2, 32, 4, 8});
  EXPECT_NO_THROW(check_qkv(q, k, v, Layout::kBNHD));
}

// Writers: atomic, and nothing is left behind on failure.
TEST(TensorIoTest, WriteReplacesAnExistingFile) {
  TempDir dir;
  const std::string path = dir.file("o.npy");
  write_npy(path, Tensor::zeros(DType::kF32, {100}));
  write_npy(path, Tensor::zeros(DType::kF16, {3}));
  EXPECT_EQ(read_npy(path).shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"o.npy"}));
}

TEST(TensorIoTest, FailedWritesLeaveTheTargetUntouched) {
  TempDir dir;
  const std::string path = dir.file("o.npy");
  write_npy(path, Tensor::zeros(DType::kF32, {4}));
  const std::string before = test::read_bytes(path);

  Tensor bad = Tensor::zeros(DType::kF32, {4});
  bad.data.resize(15);  // does not match the shape
  EXPECT_THROW(write_npy(path, bad), std::invalid_argument);
  EXPECT_THROW(write_safetensors(dir.file("o.safetensors"), {{"a", bad}}), std::invalid_argument);
  EXPECT_THROW(
      write_safetensors(dir.file("o.safetensors"), {{"a", Tensor::zeros(DType::kF32, {1})},
                                                    {"a", Tensor::zeros(DType::kF32, {1})}}),
      std::invalid_argument);
  EXPECT_THROW(write_safetensors(dir.file("o.safetensors"),
                                 {{"__metadata__", Tensor::zeros(DType::kF32, {1})}}),
               std::invalid_argument);
  EXPECT_THROW(write_safetensors(dir.file("o.safetensors"),
                                 {{std::string("\xff\xfe"), Tensor::zeros(DType::kF32, {1})}}),
               std::invalid_argument);
  EXPECT_EQ(test::read_bytes(path), before);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"o.npy"}));
}

TEST(TensorIoTest, FileSystemErrorsNameThePathAndLeaveNoTemporaryFile) {
  TempDir dir;
  const Tensor tensor = Tensor::zeros(DType::kF32, {4});
  try {
    write_npy(dir.file("missing/o.npy"), tensor);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("missing/o.npy': "), std::string::npos)
        << error.what();
  }
  // The rename fails at the very end when the target is a directory; the
  // temporary file written so far must disappear.
  std::filesystem::create_directory(dir.file("taken.npy"));
  std::filesystem::create_directory(dir.file("taken.npy/inside"));
  EXPECT_THROW(write_npy(dir.file("taken.npy"), tensor), std::runtime_error);
  EXPECT_THROW(write_safetensors(dir.file("taken.npy"), {{"t", tensor}}), std::runtime_error);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"taken.npy"}));
}

}  // namespace
}  // namespace tilesplash
