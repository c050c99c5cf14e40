#include "backends/fake/fake_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/backend_entry.h"

namespace convoy {
namespace {

// One region with a PROT_NONE page on either side; its end touches the
// trailing one.
class GuardedRegion {
 public:
  explicit GuardedRegion(std::size_t bytes) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t rounded = (bytes + 63) / 64 * 64;  // keeps 64-byte alignment
    const std::size_t body = (rounded + page - 1) / page * page;
    size_ = body + 2 * page;
    void* base = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(base);
    ::mprotect(base_, page, PROT_NONE);
    ::mprotect(base_ + page + body, page, PROT_NONE);
    data_ = base_ + page + body - rounded;  // mmap zeroes
  }
  GuardedRegion(const GuardedRegion&) = delete;
  GuardedRegion& operator=(const GuardedRegion&) = delete;
  ~GuardedRegion() { ::munmap(base_, size_); }
  char* data() const { return data_; }

 private:
  char* base_ = nullptr;
  char* data_ = nullptr;
  std::size_t size_ = 0;
};

struct Recording final : CapturedSteps {
  std::vector<std::function<void()>> work;
};

class FakeDevice final : public Device, public FakeStream {
 public:
  FakeDevice(std::unique_ptr<Device> host, const FakeDeviceOptions& options)
      : host_(std::move(host)), options_(options) {}
  ~FakeDevice() override { run_queue(); }

  FakeDeviceCounts counts;

  std::string name() const override { return "fake (host memory behind guard pages)"; }
  int64_t steps_per_call(const CompileOptions& options) const override {
    return std::max<int64_t>(options.steps_per_execution, 1);
  }

  void make_ops(const nn::Model& model, const DeviceShape& shape, const std::vector<uint64_t>& seeds) override {
    shape_ = shape;
    host_->make_ops(model, shape, seeds);
  }
  bool is_view(std::size_t layer) const override { return host_->is_view(layer); }
  int64_t align_floats() const override { return host_->align_floats(); }

  std::vector<void*> allocate(const std::vector<Region>& regions) override {
    host_->allocate({});  // the kernels' own scratch
    std::vector<void*> at;
    for (const Region& r : regions) at.push_back(allocate_one(r.bytes));
    example_bytes_ = sizeof(float) * static_cast<std::size_t>(numel(shape_.input));
    slot_x_ = shape_.batch * example_bytes_;
    slot_labels_ = sizeof(int32_t) * static_cast<std::size_t>(shape_.batch);
    slot_dense_ = sizeof(float) * static_cast<std::size_t>(shape_.batch * shape_.classes);
    for (int b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < shape_.slots; ++i) {
        // Each part of each slot guarded on its own: a copy of one batch too
        // many rows (or labels) crashes.
        banks_[b].push_back({static_cast<float*>(allocate_one(slot_x_)),
                             static_cast<int32_t*>(allocate_one(slot_labels_)),
                             static_cast<float*>(allocate_one(slot_dense_))});
      }
      pinned_[b].resize(static_cast<std::size_t>(shape_.slots));
    }
    return at;
  }

  void* allocate_one(std::size_t bytes) {
    regions_.push_back(std::make_unique<GuardedRegion>(bytes));
    return regions_.back()->data();
  }

  void bind_edges(float* input, float* d_input) override { host_->bind_edges(input, d_input); }
  void bind(std::size_t layer, OpBuffers buffers) override { host_->bind(layer, std::move(buffers)); }

  void to_device(void* dst, const void* src, std::size_t bytes) override {
    run_queue();
    copy_bytes(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, std::size_t bytes) const override {
    run_queue();
    copy_bytes(dst, src, bytes);
  }
  void zero(void* dst, std::size_t bytes) override {
    enqueue([dst, bytes] { zero_bytes(dst, bytes); });
  }
  bool all_finite(const float* values, int64_t n) const override {
    run_queue();
    return host_->all_finite(values, n);
  }

  // Host copies first (a GPU's pinned banks), then a copy into the device
  // bank as work on the stream.
  int stage(const float* x, Targets y, int64_t n, int64_t rows) override {
    const int bank = next_bank_;
    next_bank_ ^= 1;
    if (upload_pending_[bank]) run_queue();  // the pinned bank is free once its upload ran
    const int64_t batch = shape_.batch, classes = shape_.classes;
    for (int64_t i = 0; i < n; ++i) {
      HostSlot& h = pinned_[bank][static_cast<std::size_t>(i)];
      const auto* xb = reinterpret_cast<const char*>(x + i * batch * numel(shape_.input));
      h.x.assign(xb, xb + rows * example_bytes_);
      h.labels.clear();
      h.dense.clear();
      if (y.dense)
        h.dense.assign(y.dense + i * batch * classes, y.dense + (i * batch + rows) * classes);
      else
        h.labels.assign(y.labels + i * batch, y.labels + i * batch + rows);
    }
    upload_pending_[bank] = true;
    enqueue([this, bank, n] {
      for (int64_t i = 0; i < n; ++i) {
        const HostSlot& h = pinned_[bank][static_cast<std::size_t>(i)];
        const DeviceSlot& d = banks_[bank][static_cast<std::size_t>(i)];
        copy_bytes(d.x, h.x.data(), h.x.size());
        copy_bytes(d.labels, h.labels.data(), sizeof(int32_t) * h.labels.size());
        copy_bytes(d.dense, h.dense.data(), sizeof(float) * h.dense.size());
      }
      upload_pending_[bank] = false;
    });
    return bank;
  }
  Slot slot(int bank, int64_t i) const override {
    const DeviceSlot& d = banks_[bank][static_cast<std::size_t>(i)];
    return {d.x, d.labels, d.dense};
  }
  void release(int) override {}

  void load_input(const float* x, int64_t rows) override {
    enqueue([this, x, rows] { host_->load_input(x, rows); });
  }
  void read_input_gradient(std::span<float> out) const override {
    run_queue();
    host_->read_input_gradient(out);
  }

  void forward(std::size_t layer, bool training) override {
    enqueue([this, layer, training] { host_->forward(layer, training); });
  }
  void backward(std::size_t layer) override {
    enqueue([this, layer] { host_->backward(layer); });
  }
  void loss(const LossCall& call) override {
    enqueue([this, call] { host_->loss(call); });
  }
  void sum(float* into, const std::vector<const float*>& parts, int64_t n) override {
    enqueue([this, into, parts, n] { host_->sum(into, parts, n); });
  }
  void begin_guarded_step(float* state, float* state_before, int64_t state_n, DeviceScalars* s) override {
    enqueue([=, this] { host_->begin_guarded_step(state, state_before, state_n, s); });
  }
  void finish_guarded_step(const float* grads, int64_t n, float* state, const float* state_before, int64_t state_n,
                           int64_t batch, DeviceScalars* s) override {
    enqueue([=, this] { host_->finish_guarded_step(grads, n, state, state_before, state_n, batch, s); });
  }
  void optimizer_step(const optim::OptimizerOptions& opt, float* params, float* grads, float* state, int64_t n,
                      DeviceScalars* s) override {
    enqueue([=, this] { host_->optimizer_step(opt, params, grads, state, n, s); });
  }
  void gather_runs(const float* flat, float* packed, const int64_t* runs, int64_t count, int64_t packed_n) override {
    enqueue([=, this] { host_->gather_runs(flat, packed, runs, count, packed_n); });
  }
  void scatter_runs(const float* packed, float* flat, const int64_t* runs, int64_t count, int64_t packed_n) override {
    enqueue([=, this] { host_->scatter_runs(packed, flat, runs, count, packed_n); });
  }

  void prepare_marks(std::size_t count) override { host_->prepare_marks(count); }
  void mark(std::size_t k) override {
    enqueue([this, k] { host_->mark(k); });
  }
  std::vector<double> mark_seconds() override {
    run_queue();
    return host_->mark_seconds();
  }

  bool can_capture() const override { return true; }
  void begin_capture() override {
    if (capture_) throw std::logic_error("fake device: a capture is already under way");
    capture_ = std::make_unique<Recording>();
  }
  std::unique_ptr<CapturedSteps> end_capture(bool keep) override {
    std::unique_ptr<Recording> recording = std::move(capture_);
    if (!keep) return nullptr;
    counts.captures += 1;
    return recording;
  }
  void launch(CapturedSteps& steps) override {
    counts.replays += 1;
    for (const auto& work : static_cast<Recording&>(steps).work) enqueue(work);
  }
  void synchronize() override { run_queue(); }

  void accept_gradient_reducer(GradientReducer* reducer) override {
    bind_device_reducer(reducer, 0, static_cast<FakeStream*>(this), name());
  }
  void set_batch_norm_reducer(StatisticsReducer reducer, GradientReducer* gradient_reducer) override {
    require(!reducer || gradient_reducer != nullptr, name() + ": synchronised batch norm needs a device reducer");
    host_->set_batch_norm_reducer(std::move(reducer), gradient_reducer);
  }

  // FakeStream: while capturing, work is recorded, not queued.
  void enqueue(std::function<void()> work) override {
    if (capture_) {
      if (options_.fail_capture_at > 0 && static_cast<int64_t>(capture_->work.size()) + 1 == options_.fail_capture_at) {
        counts.failed_captures += 1;
        throw std::runtime_error("fake device: capture failed on purpose at its work item " +
                                 std::to_string(options_.fail_capture_at));
      }
      capture_->work.push_back(std::move(work));
      return;
    }
    queue_.push_back(std::move(work));
  }

 private:
  struct DeviceSlot {
    float* x;
    int32_t* labels;
    float* dense;
  };
  struct HostSlot {
    std::vector<char> x;
    std::vector<int32_t> labels;
    std::vector<float> dense;
  };

  // The host waits: everything enqueued runs, in order.
  void run_queue() const {
    while (!queue_.empty()) {
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      work();
    }
  }

  std::unique_ptr<Device> host_;
  FakeDeviceOptions options_;
  DeviceShape shape_;
  std::vector<std::unique_ptr<GuardedRegion>> regions_;
  std::vector<DeviceSlot> banks_[2];
  std::vector<HostSlot> pinned_[2];
  bool upload_pending_[2] = {false, false};
  int next_bank_ = 0;
  std::size_t example_bytes_ = 0, slot_x_ = 0, slot_labels_ = 0, slot_dense_ = 0;
  mutable std::deque<std::function<void()>> queue_;
  std::unique_ptr<Recording> capture_;
};

FakeDevice& fake_of(Program& program) { return dynamic_cast<FakeDevice&>(program.device_for_tests()); }

}  // namespace

std::unique_ptr<Program> compile_fake(const nn::Model& model, const CompileOptions& options, uint64_t seed,
                                      const FakeDeviceOptions& fake) {
  auto device = std::make_unique<FakeDevice>(cpu::backend(options.cpu_kernels).make_device(options), fake);
  return std::make_unique<Program>(model, options, seed, std::move(device));
}

FakeDeviceCounts fake_device_counts(Program& program) { return fake_of(program).counts; }

void* fake_device_allocate(Program& program, std::size_t bytes) { return fake_of(program).allocate_one(bytes); }

}  // namespace convoy
