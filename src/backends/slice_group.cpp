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
      statistics_(static_cast<std::size_t>(slices)), summed_(static_cast<std::size_t>(slices)) {
  for (int k = 0; k < slices; ++k) reducers_.push_back(std::make_unique<SliceGradients>(*this, k));
}

StatisticsReducer SliceGroup::statistics_reducer(int k) {
  return [this, k](std::span<double> sums) { sum_of_statistics(k, sums); };
}

// Each thread sums its own range of elements over all slices, in slice
// order, and writes the mean to every slice's buffer: one pass, no copies.
void SliceGroup::mean_of_gradients(int k, std::span<float> gradients) {
  const auto K = static_cast<std::size_t>(slices_);
  gradients_[static_cast<std::size_t>(k)] = gradients.data();
  barrier_.wait();
  const std::size_t n = gradients.size(), me = static_cast<std::size_t>(k), begin = n * me / K, end = n * (me + 1) / K;
  const float slices = static_cast<float>(slices_);
  for (std::size_t i = begin; i < end; ++i) {
    float s = gradients_[0][i];
    for (std::size_t j = 1; j < K; ++j) s += gradients_[j][i];
    s /= slices;
    for (std::size_t j = 0; j < K; ++j) gradients_[j][i] = s;
  }
  barrier_.wait();  // every buffer complete before any optimizer touches its own
  if (!outer_) return;
  if (k == 0) {
    outer_->ready(gradients);  // one bucket: the whole buffer (a bucketing reducer needs every value announced)
    outer_->finish(gradients);
  }
  share_from_first(k, gradients, gradients_);
}

// Every thread sums all slices (a handful of values per channel) into its
// own staging, so each gets the same bits without waiting for another.
void SliceGroup::sum_of_statistics(int k, std::span<double> sums) {
  const auto K = static_cast<std::size_t>(slices_);
  statistics_[static_cast<std::size_t>(k)] = sums.data();
  std::vector<double>& out = summed_[static_cast<std::size_t>(k)];
  if (out.size() < sums.size()) out.resize(sums.size());  // once per size: not in every step
  barrier_.wait();
  for (std::size_t i = 0; i < sums.size(); ++i) {
    double s = statistics_[0][i];
    for (std::size_t j = 1; j < K; ++j) s += statistics_[j][i];
    out[i] = s;
  }
  barrier_.wait();  // all have read every slice's sums before any is overwritten
  std::copy(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(sums.size()), sums.begin());
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
