#pragma once
// Private to records/: the entries of a manifest that fail a check, under
// on_bad_example. fail: the first one is a UserError naming the source and
// the entry; skip: each is left out, named in Manifest::skipped, and one
// summary line is logged. Shared by the CSV and class-folder manifests.
#include <string>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/data/bad_examples.h"

namespace convoy::records {

class BadEntries {
 public:
  // `source`: the CSV or the root folder; `noun`: "row" or "file", for the summary.
  BadEntries(const std::string& source, const char* noun, data::OnBadExample policy)
      : source_(source), noun_(noun), policy_(policy) {}

  // `where`: "line 7", or a file under the root. Returns normally only under skip.
  void add(const std::string& where, const std::string& problem, const std::string& advice) {
    if (policy_ == data::OnBadExample::fail)
      throw UserError(source_ + ": " + where + ": " + problem + "; " + advice + " (or set on_bad_example: skip)");
    named_.push_back(where + ": " + problem);
    if (first_advice_.empty()) first_advice_ = advice;
  }

  // What to do about the first entry left out ("" when none was).
  const std::string& first_advice() const { return first_advice_; }

  // Every entry left out ("<source>: <where>: <problem>"), after logging one
  // line of the first ten.
  std::vector<std::string> finish(const data::LogFn& log) {
    std::vector<std::string> out;
    if (named_.empty()) return out;
    std::string line = source_ + ": skipped " + std::to_string(named_.size()) + " bad " + noun_ +
                       (named_.size() == 1 ? "" : "s") + ": ";
    for (std::size_t i = 0; i < named_.size() && i < 10; ++i) line += (i ? "; " : "") + named_[i];
    if (named_.size() > 10) line += "; and " + std::to_string(named_.size() - 10) + " more";
    log(line);
    for (const std::string& n : named_) out.push_back(source_ + ": " + n);
    return out;
  }

 private:
  const std::string& source_;
  const char* noun_;
  data::OnBadExample policy_;
  std::vector<std::string> named_;
  std::string first_advice_;
};

}  // namespace convoy::records
