// prefetch: a background thread runs the input ahead of the consumer into a
// bounded queue, so the pipeline's work overlaps the training step. The thread
// is the iterator's own, not the pool's: it blocks on its input (a parallel
// map waiting for pool tasks), which pool tasks must never do.
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "convoy/core/error.h"
#include "convoy/data/dataset.h"

namespace convoy::data {
namespace {

class PrefetchIterator final : public Iterator {
 public:
  PrefetchIterator(std::unique_ptr<Iterator> input, int64_t capacity)
      : input_(std::move(input)), capacity_(static_cast<std::size_t>(capacity)), producer_([this] { produce(); }) {}

  // Stops the producer once its current element is done, then joins it. The
  // input is destroyed after the join, on this thread.
  ~PrefetchIterator() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    space_.notify_all();
    producer_.join();
  }

  std::optional<Example> next() override {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    Example out = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    space_.notify_one();
    return out;
  }

 private:
  void produce() {
    try {
      for (;;) {
        {
          std::unique_lock lock(mu_);
          space_.wait(lock, [&] { return stopping_ || queue_.size() < capacity_; });
          if (stopping_) return;
        }
        auto e = input_->next();  // outside the lock: this is the slow part
        std::lock_guard lock(mu_);
        if (!e) {
          finished_ = true;
          ready_.notify_one();
          return;
        }
        queue_.push_back(std::move(*e));
        ready_.notify_one();
      }
    } catch (...) {
      std::lock_guard lock(mu_);
      error_ = std::current_exception();
      finished_ = true;
      ready_.notify_one();
    }
  }

  std::unique_ptr<Iterator> input_;
  const std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<Example> queue_;
  bool finished_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::thread producer_;  // last: starts once everything above exists
};

}  // namespace

Dataset Dataset::prefetch(int64_t buffer) const {
  require(buffer >= 1, "prefetch: buffer must be at least 1, got " + std::to_string(buffer));
  return Dataset([input = *this, buffer](int64_t epoch) {
    return std::make_unique<PrefetchIterator>(input.iterate(epoch), buffer);
  });
}

}  // namespace convoy::data
