// map: inline when parallelism is 1, otherwise a window of elements in flight
// on the shared pool. The input is always pulled on the consumer's thread (no
// iterator is shared between threads); only the map function runs in the pool.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <string>

#include "convoy/core/error.h"
#include "convoy/core/thread_pool.h"
#include "convoy/data/dataset.h"

namespace convoy::data {
namespace {

// Runs fn on one element with its own generator. A failure is rethrown
// naming the element: its file when the example names one (the user's word
// for it; "map: element N" meant nothing to them), else its position, and
// keeps UserError a UserError. Running out of memory in a worker is a
// UserError too ("out of memory ..."), so it ends the command with exit 2
// under every policy instead of reaching the CLI as an internal error.
Example apply(const MapFn& fn, Example in, uint64_t seed, int64_t epoch, int64_t position) {
  std::string file;
  for (const char* name : {"file", "path"})
    if (file.empty() && in.has(name) && !in.texts(name).empty()) file = in.text(name);
  const auto where = [&](const std::string& message) {
    if (file.empty()) return "element " + std::to_string(position) + " of epoch " + std::to_string(epoch) + ": " + message;
    return message.find(file) == std::string::npos ? file + ": " + message : message;
  };
  try {
    Rng rng(element_seed(seed, epoch, position));
    return fn(std::move(in), rng);
  } catch (const UserError& e) {
    throw UserError(where(e.what()));
  } catch (const std::bad_alloc&) {
    throw UserError("out of memory while preparing " + (file.empty() ? "an example" : file) +
                    "; free memory, or use a smaller --batch-size, fewer --threads or a lower data.max_image_bytes");
  } catch (const std::exception& e) {
    throw std::runtime_error(where(e.what()));
  } catch (...) {
    throw std::runtime_error(where("unknown exception"));
  }
}

class SequentialMap final : public Iterator {
 public:
  SequentialMap(std::unique_ptr<Iterator> input, std::shared_ptr<const MapFn> fn, uint64_t seed, int64_t epoch)
      : input_(std::move(input)), fn_(std::move(fn)), seed_(seed), epoch_(epoch) {}
  std::optional<Example> next() override {
    auto in = input_->next();
    if (!in) return std::nullopt;
    return apply(*fn_, std::move(*in), seed_, epoch_, position_++);
  }

 private:
  std::unique_ptr<Iterator> input_;
  std::shared_ptr<const MapFn> fn_;
  uint64_t seed_;
  int64_t epoch_, position_ = 0;
};

class ParallelMap final : public Iterator {
 public:
  ParallelMap(std::unique_ptr<Iterator> input, std::shared_ptr<const MapFn> fn, MapOptions options, int64_t epoch)
      : input_(std::move(input)), fn_(std::move(fn)), options_(options), epoch_(epoch), shared_(std::make_shared<Shared>()) {}

  // Claims every element not started, so no pool task starts fn any more, and
  // waits for those running: fn may hold references the caller frees once the
  // loop is left.
  ~ParallelMap() override {
    for (auto& slot : window_) slot->claim();
    std::unique_lock lock(shared_->mu);
    shared_->changed.wait(lock, [&] { return shared_->running == 0; });
  }

  std::optional<Example> next() override {
    fill();
    if (window_.empty()) return std::nullopt;
    auto ready = window_.end();
    for (;;) {
      {
        std::unique_lock lock(shared_->mu);
        ready = find_done();
        if (ready != window_.end()) break;
      }
      // Nothing finished: run a waiting element here rather than sleep (the
      // pool may be busy with other work), and sleep only when all are running.
      auto waiting = std::find_if(window_.begin(), window_.end(), [](const auto& s) { return s->claim(); });
      if (waiting != window_.end()) {
        run(**waiting);
        std::lock_guard lock(shared_->mu);
        (*waiting)->done = true;
        continue;
      }
      std::unique_lock lock(shared_->mu);
      shared_->changed.wait(lock, [&] { return (ready = find_done()) != window_.end(); });
      break;
    }
    std::shared_ptr<Slot> slot = std::move(*ready);
    window_.erase(ready);
    // Taken out of the slot so the exception is released on this thread, not
    // by a pool task dropping its last reference to the slot.
    if (std::exception_ptr error = std::move(slot->error)) std::rethrow_exception(error);
    return std::move(slot->out);
  }

 private:
  struct Slot {
    Example in;
    std::optional<Example> out;
    std::exception_ptr error;
    int64_t position = 0;
    std::atomic<bool> claimed{false};  // by a pool task or by the consumer, whoever comes first
    bool done = false;                 // guarded by Shared::mu; publishes `out` and `error`
    bool claim() { return !claimed.exchange(true); }
  };
  // Outlives the iterator while tasks still hold it, so a task may signal
  // after the iterator's destructor has returned.
  struct Shared {
    std::mutex mu;
    std::condition_variable changed;
    int64_t running = 0;  // pool tasks inside fn
  };

  // The slot to hand out next, if it is done: the oldest in deterministic
  // mode, any in the other. Call with Shared::mu held.
  std::deque<std::shared_ptr<Slot>>::iterator find_done() {
    if (options_.deterministic) return window_.front()->done ? window_.begin() : window_.end();
    return std::find_if(window_.begin(), window_.end(), [](const auto& s) { return s->done; });
  }

  void run(Slot& slot) const {
    try {
      slot.out = apply(*fn_, std::move(slot.in), options_.seed, epoch_, slot.position);
    } catch (...) {
      slot.error = std::current_exception();
    }
  }

  // Tops the window up to `parallelism` elements, pulling input here. With
  // kAutotune the window is a few elements per pool thread, so threads rarely
  // wait on the oldest element.
  void fill() {
    const int width = options_.parallelism == kAutotune ? 4 * ThreadPool::shared().size() : options_.parallelism;
    while (!input_done_ && static_cast<int>(window_.size()) < width) {
      auto in = input_->next();
      if (!in) {
        input_done_ = true;
        break;
      }
      auto slot = std::make_shared<Slot>();
      slot->in = std::move(*in);
      slot->position = position_++;
      window_.push_back(slot);
      ThreadPool::shared().submit([this_map = this, shared = shared_, slot] {
        {
          std::lock_guard lock(shared->mu);
          if (!slot->claim()) return;  // the consumer ran it, or the iterator is gone
          ++shared->running;           // under the lock: the destructor counts after claiming all
        }
        this_map->run(*slot);
        std::lock_guard lock(shared->mu);
        slot->done = true;
        --shared->running;
        shared->changed.notify_all();
      });
    }
  }

  std::unique_ptr<Iterator> input_;
  std::shared_ptr<const MapFn> fn_;
  MapOptions options_;
  int64_t epoch_, position_ = 0;
  bool input_done_ = false;
  std::shared_ptr<Shared> shared_;
  std::deque<std::shared_ptr<Slot>> window_;  // in input order
};

}  // namespace

Dataset Dataset::map(MapFn fn, MapOptions options) const {
  require(options.parallelism >= 1 || options.parallelism == kAutotune,
          "map: parallelism must be at least 1 or kAutotune, got " + std::to_string(options.parallelism));
  require(static_cast<bool>(fn), "map: the function is empty; pass a callable");
  auto shared = std::make_shared<const MapFn>(std::move(fn));
  return Dataset([input = *this, fn = std::move(shared), options](int64_t epoch) -> std::unique_ptr<Iterator> {
    if (options.parallelism == 1) return std::make_unique<SequentialMap>(input.iterate(epoch), fn, options.seed, epoch);
    return std::make_unique<ParallelMap>(input.iterate(epoch), fn, options, epoch);
  });
}

}  // namespace convoy::data
