#pragma once
// The bookkeeping of a reducer that sends gradients in buckets while the
// backward pass still runs (dist/nccl_group.cpp; the fake device's reducer):
// ready() spans of adjacent layers gather into a bucket that is sent once it
// holds `bucket_floats`; finish() sends the rest and checks that every
// gradient went out exactly once. abandon() forgets a step that will never
// run (a capture that failed half-way), so the next one starts clean.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>

namespace convoy {

class GradientBuckets {
 public:
  explicit GradientBuckets(std::size_t bucket_floats) : bucket_floats_(bucket_floats) {}

  template <class Send>
  void ready(std::span<float> layer, Send&& send) {
    if (bucket_floats_ == 0) return;
    if (!pending_.empty() && layer.data() + layer.size() != pending_.data()) flush(send);  // not adjacent
    pending_ = pending_.empty() ? layer : std::span<float>(layer.data(), layer.size() + pending_.size());
    if (pending_.size() >= bucket_floats_) flush(send);
  }

  template <class Send>
  void finish(std::span<float> gradients, Send&& send) {
    if (bucket_floats_ == 0) pending_ = gradients;
    flush(send);
    // Every gradient must have been announced by ready(): a backend bug otherwise.
    if (sent_ != gradients.size()) {
      std::fprintf(stderr, "convoy: internal error: gradient buckets covered %zu of %zu values\n", sent_,
                   gradients.size());
      std::abort();
    }
    sent_ = 0;
  }

  void abandon() {
    pending_ = {};
    sent_ = 0;
  }

 private:
  template <class Send>
  void flush(Send& send) {
    if (pending_.empty()) return;
    send(pending_);
    sent_ += pending_.size();
    pending_ = {};
  }

  std::size_t bucket_floats_;  // 0: one bucket, sent by finish()
  std::span<float> pending_;   // gradients announced, not yet sent
  std::size_t sent_ = 0;       // floats sent this step
};

}  // namespace convoy
