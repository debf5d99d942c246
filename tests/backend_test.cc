// The compute-backend seam (backend.h): backends made by name from one list,
// the CPU backend equal to the runner it is, refusing views on another
// device by name, and tuning keys that say which backend timed them, on what
// device and code path, in the backend's own words.
#include "tilesplash/backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "support/random_data.h"
#include "tilesplash/attention.h"
#include "tilesplash/tuning.h"

namespace tilesplash::test {
namespace {

TEST(Backend, EveryListedBackendCanBeMadeByItsName) {
  ASSERT_FALSE(backend_names().empty());
  EXPECT_EQ(backend_names().front(), "cpu");
  for (const std::string_view name : backend_names()) {
    const auto backend = make_backend(name);
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->name(), name);
    EXPECT_FALSE(backend->device_name().empty());
  }
}

TEST(Backend, UnknownNameIsRefusedListingTheKnownOnes) {
  try {
    make_backend("tpu");
    FAIL() << "no error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("'tpu'"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("'cpu'"), std::string::npos) << error.what();
  }
}

TEST(Backend, CpuBackendRunsThePlanLikeTheRunner) {
  const auto threads = std::make_shared<ThreadingContext>(2);
  const auto backend = make_backend("cpu", threads);
  EXPECT_TRUE(backend->accepts(Device{}));
  EXPECT_FALSE(backend->accepts(Device{DeviceType::kCuda, 0}));
  EXPECT_EQ(backend->threads(0), 2);
  EXPECT_EQ(backend->threads(1), 1);
  EXPECT_EQ(backend->code_path(), active_isa());

  HostTensor q(DType::kF32, 2, 100, 64), k(DType::kF32, 2, 130, 64), v(DType::kF32, 2, 130, 64);
  q.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  HostTensor out_backend(DType::kF32, 2, 100, 64), out_runner(DType::kF32, 2, 100, 64);
  const TilePlan plan = TilePlan::build(Mask::local(20, 20, 15), 100, 130, {32, 64});
  backend->forward(plan, {q.view(), k.view(), v.view(), out_backend.mutable_view()});
  AttentionRunner runner(threads);
  runner.forward(plan, {q.view(), k.view(), v.view(), out_runner.mutable_view()});
  EXPECT_EQ(std::memcmp(out_backend.storage().data(), out_runner.storage().data(),
                        out_runner.storage().size()),
            0);
}

TEST(Backend, CpuBackendRefusesViewsOnAnotherDeviceNamingTheArgument) {
  HostTensor q(DType::kF32, 1, 64, 64), k(DType::kF32, 1, 64, 64), v(DType::kF32, 1, 64, 64);
  HostTensor out(DType::kF32, 1, 64, 64);
  const TilePlan plan = TilePlan::build(Mask::dense(), 64, 64, {64, 64});
  const auto backend = make_backend("cpu");
  for (const char* which : {"q", "k", "v", "out"}) {
    AttentionArgs args{q.view(), k.view(), v.view(), out.mutable_view()};
    const Device cuda{DeviceType::kCuda, 1};
    if (std::string(which) == "q") args.q.device = cuda;
    if (std::string(which) == "k") args.k.device = cuda;
    if (std::string(which) == "v") args.v.device = cuda;
    if (std::string(which) == "out") args.out.device = cuda;
    try {
      backend->forward(plan, args);
      FAIL() << which << ": no error";
    } catch (const std::invalid_argument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(std::string(which) + ".device must be cpu"), std::string::npos)
          << message;
      EXPECT_NE(message.find("cuda:1"), std::string::npos) << message;
    }
  }
}

// A backend the library does not know: what a GPU backend of our own would be.
class FakeBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "fake"; }
  std::string device_name() const override { return "Fake GPU 80GB"; }
  std::string code_path() const override { return "sm_90"; }
  int threads(int) const override { return 1; }
  bool accepts(Device) const override { return false; }
  void forward(const TilePlan&, const AttentionArgs&, const AttentionOptions&) override {}
};

// The key of a shape says which backend timed it, on what and by which code
// path, as the backend itself says: a backend keys its own entries.
TEST(Backend, TuningKeysTakeTheBackendsNameDeviceAndCodePath) {
  const FakeBackend fake;
  const TuneKey key = make_tune_key(fake, Mask::causal(), 4096, 4096, 128, DType::kBF16, 2);
  EXPECT_EQ(key.backend, "fake");
  EXPECT_EQ(key.cpu, "Fake GPU 80GB");
  EXPECT_EQ(key.isa, "sm_90");
  const auto cpu = make_backend("cpu");
  const TuneKey native = make_tune_key(Mask::causal(), 4096, 4096, 128, DType::kBF16, 2);
  EXPECT_EQ(native, make_tune_key(*cpu, Mask::causal(), 4096, 4096, 128, DType::kBF16, 2));
  EXPECT_EQ(native.cpu, cpu->device_name());
  EXPECT_EQ(native.isa, cpu->code_path());
  EXPECT_NE(key.to_string(), native.to_string());
}

TEST(Backend, TuningKeysNameTheBackend) {
  const TuneKey key = make_tune_key(Mask::causal(), 4096, 4096, 128, DType::kBF16, 2);
  EXPECT_EQ(key.backend, "cpu");
  EXPECT_EQ(key.to_string().rfind("backend=cpu|", 0), 0u) << key.to_string();
  TuneKey other = key;
  other.backend = "flex";
  EXPECT_NE(other.to_string(), key.to_string());
  EXPECT_FALSE(other == key);
}

}  // namespace
}  // namespace tilesplash::test
