#pragma once
// Row-wise softmax-family kernels over [rows, cols] in plain layout, and the
// losses on the model's output. Small (rows = batch, cols = classes), so plain
// loops that the compiler vectorises beat a primitive call.
#include <cstdint>

#include "convoy/backends/executable.h"

namespace convoy::cpu {

// y = x - logsumexp(x) per row.
void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols);
// dx = dy - softmax(x) * sum(dy) per row, with softmax(x) = exp(y).
void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols);

struct LossResult {
  double loss_sum = 0;  // sum over rows of the per-example loss
  int64_t correct = 0;  // rows whose arg-max equals the label
};

// Loss of the model's output against the targets (class indices or dense
// rows), after label smoothing. When d_out is not null it receives
// d(mean loss)/d(out) over `grad_rows` rows (the batch the mean is taken
// over). Throws UserError for a class index outside [0, cols) and for binary
// cross-entropy without dense targets.
LossResult loss_forward(Loss loss, float label_smoothing, const float* out, Targets targets, int64_t rows,
                        int64_t cols, float* d_out, int64_t grad_rows);

}  // namespace convoy::cpu
