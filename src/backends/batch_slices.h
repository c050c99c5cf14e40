#pragma once
// Batch slices: training on several CPU threads without a barrier after
// every op. The batch of B examples is cut into K slices of B / K, one per
// thread; each slice is a Program (program.h) of its own, compiled for B / K
// with single-threaded ops, holding its own activations and a copy of the
// weights and optimizer state. A step runs every slice through forward,
// loss and backward at once; the slices meet only where the whole batch
// matters (slice_group.h): batch norm's per-channel sums (so it normalises
// over the whole batch) and, once per step, the gradients, averaged in slice
// order, after which every slice applies the same update to its copy (the
// copies stay equal bit for bit). Dropout draws what the whole batch would
// (BatchSlice). Metrics are summed over the slices, in slice order, per step.
//
// What is bit-identical to what: a rerun with the same slice count (the same
// model, batch and thread count: the rule below is fixed) repeats every bit;
// the slices' sums are in a different order from one op over the whole batch,
// so per_op and batch_slices agree to rounding (~1e-6 relative), not in bits.
// The count is recorded in summary.json (batch_slices) and follows from the
// config the checkpoints keep plus the thread count.
#include <cstdint>
#include <functional>
#include <memory>

#include "backends/device.h"
#include "convoy/backends/executable.h"

namespace convoy {

// How many slices compile_cpu cuts each batch into for `threads` threads
// (1: one Program whose ops use all threads). Parallelism::automatic slices
// when threads > 1, a slice count K >= 2 divides the batch with at least
// kMinSliceRows rows per slice, and no layer's work per step and slice is
// above kMaxLayerFlopsPerThread; batch_slices needs only the divisor.
int64_t choose_batch_slices(const nn::Model& model, const CompileOptions& options, int threads);

// The slices as one Executable. make_device gives each slice its device.
std::unique_ptr<Executable> make_batch_slices(const nn::Model& model, const CompileOptions& options, uint64_t seed,
                                              int64_t slices,
                                              const std::function<std::unique_ptr<Device>()>& make_device);

}  // namespace convoy
