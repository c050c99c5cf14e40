#include "convoy/dist/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "convoy/dist/strategy.h"

namespace convoy::dist {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Watchdog::Watchdog(double timeout_seconds, OnTimeout on_timeout)
    : timeout_(timeout_seconds), on_timeout_(std::move(on_timeout)), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::enter(const char* what) {
  what_.store(what, std::memory_order_relaxed);
  since_ns_.store(now_ns(), std::memory_order_release);
}

void Watchdog::leave() { since_ns_.store(0, std::memory_order_release); }

void Watchdog::watch() {
  // Polls a few times per timeout (at most every 0.1 s): a wait is caught
  // between 1 and ~1.1 timeouts after it began.
  const auto period = std::chrono::duration<double>(std::clamp(timeout_ / 10, 0.001, 0.1));
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
    const int64_t since = since_ns_.load(std::memory_order_acquire);
    if (since == 0) continue;
    const double waited = static_cast<double>(now_ns() - since) * 1e-9;
    if (waited < timeout_) continue;
    on_timeout_(what_.load(std::memory_order_relaxed), waited);
    int64_t expected = since;
    since_ns_.compare_exchange_strong(expected, 0);  // a handler that returns hears of each wait once
  }
}

Watchdog::OnTimeout exit_on_timeout(int rank, int world_size) {
  return [rank, world_size](const char* what, double waited) {
    char line[512];
    const int n = std::snprintf(line, sizeof line,
                                "convoy: error: replica %d of %d waited %.0f s for the other replicas in %s; one of "
                                "them has died or hangs (the limit is --dist-timeout). Stopping this replica.\n",
                                rank, world_size, waited, what);
    // write(2) and _exit: nothing here may wait on the blocked main thread.
    if (n > 0) {
      const ssize_t written = ::write(STDERR_FILENO, line, std::min<std::size_t>(n, sizeof line - 1));
      (void)written;  // nothing more to do if stderr is gone
    }
    std::_Exit(kFailedReplicaExitCode);
  };
}

}  // namespace convoy::dist
