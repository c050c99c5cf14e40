#include "backends/slice_group.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace convoy {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#endif
}

// into[i] += from[i]; then, with `divide_by`, into[i] /= divide_by. Separate
// pointers (restrict) so the loops vectorise; each element's operations are
// the scalar ones in the same order, so the bits do not depend on it.
void add_into(float* __restrict into, const float* __restrict from, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) into[i] += from[i];
}
void add_into_and_divide(float* __restrict into, const float* __restrict from, std::size_t n, float divide_by) {
  for (std::size_t i = 0; i < n; ++i) into[i] = (into[i] + from[i]) / divide_by;
}

class SliceGradients final : public GradientReducer {
 public:
  SliceGradients(SliceGroup& group, int k) : group_(group), k_(k) {}
  void finish(std::span<float> gradients) override { group_.mean_of_gradients(k_, gradients); }

 private:
  SliceGroup& group_;
  int k_;
};

}  // namespace

void SliceBarrier::wait() {
  // The generation before the abort flag: abort() sets the flag, then moves
  // the generation, so a wait that sees no abort here will see the move.
  const uint32_t generation = generation_.load();
  if (aborted_.load()) throw SliceAborted{};
  if (waiting_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
    waiting_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1);
    // seq_cst pairs with the waiter's parked_ increment before its last
    // check: either it sees the new generation, or this sees it parked.
    if (parked_.load() > 0) generation_.notify_all();
    return;
  }
  await_generation(generation);
  if (aborted_.load()) throw SliceAborted{};
}

void SliceBarrier::await_generation(uint32_t seen) {
  // Spin first, for a bounded time rather than a count: a pause costs
  // ~10 cycles on some CPUs and ~140 on others. The clock is read every 16.
  using Clock = std::chrono::steady_clock;
  constexpr auto kSpinFor = std::chrono::microseconds(20);
  const auto until = Clock::now() + kSpinFor;
  for (int spins = 1;; ++spins) {
    if (generation_.load(std::memory_order_acquire) != seen) return;
    cpu_relax();
    if (spins % 16 == 0 && Clock::now() >= until) break;
  }
  // Park. abort() moves the generation too, so a parked waiter wakes for it.
  parked_.fetch_add(1);
  while (generation_.load() == seen) generation_.wait(seen);
  parked_.fetch_sub(1);
}

void SliceBarrier::abort() {
  aborted_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
}

void SliceBarrier::reset() {
  aborted_.store(false);
  waiting_.store(0);
}

SliceGroup::SliceGroup(int slices)
    : slices_(slices), barrier_(slices), gradients_(static_cast<std::size_t>(slices)),
      statistics_(static_cast<std::size_t>(slices)), staged_(static_cast<std::size_t>(slices)) {
  for (int k = 0; k < slices; ++k) reducers_.push_back(std::make_unique<SliceGradients>(*this, k));
}

void SliceGroup::reset() {
  barrier_.reset();
  for (Staged& s : staged_) s.next = 0;
}

StatisticsReducer SliceGroup::statistics_reducer(int k) {
  return [this, k](std::span<double> sums) { sum_of_statistics(k, sums); };
}

// Each thread takes its own range of elements: slice 0's buffer accumulates
// the others in slice order, (((g0 + g1) + g2) ...) / K per element, then
// the mean is copied to the other slices' buffers.
void SliceGroup::mean_of_gradients(int k, std::span<float> gradients) {
  const auto K = static_cast<std::size_t>(slices_);
  gradients_[static_cast<std::size_t>(k)] = gradients.data();
  barrier_.wait();
  const std::size_t n = gradients.size(), me = static_cast<std::size_t>(k), begin = n * me / K, end = n * (me + 1) / K;
  float* mean = gradients_[0] + begin;
  for (std::size_t j = 1; j < K; ++j) {
    if (j + 1 < K)
      add_into(mean, gradients_[j] + begin, end - begin);
    else
      add_into_and_divide(mean, gradients_[j] + begin, end - begin, static_cast<float>(slices_));
  }
  for (std::size_t j = 1; j < K; ++j) std::copy(mean, mean + (end - begin), gradients_[j] + begin);
  barrier_.wait();  // every buffer complete before any optimizer touches its own
  if (!outer_) return;
  if (k == 0) {
    outer_->ready(gradients);  // one bucket: the whole buffer (a bucketing reducer needs every value announced)
    outer_->finish(gradients);
  }
  share_from_first(k, gradients, gradients_);
}

// Every thread sums all slices' staged copies (a handful of values per
// channel) into its own sums, so each gets the same bits without waiting for
// another. The copies, not the sums, are read: a thread that has finished
// may overwrite its sums while another still reads.
void SliceGroup::sum_of_statistics(int k, std::span<double> sums) {
  const auto K = static_cast<std::size_t>(slices_);
  statistics_[static_cast<std::size_t>(k)] = sums.data();
  Staged& mine = staged_[static_cast<std::size_t>(k)];
  const int parity = mine.next;
  mine.next ^= 1;
  std::vector<double>& copy = mine.sums[parity];
  if (copy.size() < sums.size()) copy.resize(sums.size());  // once per size: not in every step
  std::copy(sums.begin(), sums.end(), copy.begin());
  barrier_.wait();
  for (std::size_t i = 0; i < sums.size(); ++i) {
    double s = staged_[0].sums[parity][i];
    for (std::size_t j = 1; j < K; ++j) s += staged_[j].sums[parity][i];
    sums[i] = s;
  }
  if (!outer_statistics_) return;
  if (k == 0) outer_statistics_(sums);
  share_from_first(k, sums, statistics_);
}

template <class T> void SliceGroup::share_from_first(int k, std::span<T> mine, const std::vector<T*>& all) {
  barrier_.wait();  // slice 0 holds the result
  if (k != 0) std::copy(all[0], all[0] + mine.size(), mine.begin());
  barrier_.wait();  // read before slice 0 goes on to change it
}

}  // namespace convoy
