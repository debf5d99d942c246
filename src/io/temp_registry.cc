// Lock-free table of temporary paths for temp_registry.h. A slot goes free ->
// writing -> ready; the handler reads only ready slots, so it never sees a half
// copied path, and nothing it calls (unlink) is unsafe in a signal handler.
#include "io/temp_registry.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "tilesplash/output_set.h"

namespace tilesplash::io {
namespace {

constexpr int kSlots = 64;
constexpr std::size_t kMaxPath = 4096;
enum State : int { kFree = 0, kWriting = 1, kReady = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[kMaxPath];
};

Slot slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

struct sigaction previous[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void on_signal(int signal_number) {
  remove_registered_temporaries();
  for (int i = 0; i < 3; ++i) {
    if (kSignals[i] != signal_number) continue;
    const struct sigaction& old = previous[i];
    if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler != SIG_DFL &&
        old.sa_handler != SIG_IGN) {
      old.sa_handler(signal_number);  // a host's own handler still runs
      return;
    }
    // Die of the signal as if no handler had been installed, so the parent
    // sees the usual status (e.g. 130 from a shell after Ctrl-C).
    ::sigaction(signal_number, &old, nullptr);
    ::raise(signal_number);
    return;
  }
}

}  // namespace

int register_temporary(const std::string& path) {
  if (path.size() >= kMaxPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!slots[i].state.compare_exchange_strong(expected, kWriting)) continue;
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].state.store(kReady);
    return i;
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0 && slot < kSlots) slots[slot].state.store(kFree);
}

void remove_registered_temporaries() {
  for (Slot& slot : slots) {
    if (slot.state.load() == kReady) ::unlink(slot.path);
  }
}

}  // namespace tilesplash::io

namespace tilesplash {

void remove_temporaries_on_signals() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  for (int i = 0; i < 3; ++i) {
    struct sigaction action {};
    action.sa_handler = io::on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    ::sigaction(io::kSignals[i], nullptr, &io::previous[i]);
    // A signal the host ignores (nohup's SIGHUP) stays ignored.
    if ((io::previous[i].sa_flags & SA_SIGINFO) == 0 && io::previous[i].sa_handler == SIG_IGN) {
      continue;
    }
    ::sigaction(io::kSignals[i], &action, nullptr);
  }
}

}  // namespace tilesplash
