#pragma once
// The training loop: epochs of shuffled batches through an Executable, an
// evaluation pass after each, and callbacks around both.
#include <cstdint>
#include <functional>

#include "convoy/backends/executable.h"
#include "convoy/data/labeled_images.h"
#include "convoy/dist/strategy.h"
#include "convoy/train/callbacks.h"

namespace convoy::train {

struct FitOptions {
  int64_t epochs = 50;  // the last epoch to run (as Keras's `epochs`)
  uint64_t seed = 1;
  int64_t initial_epoch = 0;  // epochs already done (resuming): training starts at initial_epoch + 1
  // Batch callbacks (progress, NaN checks) run after every N steps and after
  // an epoch's last step, as Keras's steps_per_execution.
  int64_t steps_per_execution = 1;
  Callbacks callbacks;
  // Data parallelism (dist/data_parallel.h): this replica trains on its shard
  // of every epoch and evaluates its slice of `test`; metrics are summed over
  // replicas before callbacks see them, and replicas stop together. The
  // executable must be attached to it. nullptr: one replica.
  dist::Strategy* strategy = nullptr;
};

// Trains on full batches (the remainder of each shuffled epoch is dropped, as
// the seed's drop_last=True) and evaluates on all of `test` after every epoch.
// Epoch e's batch order depends only on (seed, e), so a resumed run sees the
// same batches as an uninterrupted one. `history` may hold earlier epochs.
History fit(Executable& exe, const data::LabeledImages& train, const data::LabeledImages& test,
            const FitOptions& options, History history = {});

// Inference-mode loss and accuracy over every example of `data`.
Metrics evaluate(Executable& exe, const data::LabeledImages& data);

// Runs every example of `data` in inference mode, in order, and hands each
// output row to visit(index, row) (row: output_size() floats).
void for_each_output(Executable& exe, const data::LabeledImages& data,
                     const std::function<void(int64_t, const float*)>& visit);

// Inference-mode arg-max class of every example of `data`, in order.
std::vector<int32_t> predict_classes(Executable& exe, const data::LabeledImages& data);

}  // namespace convoy::train
