#pragma once
// The training loop: epochs of shuffled batches through an Executable, an
// evaluation pass after each, and callbacks around both.
#include <cstdint>
#include <functional>

#include "convoy/backends/executable.h"
#include "convoy/data/dataset.h"
#include "convoy/data/labeled_images.h"
#include "convoy/dist/strategy.h"
#include "convoy/train/callbacks.h"
#include "convoy/train/numerical_guard.h"

namespace convoy::train {

struct FitOptions {
  int64_t epochs = 50;  // the last epoch to run (as Keras's `epochs`)
  uint64_t seed = 1;
  int64_t initial_epoch = 0;  // epochs already done (resuming): training starts at initial_epoch + 1
  // The run's last epoch, when this fit is one part of it (transfer
  // learning's frozen and fine-tune phases): what progress counts against,
  // "Epoch 4/10" rather than the phase's own end. 0: `epochs`.
  int64_t run_epochs = 0;
  // Resuming mid-epoch: the steps of epoch initial_epoch + 1 already done and
  // their running sums (from a checkpoint). Those batches are skipped at the
  // index level: none of their images is gathered.
  EpochProgress initial_progress;
  // A step whose loss or gradients hold NaN or Inf is never applied; then
  // either the fit ends there (history.fault) or the step is counted and
  // skipped (history.skipped_steps).
  OnNonFinite on_nan = OnNonFinite::stop;
  // As Keras's steps_per_execution: N batches per Executable::train_steps
  // call (on a GPU, one CUDA graph; the executable must be compiled for at
  // least N); batch callbacks (progress, NaN checks) run after each execution
  // and after an epoch's last step.
  int64_t steps_per_execution = 1;
  Callbacks callbacks;
  // Warnings from the loop and the callbacks, one line each (FitState::warnings);
  // nullptr: nowhere. The library prints nothing of its own.
  std::ostream* warnings = nullptr;
  // Data parallelism (dist/data_parallel.h): this replica trains on its shard
  // of every epoch and evaluates its slice of `test`; metrics are summed over
  // replicas before callbacks see them, and replicas stop together. The
  // executable must be attached to it. nullptr: one replica.
  dist::Strategy* strategy = nullptr;
};

// What fit trains and validates on, as pipelines of batches: each batch has
// `image` f32 [B, ...] and `label`, class indices i32 [B] or target rows
// f32 [B, classes] (one-hot, soft or multi-hot).
struct TrainingData {
  // Opens epoch e's training batches after skipping the first `skip_steps`
  // (resuming mid-epoch): full batches of the executable's batch size,
  // steps_per_epoch of them, in an order that depends only on (seed, e), so
  // a resumed run sees the same batches as an uninterrupted one.
  std::function<std::unique_ptr<data::Iterator>(int64_t epoch, int64_t skip_steps)> open_train;
  int64_t steps_per_epoch = 0;
  // The validation data in order, batches of at most the batch size.
  data::Dataset validation;

  // From a pipeline whose iterate(e) gives epoch e's batches (skipping runs
  // the skipped batches' work; in_memory skips positions instead).
  static TrainingData from_batches(data::Dataset train, int64_t steps_per_epoch, data::Dataset validation);
};

// In-memory images: each epoch a fresh shuffle of `train` fixed by (seed,
// epoch) cut into full batches (the remainder dropped, as the seed's
// drop_last=True), gathered on a background thread while the step runs or,
// when the steps run on the host's cores (steps_on_host) and their threads
// take every core, by those threads between steps (the same batches);
// `test` in order as validation.
// With a strategy of several replicas, this replica's shard of each epoch
// and its slice of `test` (dist/data_parallel.h).
TrainingData in_memory(const data::LabeledImages& train, const data::LabeledImages& test, int64_t batch_size,
                       uint64_t seed, dist::Strategy* strategy = nullptr, bool steps_on_host = true);
// `data` in order, batches of at most `batch_size` (for evaluation).
data::Dataset in_order(const data::LabeledImages& data, int64_t batch_size);

// Trains for options.epochs and evaluates on all of the validation data
// after every epoch. `history` may hold earlier epochs. A callback that sets
// FitState::interrupted ends the fit after that step, leaving the epoch
// unfinished (no evaluation, no epoch-end callbacks).
History fit(Executable& exe, const TrainingData& data, const FitOptions& options, History history = {});
History fit(Executable& exe, const data::LabeledImages& train, const data::LabeledImages& test,
            const FitOptions& options, History history = {});

// Inference-mode loss and accuracy over every example of the batches.
// after_batch, when set, is called after each batch with the count so far.
Metrics evaluate(Executable& exe, const data::Dataset& batches,
                 const std::function<void(int64_t batches_done)>& after_batch = {});
Metrics evaluate(Executable& exe, const data::LabeledImages& data);

// Runs every example in inference mode, in order, and hands each output row
// to visit(index, row) (row: compiled_for().output_size floats).
void for_each_output(Executable& exe, const data::Dataset& batches,
                     const std::function<void(int64_t, const float*)>& visit);
void for_each_output(Executable& exe, const data::LabeledImages& data,
                     const std::function<void(int64_t, const float*)>& visit);

// The targets of a batch's `label` tensor: class indices (i32) or rows (f32).
Targets targets_of(const Tensor& label);

// Inference-mode arg-max class of every example of `data`, in order.
std::vector<int32_t> predict_classes(Executable& exe, const data::LabeledImages& data);

}  // namespace convoy::train
