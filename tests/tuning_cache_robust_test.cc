// The tuning cache under stress: concurrent writers in separate processes
// must keep every entry (the read-modify-rename runs under an flock), and a
// cache whose fields have the wrong JSON types is ignored with the usual
// warning, in the library and through `bench` and `tune`.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/scratch_dir.h"
#include "support/shell.h"
#include "tilesplash/mask.h"
#include "tilesplash/tuning.h"
#include "tilesplash/version.h"

namespace tilesplash {
namespace {

namespace fs = std::filesystem;

class TuningCacheRobust : public test::ScratchDirTest {};

// Distinct ids give distinct keys: the thread count is part of the key, where
// lengths only count by power of two.
TuneKey key(int id) { return make_tune_key(Mask::causal(), 4096, 4096, 64, DType::kF32, id); }

TEST_F(TuningCacheRobust, ConcurrentProcessesKeepEveryEntry) {
  const fs::path path = dir_ / "sub" / "tuning.json";
  constexpr int kProcesses = 4;
  constexpr int kEntries = 25;
  // Every child blocks on this pipe until the parent closes it, so that all
  // writers start at once and their read-modify-rename cycles overlap.
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(start[1]);
      char byte;
      while (::read(start[0], &byte, 1) > 0) {
      }
      int status = 0;
      try {
        const TuningCache cache(path);
        for (int i = 0; i < kEntries; ++i) cache.store(key(1000 + p * 100 + i), {64, 64}, 1.0);
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(child);
  }
  ::close(start[0]);
  ::close(start[1]);
  for (const pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  const TuningCache cache(path);
  int found = 0;
  for (int p = 0; p < kProcesses; ++p) {
    for (int i = 0; i < kEntries; ++i) found += cache.lookup(key(1000 + p * 100 + i)).has_value();
  }
  EXPECT_EQ(found, kProcesses * kEntries);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(path.parent_path())) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"tuning.json", "tuning.json.lock"}));
}

// A cache shared through symbolic links (relative, chained, or to a file not
// written yet) is written through them: the links stay links, the shared
// target gets every entry, and nothing is left beside a link.
TEST_F(TuningCacheRobust, SymlinkedCacheIsWrittenThroughTheLink) {
  fs::create_directories(dir_ / "shared");
  fs::create_directories(dir_ / "home");
  const fs::path target = dir_ / "shared" / "tuning.json";
  const fs::path link = dir_ / "home" / "tuning.json";
  const fs::path chained = dir_ / "home" / "again.json";
  fs::create_symlink("../shared/tuning.json", link);  // dangling until the first store
  fs::create_symlink("tuning.json", chained);
  TuningCache(link).store(key(1), {64, 64}, 1.0);
  TuningCache(chained).store(key(2), {64, 128}, 1.0);
  TuningCache(target).store(key(3), {128, 64}, 1.0);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_symlink(chained));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(target)));
  for (const fs::path& path : {target, link, chained}) {
    const TuningCache cache(path);
    EXPECT_EQ(cache.lookup(key(1)), (BlockSizes{64, 64})) << path;
    EXPECT_EQ(cache.lookup(key(2)), (BlockSizes{64, 128})) << path;
    EXPECT_EQ(cache.lookup(key(3)), (BlockSizes{128, 64})) << path;
  }
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_ / "home")) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"again.json", "tuning.json"}));
  // A loop of links is refused by name, not followed forever.
  fs::create_symlink("loop-b.json", dir_ / "loop-a.json");
  fs::create_symlink("loop-a.json", dir_ / "loop-b.json");
  try {
    TuningCache(dir_ / "loop-a.json").store(key(4), {64, 64}, 1.0);
    ADD_FAILURE() << "a loop of links was written";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("too many levels of symbolic links"), std::string::npos)
        << e.what();
  }
}

// Every top-level field with a JSON type it must not have.
const char* const kWrongTypes[] = {
    R"({"format": 7, "version": 1, "library": "x", "entries": {}})",
    R"({"format": "tilesplash-tuning-cache", "version": 1, "library": ["x"], "entries": {}})",
    R"({"format": "tilesplash-tuning-cache", "version": "1", "library": 2, "entries": {}})",
    R"({"format": null, "entries": {}})",
};

TEST_F(TuningCacheRobust, WrongJsonTypesAreIgnoredNotThrown) {
  const fs::path path = dir_ / "tuning.json";
  for (const char* text : kWrongTypes) {
    SCOPED_TRACE(text);
    std::ofstream(path) << text;
    const TuningCache cache(path);
    std::optional<BlockSizes> found;
    EXPECT_NO_THROW(found = cache.lookup(key(4096)));
    EXPECT_FALSE(found);
    EXPECT_NO_THROW(cache.store(key(4096), {64, 128}, 1.0));  // replaces the corrupt file
    EXPECT_EQ(cache.lookup(key(4096)), (BlockSizes{64, 128}));
  }
}

#ifdef TILESPLASH_CLI_PATH
TEST_F(TuningCacheRobust, CliWarnsAboutWrongTypesAndCarriesOn) {
  fs::create_directories(dir_ / "tilesplash");
  const std::string env = "XDG_CACHE_HOME=" + dir_.string() + " ";
  const std::string err = (dir_ / "err.txt").string();
  const std::string commands[] = {
      "bench --mask causal --q-len 128 --head-dim 16 --dtype f32 --heads 1 --repeats 1 --json",
      "tune --mask causal --q-len 128 --head-dim 16 --dtype f32 --heads 1 --budget-seconds 0.2 "
      "--json",
  };
  for (const std::string& command : commands) {
    SCOPED_TRACE(command);
    std::ofstream(dir_ / "tilesplash" / "tuning.json") << kWrongTypes[0];
    const test::ShellResult r =
        test::run_shell(env + TILESPLASH_CLI_PATH + " " + command + " >/dev/null 2>" + err);
    std::ifstream in(err);
    const std::string message{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    EXPECT_EQ(r.exit_code, 0) << message;
    EXPECT_NE(message.find("tilesplash: warning: tuning cache " + dir_.string()), std::string::npos)
        << message;
    EXPECT_NE(message.find("is corrupt; ignored"), std::string::npos) << message;
  }
}
#endif

}  // namespace
}  // namespace tilesplash
