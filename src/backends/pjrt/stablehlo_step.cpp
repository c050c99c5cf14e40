// Whole-step modules: see stablehlo_step.h. The loss and the optimizer
// follow the CPU backend's arithmetic (backends/cpu/softmax_kernels.cpp,
// optim/optimizer_update.cpp) operation for operation where it matters.
#include "backends/pjrt/stablehlo_step.h"

#include <cmath>
#include <optional>

#include "backends/pjrt/stablehlo_kernels.h"
#include "backends/pjrt/stablehlo_layers.h"

namespace convoy::pjrt {
namespace {

struct Arg {
  Val val;
  std::string attrs;  // e.g. {tf.aliasing_output = 0 : i32}
};

// A module with one function, @main.
class Module {
 public:
  Module(std::string name, int64_t replicas) : name_(std::move(name)), replicas_(replicas) {}
  Val arg(const Shape& shape, const std::string& elem = "f32", int aliased_output = -1) {
    Val v{"%arg" + std::to_string(args_.size()), shape, elem};
    args_.push_back({v, aliased_output < 0 ? "" : " {tf.aliasing_output = " + std::to_string(aliased_output) + " : i32}"});
    return v;
  }
  HloBuilder b;
  std::string text(const std::vector<Val>& results) const {
    std::string sig, names;
    for (std::size_t i = 0; i < args_.size(); ++i)
      sig += (i ? ", " : "") + args_[i].val.name + ": " + args_[i].val.type() + args_[i].attrs;
    for (std::size_t i = 0; i < results.size(); ++i) names += (i ? ", " : "") + results[i].name;
    return "module @" + name_ + " attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = " +
           std::to_string(replicas_) + " : i32} {\n" +
           "  func.func public @main(" + sig + ") -> (" + type_list(results) + ") {\n" + b.body() +
           "    func.return " + names + " : " + type_list(results) + "\n  }\n}\n";
  }

 private:
  std::string name_;
  int64_t replicas_;
  std::vector<Arg> args_;
};

Shape with_batch(int64_t batch, const Shape& s) {
  Shape out{batch};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

Val stats(HloBuilder& b, const Val& loss_sum, const Val& correct, const Val& finite) {
  return b.concatenate({b.reshape(loss_sum, {1}), b.reshape(correct, {1}), b.reshape(finite, {1})}, 0);
}

std::vector<Val> dropout_masks(Module& m, const nn::Model& model, int64_t batch) {
  std::vector<Val> masks;
  for (const auto& plan : model.layers())
    if (std::holds_alternative<nn::Dropout>(plan.layer)) masks.push_back(m.arg(with_batch(batch, plan.output_shape)));
  return masks;
}

// The arguments every training-mode module starts with after its own.
struct BatchArgs {
  Val x, targets;
  std::vector<Val> masks;
};

BatchArgs batch_args(Module& m, const nn::Model& model, int64_t batch, bool with_lr, Val* lr) {
  BatchArgs a;
  a.x = m.arg(with_batch(batch, model.input_shape()));
  a.targets = m.arg({batch, model.output_shape()[0]});
  if (with_lr) *lr = m.arg({});
  a.masks = dropout_masks(m, model, batch);
  return a;
}

// Forward in training mode, loss, backward.
struct Pass {
  Val out, new_state, grads;
  LossOut loss;
};

// The loss sum and correct count summed over replicas (one all-reduce).
void sum_over_replicas(HloBuilder& b, LossOut& loss, int64_t replicas) {
  if (replicas == 1) return;
  const Val both = b.all_reduce_sum(b.concatenate({b.reshape(loss.loss_sum, {1}), b.reshape(loss.correct, {1})}, 0),
                                    replicas);
  loss.loss_sum = b.reshape(b.slice(both, {0}, {1}), {});
  loss.correct = b.reshape(b.slice(both, {1}, {2}), {});
}

// The mean of x over replicas.
Val mean_over_replicas(HloBuilder& b, const Val& x, int64_t replicas) {
  if (replicas == 1) return x;
  return b.div(b.all_reduce_sum(x, replicas), b.constant(static_cast<double>(replicas), x.shape));
}

// Forward in training mode, loss, backward; with replicas, the gradients are
// their mean over replicas and the loss sums their totals, the same on every
// replica (each one's loss is the mean over its own batch, so the mean of the
// gradients is the gradient of the mean over the global batch).
Pass forward_backward(HloBuilder& b, const nn::Model& model, const StepOptions& o, const Val& params,
                      const Val& state, const BatchArgs& in) {
  LayerEmitter layers(b, model, o.batch, params, state, o.sync_batch_norm ? o.replicas : 1);
  Pass r;
  r.out = layers.forward(in.x, true, in.masks);
  r.loss = emit_loss(b, o.loss, o.label_smoothing, r.out, in.targets, std::nullopt, true);
  r.new_state = layers.new_state();
  r.grads = mean_over_replicas(b, layers.backward(*r.loss.d_out), o.replicas);
  sum_over_replicas(b, r.loss, o.replicas);
  // Synchronised statistics are already the same everywhere; per-replica ones
  // are averaged, which their linear update makes the same as averaging at the end.
  if (!o.sync_batch_norm && model.num_state() > 0) r.new_state = mean_over_replicas(b, r.new_state, o.replicas);
  return r;
}

}  // namespace

int64_t device_length(int64_t floats) { return floats > 0 ? floats : 1; }

std::string pjrt_unsupported(const nn::Model& model, const CompileOptions& options) {
  if (std::string why = layers_unsupported(model); !why.empty()) return why;
  // The whole-step modules update every parameter: frozen layers need the
  // PJRT device's gathers (one replica).
  if (options.pjrt.replicas > 1)
    for (const auto& plan : model.layers())
      if (!plan.trainable)
        return "frozen layers (trainable: false, layer " + plan.name + ") train on one replica only (drop --replicas)";
  if (model.output_shape().size() != 1)
    return "the model's last layer must output [classes] for a classification loss, got " +
           to_string(model.output_shape());
  if (options.input_gradient) return "the PJRT backend does not compute input gradients (gradient checks run on the CPU)";
  return "";
}

namespace {

struct StepResult {
  Val params, opt, state, stats, grads, out, finite;
};

// One training step on the flat buffers: forward, loss, backward, the
// numerical guard (a step whose loss or any gradient is not finite changes
// nothing: parameters, optimizer state, running statistics), the update.
StepResult training_step(HloBuilder& b, const nn::Model& model, const StepOptions& o, const Val& params,
                         const Val& opt, const Val& state, const BatchArgs& in, const Val& lr) {
  const Pass pass = forward_backward(b, model, o, params, state, in);
  StepResult r;
  r.finite = b.binary("and", b.is_finite(pass.loss.loss_sum), b.reduce(b.is_finite(pass.grads), "and", 1, {0}));
  Updated u{params, opt};
  if (const int64_t n = model.num_parameters(); n > 0)
    u = emit_update(b, o.optimizer, b.slice(params, {0}, {n}), b.slice(pass.grads, {0}, {n}),
                    b.slice(opt, {0}, {optim::state_size(o.optimizer, n)}), lr);
  auto keep_if_not_finite = [&](const Val& updated, const Val& before) {
    return b.select(b.splat(r.finite, updated.shape), updated, before);
  };
  r.params = keep_if_not_finite(u.params, params);
  r.opt = keep_if_not_finite(u.opt, opt);
  r.state = keep_if_not_finite(pass.new_state, state);
  const Val zero = b.constant(0);
  r.stats = stats(b, b.select(r.finite, pass.loss.loss_sum, zero), b.select(r.finite, pass.loss.correct, zero),
                  b.convert(r.finite, "f32"));
  r.grads = pass.grads;
  r.out = pass.out;
  return r;
}

}  // namespace

std::string emit_train_module(const nn::Model& model, const StepOptions& o) {
  Module m("convoy_train", o.replicas);
  const int64_t opt_floats = optim::state_size(o.optimizer, model.num_parameters());
  const Val params = m.arg({device_length(model.num_parameters())}, "f32", 0);
  const Val opt = m.arg({device_length(opt_floats)}, "f32", 1);
  const Val state = m.arg({device_length(model.num_state())}, "f32", 2);
  HloBuilder& b = m.b;
  if (o.steps == 1) {
    Val lr;
    const BatchArgs in = batch_args(m, model, o.batch, true, &lr);
    const StepResult r = training_step(b, model, o, params, opt, state, in, lr);
    return m.text({r.params, r.opt, r.state, r.stats, r.grads, r.out});
  }
  // steps_per_execution: a loop over the stacked batches, which stops after
  // the first step that was not finite (as Executable::train_steps).
  const int64_t steps = o.steps;
  auto stacked = [&](const Shape& per_step) {
    Shape s{steps};
    s.insert(s.end(), per_step.begin(), per_step.end());
    return m.arg(s);
  };
  std::vector<Val> carry{b.constant(0, {}, "i32"), b.constant(1, {}, "i1"), params, opt, state,
                         b.constant(0, {steps, 3}), b.constant(0, params.shape),
                         b.constant(0, {o.batch, model.output_shape()[0]})};
  constexpr std::size_t kInputs = 8;  // carry[kInputs...]: x, targets, lr, masks (passed through)
  carry.push_back(stacked(with_batch(o.batch, model.input_shape())));
  carry.push_back(stacked({o.batch, model.output_shape()[0]}));
  carry.push_back(m.arg({}));
  for (const auto& plan : model.layers())
    if (std::holds_alternative<nn::Dropout>(plan.layer)) carry.push_back(stacked(with_batch(o.batch, plan.output_shape)));
  const std::vector<Val> done = b.while_loop(
      carry,
      [&](const std::vector<Val>& v) {
        return b.binary("and", b.compare(v[0], b.constant(static_cast<double>(steps), {}, "i32"), "LT"), v[1]);
      },
      [&](const std::vector<Val>& v) {
        const Val& i = v[0];
        const Val zero = b.constant(0, {}, "i32");
        auto pick = [&](const Val& all) {  // step i's slice of a stacked input
          std::vector<Val> start{i};
          Shape one{1}, per_step;
          for (std::size_t d = 1; d < all.shape.size(); ++d) {
            start.push_back(zero);
            one.push_back(all.shape[d]);
            per_step.push_back(all.shape[d]);
          }
          return b.reshape(b.dynamic_slice(all, start, one), per_step);
        };
        BatchArgs in{pick(v[kInputs]), pick(v[kInputs + 1]), {}};
        for (std::size_t k = kInputs + 3; k < v.size(); ++k) in.masks.push_back(pick(v[k]));
        const StepResult r = training_step(b, model, o, v[2], v[3], v[4], in, v[kInputs + 2]);
        const Val row = b.reshape(r.stats, {1, 3});
        std::vector<Val> next{b.add(i, b.constant(1, {}, "i32")), r.finite, r.params, r.opt, r.state,
                              b.dynamic_update_slice(v[5], row, {i, zero}), r.grads, r.out};
        next.insert(next.end(), v.begin() + kInputs, v.end());
        return next;
      });
  return m.text({done[2], done[3], done[4], done[5], done[6], done[7]});
}

std::string emit_gradients_module(const nn::Model& model, const StepOptions& o) {
  Module m("convoy_gradients", o.replicas);
  const Val params = m.arg({device_length(model.num_parameters())});
  const Val state = m.arg({device_length(model.num_state())}, "f32", 0);
  const BatchArgs in = batch_args(m, model, o.batch, false, nullptr);
  const Pass pass = forward_backward(m.b, model, o, params, state, in);
  return m.text({pass.new_state, stats(m.b, pass.loss.loss_sum, pass.loss.correct, m.b.constant(1)), pass.grads,
                 pass.out});
}

std::string emit_eval_module(const nn::Model& model, const StepOptions& o) {
  Module m("convoy_eval", o.replicas);
  const Val params = m.arg({device_length(model.num_parameters())});
  const Val state = m.arg({device_length(model.num_state())});
  const Val x = m.arg(with_batch(o.batch, model.input_shape()));
  const Val targets = m.arg({o.batch, model.output_shape()[0]});
  const Val count = m.arg({}, "i32");
  HloBuilder& b = m.b;
  LayerEmitter layers(b, model, o.batch, params, state);
  const Val out = layers.forward(x, false);
  const Val rows = b.iota({o.batch}, 0);
  const Val valid = b.convert(b.compare(rows, b.splat(count, {o.batch}), "LT"), "f32");
  LossOut loss = emit_loss(b, o.loss, o.label_smoothing, out, targets, valid, false);
  sum_over_replicas(b, loss, o.replicas);
  return m.text({stats(b, loss.loss_sum, loss.correct, b.constant(1)), out});
}

}  // namespace convoy::pjrt
