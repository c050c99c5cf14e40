#include "convoy/train/callbacks.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/tensorboard.h"

namespace convoy::train {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

double metric_value(const EpochRecord& r, const std::string& name) {
  if (name == "loss") return r.train_loss;
  if (name == "accuracy") return r.train_accuracy;
  if (name == "val_loss") return r.test_loss;
  if (name == "val_accuracy") return r.test_accuracy;
  throw UserError("unknown metric '" + shown(name) + "'; use loss, accuracy, val_loss or val_accuracy");
}

void check_metric_name(const std::string& name, const std::string& where) {
  try {
    metric_value({}, name);
  } catch (const UserError& e) {
    throw UserError(where + ": " + e.what());
  }
}

EarlyStopping::EarlyStopping(EarlyStoppingOptions options, std::ostream* log)
    : options_(std::move(options)), log_(log) {
  check_metric_name(options_.monitor, "early_stopping.monitor");
  const std::string& mode = options_.mode;
  require(mode == "min" || mode == "max" || mode == "auto",
          "early_stopping.mode: '" + mode + "' is not min, max or auto");
  require(options_.patience >= 0, "early_stopping.patience must be 0 or more");
  maximize_ = mode == "max" || (mode == "auto" && options_.monitor.find("acc") != std::string::npos);
}

void EarlyStopping::on_train_begin(FitState& s) {
  best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  best_epoch_ = stopped_epoch_ = wait_ = 0;
  best_params_.clear();
  best_state_.clear();
  // A resumed run replays its earlier epochs, so it stops when an
  // uninterrupted one would (their weights are gone; see on_epoch_end).
  for (const auto& r : s.history.epochs) {
    const double v = metric_value(r, options_.monitor);
    if (improved(v)) {
      best_ = v;
      best_epoch_ = r.epoch;
      wait_ = 0;
    } else {
      ++wait_;
    }
  }
}

bool EarlyStopping::improved(double v) const {
  const double delta = std::abs(options_.min_delta);
  return maximize_ ? v > best_ + delta : v < best_ - delta;
}

void EarlyStopping::on_epoch_end(FitState& s, const EpochRecord& r) {
  const double v = metric_value(r, options_.monitor);
  if (improved(v)) {
    best_ = v;
    best_epoch_ = r.epoch;
    wait_ = 0;
    if (options_.restore_best_weights) {
      best_params_ = s.exe.internals().copy_of(Held::parameters);
      best_state_ = s.exe.internals().copy_of(Held::state);
    }
    return;
  }
  if (++wait_ < options_.patience && options_.patience > 0) return;
  s.stop_training = true;
  stopped_epoch_ = r.epoch;
  s.history.stopped_epoch = r.epoch;
  if (log_) *log_ << "Epoch " << r.epoch << ": early stopping\n" << std::flush;
  if (options_.restore_best_weights && best_epoch_ > 0 && best_epoch_ != r.epoch) {
    if (best_params_.empty()) {
      warn(s, "convoy: early stopping: the best epoch (" + std::to_string(best_epoch_) +
                  ") came before the run was resumed, so its weights are not in memory; keeping the last epoch's");
      return;
    }
    s.exe.internals().write(Held::parameters, best_params_);
    s.exe.internals().write(Held::state, best_state_);
    s.history.weights_epoch = best_epoch_;
    if (log_) *log_ << "Restoring model weights from the end of the best epoch: " << best_epoch_ << ".\n" << std::flush;
  }
}

void warn(const FitState& s, const std::string& line) {
  if (s.warnings) *s.warnings << line << "\n" << std::flush;
}

void TerminateOnNaN::on_batch_end(FitState& s, int64_t step, const Metrics& running) {
  if (std::isfinite(running.loss_sum)) return;
  triggered_ = true;
  s.stop_training = true;
  warn(s, std::string("convoy: loss became ") + (std::isnan(running.loss_sum) ? "NaN" : "infinite") + " at epoch " +
              std::to_string(s.epoch) + " step " + std::to_string(step) + "; stopping (TerminateOnNaN)");
}

void CsvLogger::on_epoch_end(FitState& s, const EpochRecord&) {
  std::string csv = "epoch,loss,accuracy,val_loss,val_accuracy,lr,train_seconds,images_per_second\n";
  char row[256];
  for (const auto& e : s.history.epochs) {
    std::snprintf(row, sizeof row, "%lld,%.6f,%.6f,%.6f,%.6f,%.6g,%.4f,%.1f\n", static_cast<long long>(e.epoch),
                  e.train_loss, e.train_accuracy, e.test_loss, e.test_accuracy, e.lr, e.train_seconds,
                  e.images_per_second);
    csv += row;
  }
  io::write_file_atomic(path_, csv);
}

// One event file per run kind, as Keras writes train/ and validation/.
struct TensorBoardLogger::Writers {
  io::EventWriter train, validation;
};

TensorBoardLogger::TensorBoardLogger(const std::string& dir, int64_t every_steps)
    : w_(new Writers{io::EventWriter(dir + "/train"), io::EventWriter(dir + "/validation")}), every_(every_steps) {}
TensorBoardLogger::~TensorBoardLogger() = default;

void TensorBoardLogger::on_batch_end(FitState& s, int64_t step, const Metrics& running) {
  if (every_ <= 0 || step % every_ != 0) return;
  const int64_t global = (s.epoch - 1) * s.steps_per_epoch + step;
  w_->train.scalar("batch_loss", static_cast<float>(running.mean_loss()), global);
}

void TensorBoardLogger::on_epoch_end(FitState&, const EpochRecord& r) {
  w_->train.scalar("epoch_loss", static_cast<float>(r.train_loss), r.epoch);
  w_->train.scalar("epoch_accuracy", static_cast<float>(r.train_accuracy), r.epoch);
  w_->train.scalar("learning_rate", static_cast<float>(r.lr), r.epoch);
  w_->validation.scalar("epoch_loss", static_cast<float>(r.test_loss), r.epoch);
  w_->validation.scalar("epoch_accuracy", static_cast<float>(r.test_accuracy), r.epoch);
  w_->train.flush();
  w_->validation.flush();
}

namespace {

// The terminal's width: stdout's window, else $COLUMNS, else 80.
int terminal_columns() {
  winsize w{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n > 0) return n;
  }
  return 80;
}

// 42s, 5m02s, 1h05m: short enough for the bar.
std::string short_duration(double seconds) {
  char s[32];
  const auto t = static_cast<long long>(std::max(0.0, std::round(seconds)));
  if (t < 60) std::snprintf(s, sizeof s, "%llds", t);
  else if (t < 3600) std::snprintf(s, sizeof s, "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(s, sizeof s, "%lldh%02lldm", t / 3600, t / 60 % 60);
  return s;
}

std::string bar_of(int width, double fraction) {
  const int done = std::clamp(static_cast<int>(width * fraction), 0, width);
  std::string bar(static_cast<std::size_t>(done), '=');
  if (done < width) bar += '>' + std::string(static_cast<std::size_t>(width - done - 1), '.');
  return bar;
}

}  // namespace

ProgressLogger::ProgressLogger(std::ostream& out, bool live_bar, int columns)
    : out_(out), live_(live_bar), columns_(columns > 0 ? columns : live_bar ? terminal_columns() : 0) {}

void ProgressLogger::on_train_begin(FitState& s) {
  train_start_ = now_seconds();
  first_epoch_ = s.epoch + 1;  // fit starts after its initial epoch (a resumed run's last)
}

void ProgressLogger::on_epoch_begin(FitState& s) {
  if (train_start_ == 0) {  // a logger that missed the fit's start
    train_start_ = now_seconds();
    first_epoch_ = s.epoch;
  }
  epoch_start_ = last_draw_ = now_seconds();
}

// One line, redrawn in place: `head` [bar] tail, cut to fit the terminal
// (one column spare, so the cursor never wraps to a new line). `tails` go
// from the most detailed to the least; the first that leaves room for a bar
// of 10 is taken.
void ProgressLogger::draw(const std::string& head, const std::vector<std::string>& tails, double fraction) {
  const int room = std::max(columns_ - 1, 10);
  std::string tail = tails.empty() ? "" : tails.back();
  for (const std::string& t : tails)
    if (room - static_cast<int>(head.size() + t.size()) - 3 >= 10) {
      tail = t;
      break;
    }
  const int bar_width = std::min<int>(30, room - static_cast<int>(head.size() + tail.size()) - 3);
  std::string line = head;
  if (bar_width >= 6) line += " [" + bar_of(bar_width, fraction) + "]";
  line += tail;
  if (static_cast<int>(line.size()) > room) line.resize(static_cast<std::size_t>(room));
  out_ << "\r\033[K" << line << std::flush;
}

namespace {
// The epoch progress counts against: the run's last (a transfer run fits its
// phases one by one), else this fit's.
int64_t run_end(const FitState& s) { return std::max(s.epochs, s.run_epochs); }
}  // namespace

void ProgressLogger::on_batch_end(FitState& s, int64_t step, const Metrics& running) {
  if (!live_) return;
  const double now = now_seconds();
  if (now - last_draw_ < 0.1 && step != s.steps_per_epoch) return;  // ~10 redraws a second
  last_draw_ = now;
  const double elapsed = now - epoch_start_;
  const double total_steps = static_cast<double>(std::max<int64_t>(s.steps_per_epoch, 1));
  const double epoch_eta = elapsed / static_cast<double>(step) * (total_steps - static_cast<double>(step));
  // The run's: the epochs done so far (with their evaluations) set the pace;
  // in the first, this epoch's training pace does.
  const double epochs_done = static_cast<double>(s.epoch - first_epoch_);
  const double per_epoch = epochs_done > 0 ? (epoch_start_ - train_start_) / epochs_done
                                           : elapsed / static_cast<double>(step) * total_steps;
  const double run_eta = epoch_eta + per_epoch * static_cast<double>(run_end(s) - s.epoch);
  char head[64], metrics[64], rate[32];
  std::snprintf(head, sizeof head, "Epoch %lld/%lld %lld/%lld", static_cast<long long>(s.epoch),
                static_cast<long long>(run_end(s)), static_cast<long long>(step),
                static_cast<long long>(s.steps_per_epoch));
  std::snprintf(metrics, sizeof metrics, " - loss %.4f - acc %.4f", running.mean_loss(), running.accuracy());
  std::snprintf(rate, sizeof rate, " - %.0f img/s", static_cast<double>(running.count) / elapsed);
  const std::string epoch = " ETA " + short_duration(epoch_eta);
  const std::string run = s.epoch < run_end(s) ? epoch + " (run " + short_duration(run_eta) + ")" : epoch;
  draw(head, {run + metrics + rate, run + metrics, epoch + metrics, metrics}, static_cast<double>(step) / total_steps);
}

void ProgressLogger::on_evaluate_batch(FitState& s, int64_t done) {
  if (!live_) return;
  const int64_t expected = evaluation_batches_;  // the last evaluation's length
  evaluation_batches_ = std::max(evaluation_batches_, done);
  const double now = now_seconds();
  if (now - last_draw_ < 0.1 && done > 1) return;  // the first batch shows the state change at once
  last_draw_ = now;
  char head[64], tail[64];
  std::snprintf(head, sizeof head, "Epoch %lld/%lld evaluating", static_cast<long long>(s.epoch),
                static_cast<long long>(run_end(s)));
  if (expected >= done) {
    std::snprintf(tail, sizeof tail, " %lld/%lld batches", static_cast<long long>(done),
                  static_cast<long long>(expected));
    draw(head, {tail}, static_cast<double>(done) / static_cast<double>(expected));
  } else {  // the first evaluation: its length is not known yet
    std::snprintf(tail, sizeof tail, " %lld batch%s", static_cast<long long>(done), done == 1 ? "" : "es");
    out_ << "\r\033[K" << head << tail << std::flush;
  }
}

void ProgressLogger::on_epoch_end(FitState& s, const EpochRecord& r) {
  if (live_) out_ << "\r\033[K";  // clear the bar
  char head[160], test[64] = "", time[32], rate[32];
  if (!std::isnan(r.test_loss))  // NaN: fit had no validation data
    std::snprintf(test, sizeof test, "  test_loss %.4f  test_acc %.2f%%", r.test_loss, 100.0 * r.test_accuracy);
  std::snprintf(head, sizeof head, "epoch %3lld/%lld  loss %.4f  acc %.2f%%%s", static_cast<long long>(r.epoch),
                static_cast<long long>(run_end(s)), r.train_loss, 100.0 * r.train_accuracy, test);
  std::snprintf(time, sizeof time, "  %.2f s", r.train_seconds);
  std::snprintf(rate, sizeof rate, "  %.0f img/s", r.images_per_second);
  // On a terminal the line keeps a column spare (no wrap): time and rate go first.
  std::string text = head;
  for (const char* part : {time, rate})
    if (columns_ <= 0 || text.size() + std::strlen(part) < static_cast<std::size_t>(columns_)) text += part;
  out_ << text << "\n" << std::flush;
}

void ProgressLogger::on_train_end(FitState&) {
  if (live_) out_ << "\r\033[K" << std::flush;  // a bar left by a stopped epoch
}

}  // namespace convoy::train
