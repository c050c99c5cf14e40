#pragma once
// The fake device: the device contract (backends/device.h) run on the CPU
// the way a GPU runs it, so the host logic the CUDA device depends on (the
// Program's step, captured steps and their fallback, the replicas' reducer)
// is tested on machines without a GPU.
//   - Device memory is host memory behind guard pages (PROT_NONE pages on
//     either side of each region, the region's end against the trailing
//     one): a copy past a buffer's end crashes at once.
//   - The stream is a queue of work run in order, only when the host waits
//     (to_host, mark_seconds, synchronize, a bank reused): work that reads a
//     buffer before the copy into it was enqueued sees stale data, as on a GPU.
//   - Capture records the work enqueued between begin and end instead of
//     running it; a launch enqueues the recording again (a replay), with the
//     arguments it was captured with. Captures and replays are counted, and a
//     capture can be made to fail on purpose at its k-th piece of work.
// The kernels are a CPU device's (cpu_device.cpp), called from the queue.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "backends/device.h"
#include "backends/device_reducer.h"
#include "backends/gradient_buckets.h"
#include "backends/program.h"

namespace convoy {

// What a DeviceGradientReducer bound to a fake device gets as its stream.
class FakeStream {
 public:
  virtual ~FakeStream() = default;
  virtual void enqueue(std::function<void()> work) = 0;
};

struct FakeDeviceOptions {
  // > 0: a capture fails (throws, as a CUDA call does) when its k-th piece
  // of work is enqueued.
  int64_t fail_capture_at = 0;
};

struct FakeDeviceCounts {
  int64_t captures = 0;         // captures that succeeded
  int64_t failed_captures = 0;  // captures that failed on purpose
  int64_t replays = 0;          // launches of captured steps
};

// Compiles `model` onto a fake device over the CPU kernels CompileOptions
// picks. steps_per_execution > 1 (and gpu.graphs) makes train_steps capture.
std::unique_ptr<Program> compile_fake(const nn::Model& model, const CompileOptions& options, uint64_t seed,
                                      const FakeDeviceOptions& fake = {});
// The counts of a Program compile_fake made.
FakeDeviceCounts fake_device_counts(Program& program);
// A region of `bytes` of the fake device's memory behind guard pages (tests
// of the guard pages themselves); freed with the program.
void* fake_device_allocate(Program& program, std::size_t bytes);

// One replica's gradient reducer on a fake device: sends gradients in
// buckets (GradientBuckets, as the NCCL group) as work on the device's
// stream, "averaging" over one replica (the values stay). Counts the
// collectives that ran, so replays of captured steps count too.
class FakeGroupReducer final : public DeviceGradientReducer {
 public:
  explicit FakeGroupReducer(std::size_t bucket_floats) : buckets_(bucket_floats) {}
  void bind(int, void* stream) override { stream_ = static_cast<FakeStream*>(stream); }
  void ready(std::span<float> layer) override {
    buckets_.ready(layer, [this](std::span<float> b) { send(b); });
  }
  void finish(std::span<float> gradients) override {
    buckets_.finish(gradients, [this](std::span<float> b) { send(b); });
  }
  void abandon_step() override { buckets_.abandon(); }
  void sum_statistics(double*, std::size_t) override {}
  int64_t collectives_run() const { return collectives_run_; }
  int64_t floats_run() const { return floats_run_; }

 private:
  void send(std::span<float> bucket) {
    stream_->enqueue([this, n = bucket.size()] {
      collectives_run_ += 1;
      floats_run_ += static_cast<int64_t>(n);
    });
  }
  GradientBuckets buckets_;
  FakeStream* stream_ = nullptr;
  int64_t collectives_run_ = 0, floats_run_ = 0;
};

}  // namespace convoy
