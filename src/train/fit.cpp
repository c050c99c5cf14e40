#include "convoy/train/fit.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "convoy/core/error.h"
#include "convoy/data/dataset.h"
#include "convoy/data/transforms.h"
#include "convoy/dist/data_parallel.h"

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

double History::input_wait_fraction() const {
  double waited = 0, seconds = 0;
  for (const auto& e : epochs) {
    waited += e.input_wait_seconds;
    seconds += e.train_seconds;
  }
  return seconds > 0 ? waited / seconds : 0.0;
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

void for_each_output(Executable& exe, const data::LabeledImages& data,
                     const std::function<void(int64_t, const float*)>& visit) {
  const int64_t batch = exe.batch_size(), classes = exe.output_size();
  BatchBuffers buf(data, batch);
  std::vector<float> out(static_cast<std::size_t>(batch * classes));
  data::EpochBatches batches(data, batch, /*shuffle=*/false, /*drop_remainder=*/false, 0, 0);
  for (int64_t b = 0; b < batches.size(); ++b) {
    const int64_t count = batches.gather(b, buf.x.data(), buf.y.data());
    exe.eval_step(buf.x.data(), buf.y.data(), count);
    exe.get_output(out);
    for (int64_t i = 0; i < count; ++i) visit(b * batch + i, out.data() + i * classes);
  }
  exe.take_metrics();  // these passes are not evaluation metrics
}

std::vector<int32_t> predict_classes(Executable& exe, const data::LabeledImages& data) {
  const int64_t classes = exe.output_size();
  std::vector<int32_t> predicted;
  predicted.reserve(static_cast<std::size_t>(data.size()));
  for_each_output(exe, data, [&](int64_t, const float* row) {
    predicted.push_back(static_cast<int32_t>(std::max_element(row, row + classes) - row));
  });
  return predicted;
}

History fit(Executable& exe, const data::LabeledImages& train, const data::LabeledImages& test,
            const FitOptions& options, History history) {
  const int64_t batch = exe.batch_size();
  dist::Strategy& replicas = options.strategy ? *options.strategy : dist::single();
  const int64_t shard = dist::shard_size(train.size(), replicas);  // examples per replica and epoch
  require(options.epochs >= 1, "epochs must be at least 1, got " + std::to_string(options.epochs));
  require(options.steps_per_execution >= 1, "steps_per_execution must be at least 1");
  require(shard >= batch, "batch size " + std::to_string(batch) + " exceeds the " + std::to_string(shard) +
                              " training examples per replica; use a smaller --batch-size");
  // Each epoch a fresh full shuffle fixed by (seed, epoch), full batches only
  // (the seed's drop_last=True), gathered on prefetch's background thread
  // while the step runs. Positions are shuffled and batched before the images
  // are looked up: a small shuffle buffer, one copy per batch.
  const data::Dataset batches = dist::shard(data::Dataset::range(train.size()).shuffle(train.size(), options.seed),
                                            train.size(), replicas)
                                    .batch(batch, /*drop_remainder=*/true)
                                    .map(data::rows_of(train))
                                    .prefetch(2);
  std::unique_ptr<data::Iterator> next_epoch = batches.iterate(options.initial_epoch + 1);
  FitState state{.exe = exe, .history = history, .epoch = options.initial_epoch, .epochs = options.epochs,
                 .steps_per_epoch = shard / batch, .batch_size = batch};
  const dist::EvalShard test_shard(test, replicas);
  const auto fit_start = Clock::now();
  const double seconds_before = history.total_train_seconds;
  for (auto& cb : options.callbacks) cb->on_train_begin(state);
  for (int64_t epoch = options.initial_epoch + 1; epoch <= options.epochs && !state.stop_training; ++epoch) {
    state.epoch = epoch;
    for (auto& cb : options.callbacks) cb->on_epoch_begin(state);
    const auto start = Clock::now();
    std::unique_ptr<data::Iterator> batches_of_epoch = std::move(next_epoch);
    double input_wait = 0;  // time the step loop spent waiting for a batch
    exe.take_metrics();
    for (int64_t b = 0; !state.stop_training; ++b) {
      const auto asked = Clock::now();
      std::optional<data::Example> xy = batches_of_epoch->next();
      input_wait += seconds_since(asked);
      if (!xy) break;
      exe.train_step(xy->tensor("image").data<float>().data(), xy->tensor("label").data<int32_t>().data());
      const bool boundary = (b + 1) % options.steps_per_execution == 0 || b + 1 == state.steps_per_epoch;
      // Replicas (whose callbacks differ: only rank 0's write) see the same
      // sums and stop at the same step.
      if (boundary && (!options.callbacks.empty() || replicas.world_size() > 1)) {
        const Metrics running = dist::sum(replicas, exe.peek_metrics());
        for (auto& cb : options.callbacks) cb->on_batch_end(state, b + 1, running);
        state.stop_training = dist::any(replicas, state.stop_training);
      }
    }
    batches_of_epoch.reset();  // stops its thread if the epoch was cut short
    // The next epoch's shuffle buffer fills during this epoch's evaluation.
    if (epoch < options.epochs && !state.stop_training) next_epoch = batches.iterate(epoch + 1);
    const Metrics train_metrics = dist::sum(replicas, exe.take_metrics());
    EpochRecord rec;
    rec.epoch = epoch;
    rec.lr = exe.learning_rate();
    rec.train_seconds = seconds_since(start);
    rec.input_wait_seconds = input_wait;
    rec.train_loss = train_metrics.mean_loss();
    rec.train_accuracy = train_metrics.accuracy();
    rec.images_per_second = static_cast<double>(train_metrics.count) / rec.train_seconds;
    history.images_trained += train_metrics.count;
    dist::average_state(replicas, exe);  // one model to evaluate and save
    const Metrics test_metrics = dist::sum(replicas, evaluate(exe, test_shard.data()));
    rec.test_loss = test_metrics.mean_loss();
    rec.test_accuracy = test_metrics.accuracy();
    history.epochs.push_back(rec);
    history.total_train_seconds = seconds_before + seconds_since(fit_start);
    for (auto& cb : options.callbacks) cb->on_epoch_end(state, rec);
    state.stop_training = dist::any(replicas, state.stop_training);
  }
  history.total_train_seconds = seconds_before + seconds_since(fit_start);
  for (auto& cb : options.callbacks) cb->on_train_end(state);
  return history;
}

}  // namespace convoy::train
