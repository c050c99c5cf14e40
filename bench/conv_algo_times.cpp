// One convolution per shape (stride 1 unless --stride), timed pass by pass with oneDNN's
// direct kernels and with another choice (CompileOptions::conv_algo): by
// default 3×3 pad 1 against Winograd F(2×2) or F(4×4), 3×3 (winograd_conv.h); with
// --against auto, against what `auto` runs, which for few channels is our
// direct kernels (direct_conv.h): the measurements behind the `auto` rules.
// Best of --reps runs; on one thread (OMP_NUM_THREADS=1) the thread's CPU
// time, which other processes on a busy machine barely disturb.
// --precision bf16 runs the first column (oneDNN's) in bf16, conversions
// included, and the other in fp32: on an AMX CPU, the measurements behind
// what bf16 routes to oneDNN (conv2d_op.cpp, DnnlEnv::bf16_on_amx).
//
//   conv_algo_times [--reps 10] [--against winograd|auto]     (a sweep of shapes)
//   conv_algo_times --channels 64 --filters 64 --size 16 --batch 64 [--kernel 3 --padding 1 --stride 1] [--reps 10]
//   [--kernels avx2]  (our kernels' copy; DNNL_MAX_CPU_ISA=AVX2 caps oneDNN's alike)
//   [--precision bf16]  (the oneDNN column in bf16)
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "backends/cpu/backend_entry.h"
#include "op_timing.h"
#include "convoy/backends/devices.h"
#include "convoy/core/cpu_info.h"
#include "convoy/core/error.h"
#include "convoy/core/rng.h"
#include "convoy/nn/sequential.h"

namespace {

using namespace convoy;

struct Shape4 {
  int64_t batch, channels, filters, size, kernel = 3, padding = 1, stride = 1;
};

struct PassTimes {
  double forward = 1e9, weights = 1e9, data = 1e9;  // seconds, best of reps
};

PassTimes time_conv(const Shape4& s, const char* algo, Precision precision, KernelSet kernels, int64_t reps,
                    clockid_t clock) {
  const nn::Sequential model({s.channels, s.size, s.size},
                             {nn::Conv2d{.filters = s.filters, .kernel = s.kernel, .stride = s.stride, .padding = s.padding, .bias = false}});
  const nn::LayerPlan& plan = model.layers()[0];
  Rng rng(7);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
    return v;
  };
  const int64_t in = s.batch * numel(plan.input_shape), out = s.batch * numel(plan.output_shape);
  std::vector<float> x = random(in), y(static_cast<std::size_t>(out)), dy = random(out),
                     dx(static_cast<std::size_t>(in)), p = model.initial_parameters(1), g(p.size());
  PassTimes best;
  for (const bool with_data : {false, true}) {  // the weight gradient alone, then the input gradient alone
    nn::LayerPlan frozen = plan;
    frozen.trainable = !with_data;  // a frozen layer computes no weight gradient
    cpu::DnnlEnv env;
    if (precision == Precision::bf16) env.compute = dnnl::memory::data_type::bf16;
    auto op = cpu::backend(kernels).make_cpu_op(env, frozen, s.batch, 1, parse_conv_algo(algo));
    std::vector<float> scratch(op->scratchpad_bytes() / sizeof(float) + 16);
    cpu::OpBuffers b;
    b.src = x.data();
    b.dst = y.data();
    b.diff_dst = dy.data();
    b.diff_src = with_data ? dx.data() : nullptr;
    b.params = p.data();
    b.grads = g.data();
    b.scratchpad = scratch.data();
    b.srcs = {b.src};
    b.diff_srcs = {b.diff_src};
    op->bind(env, b);
    const bench::BestPasses t = bench::best_passes(*op, env, clock, reps, 2);
    if (!with_data) {
      best.forward = t.forward;
      best.weights = t.backward;
    } else {
      best.data = t.backward;
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) try {
  int64_t reps = 10;
  Shape4 one{0, 0, 0, 0};
  std::string against = "winograd";
  KernelSet kernels = KernelSet::automatic;
  Precision precision = Precision::fp32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--reps") reps = std::stoll(value);
    else if (flag == "--channels") one.channels = std::stoll(value);
    else if (flag == "--filters") one.filters = std::stoll(value);
    else if (flag == "--size") one.size = std::stoll(value);
    else if (flag == "--batch") one.batch = std::stoll(value);
    else if (flag == "--kernel") one.kernel = std::stoll(value);
    else if (flag == "--padding") one.padding = std::stoll(value);
    else if (flag == "--stride") one.stride = std::stoll(value);
    else if (flag == "--against") against = conv_algo_name(parse_conv_algo(value));
    else if (flag == "--kernels") kernels = parse_kernel_set(value);
    else if (flag == "--precision") precision = parse_precision(value);
    else
      throw UserError("unknown flag " + flag +
                      "; flags: --channels --filters --size --batch --kernel --padding --stride --against --kernels "
                      "--precision --reps");
  }
  std::vector<Shape4> shapes = {
      {64, 64, 64, 16},   {64, 128, 128, 8}, {64, 256, 256, 4}, {64, 512, 512, 2},  // ResNet-18 at 64×64
      {64, 3, 16, 32},    {64, 8, 8, 32},    {64, 16, 16, 32},  {64, 32, 32, 32},
      {64, 16, 16, 8},    {64, 32, 64, 8},   {8, 64, 64, 56},   {128, 10, 20, 12},
  };
  if (against == "auto")  // few channels, stride 1: direct_conv.h's shapes
    shapes = {{128, 10, 20, 12, 5, 0}, {128, 6, 16, 14, 5, 0}, {64, 16, 32, 16, 5, 2}, {64, 3, 16, 32},
              {64, 8, 8, 32},          {64, 16, 16, 32},       {64, 32, 32, 16},      {64, 32, 64, 8},
              {64, 3, 32, 32},         {64, 12, 24, 16, 7, 3}, {64, 20, 40, 8, 1, 0}};
  if (precision == Precision::bf16) {
    if (const std::string why = cpu_bf16_missing(); !why.empty()) throw UserError("--precision bf16: " + why);
  }
  if (one.channels > 0) {
    if (one.filters <= 0) one.filters = one.channels;
    if (one.size <= 0) one.size = 16;
    if (one.batch <= 0) one.batch = 64;
    shapes = {one};
  }
  const bool cpu_clock = omp_get_max_threads() == 1;
  const clockid_t clock = cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  std::printf("%d thread(s), best of %lld, %s, %s kernels; ms direct (oneDNN, %s) / %s (fp32)\n",
              omp_get_max_threads(), static_cast<long long>(reps), cpu_clock ? "thread CPU time" : "wall clock",
              kernel_set_name(resolve_kernel_set(kernels)), precision_name(precision), against.c_str());
  std::printf("%-28s %17s %17s %17s\n", "batch C->O HxW kK pP", "forward", "input grad", "weight grad");
  for (const Shape4& s : shapes) {
    const PassTimes d = time_conv(s, "direct", precision, kernels, reps, clock),
                    w = time_conv(s, against.c_str(), Precision::fp32, kernels, reps, clock);
    char name[64];
    std::snprintf(name, sizeof name, "%lld %lld->%lld %lldx%lld k%lld p%lld s%lld", static_cast<long long>(s.batch),
                  static_cast<long long>(s.channels), static_cast<long long>(s.filters),
                  static_cast<long long>(s.size), static_cast<long long>(s.size), static_cast<long long>(s.kernel),
                  static_cast<long long>(s.padding), static_cast<long long>(s.stride));
    std::printf("%-28s %8.3f/%8.3f %8.3f/%8.3f %8.3f/%8.3f\n", name, 1e3 * d.forward, 1e3 * w.forward,
                1e3 * d.data, 1e3 * w.data, 1e3 * d.weights, 1e3 * w.weights);
  }
  return 0;
} catch (const convoy::UserError& e) {
  std::fprintf(stderr, "conv_algo_times: %s\n", e.what());
  return 2;
}
