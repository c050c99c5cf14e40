#pragma once
// The shared shape of a layer with a weight and an optional bias on oneDNN
// (Conv2d, Dense): forward, backward-weights (+bias), and backward-data only
// when the input gradient is wanted. A frozen layer (trainable = false) skips
// backward-weights and keeps its gradients at zero. Subclasses only describe
// their primitives.
//
// Parameters live in the flat buffer in the canonical layout (PyTorch's). When
// a primitive prefers another weight layout (oneDNN's blocked formats), the
// weights are reordered into a private buffer before use and the weight
// gradient back out after the backward pass: a few thousand floats per step.
//
// A subclass may run any of the three passes with kernels of its own
// (OwnKernels) instead of oneDNN's (Conv2d of a single-channel image, Winograd
// 3×3 convolutions); they read and write the canonical layouts, so no weight
// reorder runs for them.
//
// In bf16 (DnnlEnv::compute) oneDNN's passes take bf16 inputs and weights and
// write fp32: the weights are converted once per step by the reorder into the
// primitive's layout (which then does both), the source and the output
// gradient by reorders into private bf16 copies, each only when a oneDNN pass
// reads it. Sums, outputs, gradients and the master weights stay fp32. Own
// kernels stay fp32: without AMX what they take (single-channel first
// convolutions, Winograd passes) is little work or already fewer multiplies;
// with AMX oneDNN takes most of their passes (amx_passes.h).
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_op.h"

namespace convoy::cpu {

class OwnKernels {
 public:
  virtual ~OwnKernels() = default;
  // False: the pass stays oneDNN's.
  virtual bool runs_forward() const = 0;
  virtual bool runs_weight_gradient() const { return true; }
  virtual bool runs_input_gradient() const { return false; }
  // Workspace for the passes, in the op's scratchpad (shared by all ops).
  virtual std::size_t scratchpad_bytes() const { return 0; }
  virtual void set_scratchpad(void* scratchpad) { (void)scratchpad; }
  // The step's weights, before the forward pass that uses them (ours or
  // oneDNN's) and so before the backward pass of the same step.
  virtual void prepare(const float* w) { (void)w; }
  // b and db are null without a bias.
  virtual void forward(const float* src, const float* w, const float* b, float* dst) = 0;
  virtual void weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) = 0;
  virtual void input_gradient(const float* diff_dst, const float* w, float* diff_src) {
    (void)diff_dst, (void)w, (void)diff_src;
    throw std::logic_error("own kernels without an input gradient were asked for one");
  }
};

class WeightedOp : public CpuOp {
 public:
  // b: a zero desc when the layer has no bias.
  WeightedOp(const DnnlEnv& env, dnnl::memory::desc src, dnnl::memory::desc dst, dnnl::memory::desc w,
             dnnl::memory::desc b, bool trainable)
      : src_md_(src),
        dst_md_(dst),
        w_md_(w),
        b_md_(b),
        src_in_md_(retyped(src, env.compute)),
        diff_dst_in_md_(retyped(dst, env.compute)),
        compute_(env.compute),
        trainable_(trainable) {}

  std::size_t scratchpad_bytes() const override {
    return std::max({fwd_.scratchpad_bytes(), bwd_data_.scratchpad_bytes(), bwd_w_.scratchpad_bytes(),
                     own_ ? own_->scratchpad_bytes() : 0});
  }

  void bind(DnnlEnv& env, const OpBuffers& b) override {
    // The flat buffers hold the weight, then the bias.
    const std::size_t w_floats = w_md_.get_size() / sizeof(float);
    if (!trainable_) std::fill_n(b.grads, (w_md_.get_size() + b_md_.get_size()) / sizeof(float), 0.0f);
    own_args_ = {b.src, b.params, has_bias() ? b.params + w_floats : nullptr, b.dst,
                 b.diff_dst, b.grads, has_bias() ? b.grads + w_floats : nullptr};
    own_forward_ = own_ && own_->runs_forward();
    own_weight_gradient_ = own_ && own_->runs_weight_gradient();
    own_input_gradient_ = own_ && own_->runs_input_gradient();
    if (own_) own_->set_scratchpad(b.scratchpad);
    want_diff_src_ = b.diff_src != nullptr;
    // The source and output gradient as oneDNN's passes take them: each pass
    // reads the fp32 tensor itself or its compute-type copy, per its primitive.
    const bool dnnl_weight_gradient = trainable_ && !own_weight_gradient_;
    const bool dnnl_input_gradient = want_diff_src_ && !own_input_gradient_;
    fwd_reads_src_in_ = !own_forward_ && fwd_src_md_ != src_md_;
    const bool weight_gradient_reads_src_in = dnnl_weight_gradient && bwd_w_src_md_ != src_md_;
    const void* src_in =
        relayout_in(env, src_md_, src_in_md_, b.src, fwd_reads_src_in_ || weight_gradient_reads_src_in, src_in_);
    const bool diff_dst_in_read = (dnnl_weight_gradient && bwd_w_diff_dst_md_ != dst_md_) ||
                                  (dnnl_input_gradient && bwd_data_diff_dst_md_ != dst_md_);
    const void* diff_dst_in = relayout_in(env, dst_md_, diff_dst_in_md_, b.diff_dst, diff_dst_in_read, diff_dst_in_);
    const auto src_for = [&](const dnnl::memory::desc& md) { return md == src_md_ ? b.src : src_in; };
    const auto diff_dst_for = [&](const dnnl::memory::desc& md) { return md == dst_md_ ? b.diff_dst : diff_dst_in; };
    const void* fwd_w = nullptr;  // the forward's weights, refreshed by each forward pass
    if (!own_forward_) {
      fwd_w = relayout_in(env, w_md_, fwd_w_md_, b.params, true, fwd_weights_);
      fwd_.bind(env, DNNL_ARG_SRC, fwd_src_md_, src_for(fwd_src_md_));
      fwd_.bind(env, DNNL_ARG_WEIGHTS, fwd_w_md_, fwd_w);
      if (has_bias()) fwd_.bind(env, DNNL_ARG_BIAS, b_md_, b.params + w_floats);
      fwd_.bind(env, DNNL_ARG_DST, dst_md_, b.dst);
      fwd_.bind_scratchpad(env, b.scratchpad);
    }
    if (dnnl_weight_gradient) {
      float* diff_w = b.grads;
      if (bwd_w_w_md_ != w_md_) {
        diff_weights_.buffer = AlignedBuffer(floats_for(bwd_w_w_md_));
        diff_w = diff_weights_.buffer.data();
        diff_weights_.reorder = Prim::reorder(env, bwd_w_w_md_, diff_w, w_md_, b.grads);
      }
      bwd_w_.bind(env, DNNL_ARG_SRC, bwd_w_src_md_, src_for(bwd_w_src_md_));
      bwd_w_.bind(env, DNNL_ARG_DIFF_DST, bwd_w_diff_dst_md_, diff_dst_for(bwd_w_diff_dst_md_));
      bwd_w_.bind(env, DNNL_ARG_DIFF_WEIGHTS, bwd_w_w_md_, diff_w);
      if (has_bias()) bwd_w_.bind(env, DNNL_ARG_DIFF_BIAS, b_md_, b.grads + w_floats);
      bwd_w_.bind_scratchpad(env, b.scratchpad);
    }
    own_args_.diff_src = b.diff_src;
    if (dnnl_input_gradient) {
      // Backward-data usually wants the forward's layout, already reordered.
      const void* bwd_w = fwd_w && bwd_data_w_md_ == fwd_w_md_
                              ? fwd_w
                              : relayout_in(env, w_md_, bwd_data_w_md_, b.params, true, bwd_data_weights_);
      bwd_data_.bind(env, DNNL_ARG_DIFF_DST, bwd_data_diff_dst_md_, diff_dst_for(bwd_data_diff_dst_md_));
      bwd_data_.bind(env, DNNL_ARG_WEIGHTS, bwd_data_w_md_, bwd_w);
      bwd_data_.bind(env, DNNL_ARG_DIFF_SRC, src_md_, b.diff_src);
      bwd_data_.bind_scratchpad(env, b.scratchpad);
    }
  }

  // "forward: K; input gradient: K; weight gradient: K", each K oneDNN's
  // implementation, "convoy" (own kernels) or "none" (a pass not run).
  std::string kernels() const override {
    const auto name = [&](bool runs, bool own, const Prim& p) {
      return !runs ? std::string("none") : own ? std::string("convoy") : p.implementation();
    };
    return "forward: " + name(true, own_forward_, fwd_) +
           "; input gradient: " + name(want_diff_src_, own_input_gradient_, bwd_data_) +
           "; weight gradient: " + name(trainable_, own_weight_gradient_, bwd_w_);
  }

  void forward(DnnlEnv& env, bool training) override {
    if (own_forward_ || (want_diff_src_ && own_input_gradient_)) own_->prepare(own_args_.w);
    // The bf16 source serves oneDNN's forward, else only the weight gradient (after a training forward).
    if (src_in_.reorder && (fwd_reads_src_in_ || training)) src_in_.reorder.run(env);
    if (own_forward_) return own_->forward(own_args_.src, own_args_.w, own_args_.b, own_args_.dst);
    if (fwd_weights_.reorder) fwd_weights_.reorder.run(env);
    fwd_.run(env);
  }

  void backward(DnnlEnv& env) override {
    if (diff_dst_in_.reorder) diff_dst_in_.reorder.run(env);
    if (trainable_ && own_weight_gradient_) {
      own_->weight_gradient(own_args_.src, own_args_.diff_dst, own_args_.dw, own_args_.db);
    } else if (trainable_) {
      bwd_w_.run(env);
      if (diff_weights_.reorder) diff_weights_.reorder.run(env);
    }
    if (!want_diff_src_) return;
    if (own_input_gradient_) return own_->input_gradient(own_args_.diff_dst, own_args_.w, own_args_.diff_src);
    if (bwd_data_weights_.reorder) bwd_data_weights_.reorder.run(env);
    bwd_data_.run(env);
  }

 protected:
  template <class Fwd, class BwdData, class BwdWeights>
  void set_primitives(const Fwd& fwd, const BwdData& bwd_data, const BwdWeights& bwd_weights) {
    set_forward_and_data(fwd, bwd_data);
    bwd_w_ = Prim(bwd_weights);
    bwd_w_w_md_ = bwd_weights.diff_weights_desc();
    bwd_w_src_md_ = bwd_weights.src_desc();
    bwd_w_diff_dst_md_ = bwd_weights.diff_dst_desc();
  }
  // Own kernels for the weight gradient and maybe the forward pass; oneDNN's
  // backward-data primitive (made with the forward's as its hint) remains.
  template <class Fwd, class BwdData>
  void set_own_kernels(const Fwd& fwd, const BwdData& bwd_data, std::unique_ptr<OwnKernels> own) {
    set_forward_and_data(fwd, bwd_data);
    own_ = std::move(own);
  }
  // Own kernels for some passes, oneDNN's primitives for the rest.
  template <class Fwd, class BwdData, class BwdWeights>
  void set_primitives_and_own_kernels(const Fwd& fwd, const BwdData& bwd_data, const BwdWeights& bwd_weights,
                                      std::unique_ptr<OwnKernels> own) {
    set_primitives(fwd, bwd_data, bwd_weights);
    own_ = std::move(own);
  }

  bool has_bias() const { return b_md_.get_size() > 0; }
  // Weights as the forward and backward-data passes take them (compute type,
  // or `type`), and the weight gradient as backward-weights writes it (fp32),
  // in the layout the primitive picks.
  dnnl::memory::desc any_weights() const { return any_weights(compute_); }
  dnnl::memory::desc any_weights(dnnl::memory::data_type type) const {
    return {w_md_.dims(), type, dnnl::memory::format_tag::any};
  }
  dnnl::memory::desc any_weight_gradient() const {
    return {w_md_.dims(), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any};
  }

  // fp32, in the canonical and activation layouts; the outputs and gradients the passes write.
  dnnl::memory::desc src_md_, dst_md_, w_md_, b_md_;
  // The source and the output gradient in the compute type: what the passes
  // read, unless a primitive was described over src_md_ / dst_md_ (an fp32
  // pass, where bf16 on AMX leaves it: conv2d_op.cpp).
  dnnl::memory::desc src_in_md_, diff_dst_in_md_;

 private:
  // A tensor in the layout and type a primitive takes.
  struct Relayout {
    AlignedBuffer buffer;
    Prim reorder;  // empty when the primitive takes the tensor as it is
  };

  template <class Fwd, class BwdData>
  void set_forward_and_data(const Fwd& fwd, const BwdData& bwd_data) {
    fwd_ = Prim(fwd);
    bwd_data_ = Prim(bwd_data);
    fwd_w_md_ = fwd.weights_desc();
    bwd_data_w_md_ = bwd_data.weights_desc();
    fwd_src_md_ = fwd.src_desc();
    bwd_data_diff_dst_md_ = bwd_data.diff_dst_desc();
  }

  // `data` (described by `from`) as `to`: itself, or a copy that r.reorder
  // refreshes. Nothing when no pass `needed` it.
  static const void* relayout_in(DnnlEnv& env, const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                                 const float* data, bool needed, Relayout& r) {
    if (from == to || !needed) return data;
    r.buffer = AlignedBuffer(floats_for(to));
    r.reorder = Prim::reorder(env, from, data, to, r.buffer.data());
    return r.buffer.data();
  }

  Prim fwd_, bwd_data_, bwd_w_;
  dnnl::memory::desc fwd_w_md_, bwd_data_w_md_, bwd_w_w_md_;
  // The source and output gradient as each pass reads them: src_md_ / dst_md_ or the compute-type copies.
  dnnl::memory::desc fwd_src_md_, bwd_w_src_md_, bwd_w_diff_dst_md_, bwd_data_diff_dst_md_;
  Relayout fwd_weights_, bwd_data_weights_, diff_weights_, src_in_, diff_dst_in_;
  std::unique_ptr<OwnKernels> own_;  // null: oneDNN's passes only
  struct {
    const float *src = nullptr, *w = nullptr, *b = nullptr;
    float* dst = nullptr;
    const float* diff_dst = nullptr;
    float *dw = nullptr, *db = nullptr, *diff_src = nullptr;
  } own_args_;
  dnnl::memory::data_type compute_;
  bool trainable_;
  bool own_forward_ = false, own_weight_gradient_ = false, own_input_gradient_ = false;
  bool want_diff_src_ = false;
  bool fwd_reads_src_in_ = false;
};

}  // namespace convoy::cpu
