#pragma once
// Whole-step StableHLO modules of a model: the training step (forward, loss,
// backward, numerical guard, optimizer update, metric sums), the gradients
// alone, and evaluation. The host-side runtime (pjrt_executable.cpp) only
// moves arrays in and out in the orders listed here.
//
// Targets always arrive as dense rows [batch, classes] (class indices become
// one-hot rows on the host: the same targets after smoothing, bit for bit).
// Stats are f32[3]: the batch's loss sum, its correct count, and 1 when the
// step was finite (0: the guard kept every buffer as it was).
//
// Replicas (data parallelism inside the program, num_replicas = R): every
// module runs on R devices at once, each on its own `batch` rows with its own
// copy of the buffers. Gradients are averaged with a cross-replica all-reduce
// before the guard and the update, stats are summed over replicas, so every
// replica computes the same update and the copies stay identical. Batch-norm
// statistics are each replica's own batch's (as on TPUs), or with
// sync_batch_norm every replica's (one replica on the R-times batch); the
// running statistics are averaged over replicas every step (the same values
// as averaging each replica's at the end: their update is linear), so one
// model comes out of any replica.
#include <string>

#include "convoy/backends/executable.h"

namespace convoy::pjrt {

struct StepOptions {
  int64_t batch = 0;
  Loss loss = Loss::nll;
  float label_smoothing = 0;
  optim::OptimizerOptions optimizer;  // lr is an argument of the step, not a constant
  int64_t steps = 1;                  // training batches per call (steps_per_execution)
  int64_t replicas = 1;               // copies of the program (num_replicas); batch is each one's
  bool sync_batch_norm = false;       // batch statistics over all replicas' batches
};

// Empty when these modules can be emitted for model and options; else one
// line saying what is missing.
std::string pjrt_unsupported(const nn::Model& model, const CompileOptions& options);

// The flat buffers' lengths on the device (never 0: XLA arrays of length 0
// cannot be donated everywhere, so an empty buffer is one unused float).
int64_t device_length(int64_t floats);

// Training: arguments (params f32[P], optimizer state f32[S], state f32[Q]
// — all three donated and returned updated — x [batch, input...], targets
// f32[batch, classes], lr f32[], then one mask [batch, shape...] per dropout
// layer). Results: params, optimizer state, state, stats f32[3], gradients
// f32[P] and output [batch, classes].
// With steps > 1 (steps_per_execution) the batch arguments are stacked,
// [steps, batch, ...], the program loops over them on the device and stats
// are f32[steps, 3]; it stops after the first step that was not finite
// (later rows stay zero), and gradients and output are the last step's.
std::string emit_train_module(const nn::Model& model, const StepOptions& options);

// Gradients in training mode without update: arguments params, state,
// x [batch, input...], targets, masks [batch, shape...]; results: state
// (the running statistics this forward pass moved), stats f32[3], gradients
// f32[P], output.
std::string emit_gradients_module(const nn::Model& model, const StepOptions& options);

// Inference: arguments params, state, x, targets, count (i32[]: rows past it
// are padding; with replicas, each replica's count of its own rows);
// results: stats f32[3] over the first count rows (of every replica), output.
std::string emit_eval_module(const nn::Model& model, const StepOptions& options);

}  // namespace convoy::pjrt
