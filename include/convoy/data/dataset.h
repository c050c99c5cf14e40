#pragma once
// tf.data in C++: a Dataset is an immutable recipe, a chain of
// transformations over a source; iterating it for an epoch opens a chain of
// small iterators, each wrapping the one of its input.
//
//   auto train = Dataset::fashion_mnist(dir, "train")
//                    .map(normalize("image", kSeedMean, kSeedStd))
//                    .cache()                                  // runs once
//                    .map(random_flip("image"), {.parallelism = 4, .seed = 7})  // re-drawn each epoch
//                    .shuffle(10000, /*seed=*/1)
//                    .batch(128, /*drop_remainder=*/true)
//                    .prefetch(2);
//   for (int64_t epoch = 0; epoch < 10; ++epoch)
//     for (Example& batch : train.epoch(epoch)) step(batch.tensor("image"), batch.tensor("label"));
//
// Epochs: the epoch number reaches every iterator, so `shuffle` reshuffles
// per epoch and random maps re-draw per epoch, reproducibly. Breaking out of
// an epoch (or an exception) destroys the iterators, which stop their
// threads and wait for work in flight: nothing hangs, nothing leaks.
//
// Threads: parallel maps run on convoy::ThreadPool::shared(); each prefetch
// owns one background thread (it blocks on its input, which pool tasks must
// not). Everything else runs on the thread that calls next().
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convoy/core/rng.h"
#include "convoy/data/example.h"
#include "convoy/data/labeled_images.h"

namespace convoy::data {

// One epoch's stream of examples. Not thread-safe: one consumer per iterator.
class Iterator {
 public:
  virtual ~Iterator() = default;
  // The next example, or nullopt at the end of the epoch. Errors from the
  // pipeline (a bad file, a map that threw) surface here.
  virtual std::optional<Example> next() = 0;
};

// A map function: takes an example and a generator seeded for this element
// alone (from the map's seed, the epoch and the element's position), so its
// random draws do not depend on threads or timing.
using MapFn = std::function<Example(Example, Rng&)>;
using Predicate = std::function<bool(const Example&)>;

inline constexpr int kAutotune = -1;  // map parallelism: one per pool thread

struct MapOptions {
  int parallelism = 1;        // elements in flight; 1 runs inline, kAutotune uses the pool's size
  bool deterministic = true;  // false: hand out elements as they finish (order may vary, draws do not)
  uint64_t seed = 0;          // for the per-element generators
};

class Dataset;
// One epoch of a dataset as a range: `for (Example& e : ds.epoch(n))`.
class Epoch {
 public:
  class iterator {
   public:
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    Example& operator*() { return *current_; }
    iterator& operator++() {
      current_ = source_->next();
      return *this;
    }
    bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

   private:
    friend class Epoch;
    explicit iterator(Iterator* source) : source_(source), current_(source->next()) {}
    Iterator* source_;
    std::optional<Example> current_;
  };
  explicit Epoch(std::unique_ptr<Iterator> it) : it_(std::move(it)) {}
  iterator begin() { return iterator(it_.get()); }
  std::default_sentinel_t end() { return {}; }

 private:
  std::unique_ptr<Iterator> it_;
};

class Dataset {
 public:
  // Opens the iterator chain for one epoch. Everything a transformation needs
  // lives in this function object, so copies of a Dataset are cheap and share it.
  using Opener = std::function<std::unique_ptr<Iterator>(int64_t epoch)>;
  explicit Dataset(Opener open);

  // ---- sources ----
  // Slices every feature of `columns` along its first dimension: tensors
  // [N, ...] become N examples of [...]; text features must hold N strings.
  static Dataset from_slices(Example columns);
  // `index` i32 [] = 0, 1, ..., n - 1. Shuffling positions and then looking
  // the data up (rows_of in transforms.h) keeps a whole-dataset shuffle
  // buffer small and quick to fill.
  static Dataset range(int64_t n);
  // `image` f32 [C, H, W] and `label` i32 [] per example.
  static Dataset from_labeled_images(const LabeledImages& data);
  // Unsigned-byte IDX files, raw or gzip: `image` u8 [1, H, W] (or the file's
  // [C, H, W]) and `label` i32 []. Reads the files when the dataset is built.
  static Dataset from_idx(const std::string& images_path, const std::string& labels_path);
  // Fashion-MNIST's "train" or "t10k" split from `dir` (u8 images, as from_idx).
  static Dataset fashion_mnist(const std::string& dir, const std::string& split);
  // Examples whose features are the union of each dataset's; ends with the
  // shortest. Feature names must not clash.
  static Dataset zip(std::vector<Dataset> datasets);
  // Round-robin over `sources`, `block_length` examples from each in turn,
  // skipping those that are exhausted.
  static Dataset interleave(std::vector<Dataset> sources, int64_t block_length = 1);

  // ---- transformations ----
  Dataset map(MapFn fn, MapOptions options = {}) const;
  Dataset filter(Predicate keep) const;
  // Keeps the examples whose position in this epoch's stream passes `keep`
  // (what shard and the stratified split are made of).
  Dataset filter_positions(std::function<bool(int64_t position)> keep) const;
  // The first complete epoch is kept (in memory, or in the file at `path`),
  // later epochs replay it: work above a cache runs once, work below it runs
  // every epoch. A partly read first epoch is discarded, not kept. An existing
  // file at `path` is reused as is (delete it when the data changes).
  Dataset cache() const;
  Dataset cache(const std::string& path) const;
  // tf.data's buffered shuffle: keeps `buffer` examples and hands out a random
  // one, refilling from the input. buffer >= the dataset size is a uniform
  // permutation. The order is fixed by (seed, epoch), or by seed alone when
  // reshuffle_each_epoch is false.
  Dataset shuffle(int64_t buffer, uint64_t seed, bool reshuffle_each_epoch = true) const;
  // `count` passes over the input per epoch (-1: forever). Each pass is a
  // distinct inner epoch, so a shuffle above it reshuffles per pass.
  Dataset repeat(int64_t count = -1) const;
  // Stacks `size` examples into contiguous tensors [size, ...]; every example
  // must have the same features and shapes. A short last batch is kept unless
  // drop_remainder.
  Dataset batch(int64_t size, bool drop_remainder = false) const;
  // Produces up to `buffer` examples ahead on a background thread.
  Dataset prefetch(int64_t buffer = 2) const;
  Dataset take(int64_t count) const;  // -1: all
  Dataset skip(int64_t count) const;
  // Every num_shards-th example starting at `index`: shards are disjoint and
  // together cover the dataset (one per replica, as PyTorch's DistributedSampler).
  Dataset shard(int64_t num_shards, int64_t index) const;
  // For each input example, opens `open(example)` and interleaves up to
  // `cycle_length` of those datasets, `block_length` examples at a time.
  Dataset interleave(std::function<Dataset(const Example&)> open, int64_t cycle_length,
                     int64_t block_length = 1) const;

  // ---- iteration ----
  std::unique_ptr<Iterator> iterate(int64_t epoch = 0) const { return open_(epoch); }
  Epoch epoch(int64_t epoch) const { return Epoch(iterate(epoch)); }

 private:
  Opener open_;
};

// A seed for one element's random draws, from (seed, epoch, position).
uint64_t element_seed(uint64_t seed, int64_t epoch, int64_t position);

}  // namespace convoy::data
