// Layers as StableHLO: see stablehlo_layers.h. Images are NCHW throughout
// (the canonical layout; XLA picks its own inside), weights OIHW and [out, in].
#include "backends/pjrt/stablehlo_layers.h"

#include <limits>
#include <stdexcept>
#include <variant>

#include "convoy/core/error.h"

namespace convoy::pjrt {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

template <class... Ts> struct Overloaded : Ts... { using Ts::operator()...; };
template <class... Ts> Overloaded(Ts...) -> Overloaded<Ts...>;

// Where each kind is emitted; an empty string means supported.
std::string why_not(const nn::LayerPlan& plan) {
  // Newer than the emitter (ONNX import's Clip and constant operands): no
  // StableHLO yet, so such a model is refused before anything is emitted.
  if (std::holds_alternative<nn::Clip>(plan.layer)) return "clip";
  if (std::holds_alternative<nn::Affine>(plan.layer)) return "affine";
  return "";
}

// The spatial window of a conv or pool over [.., H, W].
struct Geometry {
  int64_t k, s;
  nn::Window h, w;
};

Geometry geometry(const nn::LayerPlan& plan, int64_t kernel, int64_t stride, int64_t padding) {
  stride = stride ? stride : kernel;
  return {kernel, stride, nn::window(plan.input_shape[1], kernel, stride, padding, plan.name),
          nn::window(plan.input_shape[2], kernel, stride, padding, plan.name)};
}

// Padding of the transposed window (a conv's input gradient, a pool's
// spread): dilate by the stride, pad k-1-before in front and what makes the
// input size at the back.
Pads transposed_pads(const Geometry& g, int64_t h, int64_t w) {
  auto one = [&](const nn::Window& win, int64_t size) {
    return std::make_pair(g.k - 1 - win.pad_begin, size - 1 - (win.out - 1) * g.s + win.pad_begin);
  };
  return {one(g.h, h), one(g.w, w)};
}

}  // namespace

std::string layers_unsupported(const nn::Model& model) {
  for (const auto& plan : model.layers())
    if (std::string why = why_not(plan); !why.empty())
      return "the PJRT backend has no StableHLO for " + why + " (layer " + plan.name + ")";
  return "";
}

LayerEmitter::LayerEmitter(HloBuilder& b, const nn::Model& model, int64_t batch, SlotSource params, SlotSource state)
    : b_(b), model_(model), batch_(batch), params_slot_(std::move(params)), state_slot_(std::move(state)),
      saved_(model.layers().size()) {}

Val LayerEmitter::over_replicas(const Val& sums) {
  return sync_replicas_ > 1 ? b_.all_reduce_sum(sums, sync_replicas_) : sums;
}

Shape LayerEmitter::batched(const Shape& s) const {
  Shape out{batch_};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

Val LayerEmitter::layer_forward(std::size_t i, const std::vector<Val>& in, bool training, const Val* mask) {
  const nn::LayerPlan& plan = model_.layers()[i];
  const Shape out = batched(plan.output_shape);
  const Val& x = in[0];
  Saved& saved = saved_[i];
  saved = {.in = in, .out = {}, .vals = {}};
  saved.out = std::visit(
      Overloaded{
          [&](const nn::Conv2d& c) {
            const Geometry g = geometry(plan, c.kernel, c.stride, c.padding);
            Val y = b_.convolution(x, param(plan.params[0]), out, "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]",
                                   {g.s, g.s}, {{g.h.pad_begin, g.h.pad_end}, {g.w.pad_begin, g.w.pad_end}},
                                   {1, 1}, {1, 1}, c.groups, 1);
            if (c.bias) y = b_.add(y, b_.broadcast(param(plan.params[1]), out, {1}));
            return y;
          },
          [&](const nn::MaxPool2d& p) {
            const Geometry g = geometry(plan, p.kernel, p.stride, p.padding);
            Val xp = x;  // padding never wins: -inf
            if (g.h.pad_begin || g.h.pad_end || g.w.pad_begin || g.w.pad_end)
              xp = b_.pad(x, b_.constant(-kInf), {0, 0, g.h.pad_begin, g.w.pad_begin},
                          {0, 0, g.h.pad_end, g.w.pad_end}, {0, 0, 0, 0});
            saved.vals = {xp};
            return b_.reduce_window(xp, "maximum", -kInf, {1, 1, g.k, g.k}, {1, 1, g.s, g.s},
                                    {{0, 0}, {0, 0}, {0, 0}, {0, 0}});
          },
          [&](const nn::AvgPool2d& p) {
            const Geometry g = geometry(plan, p.kernel, p.stride, p.padding);
            const std::vector<std::pair<int64_t, int64_t>> pads{
                {0, 0}, {0, 0}, {g.h.pad_begin, g.h.pad_end}, {g.w.pad_begin, g.w.pad_end}};
            const Val sum = b_.reduce_window(x, "add", 0, {1, 1, g.k, g.k}, {1, 1, g.s, g.s}, pads);
            // The divisor per output: the whole window, or the pixels inside the image.
            const Val divisor =
                p.count_include_pad
                    ? b_.constant(static_cast<double>(g.k * g.k), out)
                    : b_.reduce_window(b_.constant(1, x.shape), "add", 0, {1, 1, g.k, g.k}, {1, 1, g.s, g.s}, pads);
            saved.vals = {divisor};
            return b_.div(sum, divisor);
          },
          [&](const nn::GlobalAvgPool&) {
            const Val mean = b_.div(b_.sum(x, {2, 3}), b_.constant(static_cast<double>(x.shape[2] * x.shape[3]),
                                                                   {x.shape[0], x.shape[1]}));
            return b_.reshape(mean, out);
          },
          [&](const nn::Dropout&) {
            if (!mask) return x;
            saved.vals = {*mask};
            return b_.mul(x, *mask);
          },
          [&](const nn::ReLU&) { return b_.max(x, b_.constant(0, x.shape)); },
          [&](const nn::ReLU6&) { return b_.min(b_.max(x, b_.constant(0, x.shape)), b_.constant(6, x.shape)); },
          [&](const nn::Clip&) -> Val { throw UserError("pjrt: clip has no StableHLO"); },  // refused by why_not
          [&](const nn::Affine&) -> Val { throw UserError("pjrt: affine has no StableHLO"); },
          [&](const nn::Sigmoid&) { return b_.unary("logistic", x); },
          [&](const nn::SiLU&) { return b_.mul(x, b_.unary("logistic", x)); },
          [&](const nn::BatchNorm& bn) {
            const bool image = x.shape.size() == 4;
            const std::vector<int64_t> over = image ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0};
            // Rows per channel: this replica's, or every replica's when synchronised.
            const int64_t count = numel(x.shape) / x.shape[1] * sync_replicas_;
            const Shape c{x.shape[1]};
            auto per_channel = [&](const Val& v) { return b_.broadcast(v, x.shape, {1}); };
            const Val gamma = param(plan.params[0]), beta = param(plan.params[1]);
            Val mean, var;
            if (training && plan.trainable) {  // frozen: inference in training steps too
              // Statistics in double, two passes (mean, then centred
              // squares), as the CPU backend: in float, a sum over a large
              // feature map loses digits that deep networks amplify.
              const Val x64 = b_.convert(x, "f64");
              const Val n64 = b_.constant(static_cast<double>(count), c, "f64");
              const Val mean64 = b_.div(over_replicas(b_.sum(x64, over)), n64);
              const Val d64 = b_.sub(x64, per_channel(mean64));
              const Val var64 = b_.div(over_replicas(b_.sum(b_.mul(d64, d64), over)), n64);
              const Val invstd64 = b_.div(b_.constant(1, c, "f64"),
                                          b_.unary("sqrt", b_.add(var64, b_.constant(bn.eps, c, "f64"))));
              const Val invstd = b_.convert(invstd64, "f32");
              const Val xhat = b_.mul(b_.sub(x, per_channel(b_.convert(mean64, "f32"))), per_channel(invstd));
              saved.vals = {xhat, invstd, gamma};
              // New running statistics (PyTorch's: the unbiased variance).
              const Val m = b_.constant(bn.momentum, c, "f64"), keep = b_.constant(1.0 - bn.momentum, c, "f64");
              const Val unbias = b_.constant(count > 1 ? static_cast<double>(count) / (count - 1) : 1.0, c, "f64");
              const Val rm = b_.convert(state_slot(plan.state[0]), "f64");
              const Val rv = b_.convert(state_slot(plan.state[1]), "f64");
              saved.vals.push_back(b_.convert(b_.add(b_.mul(keep, rm), b_.mul(m, mean64)), "f32"));
              saved.vals.push_back(b_.convert(b_.add(b_.mul(keep, rv), b_.mul(m, b_.mul(var64, unbias))), "f32"));
              saved.vals.push_back(mean64);
              saved.vals.push_back(invstd64);
              return b_.add(b_.mul(xhat, per_channel(gamma)), per_channel(beta));
            }
            mean = state_slot(plan.state[0]);
            var = state_slot(plan.state[1]);
            if (training) {  // frozen: dx = scale * dy, the CPU's scale (its factor in double)
              const Val inv64 = b_.div(b_.constant(1, c, "f64"), b_.unary("sqrt", b_.add(b_.convert(var, "f64"),
                                                                                      b_.constant(bn.eps, c, "f64"))));
              saved.vals = {b_.convert(b_.mul(b_.convert(gamma, "f64"), inv64), "f32")};
            }
            const Val invstd = b_.div(b_.constant(1, c), b_.unary("sqrt", b_.add(var, b_.constant(bn.eps, c))));
            const Val xhat = b_.mul(b_.sub(x, per_channel(mean)), per_channel(invstd));
            return b_.add(b_.mul(xhat, per_channel(gamma)), per_channel(beta));
          },
          [&](const nn::Flatten&) { return b_.reshape(x, out); },
          [&](const nn::Dense&) {
            const Val y = b_.dot(x, param(plan.params[0]), 1, 1);
            return b_.add(y, b_.broadcast(param(plan.params[1]), out, {1}));
          },
          [&](const nn::LogSoftmax&) {
            const Val mx = b_.reduce(x, "maximum", -kInf, {1});
            const Val z = b_.sub(x, b_.broadcast(mx, x.shape, {0}));
            const Val lse = b_.unary("log", b_.sum(b_.unary("exponential", z), {1}));
            return b_.sub(z, b_.broadcast(lse, x.shape, {0}));
          },
          [&](const nn::Add&) {
            Val y = in[0];
            for (std::size_t k = 1; k < in.size(); ++k) y = b_.add(y, in[k]);
            return y;
          },
          [&](const nn::Concat&) { return b_.concatenate(in, 1); },
          [&](const nn::Multiply&) {
            const Val& gate = in[1];
            if (gate.shape == x.shape) return b_.mul(x, gate);
            const Val g = b_.reshape(gate, {x.shape[0], x.shape[1]});
            return b_.mul(x, b_.broadcast(g, x.shape, {0, 1}));
          },
      },
      plan.layer);
  return saved.out;
}

// Every state slot belongs to a training batch norm, whose forward saved
// the new running mean and variance as vals[3] and vals[4].
std::pair<Val, Val> LayerEmitter::running_statistics(std::size_t i) const {
  const auto& v = saved_[i].vals;
  if (v.size() < 5) throw std::logic_error("LayerEmitter: no training forward for " + model_.layers()[i].name);
  return {v[3], v[4]};
}

std::vector<Val> LayerEmitter::layer_backward(std::size_t i, const Val& dy, std::vector<Val>& pg,
                                              const std::vector<bool>& wants) {
  const nn::LayerPlan& plan = model_.layers()[i];
  const Saved& saved = saved_[i];
  if (saved.in.empty()) throw std::logic_error("LayerEmitter: backward of " + plan.name + " before its forward");
  const Val& x = saved.in[0];
  const Val& y = saved.out;
  const bool wants_dx = wants.at(0);
  return std::visit(
      Overloaded{
          [&](const nn::Conv2d& c) -> std::vector<Val> {
            const Geometry g = geometry(plan, c.kernel, c.stride, c.padding);
            const Val w = param(plan.params[0]);
            const int64_t groups = c.groups, cin = x.shape[1], f = c.filters, k = c.kernel;
            // dW: x's channels as the batch, the examples contracted; the
            // stride dilates dy; groups split the batch (batch_group_count).
            const int64_t used_h = (g.h.out - 1) * g.s + k, used_w = (g.w.out - 1) * g.s + k;
            const Pads wpads{{g.h.pad_begin, used_h - x.shape[2] - g.h.pad_begin},
                             {g.w.pad_begin, used_w - x.shape[3] - g.w.pad_begin}};
            pg.push_back(b_.convolution(x, dy, {f, cin / groups, k, k}, "[f, b, 0, 1]x[i, o, 0, 1]->[f, b, 0, 1]",
                                        {1, 1}, wpads, {1, 1}, {g.s, g.s}, 1, groups));
            if (c.bias) pg.push_back(b_.sum(dy, {0, 2, 3}));
            if (!wants_dx) return {x};  // not wanted (the model input's): nothing emitted
            // dx: dy dilated by the stride, convolved with the flipped kernel,
            // input and output channels swapped within each group.
            Val wt = b_.reverse(w, {2, 3});
            if (groups > 1) {
              wt = b_.reshape(wt, {groups, f / groups, cin / groups, k, k});
              wt = b_.transpose(wt, {0, 2, 1, 3, 4});
              wt = b_.reshape(wt, {cin, f / groups, k, k});
            }
            const std::string dims = groups > 1 ? "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"
                                                : "[b, f, 0, 1]x[i, o, 0, 1]->[b, f, 0, 1]";
            return {b_.convolution(dy, wt, x.shape, dims, {1, 1}, transposed_pads(g, x.shape[2], x.shape[3]),
                                   {g.s, g.s}, {1, 1}, groups, 1)};
          },
          [&](const nn::MaxPool2d& p) -> std::vector<Val> {
            const Geometry g = geometry(plan, p.kernel, p.stride, p.padding);
            const Val& xp = saved.vals[0];
            Val dxp = b_.select_and_scatter_max(xp, dy, {1, 1, g.k, g.k}, {1, 1, g.s, g.s});
            if (xp.shape != x.shape)
              dxp = b_.slice(dxp, {0, 0, g.h.pad_begin, g.w.pad_begin},
                             {x.shape[0], x.shape[1], g.h.pad_begin + x.shape[2], g.w.pad_begin + x.shape[3]});
            return {dxp};
          },
          [&](const nn::AvgPool2d& p) -> std::vector<Val> {
            const Geometry g = geometry(plan, p.kernel, p.stride, p.padding);
            // Each output's share, spread back over its window: the transpose
            // of a window sum is a window sum over the dilated gradient.
            const Val share = b_.div(dy, saved.vals[0]);
            const Pads t = transposed_pads(g, x.shape[2], x.shape[3]);
            const Val spread = b_.pad(share, b_.constant(0), {0, 0, t[0].first, t[1].first},
                                      {0, 0, t[0].second, t[1].second}, {0, 0, g.s - 1, g.s - 1});
            return {b_.reduce_window(spread, "add", 0, {1, 1, g.k, g.k}, {1, 1, 1, 1},
                                     {{0, 0}, {0, 0}, {0, 0}, {0, 0}})};
          },
          [&](const nn::GlobalAvgPool&) -> std::vector<Val> {
            const Val d = b_.reshape(dy, {x.shape[0], x.shape[1]});
            const Val spread = b_.broadcast(d, x.shape, {0, 1});
            return {b_.div(spread, b_.constant(static_cast<double>(x.shape[2] * x.shape[3]), x.shape))};
          },
          [&](const nn::Dropout&) -> std::vector<Val> {
            return {saved.vals.empty() ? dy : b_.mul(dy, saved.vals[0])};
          },
          [&](const nn::ReLU&) -> std::vector<Val> {
            const Val zero = b_.constant(0, x.shape);
            return {b_.select(b_.compare(x, zero, "GT"), dy, zero)};
          },
          [&](const nn::ReLU6&) -> std::vector<Val> {
            const Val zero = b_.constant(0, x.shape);
            const Val inside = b_.binary("and", b_.compare(x, zero, "GT"), b_.compare(x, b_.constant(6, x.shape), "LT"));
            return {b_.select(inside, dy, zero)};
          },
          [&](const nn::Clip&) -> std::vector<Val> { throw UserError("pjrt: clip has no StableHLO"); },
          [&](const nn::Affine&) -> std::vector<Val> { throw UserError("pjrt: affine has no StableHLO"); },
          [&](const nn::Sigmoid&) -> std::vector<Val> {
            return {b_.mul(dy, b_.mul(y, b_.sub(b_.constant(1, y.shape), y)))};
          },
          [&](const nn::SiLU&) -> std::vector<Val> {
            const Val s = b_.unary("logistic", x);
            const Val ds = b_.add(s, b_.mul(x, b_.mul(s, b_.sub(b_.constant(1, s.shape), s))));
            return {b_.mul(dy, ds)};
          },
          [&](const nn::BatchNorm&) -> std::vector<Val> {
            if (!plan.trainable) return {b_.mul(dy, b_.broadcast(saved.vals.at(0), x.shape, {1}))};
            const bool image = x.shape.size() == 4;
            const std::vector<int64_t> over = image ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0};
            const double count = static_cast<double>(numel(x.shape) / x.shape[1] * sync_replicas_);
            const Shape c{x.shape[1]};
            auto per_channel = [&](const Val& v) { return b_.broadcast(v, x.shape, {1}); };
            // The CPU backend's arithmetic: sums and per-channel factors in double,
            // dx = k_dy * (dy - mean_dy) + k_x * (x - mean) in float.
            const Val &gamma = saved.vals.at(2), &mean64 = saved.vals.at(5), &invstd64 = saved.vals.at(6);
            const Val dy64 = b_.convert(dy, "f64");
            Val sum_a = b_.sum(dy64, over);
            Val sum_b = b_.sum(b_.mul(dy64, b_.sub(b_.convert(x, "f64"), per_channel(mean64))), over);
            // gamma and beta keep this replica's sums (the gradient mean over
            // replicas completes them); dx needs every replica's.
            pg = {b_.convert(b_.mul(sum_b, invstd64), "f32"), b_.convert(sum_a, "f32")};
            if (sync_replicas_ > 1) {
              const int64_t channels = x.shape[1];
              const Val both = over_replicas(b_.concatenate({sum_a, sum_b}, 0));
              sum_a = b_.slice(both, {0}, {channels});
              sum_b = b_.slice(both, {channels}, {2 * channels});
            }
            const Val n64 = b_.constant(count, c, "f64");
            const Val g = b_.mul(b_.convert(gamma, "f64"), invstd64);
            const Val kx = b_.div(b_.mul(b_.unary("negate", g), b_.mul(b_.mul(invstd64, invstd64), sum_b)), n64);
            const Val mean_dy = b_.convert(b_.div(sum_a, n64), "f32");
            const Val centred_dy = b_.sub(dy, per_channel(mean_dy));
            const Val centred_x = b_.sub(x, per_channel(b_.convert(mean64, "f32")));
            return {b_.add(b_.mul(per_channel(b_.convert(g, "f32")), centred_dy),
                           b_.mul(per_channel(b_.convert(kx, "f32")), centred_x))};
          },
          [&](const nn::Flatten&) -> std::vector<Val> { return {b_.reshape(dy, x.shape)}; },
          [&](const nn::Dense&) -> std::vector<Val> {
            pg = {b_.dot(dy, x, 0, 0), b_.sum(dy, {0})};
            return {b_.dot(dy, param(plan.params[0]), 1, 0)};
          },
          [&](const nn::LogSoftmax&) -> std::vector<Val> {
            const Val total = b_.broadcast(b_.sum(dy, {1}), y.shape, {0});
            return {b_.sub(dy, b_.mul(b_.unary("exponential", y), total))};
          },
          [&](const nn::Add&) -> std::vector<Val> { return std::vector<Val>(plan.inputs.size(), dy); },
          [&](const nn::Concat&) -> std::vector<Val> {
            std::vector<Val> parts;
            int64_t at = 0;
            for (const Val& in : saved.in) {
              std::vector<int64_t> start(in.shape.size(), 0), limit = dy.shape;
              start[1] = at;
              limit[1] = at + in.shape[1];
              parts.push_back(b_.slice(dy, start, limit));
              at += in.shape[1];
            }
            return parts;
          },
          [&](const nn::Multiply&) -> std::vector<Val> {
            const Val& gate = saved.in[1];
            if (gate.shape == x.shape) return {b_.mul(dy, gate), b_.mul(dy, x)};
            const Val g = b_.broadcast(b_.reshape(gate, {x.shape[0], x.shape[1]}), x.shape, {0, 1});
            return {b_.mul(dy, g), b_.reshape(b_.sum(b_.mul(dy, x), {2, 3}), gate.shape)};
          },
      },
      plan.layer);
}

}  // namespace convoy::pjrt
