// ThreadingContext: the region rules (every item once, errors, nesting, turns
// on a shared context, no lock between contexts, threads that run together),
// and the objects built on it run from several threads at once with results
// bit-identical to one thread. Suite names carry Determinism, Attention or
// Video so that the TSan job (.ci/run) runs them all.
#include <gtest/gtest.h>

#if defined(__linux__)
#include <sched.h>
#endif

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cpu_affinity.h"
#include "support/attention_check.h"
#include "support/random_data.h"
#include "tilesplash/attention.h"
#include "tilesplash/clusters.h"
#include "tilesplash/peak.h"
#include "tilesplash/plan.h"
#include "tilesplash/routing.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

using std::chrono::seconds;

// Runs `work` on a thread of its own and says whether it finished within
// `limit`; a deadlock fails the test instead of hanging it (the stuck thread is
// left behind, detached, holding what it needs).
bool finishes_within(std::function<void()> work, seconds limit) {
  struct State {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  std::thread([state, work = std::move(work)] {
    work();
    std::lock_guard<std::mutex> lock(state->mutex);
    state->done = true;
    state->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->mutex);
  return state->done_cv.wait_for(lock, limit, [&] { return state->done; });
}

// ---- the context itself -----------------------------------------------------

TEST(ThreadingContextDeterminism, ResolvesThreadCounts) {
  const ThreadingContext three(3);
  EXPECT_EQ(three.threads(), 3);
  EXPECT_EQ(three.resolve(0), 3);
  EXPECT_EQ(three.resolve(5), 5);
  EXPECT_EQ(ThreadingContext().threads(), hardware_threads());
  EXPECT_GE(hardware_threads(), 1);
  EXPECT_EQ(default_threading_context()->threads(), hardware_threads());
  EXPECT_THROW(ThreadingContext(-1), std::invalid_argument);
  EXPECT_THROW(ThreadingContext(ThreadingOptions{.threads = 1, .pin = true, .first_cpu = -1}),
               std::invalid_argument);
  ThreadingContext context(2);
  EXPECT_THROW(context.run(-1, 4, [](std::int64_t, int) {}), std::invalid_argument);
  // At most kMaxThreads: a request for 2^31 - 1 threads once failed later with bad_alloc.
  EXPECT_EQ(ThreadingContext(kMaxThreads).threads(), kMaxThreads);
  EXPECT_THROW(ThreadingContext(kMaxThreads + 1), std::invalid_argument);
  EXPECT_THROW(ThreadingContext(std::numeric_limits<int>::max()), std::invalid_argument);
  int ran = 0;
  context.run(kMaxThreads, 1, [&](std::int64_t, int) { ++ran; });  // one item: one thread
  EXPECT_EQ(ran, 1);
  try {
    context.run(kMaxThreads + 1, 4, [](std::int64_t, int) {});
    ADD_FAILURE() << "accepted kMaxThreads + 1";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("threads must be in [0, 4096]"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(context.run_together(kMaxThreads + 1, [](int) {}), std::invalid_argument);
}

TEST(ThreadingContextDeterminism, RunsEveryItemOnceOnItsWorkers) {
  ThreadingContext context(2);
  for (const int threads : {0, 1, 3, 4}) {
    const std::int64_t items = 1000;
    std::vector<std::atomic<int>> seen(items);
    std::atomic<int> bad_worker{0};
    const int expected = context.resolve(threads);
    context.run(threads, items, [&](std::int64_t item, int worker) {
      seen[static_cast<std::size_t>(item)].fetch_add(1);
      if (worker < 0 || worker >= expected) bad_worker.fetch_add(1);
    });
    for (std::int64_t i = 0; i < items; ++i) {
      ASSERT_EQ(seen[static_cast<std::size_t>(i)].load(), 1) << "item " << i << ", " << threads;
    }
    EXPECT_EQ(bad_worker.load(), 0) << threads;
  }
  context.run(0, 0, [](std::int64_t, int) { FAIL() << "no items, no calls"; });
}

TEST(ThreadingContextDeterminism, RethrowsTheFirstErrorAndStaysUsable) {
  ThreadingContext context(3);
  EXPECT_THROW(context.run(0, 100,
                           [](std::int64_t item, int) {
                             if (item == 17) throw std::runtime_error("item 17");
                           }),
               std::runtime_error);
  std::atomic<std::int64_t> sum{0};
  context.run(0, 100, [&](std::int64_t item, int) { sum += item; });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadingContextDeterminism, NestedRegionRunsOnTheCallingThread) {
  auto context = std::make_shared<ThreadingContext>(2);
  std::atomic<int> inner_items{0}, wrong_thread{0}, wrong_worker{0};
  const bool finished = finishes_within(
      [=, &inner_items, &wrong_thread, &wrong_worker] {
        context->run(0, 4, [&](std::int64_t, int) {
          const std::thread::id self = std::this_thread::get_id();
          context->run(0, 8, [&](std::int64_t, int worker) {
            inner_items.fetch_add(1);
            if (std::this_thread::get_id() != self) wrong_thread.fetch_add(1);
            if (worker != 0) wrong_worker.fetch_add(1);
          });
        });
      },
      seconds(60));
  ASSERT_TRUE(finished) << "a nested region deadlocked";
  EXPECT_EQ(inner_items.load(), 32);
  EXPECT_EQ(wrong_thread.load(), 0);
  EXPECT_EQ(wrong_worker.load(), 0);
}

// Two threads, each with its own two-thread context, meet inside their
// regions: four items must be running at the same moment, which a lock shared
// by the contexts would forbid.
TEST(ThreadingContextDeterminism, TwoContextsRunTheirRegionsAtTheSameTime) {
  ThreadingContext a(2), b(2);
  std::mutex mutex;
  std::condition_variable arrived_cv;
  int arrived = 0;
  std::atomic<int> met{0};
  const auto meet = [&](std::int64_t, int) {
    std::unique_lock<std::mutex> lock(mutex);
    ++arrived;
    arrived_cv.notify_all();
    if (arrived_cv.wait_for(lock, seconds(30), [&] { return arrived >= 4; })) met.fetch_add(1);
  };
  std::thread first([&] { a.run(0, 2, meet); });
  std::thread second([&] { b.run(0, 2, meet); });
  first.join();
  second.join();
  EXPECT_EQ(met.load(), 4) << "the two contexts' regions did not overlap";
}

// Two threads start regions on one context over and over: each region must
// still see each of its own items exactly once (without turns, the second
// region would overwrite the first one's items and body).
TEST(ThreadingContextDeterminism, SharedContextTakesTurns) {
  ThreadingContext context(2);
  std::atomic<std::int64_t> total{0};
  const auto region = [&] {
    for (int r = 0; r < 20; ++r) {
      context.run(0, 64, [&](std::int64_t item, int) { total += item; });
    }
  };
  std::thread first(region), second(region);
  first.join();
  second.join();
  EXPECT_EQ(total.load(), 2 * 20 * (63 * 64 / 2));
}

TEST(ThreadingContextDeterminism, RunTogetherStartsEveryThreadAtOnce) {
  ThreadingContext context(3);
  std::barrier sync(3);
  std::vector<int> ran(3, 0);
  ASSERT_TRUE(finishes_within(
      [&] {
        context.run_together(3, [&](int worker) {
          sync.arrive_and_wait();
          ran[static_cast<std::size_t>(worker)] += 1;
        });
      },
      seconds(60)));
  EXPECT_EQ(ran, std::vector<int>({1, 1, 1}));
  std::atomic<int> refused{0};
  context.run(0, 2, [&](std::int64_t, int) {
    try {
      context.run_together(2, [](int) {});
    } catch (const std::logic_error&) {
      refused.fetch_add(1);
    }
  });
  EXPECT_EQ(refused.load(), 2);
}

TEST(ThreadingContextDeterminism, PinnedWorkersRunOnTheirCpus) {
  const std::vector<int> cpus = runtime::allowed_cpus();
  if (cpus.empty()) GTEST_SKIP() << "no affinity on this platform";
  ThreadingContext context(ThreadingOptions{.threads = 2, .pin = true, .first_cpu = 0});
  std::atomic<int> cpu{-1};
  context.run_together(2, [&](int worker) {
#if defined(__linux__)
    if (worker == 1) cpu = sched_getcpu();
#endif
  });
#if defined(__linux__)
  EXPECT_EQ(cpu.load(), cpus[1 % cpus.size()]);
#endif
}

TEST(ThreadingContextDeterminism, PeakRunsOnAGivenContext) {
  ThreadingContext context(2);
  EXPECT_GT(measure_peak_gflops(DType::kF32, 2, 0.02, &context), 0.0);
  EXPECT_GT(measure_peak(DType::kF32, 0, 0.02, &context).gflops, 0.0);
  EXPECT_THROW(
      context.run(1, 1, [&](std::int64_t, int) { measure_peak(DType::kF32, 2, 0.02, &context); }),
      std::logic_error);
}

// ---- the kernel from several threads ----------------------------------------

struct KernelCase {
  Mask mask;
  std::int64_t len;
};

std::vector<KernelCase> kernel_cases() {
  return {{Mask::dense(), 300}, {Mask::causal(), 517}, {Mask::local(40, 90), 700}};
}

struct KernelData {
  explicit KernelData(const KernelCase& c)
      : plan(TilePlan::build(c.mask, c.len, c.len, {64, 64})),
        q(DType::kBF16, 2, c.len, 64),
        k(DType::kBF16, 2, c.len, 64),
        v(DType::kBF16, 2, c.len, 64) {
    q.fill_normal(c.len + 1);
    k.fill_normal(c.len + 2);
    v.fill_normal(c.len + 3);
  }
  test::Outputs run(AttentionRunner& runner, int threads) const {
    test::Outputs o{test::HostTensor(DType::kF32, 2, q.len(), 64),
                    std::vector<float>(static_cast<std::size_t>(2 * q.len()))};
    AttentionOptions options;
    options.threads = threads;
    runner.forward(plan, {q.view(), k.view(), v.view(), o.out.mutable_view(), o.lse.data()},
                   options);
    return o;
  }
  TilePlan plan;
  test::HostTensor q, k, v;
};

bool same(const test::Outputs& a, const test::Outputs& b) {
  return test::bitwise_equal(a.out, b.out) &&
         std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0;
}

std::vector<test::Outputs> serial_outputs(const std::vector<KernelData>& data) {
  AttentionRunner runner(std::make_shared<ThreadingContext>(1));
  std::vector<test::Outputs> outputs;
  for (const KernelData& d : data) outputs.push_back(d.run(runner, 0));
  return outputs;
}

// Each thread: `runner_for(t)` over every case, three rounds; every result
// must equal the one-thread result bit for bit.
void expect_threads_match_serial(
    const std::function<std::unique_ptr<AttentionRunner>(int)>& runner_for, int thread_count,
    int kernel_threads) {
  std::vector<KernelData> data;
  for (const KernelCase& c : kernel_cases()) data.emplace_back(c);
  const std::vector<test::Outputs> serial = serial_outputs(data);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<AttentionRunner> runner = runner_for(t);
      for (int round = 0; round < 3; ++round) {
        for (std::size_t i = 0; i < data.size(); ++i) {
          if (!same(data[i].run(*runner, kernel_threads), serial[i])) mismatches.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ThreadingAttention, TwoThreadsWithTheirOwnContextsMatchOneThread) {
  expect_threads_match_serial(
      [](int) { return std::make_unique<AttentionRunner>(std::make_shared<ThreadingContext>(2)); },
      2, 0);
}

TEST(ThreadingAttention, RunnersSharingOneContextMatchOneThread) {
  const auto shared = std::make_shared<ThreadingContext>(2);
  expect_threads_match_serial([&](int) { return std::make_unique<AttentionRunner>(shared); }, 2, 0);
  // More threads than the context holds: the pool grows, the bits do not move.
  expect_threads_match_serial([&](int) { return std::make_unique<AttentionRunner>(shared); }, 2, 3);
}

TEST(ThreadingAttention, AttentionForwardFromTwoThreadsMatchesOneThread) {
  std::vector<KernelData> data;
  for (const KernelCase& c : kernel_cases()) data.emplace_back(c);
  const std::vector<test::Outputs> serial = serial_outputs(data);
  std::atomic<int> mismatches{0};
  const auto work = [&] {
    for (std::size_t i = 0; i < data.size(); ++i) {
      const KernelData& d = data[i];
      test::Outputs o{test::HostTensor(DType::kF32, 2, d.q.len(), 64),
                      std::vector<float>(static_cast<std::size_t>(2 * d.q.len()))};
      attention_forward(d.plan,
                        {d.q.view(), d.k.view(), d.v.view(), o.out.mutable_view(), o.lse.data()});
      if (!same(o, serial[i])) mismatches.fetch_add(1);
    }
  };
  std::thread first(work), second(work);
  first.join();
  second.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ThreadingAttention, RunnerKeepsItsContext) {
  const auto context = std::make_shared<ThreadingContext>(3);
  const AttentionRunner shared(context);
  EXPECT_EQ(shared.context(), context);
  const AttentionRunner own;
  ASSERT_NE(own.context(), nullptr);
  EXPECT_NE(own.context(), default_threading_context());
  EXPECT_EQ(own.context()->threads(), hardware_threads());
  EXPECT_EQ(AttentionRunner(nullptr).context()->threads(), hardware_threads());
}

// ---- the video front door from several threads ------------------------------

const VideoGeometry kGeometry{6, 8, 8, 5, TextPlacement::kAfter};  // 389 tokens

VideoWorkload make_workload(ThreadingContext* context, int threads) {
  WorkloadOptions o;
  o.heads = 3;
  o.head_dim = 64;
  o.dtype = DType::kBF16;
  o.seed = 7;
  o.planted = {PlantedHead::kSpatial, PlantedHead::kTemporal, PlantedHead::kCluster};
  o.threads = threads;
  return VideoWorkload(kGeometry, o, context);
}

VideoAttentionOptions routed_options() {
  VideoAttentionOptions o;
  o.density = 0.3;
  o.sink = true;
  o.blocks = {64, 64};
  o.router.samples = 16;
  return o;
}

VideoAttentionOptions cluster_options() {
  VideoAttentionOptions o;
  ClusterOptions clusters;
  clusters.query_clusters = 5;
  clusters.key_clusters = 12;
  clusters.top_p = 0.7;
  clusters.blocks = {16, 64};
  o.clusters = clusters;
  return o;
}

struct VideoRun {
  test::HostTensor out{DType::kF32, 3, kGeometry.tokens(), 64};
  std::vector<std::string> choices;
};

// Two steps (the second warm-starts the clusters), as a layer runs.
VideoRun run_video(VideoAttention& attention, const VideoWorkload& workload) {
  VideoRun run;
  for (std::int64_t step = 0; step < 2; ++step) {
    const LayerReport report = attention.forward(
        {workload.q(), workload.k(), workload.v(), run.out.mutable_view()}, 1, step);
    for (const HeadReport& head : report.heads) run.choices.push_back(head.choice.name());
  }
  return run;
}

TEST(ThreadingVideo, TwoThreadsWithTheirOwnVideoAttentionMatchOneThread) {
  const VideoWorkload workload = make_workload(nullptr, 0);
  for (const VideoAttentionOptions& options : {routed_options(), cluster_options()}) {
    VideoAttention serial_attention(kGeometry, options, std::make_shared<ThreadingContext>(1));
    const VideoRun serial = run_video(serial_attention, workload);
    std::atomic<int> mismatches{0};
    const auto work = [&] {
      VideoAttention attention(kGeometry, options, std::make_shared<ThreadingContext>(2));
      for (int round = 0; round < 2; ++round) {
        const VideoRun run = run_video(attention, workload);
        if (!test::bitwise_equal(run.out, serial.out) || run.choices != serial.choices) {
          mismatches.fetch_add(1);
        }
      }
    };
    std::thread first(work), second(work);
    first.join();
    second.join();
    EXPECT_EQ(mismatches.load(), 0) << (options.clusters ? "svg2" : "svg");
  }
}

TEST(ThreadingVideo, VideoAttentionSharesAGivenContext) {
  const auto context = std::make_shared<ThreadingContext>(2);
  const VideoWorkload workload = make_workload(context.get(), 0);
  VideoAttention a(kGeometry, routed_options(), context);
  VideoAttention b(kGeometry, routed_options(), context);
  EXPECT_EQ(a.context(), context);
  VideoAttention own(kGeometry, routed_options());
  EXPECT_NE(own.context(), context);
  EXPECT_NE(own.context(), default_threading_context());
  VideoRun run_a, run_b;
  std::thread first([&] { run_a = run_video(a, workload); });
  std::thread second([&] { run_b = run_video(b, workload); });
  first.join();
  second.join();
  const VideoRun alone = run_video(own, workload);
  EXPECT_TRUE(test::bitwise_equal(run_a.out, alone.out));
  EXPECT_TRUE(test::bitwise_equal(run_b.out, alone.out));
  EXPECT_EQ(run_a.choices, alone.choices);
}

TEST(ThreadingVideo, FreeFunctionsGiveTheSameBitsOnAnyContext) {
  ThreadingContext one(1), three(3);
  const VideoWorkload by_default = make_workload(nullptr, 0);
  const VideoWorkload on_one = make_workload(&one, 0);
  const VideoWorkload on_three = make_workload(&three, 2);
  const std::size_t bytes = static_cast<std::size_t>(3 * kGeometry.tokens() * 64 * 2);
  for (const VideoWorkload* w : {&on_one, &on_three}) {
    EXPECT_EQ(std::memcmp(w->q().data, by_default.q().data, bytes), 0);
    EXPECT_EQ(std::memcmp(w->k().data, by_default.k().data, bytes), 0);
    EXPECT_EQ(std::memcmp(w->v().data, by_default.v().data, bytes), 0);
  }

  test::HostTensor token_major(DType::kBF16, 3, kGeometry.tokens(), 64);
  test::HostTensor other(DType::kBF16, 3, kGeometry.tokens(), 64);
  permute_to_token_major(kGeometry, by_default.q(), token_major.mutable_view());
  permute_to_token_major(kGeometry, by_default.q(), other.mutable_view(), 2, &three);
  EXPECT_TRUE(test::bitwise_equal(token_major, other));
  EXPECT_THROW(permute_to_token_major(kGeometry, by_default.q(), other.mutable_view(), -1),
               std::invalid_argument);

  const ClusterOptions clusters = *cluster_options().clusters;
  const HeadClusters a = cluster_head(kGeometry, by_default.q(), by_default.k(), 2, clusters);
  const HeadClusters b =
      cluster_head(kGeometry, by_default.q(), by_default.k(), 2, clusters, nullptr, 3, &one);
  EXPECT_EQ(a.query.centroids, b.query.centroids);
  EXPECT_EQ(a.key.labels, b.key.labels);

  std::vector<float> points(200 * 8);
  for (std::size_t i = 0; i < points.size(); ++i) points[i] = static_cast<float>((i * 37) % 101);
  KMeansOptions o;
  o.clusters = 7;
  const KMeansResult plain = kmeans(points, 8, o);
  o.threads = 3;
  const KMeansResult given = kmeans(points, 8, o, {}, &one);
  EXPECT_EQ(plain.centroids, given.centroids);
  EXPECT_EQ(plain.labels, given.labels);
}

}  // namespace
}  // namespace tilesplash
