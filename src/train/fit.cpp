#include "convoy/train/fit.h"

#include <chrono>
#include <cstdio>

#include "convoy/core/error.h"

namespace convoy::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Batch-sized staging buffers: allocated once per call, reused every step.
struct BatchBuffers {
  BatchBuffers(const data::LabeledImages& d, int64_t batch)
      : x(static_cast<std::size_t>(batch * numel(d.example_shape()))), y(static_cast<std::size_t>(batch)) {}
  std::vector<float> x;
  std::vector<int32_t> y;
};

}  // namespace

double History::images_per_second() const {
  double seconds = 0;
  for (const auto& e : epochs) seconds += e.train_seconds;
  return seconds > 0 ? static_cast<double>(images_trained) / seconds : 0.0;
}

Metrics evaluate(Executable& exe, const data::LabeledImages& data) {
  exe.take_metrics();  // start from zero
  BatchBuffers buf(data, exe.batch_size());
  data::EpochBatches batches(data, exe.batch_size(), /*shuffle=*/false, /*drop_remainder=*/false, 0, 0);
  for (int64_t b = 0; b < batches.size(); ++b) {
    const int64_t count = batches.gather(b, buf.x.data(), buf.y.data());
    exe.eval_step(buf.x.data(), buf.y.data(), count);
  }
  return exe.take_metrics();
}

History fit(Executable& exe, const data::LabeledImages& train, const data::LabeledImages& test,
            const FitOptions& options) {
  const int64_t batch = exe.batch_size();
  require(options.epochs >= 1, "epochs must be at least 1, got " + std::to_string(options.epochs));
  require(train.size() >= batch, "batch size " + std::to_string(batch) + " exceeds the " +
                                     std::to_string(train.size()) + " training examples; use a smaller --batch-size");
  History history;
  BatchBuffers buf(train, batch);
  const auto fit_start = Clock::now();
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    const auto start = Clock::now();
    data::EpochBatches batches(train, batch, /*shuffle=*/true, /*drop_remainder=*/true, options.seed, epoch);
    exe.take_metrics();
    for (int64_t b = 0; b < batches.size(); ++b) {
      batches.gather(b, buf.x.data(), buf.y.data());
      exe.train_step(buf.x.data(), buf.y.data());
    }
    const Metrics train_metrics = exe.take_metrics();
    EpochRecord rec;
    rec.epoch = epoch;
    rec.train_seconds = seconds_since(start);
    rec.train_loss = train_metrics.mean_loss();
    rec.train_accuracy = train_metrics.accuracy();
    rec.images_per_second = static_cast<double>(train_metrics.count) / rec.train_seconds;
    history.images_trained += train_metrics.count;
    const Metrics test_metrics = evaluate(exe, test);
    rec.test_loss = test_metrics.mean_loss();
    rec.test_accuracy = test_metrics.accuracy();
    history.epochs.push_back(rec);
    if (options.log) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "epoch %3lld/%lld  train_loss %.4f  test_loss %.4f  test_acc %6.2f%%  %6.2f s  %8.0f img/s\n",
                    static_cast<long long>(epoch), static_cast<long long>(options.epochs), rec.train_loss,
                    rec.test_loss, 100.0 * rec.test_accuracy, rec.train_seconds, rec.images_per_second);
      *options.log << line << std::flush;
    }
  }
  history.total_train_seconds = seconds_since(fit_start);
  return history;
}

}  // namespace convoy::train
