#pragma once
// What a source does with an example it cannot read (a corrupt record, a CSV
// row with no class, a missing image): `fail` (the default) stops with one
// UserError naming the file and row or record; `skip` leaves it out, counts
// it, and names it in one log line at the end of the epoch.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "convoy/data/dataset.h"

namespace convoy::data {

enum class OnBadExample { fail, skip };

// "fail" or "skip"; anything else is a UserError naming `where` (a flag, a config key).
OnBadExample parse_on_bad_example(const std::string& value, const std::string& where);

// Where log lines go: by default one line to stderr.
using LogFn = std::function<void(const std::string&)>;
LogFn stderr_log();

// The examples a source skipped, by epoch. Thread-safe: shards read on
// background threads add to one log.
class SkippedExamples {
 public:
  struct Entry {
    int64_t epoch;
    std::string what;  // "a.tfrecord: record 17 at byte 1024: data CRC mismatch"
  };
  // Adds one skipped example; the same `what` in the same epoch counts once.
  void add(int64_t epoch, std::string what);
  int64_t count() const;                        // over all epochs
  int64_t count_in_epoch(int64_t epoch) const;
  std::vector<Entry> entries() const;
  // "skipped 2 bad <noun>s in epoch 0: <what>; <what>" naming the first 10.
  std::string summary(int64_t epoch, const std::string& noun) const;

 private:
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::set<std::pair<int64_t, std::string>> seen_;
};

// `data` that, when an epoch ends, logs `skipped`'s summary for that epoch as
// one line (nothing when none were skipped).
Dataset log_skipped_at_epoch_end(Dataset data, std::shared_ptr<const SkippedExamples> skipped, std::string noun,
                                 LogFn log);

}  // namespace convoy::data
