#include "convoy/image/decode_budget.h"

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>

namespace convoy::image {
namespace {

constexpr uint64_t kMinBudget = uint64_t{256} << 20, kMaxBudget = uint64_t{2} << 30;

// Bytes of memory this process may still take: /proc/meminfo's MemAvailable,
// lowered to what a cgroup v2 limit leaves. 0 when neither can be read.
uint64_t available_memory() {
  uint64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    uint64_t kib = 0;
    std::string unit;
    meminfo >> kib >> unit;
    if (key == "MemAvailable:") {
      available = kib << 10;
      break;
    }
  }
  uint64_t limit = 0, used = 0;
  if (std::ifstream max("/sys/fs/cgroup/memory.max"); max >> limit) {  // "max" (no limit) fails to read
    std::ifstream current("/sys/fs/cgroup/memory.current");
    current >> used;
    const uint64_t left = limit > used ? limit - used : 0;
    available = available == 0 ? left : std::min(available, left);
  }
  return available;
}

uint64_t default_budget() { return std::clamp(available_memory() / 4, kMinBudget, kMaxBudget); }

struct Budget {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t limit = default_budget();
  uint64_t in_flight = 0, peak = 0, waits = 0;
  uint64_t next_ticket = 0, serving = 0;  // arrival order
};

Budget& budget() {
  static Budget b;
  return b;
}

}  // namespace

uint64_t decode_budget_bytes() {
  Budget& b = budget();
  std::lock_guard lock(b.mutex);
  return b.limit;
}

void set_decode_budget_bytes(uint64_t bytes) {
  Budget& b = budget();
  std::lock_guard lock(b.mutex);
  b.limit = bytes ? bytes : default_budget();
  b.changed.notify_all();
}

DecodeBudgetStats decode_budget_stats() {
  Budget& b = budget();
  std::lock_guard lock(b.mutex);
  return {.in_flight = b.in_flight, .peak = b.peak, .waits = b.waits};
}

void reset_decode_budget_peak() {
  Budget& b = budget();
  std::lock_guard lock(b.mutex);
  b.peak = b.in_flight;
  b.waits = 0;
}

DecodeReservation::DecodeReservation(uint64_t bytes) : bytes_(bytes) {
  Budget& b = budget();
  std::unique_lock lock(b.mutex);
  const uint64_t ticket = b.next_ticket++;
  // First in line, and either it fits or nothing else is in flight (an image
  // larger than the budget runs alone).
  const auto may_go = [&] { return ticket == b.serving && (b.in_flight == 0 || b.in_flight + bytes <= b.limit); };
  if (!may_go()) {
    ++b.waits;
    b.changed.wait(lock, may_go);
  }
  ++b.serving;
  b.in_flight += bytes;
  b.peak = std::max(b.peak, b.in_flight);
  b.changed.notify_all();  // the next in line may fit too
}

DecodeReservation::~DecodeReservation() {
  if (bytes_ == 0) return;
  Budget& b = budget();
  std::lock_guard lock(b.mutex);
  b.in_flight -= bytes_;
  b.changed.notify_all();
}

DecodeReservation& DecodeReservation::operator=(DecodeReservation&& other) noexcept {
  if (this != &other) {
    DecodeReservation gone(std::move(*this));
    bytes_ = other.bytes_;
    other.bytes_ = 0;
  }
  return *this;
}

}  // namespace convoy::image
