#include "convoy/data/bad_examples.h"

#include <iostream>

#include "convoy/core/error.h"

namespace convoy::data {
namespace {

constexpr std::size_t kNamedInSummary = 10;

class LogAtEndIterator final : public Iterator {
 public:
  LogAtEndIterator(std::unique_ptr<Iterator> input, std::shared_ptr<const SkippedExamples> skipped,
                   std::shared_ptr<const std::string> noun, std::shared_ptr<const LogFn> log, int64_t epoch)
      : input_(std::move(input)), skipped_(std::move(skipped)), noun_(std::move(noun)), log_(std::move(log)), epoch_(epoch) {}

  std::optional<Example> next() override {
    auto e = input_->next();
    if (!e && !logged_) {
      logged_ = true;
      if (skipped_->count_in_epoch(epoch_) > 0) (*log_)(skipped_->summary(epoch_, *noun_));
    }
    return e;
  }

 private:
  std::unique_ptr<Iterator> input_;
  std::shared_ptr<const SkippedExamples> skipped_;
  std::shared_ptr<const std::string> noun_;
  std::shared_ptr<const LogFn> log_;
  int64_t epoch_;
  bool logged_ = false;
};

}  // namespace

OnBadExample parse_on_bad_example(const std::string& value, const std::string& where) {
  if (value == "fail") return OnBadExample::fail;
  if (value == "skip") return OnBadExample::skip;
  throw UserError(where + ": on_bad_example must be 'fail' or 'skip', got '" + value + "'");
}

LogFn stderr_log() {
  return [](const std::string& line) { std::cerr << line << std::endl; };
}

void SkippedExamples::add(int64_t epoch, std::string what) {
  std::lock_guard lock(mu_);
  // Reading the same epoch again (a split's look at epoch 0, then training)
  // meets the same bad examples: name each once per epoch.
  if (!seen_.emplace(epoch, what).second) return;
  entries_.push_back({epoch, std::move(what)});
}

int64_t SkippedExamples::count() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(entries_.size());
}

int64_t SkippedExamples::count_in_epoch(int64_t epoch) const {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const Entry& e : entries_) n += e.epoch == epoch;
  return n;
}

std::vector<SkippedExamples::Entry> SkippedExamples::entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

std::string SkippedExamples::summary(int64_t epoch, const std::string& noun) const {
  std::lock_guard lock(mu_);
  std::string named;
  std::size_t n = 0;
  for (const Entry& e : entries_) {
    if (e.epoch != epoch) continue;
    if (n++ < kNamedInSummary) named += (named.empty() ? "" : "; ") + e.what;
  }
  std::string line = "skipped " + std::to_string(n) + " bad " + noun + (n == 1 ? "" : "s") + " in epoch " +
                     std::to_string(epoch) + ": " + named;
  if (n > kNamedInSummary) line += "; and " + std::to_string(n - kNamedInSummary) + " more";
  return line;
}

Dataset log_skipped_at_epoch_end(Dataset data, std::shared_ptr<const SkippedExamples> skipped, std::string noun,
                                 LogFn log) {
  auto shared_noun = std::make_shared<const std::string>(std::move(noun));
  auto shared_log = std::make_shared<const LogFn>(std::move(log));
  return Dataset([data, skipped, shared_noun, shared_log](int64_t epoch) -> std::unique_ptr<Iterator> {
    return std::make_unique<LogAtEndIterator>(data.iterate(epoch), skipped, shared_noun, shared_log, epoch);
  });
}

}  // namespace convoy::data
