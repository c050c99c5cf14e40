// The temporary files being written now (core/temporary_files.h),
// in a fixed table a signal handler may read: no allocation, no lock, only
// lock-free atomics and unlink(2), all async-signal-safe.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "convoy/core/temporary_files.h"

namespace convoy {
namespace {

// A slot is free, being filled (its path not yet whole: the handler skips
// it; the file is not created before the slot is ready), ready, or being
// removed: a handler holds it while it reads the path and unlinks the file,
// so the owner neither frees nor refills it under the reader. The handler
// may run on another thread while the owner goes on (signals are taken on
// their own thread: app/graceful_stop.h), so this is not only reentrancy.
enum : int { kFree = 0, kFilling = 1, kReady = 2, kRemoving = 3 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[4096];
};
static_assert(std::atomic<int>::is_always_lock_free);

// More writers at once than slots (convoy has at most a handful: the
// checkpoint savers, a report, a shard) go unlisted; the next run's
// remove_stale_temporaries removes what such a one leaves.
constexpr int kSlots = 32;
Slot g_slots[kSlots];

// Set by a handler that ends the process, before it sweeps: a writer that
// reaches a slot after that stops where it is instead of going on to make
// (or rename) a file the sweep can no longer see.
std::atomic<bool> g_ending{false};

}  // namespace

std::string temporary_name(const std::string& path) { return path + kTemporaryMark + std::to_string(::getpid()); }

InFlightTemporary::InFlightTemporary(const std::string& path) {
  if (path.size() < sizeof g_slots[0].path) {
    for (int i = 0; i < kSlots; ++i) {
      int expected = kFree;
      if (!g_slots[i].state.compare_exchange_strong(expected, kFilling)) continue;
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(kReady);
      slot_ = i;
      break;
    }
  }
  // The sweep may have passed this slot already: the file must not be made.
  if (g_ending.load()) wait_for_the_end();
}

InFlightTemporary::~InFlightTemporary() {
  if (slot_ < 0) return;
  // A handler removing this file holds the slot: wait rather than free the
  // path it reads; when the process is ending, this writer goes no further
  // (its next step, a rename of the removed file, would fail and print an
  // error the stop never caused).
  for (int expected = kReady; !g_slots[slot_].state.compare_exchange_weak(expected, kFree); expected = kReady) {
    if (g_ending.load()) wait_for_the_end();
    std::this_thread::yield();
  }
}

void remove_in_flight_temporaries(bool process_ends) {
  if (process_ends) g_ending.store(true);  // first, so no writer lists a file after the sweep passed
  for (Slot& s : g_slots) {
    int expected = kReady;
    if (!s.state.compare_exchange_strong(expected, kRemoving)) continue;  // free, filling, or another handler's
    ::unlink(s.path);
    if (!process_ends) s.state.store(kReady);  // else held: its writer waits for the end
  }
}

bool process_ending() { return g_ending.load(); }

void wait_for_the_end() {
  for (;;) ::pause();
}

}  // namespace convoy
