#pragma once
// The CLI's console as RunEvents (workflow.h): `convoy train`'s banners,
// progress display and final block, written to the stream it is given and
// nowhere else. progress "quiet" keeps only what a quiet run still says
// (bad examples skipped, training.profile's table, notices).
#include <ostream>
#include <string>

#include "convoy/app/workflow.h"

namespace convoy::train {

class ConsoleReporter : public RunEvents {
 public:
  // progress: training.progress ("auto": a live bar when `out` is std::cout
  // on a terminal, else one line per epoch; "bar"; "lines"; "quiet").
  // warnings: where training's warnings go (the CLI: std::cerr); nullptr: nowhere.
  ConsoleReporter(std::ostream& out, std::string progress, std::ostream* warnings = nullptr);
  void set_progress(std::string progress) { progress_ = std::move(progress); }

  void device_fallback(const std::string& why) override;
  void class_weights(const std::vector<double>& weights, const std::vector<std::string>& classes) override;
  void skipped_examples(const std::vector<std::string>& skipped) override;
  void pretrained_loaded(int tensors, const std::string& file, const std::string& head) override;
  void run_begins(const RunHeader& header) override;
  void transfer_planned(const std::string& head, int64_t frozen_until, double fine_tune_lr) override;
  void phase_begins(int64_t first_epoch, bool batch_norms_stay) override;
  Callbacks fit_callbacks(const RunConfig& c) override;
  std::ostream* early_stopping_log() override;
  std::ostream* warnings() override { return warnings_; }
  void profiled(const std::string& table) override;
  void finished(const History& h, const EvaluationReport& ev, const std::vector<std::string>& classes,
                const std::string& split) override;
  void submission_skipped(const std::vector<std::string>& skipped) override;
  void wrote(const std::string& dir, const std::vector<std::string>& files) override;
  void scratch_begins(const RunConfig& run, const std::string& out_dir) override;
  void scratch_done(const RunConfig& run) override;
  void notice(const std::string& line) override;

 private:
  bool shown() const { return progress_ != "quiet"; }
  std::ostream& out_;
  std::string progress_;
  std::ostream* warnings_;
};

}  // namespace convoy::train
