// A GoogleTest fixture that gives each test its own empty directory under
// /tmp and removes it afterwards, so tests that write files (caches, CLI
// outputs) never see each other's leftovers or the user's own files.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace tilesplash::test {

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/tilesplash_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::filesystem::path dir_;
};

}  // namespace tilesplash::test
