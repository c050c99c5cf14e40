// cache: the first complete epoch is kept and replayed by every later one, so
// the work above the cache runs once and the work below it every epoch. Both
// stores hand out fresh copies, so a map below the cache may change tensors
// in place without touching what is kept.
#include <filesystem>
#include <mutex>

#include "convoy/core/error.h"
#include "convoy/data/dataset.h"
#include "example_file.h"

namespace convoy::data {
namespace {

using Examples = std::vector<Example>;

// Shared by every epoch (and every copy) of one cache() dataset.
struct MemoryStore {
  std::mutex mu;
  std::shared_ptr<const Examples> examples;  // null until an epoch completes
};

class FillMemory final : public Iterator {
 public:
  FillMemory(std::unique_ptr<Iterator> input, std::shared_ptr<MemoryStore> store)
      : input_(std::move(input)), store_(std::move(store)) {}
  std::optional<Example> next() override {
    if (done_) return std::nullopt;
    auto e = input_->next();
    if (!e) {
      done_ = true;
      std::lock_guard lock(store_->mu);
      if (!store_->examples) store_->examples = std::make_shared<const Examples>(std::move(kept_));
      return std::nullopt;
    }
    kept_.push_back(deep_copy(*e));
    return e;
  }

 private:
  std::unique_ptr<Iterator> input_;
  std::shared_ptr<MemoryStore> store_;
  Examples kept_;  // dropped with the iterator if the epoch is left early
  bool done_ = false;
};

class ReplayMemory final : public Iterator {
 public:
  explicit ReplayMemory(std::shared_ptr<const Examples> examples) : examples_(std::move(examples)) {}
  std::optional<Example> next() override {
    if (next_ == examples_->size()) return std::nullopt;
    return deep_copy((*examples_)[next_++]);
  }

 private:
  std::shared_ptr<const Examples> examples_;
  std::size_t next_ = 0;
};

class FillFile final : public Iterator {
 public:
  FillFile(std::unique_ptr<Iterator> input, const std::string& path) : input_(std::move(input)), writer_(path) {}
  std::optional<Example> next() override {
    if (done_) return std::nullopt;
    auto e = input_->next();
    if (!e) {
      done_ = true;
      writer_.commit();
      return std::nullopt;
    }
    writer_.write(*e);
    return e;
  }

 private:
  std::unique_ptr<Iterator> input_;
  ExampleWriter writer_;  // removes its temp file if the epoch is left early
  bool done_ = false;
};

class ReplayFile final : public Iterator {
 public:
  explicit ReplayFile(const std::string& path) : reader_(path) {}
  std::optional<Example> next() override { return reader_.next(); }

 private:
  ExampleReader reader_;
};

}  // namespace

Dataset Dataset::cache() const {
  auto store = std::make_shared<MemoryStore>();
  return Dataset([input = *this, store](int64_t epoch) -> std::unique_ptr<Iterator> {
    std::shared_ptr<const Examples> kept;
    {
      std::lock_guard lock(store->mu);
      kept = store->examples;
    }
    if (kept) return std::make_unique<ReplayMemory>(std::move(kept));
    return std::make_unique<FillMemory>(input.iterate(epoch), store);
  });
}

Dataset Dataset::cache(const std::string& path) const {
  require(!path.empty(), "cache: the file path is empty; pass a path, or call cache() to cache in memory");
  return Dataset([input = *this, path](int64_t epoch) -> std::unique_ptr<Iterator> {
    if (std::filesystem::exists(path)) return std::make_unique<ReplayFile>(path);
    return std::make_unique<FillFile>(input.iterate(epoch), path);
  });
}

}  // namespace convoy::data
