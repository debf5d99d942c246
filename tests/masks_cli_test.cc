// The new mask families from the command line: `plan` on radial and sta
// SPECs (the sta plan in tile-major order, full or empty only when the tiles
// divide the canvas; radial with the density of the paper's block vote) and
// their pictures. No timing assertions.
#include <gtest/gtest.h>

#ifdef TILESPLASH_CLI_PATH

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/scratch_dir.h"
#include "support/shell.h"

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

}  // namespace

#endif  // TILESPLASH_CLI_PATH
