#include "convoy/app/console_reporter.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>

#include "app/class_weights.h"

namespace convoy::train {
namespace {

// %g without a float's noise: 0.5, 0.05 (not 0.05000000074505806).
std::string format_number(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", v);
  return s;
}

}  // namespace

ConsoleReporter::ConsoleReporter(std::ostream& out, std::string progress, std::ostream* warnings)
    : out_(out), progress_(std::move(progress)), warnings_(warnings) {}

// Once per process: a transfer run compiles each phase, a scratch comparison a second model.
void ConsoleReporter::device_fallback(const std::string& why) {
  static std::atomic<bool> said{false};
  if (shown() && !said.exchange(true)) out_ << "convoy: " << why << "\n" << std::flush;
}

void ConsoleReporter::class_weights(const std::vector<double>& weights, const std::vector<std::string>& classes) {
  if (shown()) out_ << "class weights in the loss: " << describe_weights(weights, classes) << "\n";
}

// One line per example: which file or row, and why.
void ConsoleReporter::skipped_examples(const std::vector<std::string>& skipped) {
  out_ << "skipped " << skipped.size() << " bad example(s) (on_bad_example: skip):";
  for (const auto& s : skipped) out_ << "\n  " << s;
  out_ << std::endl;
}

void ConsoleReporter::pretrained_loaded(int tensors, const std::string& file, const std::string& head) {
  if (shown()) out_ << "convoy: " << tensors << " pretrained tensors from " << file << "; new head '" << head << "'\n";
}

void ConsoleReporter::run_begins(const RunHeader& h) {
  if (!shown()) return;
  const RunConfig& c = h.config;
  std::string resuming;
  if (h.resumed) resuming = ", resuming after epoch " + std::to_string(h.resumed_epochs);
  if (h.resumed_steps > 0)
    resuming += " and " + std::to_string(h.resumed_steps) + " steps of epoch " + std::to_string(h.resumed_epochs + 1);
  // Momentum only where the optimizer has one (SGD, RMSprop).
  const std::string momentum =
      c.optimizer == "sgd" || c.optimizer == "rmsprop" ? " momentum " + format_number(c.momentum) : "";
  char line[320];
  std::snprintf(line, sizeof line,
                "convoy: %s on %s (%lld train, %lld %s) | %s, %d thread%s | batch %lld, %s lr %g%s, "
                "%lld epoch%s, seed %llu%s\n",
                c.model.c_str(), h.data_name.c_str(), static_cast<long long>(h.train_examples),
                static_cast<long long>(h.held_out_examples), h.validation ? "validation" : "test", h.device.c_str(),
                h.threads, h.threads == 1 ? "" : "s", static_cast<long long>(c.batch_size),
                c.optimizer == "sgd" ? "SGD" : c.optimizer.c_str(), c.lr, momentum.c_str(),
                static_cast<long long>(c.epochs), c.epochs == 1 ? "" : "s", static_cast<unsigned long long>(c.seed),
                resuming.c_str());
  out_ << line;
  if (h.process_replicas > 1)
    out_ << "  " << h.process_replicas << " replicas (" << h.strategy << "): global batch "
         << c.batch_size * h.process_replicas << (c.scale_lr ? ", lr scaled by replicas" : "")
         << (c.sync_batch_norm ? ", synchronised batch norm" : ", batch norm per replica") << "\n";
  if (c.replicas > 1)
    out_ << "  " << c.replicas << " replicas in one program (" << h.device << "): global batch "
         << c.batch_size * c.replicas << (c.scale_lr ? ", lr scaled by replicas" : "")
         << (c.sync_batch_norm ? ", synchronised batch norm" : ", batch norm per replica") << "\n";
  out_ << std::flush;
}

void ConsoleReporter::transfer_planned(const std::string& head, int64_t frozen_until, double fine_tune_lr) {
  if (!shown()) return;
  out_ << "  transfer: epochs 1-" << frozen_until << " train the head '" << head
       << "' alone (the rest frozen, batch norm on running statistics)";
  if (fine_tune_lr > 0) out_ << ", then every layer trains at lr " << fine_tune_lr;
  out_ << "\n" << std::flush;
}

void ConsoleReporter::phase_begins(int64_t first_epoch, bool batch_norms_stay) {
  if (shown())
    out_ << "  transfer: from epoch " << first_epoch << " every layer trains"
         << (batch_norms_stay ? " (batch norms stay on running statistics)" : "") << "\n" << std::flush;
}

Callbacks ConsoleReporter::fit_callbacks(const RunConfig&) {
  if (!shown()) return {};
  const bool bar = progress_ == "bar" || (progress_ == "auto" && &out_ == &std::cout && ::isatty(STDOUT_FILENO));
  return {std::make_shared<ProgressLogger>(out_, bar)};
}

std::ostream* ConsoleReporter::early_stopping_log() { return shown() ? &out_ : nullptr; }

void ConsoleReporter::profiled(const std::string& table) { out_ << table << std::flush; }

void ConsoleReporter::finished(const History& h, const EvaluationReport& ev, const std::vector<std::string>& classes,
                               const std::string& split) {
  if (!shown()) return;
  char line[200];
  const EpochRecord& kept = h.kept();
  char from[48] = "";
  if (kept.epoch != h.epochs.back().epoch)
    std::snprintf(from, sizeof from, " (weights of epoch %lld)", static_cast<long long>(kept.epoch));
  std::snprintf(line, sizeof line, "total training time %.2f s | test accuracy %.2f%%%s | %.0f images/s\n",
                h.total_train_seconds, 100.0 * kept.test_accuracy, from, h.images_per_second());
  out_ << line << evaluation_text(ev, classes, split) << std::flush;
}

void ConsoleReporter::submission_skipped(const std::vector<std::string>& skipped) {
  if (shown())
    for (const auto& s : skipped) out_ << "skipped " << s << "\n";
}

void ConsoleReporter::wrote(const std::string& dir, const std::vector<std::string>& files) {
  if (!shown()) return;
  out_ << "wrote " << dir << "/{";
  for (std::size_t i = 0; i < files.size(); ++i) out_ << (i ? "," : "") << files[i];
  out_ << "}" << std::endl;
}

void ConsoleReporter::scratch_begins(const RunConfig& c, const std::string& out_dir) {
  if (shown())
    out_ << "convoy: first, for comparison, " << c.model << " from random weights (every layer, lr " << c.lr << ", "
         << c.epochs << " epochs)" << (out_dir.empty() ? "" : " -> " + out_dir) << "\n" << std::flush;
}

void ConsoleReporter::scratch_done(const RunConfig& c) {
  if (shown()) out_ << "convoy: now " << c.model << " from " << c.pretrained << "\n" << std::flush;
}

void ConsoleReporter::notice(const std::string& line) { out_ << line << std::endl; }

}  // namespace convoy::train
