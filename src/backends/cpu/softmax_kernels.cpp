#include "backends/cpu/softmax_kernels.h"

#include <cmath>
#include <string>

#include "convoy/core/error.h"

namespace convoy::cpu {
namespace {

float row_logsumexp(const float* x, int64_t cols) {
  float mx = x[0];
  for (int64_t j = 1; j < cols; ++j) mx = std::max(mx, x[j]);
  float sum = 0;
  for (int64_t j = 0; j < cols; ++j) sum += std::exp(x[j] - mx);
  return mx + std::log(sum);
}

int64_t row_argmax(const float* x, int64_t cols) {
  int64_t best = 0;
  for (int64_t j = 1; j < cols; ++j)
    if (x[j] > x[best]) best = j;
  return best;
}

}  // namespace

void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const float lse = row_logsumexp(x + i * cols, cols);
    for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] - lse;
  }
}

void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* yr = y + i * cols;
    const float* dyr = dy + i * cols;
    float sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += dyr[j];
    for (int64_t j = 0; j < cols; ++j) dx[i * cols + j] = dyr[j] - std::exp(yr[j]) * sum;
  }
}

LossResult loss_forward(Loss loss, const float* out, const int32_t* labels, int64_t rows, int64_t cols,
                        float* d_out, int64_t grad_rows) {
  LossResult r;
  const float inv_n = 1.0f / static_cast<float>(grad_rows);
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t label = labels[i];
    if (label < 0 || label >= cols)
      throw UserError("label " + std::to_string(label) + " is outside [0, " + std::to_string(cols) +
                      ") for a model with " + std::to_string(cols) + " outputs; check the dataset's labels");
    const float* o = out + i * cols;
    r.correct += row_argmax(o, cols) == label;
    if (loss == Loss::nll) {
      r.loss_sum -= o[label];
      if (d_out) {
        for (int64_t j = 0; j < cols; ++j) d_out[i * cols + j] = 0;
        d_out[i * cols + label] = -inv_n;
      }
    } else {  // softmax cross-entropy from logits
      const float lse = row_logsumexp(o, cols);
      r.loss_sum += lse - o[label];
      if (d_out)
        for (int64_t j = 0; j < cols; ++j)
          d_out[i * cols + j] = (std::exp(o[j] - lse) - (j == label ? 1.0f : 0.0f)) * inv_n;
    }
  }
  return r;
}

}  // namespace convoy::cpu
