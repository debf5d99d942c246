// OutputSet (output_set.h): no output replaces an input or another output,
// destinations are checked before any work, several outputs land together or
// not at all, and SIGTERM / SIGINT during a write leave no temporary behind.
#include "tilesplash/output_set.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tensor_io_files.h"

namespace tilesplash::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The InputError message of add_output, or "" when it was accepted.
std::string refusal(OutputSet& set, const std::string& path, const std::string& option) {
  try {
    set.add_output(path, option);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

TEST(OutputSet, RefusesAnOutputThatIsAnInput) {
  TempDir dir;
  spit(dir.file("q.npy"), "input");
  OutputSet set;
  set.add_input(dir.file("q.npy"), "--q");
  const std::string message = refusal(set, dir.file("q.npy"), "--out");
  EXPECT_EQ(message.rfind("--out: '", 0), 0u) << message;
  EXPECT_NE(message.find("is the same file as the input --q"), std::string::npos) << message;
  // Another spelling of the same file, and a hard link to it, are the same file.
  EXPECT_NE(refusal(set, dir.file("./q.npy"), "--lse"), "");
  std::filesystem::create_hard_link(dir.file("q.npy"), dir.file("link.npy"));
  EXPECT_NE(refusal(set, dir.file("link.npy"), "--report"), "");
  EXPECT_EQ(slurp(dir.file("q.npy")), "input");
}

TEST(OutputSet, RefusesTwoOutputsOnOneFile) {
  TempDir dir;
  OutputSet set;
  set.add_output(dir.file("o.npy"), "--out");  // does not exist yet: compared by path
  const std::string message = refusal(set, dir.file("o.npy"), "--lse");
  EXPECT_NE(message.find("--lse: "), std::string::npos) << message;
  EXPECT_NE(message.find("the same file as the output --out"), std::string::npos) << message;
}

TEST(OutputSet, ChecksDestinationsBeforeAnyWork) {
  TempDir dir;
  spit(dir.file("plain"), "x");
  std::filesystem::create_directories(dir.file("sub"));
  OutputSet set;
  EXPECT_NE(refusal(set, dir.file("missing/o.npy"), "--lse").find("does not exist"),
            std::string::npos);
  EXPECT_NE(refusal(set, dir.file("plain/o.npy"), "--lse").find("is not a directory"),
            std::string::npos);
  EXPECT_NE(refusal(set, dir.file("sub"), "--report").find("is a directory"), std::string::npos);
  EXPECT_NE(refusal(set, "/dev/null", "--out").find("not a regular file"), std::string::npos);
  EXPECT_NE(refusal(set, "", "--out").find("empty path"), std::string::npos);
  if (::geteuid() != 0) {  // root may write anywhere, so the check cannot refuse
    std::filesystem::permissions(
        dir.file("sub"), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    EXPECT_NE(refusal(set, dir.file("sub/o.npy"), "--out").find("expected a writable directory"),
              std::string::npos);
    std::filesystem::permissions(dir.file("sub"), std::filesystem::perms::owner_all);
  }
  EXPECT_EQ(dir.entries().size(), 2u) << "the checks must leave no file behind";
}

TEST(OutputSet, CommitsAllOrNone) {
  TempDir dir;
  spit(dir.file("a.json"), "old a");
  {
    OutputSet set;
    set.add_output(dir.file("a.json"), "--out");
    set.add_output(dir.file("b.json"), "--report");
    set.stage(dir.file("a.json"), "new a");
    // An exception between staging and commit: nothing may change.
  }
  EXPECT_EQ(slurp(dir.file("a.json")), "old a");
  EXPECT_EQ(dir.entries().size(), 1u);
  OutputSet set;
  set.add_output(dir.file("a.json"), "--out");
  set.add_output(dir.file("b.json"), "--report");
  set.stage(dir.file("a.json"), "new a");
  set.stage(dir.file("b.json"), "new b");
  EXPECT_THROW(set.stage(dir.file("c.json"), "undeclared"), std::invalid_argument);
  set.commit();
  EXPECT_EQ(slurp(dir.file("a.json")), "new a");
  EXPECT_EQ(slurp(dir.file("b.json")), "new b");
  EXPECT_EQ(dir.entries().size(), 2u);
}

// A child process stages a file, then is killed by a signal before committing:
// the handlers must remove the temporary and let the signal end the process.
TEST(OutputSet, SignalsDuringAWriteLeaveNoTemporary) {
  for (const int signal_number : {SIGTERM, SIGINT}) {
    TempDir dir;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // A background job of a non-interactive shell (CI's parallel test
      // shards) inherits SIGINT ignored, and an ignored signal rightly stays
      // ignored: give the child the disposition of a foreground process.
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGINT, SIG_DFL);
      remove_temporaries_on_signals();
      OutputSet set;
      set.add_output(dir.file("o.bin"), "--out");
      set.stage(dir.file("o.bin"), std::string(1 << 20, 'x'));
      ::raise(signal_number);
      ::_exit(3);  // not reached when the signal ends the process
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal_number) << status;
    EXPECT_TRUE(dir.entries().empty()) << dir.entries().front();
  }
}

TEST(OutputSet, TensorSpecFile) {
  EXPECT_EQ(tensor_spec_file("a.safetensors:q"), "a.safetensors");
  EXPECT_EQ(tensor_spec_file("a.safetensors"), "a.safetensors");
  EXPECT_EQ(tensor_spec_file("dir/q.npy"), "dir/q.npy");
  EXPECT_EQ(tensor_spec_file("x.safetensors:a:b"), "x.safetensors");
}

}  // namespace
}  // namespace tilesplash::test
