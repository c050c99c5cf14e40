// The PJRT device: see pjrt_device.h. Layers come from the StableHLO layer
// emitter (stablehlo_layers.h, one layer at a time, its hand-written VJPs);
// the loss and the optimizer from stablehlo_kernels.h; the guard follows
// commit_guarded_step (device_scalars.h) select for branch.
#include "backends/pjrt/pjrt_device.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <set>
#include <stdexcept>
#include <variant>

#include "backends/device.h"
#include "backends/pjrt/host_masks.h"
#include "backends/pjrt/stablehlo_kernels.h"
#include "backends/pjrt/stablehlo_layers.h"
#include "backends/pjrt/traced_memory.h"
#include "backends/program.h"
#include "convoy/core/error.h"

namespace convoy {
namespace {

using pjrt::Val;

// DeviceScalars' fields with their element types: each one its own piece of
// memory (they cover the struct: checked in allocate).
struct Field {
  std::size_t offset, bytes;
  const char* elem;
};
#define CONVOY_FIELD(name, elem) Field{offsetof(DeviceScalars, name), sizeof(DeviceScalars::name), elem}
const Field kScalarFields[] = {
    CONVOY_FIELD(loss_sum, "f64"),       CONVOY_FIELD(correct, "i64"),        CONVOY_FIELD(step_loss, "f64"),
    CONVOY_FIELD(lr, "f32"),             CONVOY_FIELD(clip_scale, "f32"),     CONVOY_FIELD(adam_c1, "f32"),
    CONVOY_FIELD(adam_c2, "f32"),        CONVOY_FIELD(norm_partials, "f64"),  CONVOY_FIELD(step_loss_sum, "f64"),
    CONVOY_FIELD(step_correct, "i64"),   CONVOY_FIELD(train_examples, "i64"), CONVOY_FIELD(nonfinite, "i32"),
    CONVOY_FIELD(step_ok, "i32"),        CONVOY_FIELD(halted, "i32"),         CONVOY_FIELD(steps_run, "i32"),
    CONVOY_FIELD(steps_done, "i64")};
#undef CONVOY_FIELD

// The Program's regions whose values a step writes before it reads them,
// and no host reads after it (but the model's output, kept by loss(), and
// after a fault): the arena of activations and their gradients, the guard's
// saved state, the optimizer's packed copies.
const std::set<std::string> kScratch = {"activations", "state before the step", "packed parameters",
                                        "packed gradients"};

Shape with_batch(int64_t batch, const Shape& s) {
  Shape out{batch};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// Replicas' gradient reducer (replica_hooks.h): the mean over replicas, an
// all-reduce in the trace, so every replica applies the same update.
class AllReduceInTrace final : public GradientReducer {
 public:
  explicit AllReduceInTrace(pjrt::TracedMemory& mem) : mem_(mem) {}
  void finish(std::span<float> gradients) override {
    if (gradients.empty()) return;
    const Val sum = mem_.builder().all_reduce_sum(mem_.read(gradients.data(), {static_cast<int64_t>(gradients.size())}),
                                                  mem_.replicas());
    mem_.write(gradients.data(), mem_.builder().div(sum, mem_.builder().constant(mem_.replicas(), sum.shape)));
  }

 private:
  pjrt::TracedMemory& mem_;
};

// One layer's op: the Program's buffers for it and the trace its forward ran in.
struct LayerOp {
  OpBuffers b;
  bool view = false;
  uint64_t forward_trace = ~uint64_t{0};
};

class PjrtDevice final : public Device {
 public:
  PjrtDevice(pjrt::Client& client, int replicas)
      : mem_(client, replicas), platform_(client.platform()), all_reduce_(mem_) {}
  ~PjrtDevice() override = default;

  std::string name() const override { return "pjrt:" + platform_; }
  int replicas() const override { return mem_.replicas(); }
  // What set_gradient_reducer must be given with replicas (null: one replica).
  GradientReducer* replica_reducer() { return replicas() > 1 ? &all_reduce_ : nullptr; }
  const std::string& last_module() const { return mem_.last_module(); }
  int64_t steps_per_call(const CompileOptions& options) const override {
    return std::max<int64_t>(options.steps_per_execution, 1);
  }

  void make_ops(const nn::Model& model, const DeviceShape& shape, const std::vector<uint64_t>& seeds) override {
    model_ = std::make_unique<nn::Model>(model);
    shape_ = shape;
    seeds_ = seeds;
    ops_.resize(model.layers().size());
    for (std::size_t i = 0; i < ops_.size(); ++i)
      ops_[i].view = std::holds_alternative<nn::Flatten>(model.layers()[i].layer);
    auto slots = [this](float* const* base) {
      return [this, base](const nn::ParamSlot& slot) { return mem_.read(*base + slot.offset, slot.shape); };
    };
    layers_ = std::make_unique<pjrt::LayerEmitter>(mem_.builder(), *model_, shape.batch, slots(&params_),
                                                   slots(&state_));
  }
  bool is_view(std::size_t layer) const override { return ops_[layer].view; }
  int64_t align_floats() const override { return 16; }

  std::vector<void*> allocate(const std::vector<Region>& regions) override {
    std::vector<void*> at;
    for (const Region& r : regions) {
      const std::string what = r.what;
      if (what == "scalars") {
        at.push_back(allocate_scalars(r.bytes));
        scalars_at_ = static_cast<DeviceScalars*>(at.back());
        packed_ = static_cast<double*>(mem_.reserve(sizeof(double) * std::size(kScalarFields), "f64"));
        continue;
      }
      at.push_back(mem_.reserve(r.bytes, what == "run table" ? "i64" : "f32"));
      if (kScratch.count(what)) mem_.scratch(at.back(), r.bytes);
      if (what == "parameters") params_ = static_cast<float*>(at.back());
      if (what == "state") state_ = static_cast<float*>(at.back());
      if (what == "run table") runs_ = at.back();
    }
    const auto floats = [](int64_t n) { return sizeof(float) * static_cast<std::size_t>(n); };
    const int64_t batch = shape_.batch;
    for (auto& bank : banks_)
      for (int64_t i = 0; i < shape_.slots; ++i)
        bank.push_back({static_cast<float*>(mem_.reserve(floats(batch * numel(shape_.input)), "f32")),
                        static_cast<int32_t*>(mem_.reserve(sizeof(int32_t) * batch, "i32")),
                        static_cast<float*>(mem_.reserve(floats(batch * shape_.classes), "f32"))});
    // After a faulty training step the host reads its scratch (the
    // non-finite report): kept then.
    mem_.keep_scratch_if([this] {
      int32_t halted = 0;
      mem_.download_now(&halted, &scalars()->halted, sizeof halted);
      return halted != 0;
    });
    return at;
  }

  void bind_edges(float* input, float*) override { input_ = input; }
  void bind(std::size_t layer, OpBuffers buffers) override { ops_[layer].b = std::move(buffers); }

  // --- copies
  void to_device(void* dst, const void* src, std::size_t bytes) override {
    if (in_scalars(dst, bytes)) packed_fresh_ = false;
    mem_.upload(dst, src, bytes);
    if (dst == runs_) {  // the run table: gathers slice by it at trace time
      host_runs_.resize(bytes / sizeof(int64_t));
      copy_bytes(host_runs_.data(), src, bytes);
    }
  }
  void to_host(void* dst, const void* src, std::size_t bytes) const override {
    if (src == scalars_at_ && bytes == sizeof(DeviceScalars) && packed_fresh_) return unpack_scalars(dst);
    mem_.download(dst, src, bytes);
  }
  void replicas_to_host(void* dst, const void* src, std::size_t bytes) const override {
    mem_.download_each(dst, src, bytes);
  }
  void zero(void* dst, std::size_t bytes) override {
    if (in_scalars(dst, bytes)) packed_fresh_ = false;
    mem_.zero(dst, bytes);
  }
  bool all_finite(const float* values, int64_t n) const override {
    std::vector<float> host(static_cast<std::size_t>(n * replicas()));
    mem_.download_each(host.data(), values, sizeof(float) * static_cast<std::size_t>(n));
    for (float v : host)
      if (!std::isfinite(v)) return false;
    return true;
  }

  // --- feeding: each slot uploaded whole, rows past `rows` zero; replica r
  // gets rows [r * batch, (r + 1) * batch) of the whole batch.
  int stage(const float* x, Targets y, int64_t n, int64_t rows) override {
    const int bank = next_bank_;
    next_bank_ ^= 1;
    const int64_t all = shape_.batch * replicas(), example = numel(shape_.input), classes = shape_.classes;
    for (int64_t i = 0; i < n; ++i) {
      const Slot s = slot(bank, i);
      staging_.assign(all * example, 0.0f);
      copy_bytes(staging_.data(), x + i * all * example, sizeof(float) * rows * example);
      upload_parts(s.x, staging_.data(), example);
      if (y.dense) {
        staging_.assign(all * classes, 0.0f);
        copy_bytes(staging_.data(), y.dense + i * all * classes, sizeof(float) * rows * classes);
        upload_parts(s.dense, staging_.data(), classes);
      } else {
        labels_.assign(all, 0);
        copy_bytes(labels_.data(), y.labels + i * all, sizeof(int32_t) * rows);
        upload_parts(s.labels, labels_.data(), 1);
      }
    }
    return bank;
  }
  Slot slot(int bank, int64_t i) const override { return banks_[bank][static_cast<std::size_t>(i)]; }
  // The work of a batch is all enqueued: it runs now, as one module.
  void release(int) override {
    pack_scalars();
    mem_.run();
  }
  void load_input(const float* x, int64_t) override {
    mem_.drop_scratch();  // a step's scratch is dead after it (kept after a fault), but its output
    mem_.write(input_, mem_.read(x, with_batch(shape_.batch, shape_.input)));  // stage zeroed the rows past `rows`
  }
  void read_input_gradient(std::span<float>) const override {
    throw UserError("input gradient: the PJRT backend does not compute it; use the CPU backend");
  }

  // --- one step
  void forward(std::size_t layer, bool training) override {
    LayerOp& op = ops_[layer];
    if (op.view) return;  // the same memory, reshaped when read
    const nn::LayerPlan& plan = model_->layers()[layer];
    std::vector<Val> in;
    for (std::size_t k = 0; k < plan.inputs.size(); ++k)
      in.push_back(mem_.read(op.b.srcs[k], with_batch(shape_.batch, plan.input_shapes[k])));
    std::optional<Val> mask;
    if (const auto* d = std::get_if<nn::Dropout>(&plan.layer); d && training && d->rate > 0)
      mask = dropout_mask(layer, d->rate);
    const Val y = layers_->layer_forward(layer, in, training, mask ? &*mask : nullptr);
    mem_.write(op.b.dst, y);
    op.forward_trace = mem_.trace();
    if (training && plan.trainable && std::holds_alternative<nn::BatchNorm>(plan.layer)) {
      auto [mean, var] = layers_->running_statistics(layer);
      if (replicas() > 1 && !sync_batch_norm_) {  // each replica's own: their mean, the same everywhere
        auto& b = mem_.builder();
        const int64_t c = mean.shape.at(0);
        const Val both = b.all_reduce_sum(b.concatenate({mean, var}, 0), replicas());
        const Val avg = b.div(both, b.constant(replicas(), both.shape));
        mean = b.slice(avg, {0}, {c});
        var = b.slice(avg, {c}, {2 * c});
      }
      mem_.write(state_ + plan.state[0].offset, mean);
      mem_.write(state_ + plan.state[1].offset, var);
    }
  }

  void backward(std::size_t layer) override {
    LayerOp& op = ops_[layer];
    if (op.view) return;
    const nn::LayerPlan& plan = model_->layers()[layer];
    if (op.forward_trace != mem_.trace())
      throw std::logic_error("pjrt device: the backward of " + plan.name + " without its forward in the same trace");
    auto& b = mem_.builder();
    const Val dy = mem_.read(op.b.diff_dst, with_batch(shape_.batch, plan.output_shape));
    std::vector<bool> wants;
    for (float* d : op.b.diff_srcs) wants.push_back(d != nullptr);
    std::vector<Val> grads;
    const std::vector<Val> dx = layers_->layer_backward(layer, dy, grads, wants);
    for (std::size_t k = 0; k < dx.size(); ++k)
      if (wants[k]) mem_.write(op.b.diff_srcs[k], dx[k]);
    for (std::size_t k = 0; k < plan.params.size(); ++k) {  // a frozen layer's stay zero, as the CPU's
      const nn::ParamSlot& slot = plan.params[k];
      mem_.write(op.b.grads + (slot.offset - plan.params[0].offset),
                 plan.trainable ? b.reshape(grads.at(k), {slot.size()}) : b.constant(0, {slot.size()}));
    }
  }

  void loss(const LossCall& c) override {
    auto& b = mem_.builder();
    // This replica's rows, all of them counted but in a short batch of
    // several replicas (each its own rows of it, by weights).
    const int64_t rows = replicas() == 1 ? c.rows : shape_.batch;
    std::optional<Val> valid;
    if (c.rows != shape_.batch * replicas() && replicas() > 1) valid = counted_rows(c.rows);
    const Shape rows_cols{rows, c.cols};
    const Val out = mem_.read(c.out, rows_cols);
    mem_.keep(c.out, sizeof(float) * static_cast<std::size_t>(rows * c.cols));  // Held::output
    Val targets;
    if (c.targets.dense) {
      targets = mem_.read(c.targets.dense, rows_cols);
    } else {  // class indices as one-hot rows: the same targets, bit for bit
      const Val labels = b.broadcast(mem_.read(c.targets.labels, {rows}), rows_cols, {0});
      targets = b.convert(b.compare(b.iota(rows_cols, 1), labels, "EQ"), "f32");
    }
    const pjrt::LossOut r = pjrt::emit_loss(b, c.loss, c.smoothing, out, targets, valid, c.d_out != nullptr);
    if (c.d_out) {
      if (c.grad_rows != c.rows) throw std::logic_error("pjrt device: a loss gradient over other rows than the loss's");
      mem_.write(c.d_out, *r.d_out);
    }
    // The sums over replicas (one all-reduce): the same on every replica.
    Val loss = b.convert(r.loss_sum, "f64"), correct = b.convert(r.correct, "f64");
    if (replicas() > 1 && (c.step_loss || c.loss_sum || c.correct)) {
      const Val both = b.all_reduce_sum(b.concatenate({b.reshape(loss, {1}), b.reshape(correct, {1})}, 0), replicas());
      loss = b.reshape(b.slice(both, {0}, {1}), {});
      correct = b.reshape(b.slice(both, {1}, {2}), {});
    }
    if (c.step_loss) mem_.write(c.step_loss, loss);
    if (c.loss_sum) add_to(c.loss_sum, loss);
    if (c.correct) add_to(c.correct, b.convert(correct, "i64"));
  }

  void sum(float* into, const std::vector<const float*>& parts, int64_t n) override {
    auto& b = mem_.builder();
    Val total = mem_.read(parts[0], {n});
    for (std::size_t k = 1; k < parts.size(); ++k) total = b.add(total, mem_.read(parts[k], {n}));
    mem_.write(into, total);
  }

  void begin_guarded_step(float* state, float* state_before, int64_t state_n, DeviceScalars* s) override {
    auto& b = mem_.builder();
    mem_.write(&s->step_loss_sum, b.constant(0, {}, "f64"));
    mem_.write(&s->step_correct, b.constant(0, {}, "i64"));
    mem_.write(&s->nonfinite, b.constant(0, {}, "i32"));
    if (state_n > 0) mem_.write(state_before, mem_.read(state, {state_n}));
  }

  // commit_guarded_step, with selects for its branches.
  void finish_guarded_step(const float* grads, int64_t n, float* state, const float* state_before, int64_t state_n,
                           int64_t batch, DeviceScalars* s) override {
    auto& b = mem_.builder();
    auto scalar = [&](const void* at) { return mem_.read(at, {}); };
    auto k = [&](double v, const char* elem) { return b.constant(v, {}, elem); };
    const Val grads_finite =
        n > 0 ? b.reduce(b.is_finite(mem_.read(grads, {n})), "and", 1, {0}) : b.constant(1, {}, "i1");
    mem_.write(&s->nonfinite, b.select(grads_finite, k(0, "i32"), k(1, "i32")));
    const Val step_loss = scalar(&s->step_loss_sum);
    const Val finite = b.binary("and", grads_finite, b.is_finite(step_loss));
    const Val halted = scalar(&s->halted);
    const Val running = b.compare(halted, k(0, "i32"), "EQ");
    const Val ok = b.binary("and", running, finite);
    mem_.write(&s->step_ok, b.select(ok, k(1, "i32"), k(0, "i32")));
    mem_.write(&s->halted, b.select(ok, halted, k(1, "i32")));
    mem_.write(&s->steps_run, b.add(scalar(&s->steps_run), b.select(running, k(1, "i32"), k(0, "i32"))));
    const auto add_if_ok = [&](void* at, const Val& v, const char* elem) { add_to(at, b.select(ok, v, k(0, elem))); };
    add_if_ok(&s->steps_done, k(1, "i64"), "i64");
    add_if_ok(&s->loss_sum, step_loss, "f64");
    add_if_ok(&s->correct, scalar(&s->step_correct), "i64");
    add_if_ok(&s->train_examples, k(static_cast<double>(batch), "i64"), "i64");
    if (state_n > 0)
      mem_.write(state, b.select(b.splat(ok, {state_n}), mem_.read(state, {state_n}), mem_.read(state_before, {state_n})));
    note_guard();
  }

  void optimizer_step(const optim::OptimizerOptions& opt, float* params, float* grads, float* state, int64_t n,
                      DeviceScalars* s) override {
    if (n == 0) return;
    auto& b = mem_.builder();
    const int64_t state_n = optim::state_size(opt, n);
    const Val p = mem_.read(params, {n}), st = mem_.read(state, {state_n});
    const pjrt::Updated u = pjrt::emit_update(b, opt, p, mem_.read(grads, {n}), st, mem_.read(&s->lr, {}));
    const Val ok = b.compare(mem_.read(&s->step_ok, {}), b.constant(0, {}, "i32"), "NE");
    mem_.write(params, b.select(b.splat(ok, {n}), u.params, p));
    mem_.write(state, b.select(b.splat(ok, {state_n}), u.opt, st));
  }

  void gather_runs(const float* flat, float* packed, const int64_t*, int64_t count, int64_t packed_n) override {
    std::vector<Val> parts;
    for (int64_t r = 0; r < count; ++r) {
      const auto [from, at, length] = run(r, count, packed_n);
      parts.push_back(mem_.read(flat + from, {length}));
      (void)at;
    }
    mem_.write(packed, parts.size() == 1 ? parts[0] : mem_.builder().concatenate(parts, 0));
  }
  void scatter_runs(const float* packed, float* flat, const int64_t*, int64_t count, int64_t packed_n) override {
    const Val all = mem_.read(packed, {packed_n});
    for (int64_t r = 0; r < count; ++r) {
      const auto [to, at, length] = run(r, count, packed_n);
      mem_.write(flat + to, mem_.builder().slice(all, {at}, {at + length}));
    }
  }

  // --- profiling: a step's layers fuse into one module with no clock per
  // layer, so no times (the profile says so); the marks cost nothing and
  // the chunk still runs as one module.
  void prepare_marks(std::size_t) override {}
  void mark(std::size_t) override {}
  std::vector<double> mark_seconds() override { return {}; }

  void synchronize() override { mem_.run(); }

  // Replicas are the program's own: only their in-trace all-reduce will do
  // (a process's reducer, --strategy mpi, cannot reach into the program).
  void accept_gradient_reducer(GradientReducer* reducer) override {
    require(reducer == replica_reducer(), name() + ": this backend cannot train as one of several replicas");
  }
  // Synchronised batch norm: the emitter all-reduces each batch norm's sums
  // in the trace (the host function is never called: the sums never leave
  // the devices).
  void set_batch_norm_reducer(StatisticsReducer reducer, GradientReducer* gradient_reducer) override {
    require(!reducer || (gradient_reducer != nullptr && gradient_reducer == replica_reducer()),
            name() + ": synchronised batch norm needs the program's replicas (--replicas)");
    sync_batch_norm_ = static_cast<bool>(reducer);
    layers_->synchronise(sync_batch_norm_ ? replicas() : 1);
  }

 private:
  void* allocate_scalars(std::size_t bytes) {
    char* at = static_cast<char*>(mem_.reserve(bytes, "f64"));
    std::size_t covered = 0;
    for (const Field& f : kScalarFields) {
      if (f.offset != covered) throw std::logic_error("pjrt device: DeviceScalars has a field the device lacks");
      mem_.define(at + f.offset, f.bytes, f.elem);
      covered += f.bytes;
    }
    if (covered != bytes) throw std::logic_error("pjrt device: DeviceScalars has a field the device lacks");
    return at;
  }

  // The host reads DeviceScalars after each chunk of work: one download of
  // every field as f64 (the counts are far below 2^53), written at the end
  // of the trace, rather than one per field. Not norm_partials (no kernel
  // here writes it: read apart).
  bool in_scalars(const void* at, std::size_t bytes) const {
    const auto b = reinterpret_cast<uintptr_t>(at), s = reinterpret_cast<uintptr_t>(scalars_at_);
    return b < s + sizeof(DeviceScalars) && b + bytes > s;
  }
  static bool packed(const Field& f) { return f.bytes == elem_size(f.elem); }
  static std::size_t elem_size(const char* elem) { return pjrt::elem_bytes(elem); }
  void pack_scalars() {
    auto& b = mem_.builder();
    std::vector<Val> parts;
    const char* at = reinterpret_cast<const char*>(scalars_at_);
    for (const Field& f : kScalarFields)
      parts.push_back(packed(f) ? b.reshape(b.convert(mem_.read(at + f.offset, {}), "f64"), {1}) : b.constant(0, {1}, "f64"));
    mem_.write(packed_, b.concatenate(parts, 0));
    packed_fresh_ = true;
  }
  void unpack_scalars(void* dst) const {
    double v[std::size(kScalarFields)];
    mem_.download(v, packed_, sizeof v);
    char* out = static_cast<char*>(dst);
    const char* at = reinterpret_cast<const char*>(scalars_at_);
    for (std::size_t k = 0; k < std::size(kScalarFields); ++k) {
      const Field& f = kScalarFields[k];
      char* to = out + f.offset;
      const std::string elem = f.elem;
      if (!packed(f)) {
        mem_.download_now(to, at + f.offset, f.bytes);
      } else if (elem == "f64") {
        std::memcpy(to, &v[k], sizeof(double));
      } else if (elem == "i64") {
        const auto i = static_cast<int64_t>(v[k]);
        std::memcpy(to, &i, sizeof i);
      } else if (elem == "f32") {
        const auto x = static_cast<float>(v[k]);
        std::memcpy(to, &x, sizeof x);
      } else {
        const auto i = static_cast<int32_t>(v[k]);
        std::memcpy(to, &i, sizeof i);
      }
    }
  }

  void add_to(void* at, const Val& v) { mem_.write(at, mem_.builder().add(mem_.read(at, v.shape), v)); }

  // `all` holds the whole batch's rows of `width` elements: replica r's part to it.
  template <class T>
  void upload_parts(const T* at, const T* all, int64_t width) {
    const int64_t part = shape_.batch * width;
    std::vector<const void*> parts;
    for (int r = 0; r < replicas(); ++r) parts.push_back(all + r * part);
    mem_.upload_each(const_cast<T*>(at), parts, sizeof(T) * static_cast<std::size_t>(part));
  }

  // f32[batch] per replica: 1 for each of its rows among the first `count`
  // of the whole batch, 0 past them (the weights of a short batch's loss).
  Val counted_rows(int64_t count) {
    const int64_t batch = shape_.batch;
    weights_.assign(static_cast<std::size_t>(batch * replicas()), 0.0f);
    std::fill_n(weights_.begin(), count, 1.0f);
    std::vector<const void*> parts;
    for (int r = 0; r < replicas(); ++r) parts.push_back(weights_.data() + r * batch);
    return mem_.argument(mem_.copies(parts, "f32", batch), batch, "f32");
  }

  // Run r of the run table: its flat start, packed start and length.
  std::tuple<int64_t, int64_t, int64_t> run(int64_t r, int64_t count, int64_t packed_n) const {
    const int64_t at = host_runs_.at(count + r);
    const int64_t end = r + 1 < count ? host_runs_.at(count + r + 1) : packed_n;
    return {host_runs_.at(r), at, end - at};
  }

  // Training steps applied before the one being traced: steps_done as the
  // trace started (read once per trace, while it is still a buffer) plus
  // the guards traced since (a step after a faulty one changes nothing, so
  // its masks do not matter).
  int64_t steps_done() {
    if (steps_trace_ != mem_.trace()) {
      if (guards_ > 0 && guards_trace_ == mem_.trace())
        throw std::logic_error("pjrt device: dropout after a guarded step in one trace, before any dropout");
      int64_t at_start = 0;
      mem_.download_now(&at_start, &scalars()->steps_done, sizeof at_start);
      steps_at_start_ = at_start;
      steps_trace_ = mem_.trace();
    }
    return steps_at_start_ + (guards_trace_ == mem_.trace() ? guards_ : 0);
  }
  void note_guard() {
    if (guards_trace_ != mem_.trace()) {
      guards_trace_ = mem_.trace();
      guards_ = 0;
    }
    ++guards_;
  }
  DeviceScalars* scalars() const { return scalars_at_; }

  // The whole batch's masks, drawn as the CPU draws them for one batch of
  // that size; replica r gets its rows'.
  Val dropout_mask(std::size_t layer, float rate) {
    const Shape& example = model_->layers()[layer].output_shape;
    const int64_t batch = shape_.batch, n = batch * numel(example);
    mask_.resize(static_cast<std::size_t>(n * replicas()));
    pjrt::draw_dropout_masks(mask_, example, rate, seeds_[layer], steps_done(), batch * replicas());
    std::vector<const void*> parts;
    for (int r = 0; r < replicas(); ++r) parts.push_back(mask_.data() + r * n);
    return mem_.builder().reshape(mem_.argument(mem_.copies(parts, "f32", n), n, "f32"), with_batch(batch, example));
  }

  mutable pjrt::TracedMemory mem_;
  std::string platform_;
  AllReduceInTrace all_reduce_;
  bool sync_batch_norm_ = false;
  std::unique_ptr<nn::Model> model_;
  DeviceShape shape_;
  std::vector<uint64_t> seeds_;
  std::vector<LayerOp> ops_;
  std::unique_ptr<pjrt::LayerEmitter> layers_;
  float *params_ = nullptr, *state_ = nullptr, *input_ = nullptr;
  DeviceScalars* scalars_at_ = nullptr;
  double* packed_ = nullptr;  // pack_scalars' copy of the fields
  bool packed_fresh_ = false;
  void* runs_ = nullptr;
  std::vector<int64_t> host_runs_;
  std::vector<Slot> banks_[2];
  int next_bank_ = 0;
  std::vector<float> staging_, mask_, weights_;
  std::vector<int32_t> labels_;
  uint64_t steps_trace_ = ~uint64_t{0}, guards_trace_ = ~uint64_t{0};
  int64_t steps_at_start_ = 0, guards_ = 0;
};

}  // namespace

std::unique_ptr<Executable> compile_pjrt_program(const nn::Model& model, const CompileOptions& options, uint64_t seed,
                                                 pjrt::Client& client) {
  auto device = std::make_unique<PjrtDevice>(client, options.pjrt.replicas);
  GradientReducer* all_reduce = device->replica_reducer();
  auto program = std::make_unique<Program>(model, options, seed, std::move(device));
  if (all_reduce) program->set_gradient_reducer(all_reduce);
  if (all_reduce && options.pjrt.sync_batch_norm)
    program->set_batch_norm_reducer([](std::span<double>) {
      throw std::logic_error("pjrt device: batch-norm sums are all-reduced in the trace, not on the host");
    });
  return program;
}

const std::string& pjrt_last_module(Executable& e) {
  auto* program = dynamic_cast<Program*>(&e);
  if (!program) throw std::logic_error("pjrt_last_module: not a Program");
  return dynamic_cast<PjrtDevice&>(program->device_for_tests()).last_module();
}

}  // namespace convoy
