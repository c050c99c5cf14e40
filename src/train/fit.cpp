#include "convoy/train/fit.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <thread>

#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "convoy/data/dataset.h"
#include "convoy/data/index_batches.h"
#include "convoy/data/transforms.h"
#include "convoy/dist/data_parallel.h"

namespace convoy::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One inference batch on the executable: a short last batch is padded into
// batch-sized staging buffers (inference is per-example, padding ignored).
class EvalFeeder {
 public:
  explicit EvalFeeder(Executable& exe) : exe_(exe) {}
  // Runs the batch; returns how many examples it held.
  int64_t run(const data::Example& batch) {
    const Tensor& x = batch.tensor("image");
    const Tensor& y = batch.tensor("label");
    const int64_t count = x.dim(0), full = exe_.compiled_for().batch_size;
    require(count <= full, "evaluation batch of " + std::to_string(count) + " exceeds the batch size");
    if (count == full) {
      exe_.eval_step(x.data<float>().data(), targets_of(y), count);
      return count;
    }
    const int64_t per_x = x.numel() / std::max<int64_t>(count, 1), per_y = y.numel() / std::max<int64_t>(count, 1);
    x_.assign(static_cast<std::size_t>(full * per_x), 0.0f);
    std::copy_n(x.data<float>().data(), count * per_x, x_.begin());
    if (y.dtype() == DType::i32) {
      labels_.assign(static_cast<std::size_t>(full * per_y), 0);
      std::copy_n(y.data<int32_t>().data(), count * per_y, labels_.begin());
      exe_.eval_step(x_.data(), labels_.data(), count);
    } else {
      rows_.assign(static_cast<std::size_t>(full * per_y), 0.0f);
      std::copy_n(y.data<float>().data(), count * per_y, rows_.begin());
      exe_.eval_step(x_.data(), Targets::rows(rows_.data()), count);
    }
    return count;
  }

 private:
  Executable& exe_;
  std::vector<float> x_, rows_;
  std::vector<int32_t> labels_;
};

// The batches of one execution, as Executable::train_steps takes them: one
// batch is used where it lies; several are copied side by side into vectors
// that keep their capacity across executions (no allocation after the first).
struct Execution {
  std::optional<data::Example> first;
  std::vector<float> x, rows;
  std::vector<int32_t> labels;
  int64_t n = 0;
  void clear() {
    first.reset();
    x.clear();
    rows.clear();
    labels.clear();
    n = 0;
  }
  void add(data::Example batch) {
    if (n++ == 0) {
      first = std::move(batch);
      return;
    }
    if (n == 2) append(*first);
    append(batch);
  }
  // Runs batches [from, n): returns how many steps ran, ending early after
  // a step that was not finite (Executable::train_steps).
  int64_t run(Executable& exe, int64_t from) {
    if (n == 1) {
      exe.train_step(first->tensor("image").data<float>().data(), targets_of(first->tensor("label")));
      return 1;
    }
    const CompiledFor& c = exe.compiled_for();
    const int64_t batch = c.batch_size;
    const Targets y = labels.empty() ? Targets::rows(rows.data() + from * batch * c.output_size)
                                     : Targets(labels.data() + from * batch);
    return exe.train_steps(x.data() + from * batch * c.input_size, y, n - from);
  }

 private:
  void append(const data::Example& batch) {
    const auto images = batch.tensor("image").data<float>();
    x.insert(x.end(), images.begin(), images.end());
    const Tensor& y = batch.tensor("label");
    if (y.dtype() == DType::i32) {
      const auto l = y.data<int32_t>();
      labels.insert(labels.end(), l.begin(), l.end());
    } else {
      const auto r = y.data<float>();
      rows.insert(rows.end(), r.begin(), r.end());
    }
  }
};

}  // namespace

const EpochRecord& History::kept() const {
  for (const auto& e : epochs)
    if (e.epoch == weights_epoch) return e;
  return epochs.back();
}

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

Targets targets_of(const Tensor& label) {
  if (label.dtype() == DType::i32) return Targets(label.data<int32_t>().data());
  require(label.dtype() == DType::f32, "label: expected class indices (i32) or target rows (f32)");
  return Targets::rows(label.data<float>().data());
}

data::Dataset in_order(const data::LabeledImages& data, int64_t batch_size) {
  return data::Dataset::range(data.size()).batch(batch_size).map(data::rows_of(data));
}

TrainingData in_memory(const data::LabeledImages& train, const data::LabeledImages& test, int64_t batch_size,
                       uint64_t seed, dist::Strategy* strategy, bool steps_on_host) {
  dist::Strategy& replicas = strategy ? *strategy : dist::single();
  const int64_t shard = dist::shard_size(train.size(), replicas);  // examples per replica and epoch
  require(shard >= batch_size, "batch size " + std::to_string(batch_size) + " exceeds the " + std::to_string(shard) +
                                   " training examples" + (replicas.world_size() > 1 ? " per replica" : "") +
                                   "; use a smaller --batch-size");
  // Each epoch a fresh full shuffle fixed by (seed, epoch), full batches only
  // (the seed's drop_last=True). Positions are shuffled and batched before the images
  // are looked up, a batch at a time (data/index_batches.h): one small vector
  // per epoch, one copy per batch, and resuming mid-epoch skips batches of
  // positions, never gathering their images. With several replicas each
  // takes its shard of the same shuffled order (dist::shard's: the first
  // shard x world positions, every world-th from its rank) and its slice of
  // the validation set (dist/data_parallel.h).
  const int64_t world = replicas.world_size(), rank = replicas.rank();
  const data::Dataset position_batches = data::index_batches(
      [n = train.size(), seed, world, rank, shard](int64_t epoch) {
        std::vector<int32_t> all = data::shuffled_positions(n, seed, epoch);
        if (world == 1) return all;
        std::vector<int32_t> mine(static_cast<std::size_t>(shard));
        for (int64_t i = 0; i < shard; ++i) mine[static_cast<std::size_t>(i)] = all[static_cast<std::size_t>(i * world + rank)];
        return mine;
      },
      batch_size, /*drop_remainder=*/true);
  // Where the gather runs is chosen when an epoch opens, by the thread count
  // fit's thread has then (the same batches either way, so the same bits):
  // with a core to spare (or steps on a GPU), on prefetch's thread; when the
  // training threads take every core, on those threads between steps. A
  // producer thread there preempts one training thread per batch, and with
  // batch slices the other spins at the next rendezvous until it is back
  // (docs/benchmarks.md).
  return {.open_train =
              [position_batches, rows = data::rows_of(train), rows_on_threads = data::rows_of_on_threads(train),
               steps_on_host](int64_t epoch, int64_t skip_steps) {
                const data::Dataset positions = skip_steps > 0 ? position_batches.skip(skip_steps) : position_batches;
                if (steps_on_host && num_threads() >= hardware_threads())
                  return positions.map(rows_on_threads).iterate(epoch);
                return positions.map(rows).prefetch(2).iterate(epoch);
              },
          .steps_per_epoch = shard / batch_size,
          .validation = in_order(dist::EvalShard(test, replicas).data(), batch_size)};
}

TrainingData TrainingData::from_batches(data::Dataset train, int64_t steps_per_epoch, data::Dataset validation) {
  return {.open_train =
              [train](int64_t epoch, int64_t skip_steps) {
                return (skip_steps > 0 ? train.skip(skip_steps) : train).iterate(epoch);
              },
          .steps_per_epoch = steps_per_epoch,
          .validation = std::move(validation)};
}

Metrics evaluate(Executable& exe, const data::Dataset& batches, const std::function<void(int64_t)>& after_batch) {
  exe.metrics(Metrics::reset);  // start from zero
  EvalFeeder feed(exe);
  int64_t done = 0;
  for (data::Example& batch : batches.epoch(0)) {
    feed.run(batch);
    if (after_batch) after_batch(++done);
  }
  return exe.metrics(Metrics::reset);
}

Metrics evaluate(Executable& exe, const data::LabeledImages& data) {
  return evaluate(exe, in_order(data, exe.compiled_for().batch_size));
}

void for_each_output(Executable& exe, const data::Dataset& batches,
                     const std::function<void(int64_t, const float*)>& visit) {
  const int64_t classes = exe.compiled_for().output_size;
  std::vector<float> out(static_cast<std::size_t>(exe.compiled_for().batch_size * classes));
  EvalFeeder feed(exe);
  int64_t index = 0;
  for (data::Example& batch : batches.epoch(0)) {
    const int64_t count = feed.run(batch);
    exe.internals().read(Held::output, out);
    for (int64_t i = 0; i < count; ++i) visit(index++, out.data() + i * classes);
  }
  exe.metrics(Metrics::reset);  // these passes are not evaluation metrics
}

void for_each_output(Executable& exe, const data::LabeledImages& data,
                     const std::function<void(int64_t, const float*)>& visit) {
  for_each_output(exe, in_order(data, exe.compiled_for().batch_size), visit);
}

std::vector<int32_t> predict_classes(Executable& exe, const data::LabeledImages& data) {
  const int64_t classes = exe.compiled_for().output_size;
  std::vector<int32_t> predicted;
  predicted.reserve(static_cast<std::size_t>(data.size()));
  for_each_output(exe, data, [&](int64_t, const float* row) {
    predicted.push_back(static_cast<int32_t>(std::max_element(row, row + classes) - row));
  });
  return predicted;
}

History fit(Executable& exe, const data::LabeledImages& train, const data::LabeledImages& test,
            const FitOptions& options, History history) {
  const CompiledFor& compiled = exe.compiled_for();
  return fit(exe, in_memory(train, test, compiled.batch_size, options.seed, options.strategy, compiled.device == "cpu"),
             options, std::move(history));
}

History fit(Executable& exe, const TrainingData& data, const FitOptions& options, History history) {
  const int64_t batch = exe.compiled_for().batch_size;
  require(options.epochs >= 1, "epochs must be at least 1, got " + std::to_string(options.epochs));
  require(options.steps_per_execution >= 1, "steps_per_execution must be at least 1");
  require(data.steps_per_epoch >= 1, "no full batch of " + std::to_string(batch) +
                                         " training examples; use a smaller --batch-size");
  dist::Strategy& replicas = options.strategy ? *options.strategy : dist::single();
  const EpochProgress& resumed = options.initial_progress;
  require(resumed.step >= 0 && resumed.step <= data.steps_per_epoch,
          "resuming at step " + std::to_string(resumed.step) + " of an epoch of " +
              std::to_string(data.steps_per_epoch) + " steps; the checkpoint does not belong to this data");
  auto open_epoch = [&](int64_t epoch, int64_t skip_steps) { return data.open_train(epoch, skip_steps); };
  // Updates applied before this fit (skipped non-finite steps applied none).
  if (options.initial_epoch > 0 || resumed.step > 0)
    exe.internals().set_steps_done(options.initial_epoch * data.steps_per_epoch + resumed.step - history.skipped_steps);
  std::unique_ptr<data::Iterator> next_epoch = open_epoch(options.initial_epoch + 1, resumed.step);
  FitState state{.exe = exe, .history = history, .epoch = options.initial_epoch, .epochs = options.epochs,
                 .run_epochs = std::max(options.epochs, options.run_epochs),
                 .steps_per_epoch = data.steps_per_epoch, .batch_size = batch};
  state.warnings = options.warnings;
  // Batches per train_steps call: what the backend takes at once (a GPU
  // replays a CUDA graph of that many steps; the CPU takes one).
  const int64_t together =
      std::max<int64_t>(1, std::min(options.steps_per_execution, exe.compiled_for().steps_per_call));
  Execution execution;
  DivergenceWatch divergence;
  const auto fit_start = Clock::now();
  const double seconds_before = history.total_train_seconds;
  for (auto& cb : options.callbacks) cb->on_train_begin(state);
  for (int64_t epoch = options.initial_epoch + 1; epoch <= options.epochs && !state.stop_training; ++epoch) {
    state.epoch = epoch;
    for (auto& cb : options.callbacks) cb->on_epoch_begin(state);
    const auto start = Clock::now();
    std::unique_ptr<data::Iterator> batches_of_epoch = std::move(next_epoch);
    // A resumed epoch continues its saved step count, sums and times.
    const bool resuming = epoch == options.initial_epoch + 1 && resumed.step > 0;
    const EpochProgress carried = resuming ? resumed : EpochProgress{};
    state.step = carried.step;
    double input_wait = carried.input_wait_seconds;  // time the step loop spent waiting for a batch
    exe.metrics(Metrics::reset);
    if (resuming) exe.internals().restore_metrics(carried.metrics);
    divergence.restart(exe.metrics(Metrics::keep_running));
    // One execution per iteration: up to `together` batches in one
    // train_steps call (on a GPU, one CUDA graph); the CPU takes them one by
    // one. Step callbacks and the numerical guard run after each call, batch
    // callbacks every steps_per_execution steps and after each execution.
    bool exhausted = false;
    while (!state.stop_training && !exhausted) {
      execution.clear();
      while (execution.n < together) {
        const auto asked = Clock::now();
        std::optional<data::Example> xy = batches_of_epoch->next();
        input_wait += seconds_since(asked);
        if (!xy) {
          exhausted = true;
          break;
        }
        execution.add(std::move(*xy));
      }
      for (int64_t done = 0; done < execution.n;) {
        const int64_t ran = execution.run(exe, done);
        done += ran;
        state.step += ran;
        state.epoch_train_seconds = carried.train_seconds + seconds_since(start);
        state.epoch_input_wait_seconds = input_wait;
        if (!exe.last_step_finite() && !handle_nonfinite_step(state, options.on_nan, history)) {
          state.interrupted = true;  // the weights stay those of the last good step
          break;
        }
        if (divergence.diverged(exe.metrics(Metrics::keep_running))) {
          record_divergence(state, divergence, history);
          state.interrupted = true;
          break;
        }
        for (auto& cb : options.callbacks) cb->on_step_end(state);
        if (state.interrupted) break;
        const bool boundary = state.step % options.steps_per_execution == 0 ||
                              state.step == state.steps_per_epoch || (together > 1 && done == execution.n);
        // Replicas (whose callbacks differ: only rank 0's write) see the same
        // sums and stop at the same step.
        if (boundary && (!options.callbacks.empty() || replicas.world_size() > 1)) {
          const Metrics running = dist::sum(replicas, exe.metrics(Metrics::keep_running));
          for (auto& cb : options.callbacks) cb->on_batch_end(state, state.step, running);
          state.stop_training = dist::any(replicas, state.stop_training);
        }
        if (state.stop_training) break;
      }
      if (state.interrupted) break;
    }
    batches_of_epoch.reset();  // stops its thread if the epoch was cut short
    if (state.interrupted) {  // the epoch stays unfinished; a checkpoint has its position
      history.interrupted = !history.fault;
      break;
    }
    // The next epoch's shuffle buffer fills during this epoch's evaluation.
    if (epoch < options.epochs && !state.stop_training) next_epoch = open_epoch(epoch + 1, 0);
    const Metrics train_metrics = dist::sum(replicas, exe.metrics(Metrics::reset));
    EpochRecord rec;
    rec.epoch = epoch;
    rec.lr = exe.learning_rate();
    rec.train_seconds = carried.train_seconds + seconds_since(start);
    rec.input_wait_seconds = input_wait;
    rec.train_loss = train_metrics.mean_loss();
    rec.train_accuracy = train_metrics.accuracy();
    rec.images_per_second = static_cast<double>(train_metrics.count) / rec.train_seconds;
    history.images_trained += train_metrics.count;
    dist::average_state(replicas, exe);  // one model to evaluate and save
    const Metrics test_metrics = dist::sum(replicas, evaluate(exe, data.validation, [&](int64_t done) {
                                             for (auto& cb : options.callbacks) cb->on_evaluate_batch(state, done);
                                           }));
    // No validation examples: no validation figures (NaN, not a fake 0).
    const double none = std::numeric_limits<double>::quiet_NaN();
    rec.test_loss = test_metrics.count ? test_metrics.mean_loss() : none;
    rec.test_accuracy = test_metrics.count ? test_metrics.accuracy() : none;
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
