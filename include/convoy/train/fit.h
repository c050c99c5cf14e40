#pragma once
// The training loop: epochs of shuffled batches through an Executable, an
// evaluation pass after each, and a line per epoch.
#include <cstdint>
#include <ostream>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/data/labeled_images.h"

namespace convoy::train {

struct FitOptions {
  int64_t epochs = 50;
  uint64_t seed = 1;
  std::ostream* log = nullptr;  // per-epoch lines; null for silence
};

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  double test_loss = 0, test_accuracy = 0;
  double train_seconds = 0;  // the training pass alone (no evaluation)
  double images_per_second = 0;
};

struct History {
  std::vector<EpochRecord> epochs;
  double total_train_seconds = 0;  // the whole fit: training and evaluation passes
  int64_t images_trained = 0;
  double images_per_second() const;  // over the training passes
};

// Trains on full batches (the remainder of each shuffled epoch is dropped, as
// the seed's drop_last=True) and evaluates on all of `test` after every epoch.
History fit(Executable& exe, const data::LabeledImages& train, const data::LabeledImages& test,
            const FitOptions& options);

// Inference-mode loss and accuracy over every example of `data`.
Metrics evaluate(Executable& exe, const data::LabeledImages& data);

}  // namespace convoy::train
