#include "backends/cpu/softmax_kernels.h"

#include <cmath>
#include <string>
#include <vector>

#include "backends/targets.h"
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

// y = (x - max) - log sum exp(x - max): subtracting max + log sum as one
// number rounds it at the size of max (2.4e-4 at |x| = 1e4).
void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float mx = xr[0];
    for (int64_t j = 1; j < cols; ++j) mx = std::max(mx, xr[j]);
    float sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(xr[j] - mx);
    const float log_sum = std::log(sum);
    for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = (xr[j] - mx) - log_sum;
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

namespace {

// One row's targets after smoothing, written into t[cols].
void smoothed_targets(const Targets& targets, int64_t row, int64_t cols, float smoothing, float uniform, float* t) {
  if (targets.dense) {
    const float* d = targets.dense + row * cols;
    for (int64_t j = 0; j < cols; ++j) t[j] = d[j] * (1 - smoothing) + uniform;
    return;
  }
  const int32_t label = targets.labels[row];
  check_label(label, cols);
  for (int64_t j = 0; j < cols; ++j) t[j] = uniform;
  t[label] += 1 - smoothing;
}

// The class a row's targets name: the label, or the arg-max of a dense row.
int64_t target_class(const Targets& targets, int64_t row, int64_t cols) {
  return targets.dense ? row_argmax(targets.dense + row * cols, cols) : targets.labels[row];
}

}  // namespace

LossResult loss_forward(Loss loss, float label_smoothing, const float* out, Targets targets, int64_t rows,
                        int64_t cols, float* d_out, int64_t grad_rows) {
  check_target_kind(loss, targets);
  LossResult r;
  const float inv_n = 1.0f / static_cast<float>(grad_rows);
  const float uniform = loss == Loss::binary_cross_entropy ? label_smoothing / 2 : label_smoothing / cols;
  thread_local std::vector<float> t;  // grows once; no allocation per step after that
  t.resize(static_cast<std::size_t>(cols));
  for (int64_t i = 0; i < rows; ++i) {
    smoothed_targets(targets, i, cols, label_smoothing, uniform, t.data());
    const float* o = out + i * cols;
    float* d = d_out ? d_out + i * cols : nullptr;
    if (loss == Loss::binary_cross_entropy) {
      // Stable form: max(o, 0) - o t + log(1 + exp(-|o|)), averaged over classes.
      const float* raw = targets.dense + i * cols;
      bool all_right = true;
      double row_loss = 0;
      for (int64_t j = 0; j < cols; ++j) {
        row_loss += std::max(o[j], 0.0f) - o[j] * t[j] + std::log1p(std::exp(-std::abs(o[j])));
        all_right = all_right && ((o[j] > 0) == (raw[j] >= 0.5f));
        if (d) d[j] = (1 / (1 + std::exp(-o[j])) - t[j]) * inv_n / cols;
      }
      r.loss_sum += row_loss / cols;
      r.correct += all_right;
      continue;
    }
    r.correct += row_argmax(o, cols) == target_class(targets, i, cols);
    float t_sum = 0;
    for (int64_t j = 0; j < cols; ++j) t_sum += t[j];
    if (loss == Loss::nll) {
      for (int64_t j = 0; j < cols; ++j) r.loss_sum -= t[j] * o[j];
      if (d)
        for (int64_t j = 0; j < cols; ++j) d[j] = -t[j] * inv_n;
    } else {  // softmax cross-entropy from logits: sum_j t_j (lse - o_j)
      const float lse = row_logsumexp(o, cols);
      for (int64_t j = 0; j < cols; ++j) r.loss_sum += t[j] * (lse - o[j]);
      if (d)
        for (int64_t j = 0; j < cols; ++j) d[j] = (std::exp(o[j] - lse) * t_sum - t[j]) * inv_n;
    }
  }
  return r;
}

}  // namespace convoy::cpu
