// The new mask families from the command line: `plan` on radial and sta
// SPECs (the sta plan in tile-major order, full or empty only when the tiles
// divide the canvas; radial with the density of the paper's block vote) and
// their pictures, and `compare` (every method on every planted type). No
// timing assertions.
#include <gtest/gtest.h>

#ifdef TILESPLASH_CLI_PATH

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/layout_views.h"
#include "support/scratch_dir.h"
#include "support/shell.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"
#include "tilesplash/tensor_io.h"

namespace {

tilesplash::test::ShellResult run(const std::string& args) {
  return tilesplash::test::run_shell(std::string(TILESPLASH_CLI_PATH) + " " + args + " 2>&1");
}

class MasksCli : public tilesplash::test::ScratchDirTest {};

TEST_F(MasksCli, PlanShowsStaInTileMajorOrder) {
  const std::string png = (dir_ / "sta.png").string();
  const auto r =
      run("plan --mask 'sta:frames=12,height=16,width=16,text=20,text_at=before,tile=6x8x8,"
          "window=1x1x3' --q-len 3092 --block-q 128 --block-kv 128 --json --png " +
          png);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json.at("plan_order").get<std::string>(), "tile-major");
  EXPECT_EQ(json.at("partial").get<int>(), 0);
  EXPECT_GT(json.at("full").get<int>(), 0);
  EXPECT_EQ(json.at("kept_pairs"), json.at("mask_kept_pairs"));
  EXPECT_TRUE(std::filesystem::exists(png));
  const auto wrong = run("plan --mask 'sta:frames=2,height=2,width=2,window=1x1x1' --q-len 9");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.out;
  EXPECT_NE(wrong.out.find("q_len and kv_len must both be 8"), std::string::npos) << wrong.out;
}

TEST_F(MasksCli, PlanReportsRadialTokenAndBlockDensities) {
  const std::string png = (dir_ / "radial.png").string();
  const auto r =
      run("plan --mask 'radial:frames=9,height=8,width=16,decay=0.95,block=32,sink' --q-len 1152 "
          "--json --png " +
          png);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_GT(json.at("density").get<double>(), 0.0);
  EXPECT_GT(json.at("block_vote_density").get<double>(), 0.0);
  EXPECT_TRUE(std::filesystem::exists(png));
  const auto bad = run("plan --mask 'radial:frames=9,height=8,width=16' --q-len 1152");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("neither of 'decay' and 'density'"), std::string::npos) << bad.out;
}

TEST_F(MasksCli, CompareReportsEveryMethodDensityAndHead) {
  const auto r =
      run("compare --geometry frames=8,height=8,width=12 --head-dim 32 --planted temporal,cluster "
          "--methods svg,radial,sta,mix,svg2 --densities 0.15,0.4 --query-clusters 16 "
          "--key-clusters 48 --threads 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.at("rows").size(), 5u * 2u * 2u);
  ASSERT_EQ(json.at("dense").size(), 2u);
  for (const auto& row : json.at("rows")) {
    for (const char* key : {"method", "target_density", "planted", "choice", "density", "rel_l2",
                            "cosine", "kernel_ms", "permute_ms", "cluster_ms", "plan_ms"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
    const std::string method = row.at("method"), planted = row.at("planted");
    const double rel_l2 = row.at("rel_l2"), cosine = row.at("cosine");
    const double density = row.at("density"), visited = row.at("tiles_visited");
    EXPECT_GE(visited, density - 1e-9) << method;  // the kernel sees every kept pair
    EXPECT_LE(visited, 1.0 + 1e-9) << method;
    // |O - D| / |D| is at least the sine of the angle between O and D (the
    // distance from D to the nearest multiple of O), so the two columns must
    // agree; a mask that keeps every pair gives dense's output.
    EXPECT_LE(cosine, 1.0 + 1e-9);
    EXPECT_GE(rel_l2 + 1e-6, std::sqrt(std::max(0.0, 1.0 - cosine * cosine))) << method;
    if (density >= 1.0 - 1e-12) {
      EXPECT_LT(rel_l2, 1e-4) << method;
    }
    // Each planted type is near-exact under the method built for it.
    if (planted == "temporal" && (method == "svg" || method == "mix")) {
      EXPECT_EQ(row.at("choice").get<std::string>(), "temporal") << method;
      EXPECT_GT(cosine, 0.99) << method;
    }
    if (planted == "cluster" && method == "svg2") {
      EXPECT_EQ(row.at("choice").get<std::string>(), "svg2");
      EXPECT_GT(cosine, 0.99);
      EXPECT_NEAR(row.at("density").get<double>(), row.at("target_density").get<double>(), 0.05);
    }
  }
  const auto bad = run("compare --geometry frames=2,height=2,width=2 --methods svg,nope");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("unknown method 'nope'"), std::string::npos) << bad.out;
  const auto bad_density = run("compare --geometry frames=2,height=2,width=2 --densities 0.1,2");
  EXPECT_EQ(bad_density.exit_code, 2) << bad_density.out;
  EXPECT_NE(bad_density.out.find("--densities: expected numbers in (0, 1], got '2'"),
            std::string::npos)
      << bad_density.out;
}

TEST_F(MasksCli, CompareRunsEveryMethodOnEveryPlantedType) {
  const auto r =
      run("compare --geometry frames=6,height=8,width=8 --head-dim 32 --densities 0.2,0.4 "
          "--planted spatial,cluster --methods svg,radial,sta,svg2 --key-clusters 64 "
          "--query-clusters 16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  const auto& rows = json.at("rows");
  ASSERT_EQ(rows.size(), 4u * 2u * 2u);
  double svg_cluster = -1.0, svg2_cluster = -1.0;
  for (const auto& row : rows) {
    const double rel_l2 = row.at("rel_l2"), cosine = row.at("cosine");
    EXPECT_LE(cosine, 1.0 + 1e-9);
    EXPECT_GE(rel_l2 + 1e-6, std::sqrt(std::max(0.0, 1.0 - cosine * cosine)));
    EXPECT_GT(row.at("density").get<double>(), 0.0);
    const std::string method = row.at("method").get<std::string>();
    if (method == "svg2") {
      EXPECT_EQ(row.at("choice").get<std::string>(), "svg2");
      EXPECT_GT(row.at("cluster_cold_ms").get<double>(), 0.0);
    }
    if (row.at("planted") == "cluster" && row.at("target_density") == 0.2) {
      if (method == "svg") svg_cluster = row.at("rel_l2").get<double>();
      if (method == "svg2") svg2_cluster = row.at("rel_l2").get<double>();
    }
  }
  // Objects with no geometric order: only the clusters find them.
  ASSERT_GE(svg_cluster, 0.0) << "no svg row for the cluster head at density 0.2";
  ASSERT_GE(svg2_cluster, 0.0) << "no svg2 row for the cluster head at density 0.2";
  EXPECT_LT(svg2_cluster, 0.5 * svg_cluster);
  EXPECT_EQ(json.at("dense").size(), 2u);

  const auto bad = run("compare --geometry frames=2,height=2,width=2 --methods svg,svg3");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--methods: unknown method 'svg3' (expected " +
                         tilesplash::method_list_text() + ")"),
            std::string::npos)
      << bad.out;
  const auto bad_type = run("compare --geometry frames=2,height=2,width=2 --planted radial");
  EXPECT_EQ(bad_type.exit_code, 2) << bad_type.out;
  EXPECT_NE(bad_type.out.find("unknown planted head type 'radial'"), std::string::npos);
  const auto bad_density = run("compare --geometry frames=2,height=2,width=2 --densities 0.1,2");
  EXPECT_EQ(bad_density.exit_code, 2) << bad_density.out;
}

// attend --route --method runs the method on tensors from files, bit for
// bit what the library gives.
TEST_F(MasksCli, AttendRunsEveryMethodOnFiles) {
  const tilesplash::VideoGeometry g{6, 4, 8, 0, tilesplash::TextPlacement::kNone};
  const std::int64_t n = g.tokens(), heads = 2, d = 32;
  std::vector<tilesplash::Tensor> qkv;
  for (unsigned seed : {1u, 2u, 3u}) {
    tilesplash::Tensor t = tilesplash::Tensor::zeros(tilesplash::DType::kF32, {heads, n, d});
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    auto* values = reinterpret_cast<float*>(t.data.data());
    for (std::int64_t i = 0; i < t.numel(); ++i) values[i] = normal(rng);
    qkv.push_back(std::move(t));
  }
  const char* names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    tilesplash::write_npy((dir_ / (std::string(names[i]) + ".npy")).string(), qkv[i]);
  }
  const std::string files = " --q " + (dir_ / "q.npy").string() + " --k " +
                            (dir_ / "k.npy").string() + " --v " + (dir_ / "v.npy").string();
  for (const tilesplash::MethodInfo& info : tilesplash::methods()) {
    const std::string method(info.name);
    const std::string out = (dir_ / (method + ".npy")).string();
    const auto r = run("attend" + files + " --out " + out +
                       " --route frames=6,height=4,width=8 --density 0.4 --method " + method +
                       " --block-kv 64 --quiet");
    ASSERT_EQ(r.exit_code, 0) << method << ": " << r.out;
    tilesplash::VideoAttentionOptions options =
        tilesplash::method_attention_options(method, g, {0.4});
    options.density = 0.4;
    options.blocks = {128, 64};
    tilesplash::VideoAttention attention(g, options);
    tilesplash::Tensor expected = tilesplash::Tensor::zeros(tilesplash::DType::kF32, {heads, n, d});
    const auto view = [](const tilesplash::Tensor& t) {
      return tilesplash::test::entry_of(t, tilesplash::Layout::kHND);
    };
    attention.forward({view(qkv[0]), view(qkv[1]), view(qkv[2]),
                       tilesplash::test::mutable_entry_of(expected, tilesplash::Layout::kHND)});
    EXPECT_TRUE(tilesplash::read_tensor(out).data == expected.data) << method;
  }
  const auto bad = run("attend" + files + " --out " + (dir_ / "x.npy").string() +
                       " --route frames=6,height=4,width=8 --method svg3");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--method: unknown method 'svg3' (expected " +
                         tilesplash::method_list_text() + ")"),
            std::string::npos)
      << bad.out;
}

}  // namespace

#endif  // TILESPLASH_CLI_PATH
