// End-to-end tests of `tilesplash attend`: tensors written with tensor_io go
// through the binary, and its output must equal the library call bit for bit;
// malformed, missing and inconsistent files must exit 2 with one message line
// and leave no output file behind.
#include <gtest/gtest.h>

#ifdef TILESPLASH_CLI_PATH

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/layout_views.h"
#include "support/shell.h"
#include "tensor_io_files.h"
#include "tilesplash/attention.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/routing.h"
#include "tilesplash/tensor_io.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

RunResult run_cli(const std::string& args, const std::string& err_path) {
  const std::string command = std::string(TILESPLASH_CLI_PATH) + " " + args + " 2>" + err_path;
  const tilesplash::test::ShellResult shell = tilesplash::test::run_shell(command);
  RunResult result;
  result.exit_code = shell.exit_code;
  result.out = shell.out;
  std::ifstream err_file(err_path);
  result.err.assign(std::istreambuf_iterator<char>(err_file), std::istreambuf_iterator<char>());
  return result;
}

Tensor random_tensor(DType dtype, std::vector<std::int64_t> shape, unsigned seed) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const float x = dist(rng);
    if (dtype == DType::kF32) {
      std::memcpy(t.data.data() + i * 4, &x, 4);
    } else {
      const std::uint16_t bits = dtype == DType::kBF16 ? float_to_bf16(x) : float_to_f16(x);
      std::memcpy(t.data.data() + i * 2, &bits, 2);
    }
  }
  return t;
}

class CliAttend : public ::testing::Test {
 protected:
  RunResult run(const std::string& args) { return run_cli(args, dir_.file("stderr.txt")); }
  std::string qkv_args() const {
    return "--q " + dir_.file("q.npy") + " --k " + dir_.file("k.npy") + " --v " +
           dir_.file("v.npy");
  }
  void write_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
    write_npy(dir_.file("q.npy"), q);
    write_npy(dir_.file("k.npy"), k);
    write_npy(dir_.file("v.npy"), v);
  }
  void expect_bad_input(const RunResult& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("tilesplash: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line expected: " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_.file("o.npy")));
  }

  test::TempDir dir_;
};

// Runs the library exactly as attend documents it: one plan, batch by batch.
Tensor library_attend(const Tensor& q, const Tensor& k, const Tensor& v, Layout layout,
                      const std::string& spec, BlockSizes blocks, DType out_dtype,
                      std::vector<float>* lse, Precision precision = Precision::kDefault) {
  const LayoutDims qd = layout_dims(q, layout, "q");
  const LayoutDims vd = layout_dims(v, layout, "v");
  const LayoutDims kd = layout_dims(k, layout, "k");
  Tensor out = Tensor::zeros(out_dtype, layout_shape(layout, {qd.batch, qd.heads, qd.len, vd.dim}));
  lse->assign(static_cast<std::size_t>(qd.batch * qd.heads * qd.len), 0.0f);
  const TilePlan plan = TilePlan::build(parse_mask_spec(spec), qd.len, kd.len, blocks);
  AttentionOptions options;
  options.precision = precision;
  for (std::int64_t b = 0; b < qd.batch; ++b) {
    attention_forward(
        plan,
        {test::entry_of(q, layout, b), test::entry_of(k, layout, b), test::entry_of(v, layout, b),
         test::mutable_entry_of(out, layout, b), lse->data() + b * qd.heads * qd.len},
        options);
  }
  return out;
}

struct MaskCase {
  Layout layout;
  DType dtype;
  std::vector<std::int64_t> shape;  // of Q, K and V
  std::string mask;
  std::string out_dtype;  // empty: the input's
};

TEST_F(CliAttend, OutputEqualsLibraryBitForBit) {
  const MaskCase cases[] = {
      {Layout::kHND, DType::kF32, {2, 200, 64}, "causal", ""},
      {Layout::kBHND, DType::kBF16, {2, 2, 130, 64}, "local:left=40,right=8", ""},
      {Layout::kBNHD, DType::kF16, {2, 150, 3, 32}, "dense", "f32"},
      {Layout::kHND, DType::kBF16, {1, 96, 64}, "causal|random:density=0.2,seed=3", "f32"},
  };
  for (const MaskCase& c : cases) {
    const std::string label = std::string(to_string(c.layout)) + " " + c.mask;
    const Tensor q = random_tensor(c.dtype, c.shape, 1);
    const Tensor k = random_tensor(c.dtype, c.shape, 2);
    const Tensor v = random_tensor(c.dtype, c.shape, 3);
    write_qkv(q, k, v);
    std::string args = "attend " + qkv_args() + " --out " + dir_.file("o.npy") + " --lse " +
                       dir_.file("lse.npy") + " --layout " + std::string(to_string(c.layout)) +
                       " --mask '" + c.mask + "' --block-q 32 --block-kv 64 --quiet";
    if (!c.out_dtype.empty()) args += " --out-dtype " + c.out_dtype;
    const RunResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << label << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << "--quiet prints nothing: " << r.out;

    std::vector<float> lse;
    const DType out_dtype = c.out_dtype.empty() ? c.dtype : DType::kF32;
    const Tensor expected = library_attend(q, k, v, c.layout, c.mask, {32, 64}, out_dtype, &lse);
    const Tensor got = read_tensor(dir_.file("o.npy"));
    EXPECT_EQ(got.dtype, out_dtype) << label;
    EXPECT_EQ(got.shape, expected.shape) << label;
    EXPECT_TRUE(got.data == expected.data) << label;
    const Tensor got_lse = read_tensor(dir_.file("lse.npy"));
    ASSERT_EQ(got_lse.data.size(), lse.size() * 4) << label;
    EXPECT_EQ(std::memcmp(got_lse.data.data(), lse.data(), got_lse.data.size()), 0) << label;
  }
}

// --precision int8 runs the library's 8-bit Q.K^T: the same bytes as the
// library call with Precision::kInt8, and not those of the default precision.
TEST_F(CliAttend, PrecisionInt8EqualsTheLibrary) {
  const std::vector<std::int64_t> shape = {2, 2, 140, 64};
  const Tensor q = random_tensor(DType::kBF16, shape, 11);
  const Tensor k = random_tensor(DType::kBF16, shape, 12);
  const Tensor v = random_tensor(DType::kBF16, shape, 13);
  write_qkv(q, k, v);
  const RunResult r = run("attend " + qkv_args() + " --out " + dir_.file("o.npy") +
                          " --layout bhnd --mask causal --block-q 32 --block-kv 64 --out-dtype f32 "
                          "--precision int8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("precision"), "int8");
  std::vector<float> lse;
  const Tensor int8 = library_attend(q, k, v, Layout::kBHND, "causal", {32, 64}, DType::kF32, &lse,
                                     Precision::kInt8);
  const Tensor fallback =
      library_attend(q, k, v, Layout::kBHND, "causal", {32, 64}, DType::kF32, &lse);
  const Tensor got = read_tensor(dir_.file("o.npy"));
  EXPECT_TRUE(got.data == int8.data);
  EXPECT_FALSE(got.data == fallback.data);

  const RunResult bad = run("attend " + qkv_args() + " --out " + dir_.file("o.npy") +
                            " --layout bhnd --mask causal --precision fp8");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--precision"), std::string::npos) << bad.err;
}

TEST_F(CliAttend, SafetensorsInAndOut) {
  const Tensor q = random_tensor(DType::kF32, {2, 64, 64}, 4);
  const Tensor k = random_tensor(DType::kF32, {2, 64, 64}, 5);
  const Tensor v = random_tensor(DType::kF32, {2, 64, 64}, 6);
  const std::string in = dir_.file("qkv.safetensors");
  write_safetensors(in, {{"q", q}, {"k", k}, {"v", v}});
  const std::string out = dir_.file("o.safetensors");
  const RunResult r = run("attend --q " + in + ":q --k " + in + ":k --v " + in + ":v --out " + out +
                          ":attn --mask causal --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json.at("heads").get<int>(), 2);
  std::vector<float> lse;
  const Tensor expected = library_attend(q, k, v, Layout::kHND, "causal", {}, DType::kF32, &lse);
  EXPECT_TRUE(read_safetensors(out, "attn").data == expected.data);
}

TEST_F(CliAttend, RouteMatchesFrontDoorAndReportsHeads) {
  const VideoGeometry geometry = parse_video_geometry("frames=2,height=4,width=8");
  const std::vector<std::int64_t> shape = {2, geometry.tokens(), 64};
  const Tensor q = random_tensor(DType::kF32, shape, 7);
  const Tensor k = random_tensor(DType::kF32, shape, 8);
  const Tensor v = random_tensor(DType::kF32, shape, 9);
  write_qkv(q, k, v);
  const RunResult r = run("attend " + qkv_args() + " --out " + dir_.file("o.npy") +
                          " --route frames=2,height=4,width=8 --density 0.5 --quiet --report " +
                          dir_.file("report.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;

  VideoAttentionOptions options;
  options.density = 0.5;
  VideoAttention attention(geometry, options);
  Tensor expected = Tensor::zeros(DType::kF32, shape);
  const LayerReport report = attention.forward(
      {test::entry_of(q, Layout::kHND), test::entry_of(k, Layout::kHND),
       test::entry_of(v, Layout::kHND), test::mutable_entry_of(expected, Layout::kHND)});
  EXPECT_TRUE(read_tensor(dir_.file("o.npy")).data == expected.data);

  std::ifstream file(dir_.file("report.json"));
  const auto json = nlohmann::json::parse(file);
  ASSERT_EQ(json.at("heads_table").size(), 2u);
  for (std::size_t h = 0; h < 2; ++h) {
    EXPECT_EQ(json["heads_table"][h].at("choice").get<std::string>(),
              std::string(to_string(report.heads[h].choice)));
  }
}

TEST_F(CliAttend, MalformedFileExitsTwoNamingIt) {
  write_qkv(random_tensor(DType::kF32, {1, 64, 64}, 1), random_tensor(DType::kF32, {1, 64, 64}, 2),
            random_tensor(DType::kF32, {1, 64, 64}, 3));
  {
    std::ofstream bad(dir_.file("k.npy"), std::ios::binary | std::ios::trunc);
    bad << "\x93NUMPY\x01\x00garbage";
  }
  expect_bad_input(run("attend " + qkv_args() + " --out " + dir_.file("o.npy")), "k.npy");
}

TEST_F(CliAttend, MissingFileExitsTwo) {
  expect_bad_input(run("attend --q " + dir_.file("nope.npy") + " --k " + dir_.file("nope.npy") +
                       " --v " + dir_.file("nope.npy") + " --out " + dir_.file("o.npy")),
                   "nope.npy");
}

TEST_F(CliAttend, MismatchedShapesExitTwo) {
  write_qkv(random_tensor(DType::kF32, {2, 64, 64}, 1), random_tensor(DType::kF32, {3, 64, 64}, 2),
            random_tensor(DType::kF32, {3, 64, 64}, 3));
  expect_bad_input(run("attend " + qkv_args() + " --out " + dir_.file("o.npy")), "k.npy");
}

TEST_F(CliAttend, RouteWithWrongLengthExitsTwo) {
  write_qkv(random_tensor(DType::kF32, {1, 64, 64}, 1), random_tensor(DType::kF32, {1, 64, 64}, 2),
            random_tensor(DType::kF32, {1, 64, 64}, 3));
  expect_bad_input(
      run("attend " + qkv_args() + " --out " + dir_.file("o.npy") + " --route wan2.1-1.3b-480p"),
      "32760");
}

TEST_F(CliAttend, BadOutputNameExitsTwo) {
  write_qkv(random_tensor(DType::kF32, {1, 64, 64}, 1), random_tensor(DType::kF32, {1, 64, 64}, 2),
            random_tensor(DType::kF32, {1, 64, 64}, 3));
  expect_bad_input(run("attend " + qkv_args() + " --out " + dir_.file("o.txt")), "--out");
}

TEST_F(CliAttend, HelpHasAnExample) {
  const RunResult r = run("attend --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("tilesplash attend --q"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tilesplash

#endif  // TILESPLASH_CLI_PATH
