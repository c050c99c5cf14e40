// The loss and the optimizer update: see stablehlo_kernels.h.
#include "backends/pjrt/stablehlo_kernels.h"

#include <cmath>

namespace convoy::pjrt {
namespace {

// The first index of each row's maximum, as i32 [rows] (row_argmax's ties).
Val row_argmax(HloBuilder& b, const Val& x) {
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const Val mx = b.broadcast(b.reduce(x, "maximum", -INFINITY, {1}), x.shape, {0});
  const Val index = b.iota(x.shape, 1);
  const Val at_max = b.select(b.compare(x, mx, "EQ"), index, b.constant(static_cast<double>(cols), x.shape, "i32"));
  (void)rows;
  return b.reduce(at_max, "minimum", static_cast<double>(cols), {1});
}

}  // namespace

LossOut emit_loss(HloBuilder& b, Loss loss, float smoothing, const Val& out, const Val& raw,
                  const std::optional<Val>& valid, bool gradient) {
  const Shape& s = out.shape;
  const int64_t rows = s[0], cols = s[1];
  const double uniform = loss == Loss::binary_cross_entropy ? smoothing / 2.0f : smoothing / static_cast<float>(cols);
  Val t = raw;
  if (smoothing != 0)
    t = b.add(b.mul(raw, b.constant(1.0f - smoothing, s)), b.constant(static_cast<float>(uniform), s));
  const Val inv_n = b.constant(1.0f / static_cast<float>(rows), s);
  auto masked_sum = [&](const Val& per_row) {
    return b.sum(valid ? b.mul(per_row, *valid) : per_row, {0});
  };
  LossOut r;
  if (loss == Loss::binary_cross_entropy) {
    const Val zero = b.constant(0, s);
    const Val elem = b.add(b.sub(b.max(out, zero), b.mul(out, t)),
                           b.unary("log_plus_one", b.unary("exponential", b.unary("negate", b.unary("abs", out)))));
    const Val row = b.div(b.sum(elem, {1}), b.constant(static_cast<double>(cols), {rows}));
    r.loss_sum = masked_sum(row);
    const Val right = b.compare(b.compare(out, zero, "GT"), b.compare(raw, b.constant(0.5, s), "GE"), "EQ");
    const Val all_right = b.convert(b.reduce(b.convert(right, "i32"), "minimum", 1, {1}), "f32");
    r.correct = masked_sum(all_right);
    if (gradient)
      r.d_out = b.div(b.mul(b.sub(b.unary("logistic", out), t), inv_n), b.constant(static_cast<double>(cols), s));
    return r;
  }
  const Val hit = b.convert(b.compare(row_argmax(b, out), row_argmax(b, raw), "EQ"), "f32");
  r.correct = masked_sum(hit);
  if (loss == Loss::nll) {
    r.loss_sum = masked_sum(b.unary("negate", b.sum(b.mul(t, out), {1})));
    if (gradient) r.d_out = b.mul(b.unary("negate", t), inv_n);
    return r;
  }
  // Softmax cross-entropy from logits: sum_j t_j (lse - o_j).
  const Val mx = b.reduce(out, "maximum", -INFINITY, {1});
  const Val mxb = b.broadcast(mx, s, {0});
  const Val lse = b.add(mx, b.unary("log", b.sum(b.unary("exponential", b.sub(out, mxb)), {1})));
  const Val lseb = b.broadcast(lse, s, {0});
  r.loss_sum = masked_sum(b.sum(b.mul(t, b.sub(lseb, out)), {1}));
  if (gradient) {
    const Val t_sum = b.broadcast(b.sum(t, {1}), s, {0});
    r.d_out = b.mul(b.sub(b.mul(b.unary("exponential", b.sub(out, lseb)), t_sum), t), inv_n);
  }
  return r;
}

Updated emit_update(HloBuilder& b, const optim::OptimizerOptions& o, const Val& p, Val g, const Val& opt,
                    const Val& lr_scalar) {
  const Shape s = p.shape;
  const int64_t n = s[0];
  auto k = [&](double v) { return b.constant(v, s); };
  const Val lr = b.splat(lr_scalar, s);
  if (o.clip_norm > 0) {
    const Val norm = b.unary("sqrt", b.sum(b.mul(g, g), {0}));
    const Val limit = b.constant(o.clip_norm);
    const Val scale = b.select(b.compare(norm, limit, "LE"), b.constant(1),
                               b.div(limit, b.add(norm, b.constant(1e-6))));
    g = b.mul(g, b.splat(scale, s));
  }
  auto part = [&](int64_t from, int64_t count) { return b.slice(opt, {from}, {from + count}); };
  switch (o.kind) {
    case optim::Kind::sgd: {
      const Val v = part(0, n);
      if (o.nesterov) {
        const Val gi = b.add(g, b.mul(k(o.weight_decay), p));
        const Val v2 = b.add(b.mul(k(o.momentum), v), gi);
        return {b.sub(p, b.mul(lr, b.add(gi, b.mul(k(o.momentum), v2)))), v2};
      }
      const Val v2 = b.add(b.add(b.mul(k(o.momentum), v), g), b.mul(k(o.weight_decay), p));
      return {b.sub(p, b.mul(lr, v2)), v2};
    }
    case optim::Kind::adam:
    case optim::Kind::adamw: {
      const Val m = part(0, n), v = part(n, n), t = b.add(part(2 * n, 1), b.constant(1, {1}));
      const Val t_scalar = b.reshape(t, {});
      auto correction = [&](float beta) {  // 1 / (1 - beta^t)
        const Val pow = b.binary("power", b.constant(beta), t_scalar);
        return b.splat(b.div(b.constant(1), b.sub(b.constant(1), pow)), s);
      };
      const bool decoupled = o.kind == optim::Kind::adamw;
      const Val gi = decoupled ? g : b.add(g, b.mul(k(o.weight_decay), p));
      const Val m2 = b.add(b.mul(k(o.beta1), m), b.mul(k(1 - o.beta1), gi));
      const Val v2 = b.add(b.mul(k(o.beta2), v), b.mul(b.mul(k(1 - o.beta2), gi), gi));
      const Val shrunk = decoupled ? b.mul(p, b.sub(k(1), b.mul(lr, k(o.weight_decay)))) : p;
      const Val step = b.div(b.mul(lr, b.mul(m2, correction(o.beta1))),
                             b.add(b.unary("sqrt", b.mul(v2, correction(o.beta2))), k(o.eps)));
      return {b.sub(shrunk, step), b.concatenate({m2, v2, t}, 0)};
    }
    case optim::Kind::rmsprop: {
      const Val sq = part(0, n), buf = part(n, n);
      const Val gi = b.add(g, b.mul(k(o.weight_decay), p));
      const Val sq2 = b.add(b.mul(k(o.alpha), sq), b.mul(b.mul(k(1 - o.alpha), gi), gi));
      const Val d = b.div(gi, b.add(b.unary("sqrt", sq2), k(o.eps)));
      const Val buf2 = b.add(b.mul(k(o.momentum), buf), d);
      return {b.sub(p, b.mul(lr, o.momentum > 0 ? buf2 : d)), b.concatenate({sq2, buf2}, 0)};
    }
  }
  return {p, opt};
}

}  // namespace convoy::pjrt
