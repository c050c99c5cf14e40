#pragma once
// Memory for decoding, bounded across threads. Each image's pixels are
// bounded by its header (2^28 pixels), but N decode threads each holding a
// huge, legal image would multiply that. Every decode reserves the bytes it
// will hold (its pixels; a progressive JPEG's full-size coefficients) from
// one process-wide budget before it allocates, and waits while the
// reservations in flight would pass it. Waiters are served in arrival order,
// so a large image is not starved by small ones. An image larger than the
// whole budget waits until nothing else is in flight and then runs alone: it
// is never refused for the budget (its pixel limit already held) and cannot
// deadlock, since no decode holds a reservation while it waits for another.
#include <cstdint>
#include <string_view>

namespace convoy::image {

// The budget: a quarter of the memory available when first asked
// (MemAvailable, or the cgroup's limit when lower), clamped to
// [256 MiB, 2 GiB]; a maximal RGB image (805 MB) fits at least at the top.
uint64_t decode_budget_bytes();
// Replaces the budget (tests; 0 restores the default). Reservations in
// flight keep their bytes.
void set_decode_budget_bytes(uint64_t bytes);

// Counters for tests and reports: bytes reserved now, the most reserved at
// once since the last reset, and how many reservations had to wait.
struct DecodeBudgetStats {
  uint64_t in_flight = 0, peak = 0, waits = 0;
};
DecodeBudgetStats decode_budget_stats();
void reset_decode_budget_peak();

// Holds `bytes` of the budget for its lifetime (waiting for them first).
class DecodeReservation {
 public:
  DecodeReservation() = default;
  explicit DecodeReservation(uint64_t bytes);
  ~DecodeReservation();
  DecodeReservation(DecodeReservation&& other) noexcept : bytes_(other.bytes_) { other.bytes_ = 0; }
  DecodeReservation& operator=(DecodeReservation&& other) noexcept;
  DecodeReservation(const DecodeReservation&) = delete;
  DecodeReservation& operator=(const DecodeReservation&) = delete;
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t bytes_ = 0;
};

}  // namespace convoy::image
