// Regenerates the committed seed corpora (fuzz/corpus/npy, fuzz/corpus/safetensors):
// small valid files of every dtype and header variant the readers accept, plus
// a few near misses, so libFuzzer starts from inputs that reach deep into both
// parsers instead of rediscovering the formats from random bytes.
//   seed_corpus <fuzz/corpus>
#include <cstdio>
#include <string>

#include "tensor_io_files.h"
#include "tilesplash/tensor_io.h"

namespace {

using tilesplash::DType;
using tilesplash::Tensor;
namespace test = tilesplash::test;

Tensor ramp(DType dtype, std::vector<std::int64_t> shape) {
  Tensor tensor = Tensor::zeros(dtype, std::move(shape));
  for (std::size_t i = 0; i < tensor.data.size(); ++i) {
    tensor.data[i] = static_cast<std::byte>(i * 37 + 11);
  }
  return tensor;
}

void write_npy_seeds(const std::string& dir) {
  tilesplash::write_npy(dir + "/f32_2x3.npy", ramp(DType::kF32, {2, 3}));
  tilesplash::write_npy(dir + "/f16_bhnd.npy", ramp(DType::kF16, {1, 2, 3, 4}));
  tilesplash::write_npy(dir + "/bf16_v2.npy", ramp(DType::kBF16, {4}));
  tilesplash::write_npy(dir + "/f32_scalar.npy", ramp(DType::kF32, {}));
  tilesplash::write_npy(dir + "/f16_empty.npy", ramp(DType::kF16, {0, 8}));
  const std::string data = test::f32_bytes({1, 2, 3, 4, 5, 6});
  const std::string dict = test::npy_dict("<f4", "(2, 3)");
  const struct {
    const char* name;
    std::string bytes;
  } seeds[] = {
      {"bf16_mldtypes_name.npy", test::npy_file(test::npy_dict("bfloat16", "(12,)"), data)},
      {"f32_version2.npy", test::npy_file(dict, data, 2)},
      {"f32_version3.npy", test::npy_file(dict, data, 3)},
      {"fortran_row.npy", test::npy_file(test::npy_dict("<f4", "(1, 6)", "True"), data)},
      {"python2_longs.npy",
       test::npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", data)},
      {"big_endian.npy", test::npy_file(test::npy_dict(">f4", "(2, 3)"), data)},
      {"negative_shape.npy", test::npy_file(test::npy_dict("<f4", "(-1, 6)"), data)},
      {"truncated_data.npy", test::npy_file(test::npy_dict("<f4", "(64, 64)"), data)},
      {"structured.npy",
       test::npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", data)},
  };
  for (const auto& seed : seeds) test::write_bytes(dir + "/" + seed.name, seed.bytes);
}

void write_safetensors_seeds(const std::string& dir) {
  tilesplash::write_safetensors(dir + "/one_f32.safetensors", {{"q", ramp(DType::kF32, {2, 4})}});
  tilesplash::write_safetensors(dir + "/qkv_mixed.safetensors",
                                {{"q", ramp(DType::kF32, {1, 2, 2, 4})},
                                 {"k", ramp(DType::kF16, {1, 2, 2, 4})},
                                 {"v", ramp(DType::kBF16, {1, 2, 2, 4})}});
  // Each file's data section holds exactly the bytes its header describes,
  // as a valid file must, except where a seed is a near miss on purpose.
  const struct {
    const char* name;
    std::string json;
    std::size_t data_bytes;
  } seeds[] = {
      {"metadata_and_i64.safetensors",
       R"({"__metadata__":{"format":"pt"},"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
       R"("x":{"dtype":"BF16","shape":[2,4],"data_offsets":[16,32]}})",
       32},
      {"unsorted.safetensors",
       R"({"b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]},)"
       R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       32},
      {"empty_tensor.safetensors", R"({"e":{"dtype":"F16","shape":[0,3],"data_offsets":[0,0]}})",
       0},
      {"unsupported_dtype.safetensors",
       R"({"q":{"dtype":"F64","shape":[8],"data_offsets":[0,64]}})", 64},
      {"metadata_only.safetensors", R"({"__metadata__":{}})", 0},
      // Near misses: the reference implementation rejects each of these.
      {"overlapping.safetensors",
       R"({"b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]},)"
       R"("a":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
       32},
      {"hole.safetensors",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
       24},
      {"trailing_bytes.safetensors", R"({"q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       16},
      {"out_of_range.safetensors", R"({"q":{"dtype":"F32","shape":[64],"data_offsets":[0,256]}})",
       64},
  };
  for (const auto& seed : seeds) {
    const std::string data(seed.data_bytes, '\x3c');
    test::write_bytes(dir + "/" + seed.name, test::safetensors_file(seed.json, data));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (with npy/ and safetensors/ inside)\n", argv[0]);
    return 1;
  }
  const std::string root = argv[1];
  write_npy_seeds(root + "/npy");
  write_safetensors_seeds(root + "/safetensors");
  return 0;
}
