// Training throughput of a zoo model on random data: the convoy side of
// bench/resnet_vs_pytorch.py. Random images and labels, SGD with momentum,
// `--warmup` untimed steps, then `--steps` timed ones.
//
//   train_steps_convoy --model resnet18 --size 64 --classes 10 --batch 64 --steps 30 [--warmup 3] [--profile 1]
//                      [--kernels base|avx2|avx512] [--parallelism auto|per_op|batch_slices] [--precision fp32|bf16]
// (--kernels: that copy of the CPU kernels, default the best;
// --profile 1: the per-layer table of `convoy train --profile` on stderr)
// Prints one JSON line: {"images_per_second": ..., "cpu_seconds_per_step": ..., "step_seconds": [...]}
// (cpu_seconds_per_step: the process's CPU time over the timed steps; on one
// thread, a figure that other processes on a busy machine barely disturb)
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstring>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/rng.h"
#include "openmp_spin_default.h"
#include "convoy/nn/zoo.h"
#include "convoy/train/profile_report.h"

int main(int argc, char** argv) try {
  convoy::cli::adopt_openmp_spin_default(argv);  // the spin convoy itself runs with
  std::string model = "resnet18";
  int64_t size = 64, classes = 10, batch = 64, steps = 30, warmup = 3;
  bool profile = false;
  convoy::KernelSet kernels = convoy::KernelSet::automatic;
  std::string parallelism = "auto";
  convoy::Precision precision = convoy::Precision::fp32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--model") model = value;
    else if (flag == "--size") size = std::stoll(value);
    else if (flag == "--classes") classes = std::stoll(value);
    else if (flag == "--batch") batch = std::stoll(value);
    else if (flag == "--steps") steps = std::stoll(value);
    else if (flag == "--warmup") warmup = std::stoll(value);
    else if (flag == "--profile") profile = value == "1";
    else if (flag == "--kernels") kernels = convoy::parse_kernel_set(value);
    else if (flag == "--parallelism") parallelism = value;
    else if (flag == "--precision") precision = convoy::parse_precision(value);
    else throw convoy::UserError("unknown flag " + flag + "; flags: --model --size --classes --batch --steps --warmup "
                                 "--profile --kernels --parallelism --precision");
  }
  using namespace convoy;
  const nn::Model m = nn::model_by_name(model, {.input = {3, size, size}, .classes = classes});
  auto exe = compile_cpu(m, {.batch_size = batch, .loss = Loss::softmax_cross_entropy,
                             .optimizer = {.lr = 0.01f, .momentum = 0.9f}, .cpu_kernels = kernels,
                             .parallelism = parse_parallelism(parallelism), .precision = precision}, 1);
  Rng rng(7);
  std::vector<float> x(static_cast<std::size_t>(batch * numel(m.input_shape())));
  for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
  std::vector<int32_t> y(static_cast<std::size_t>(batch));
  for (auto& v : y) v = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(classes));
  for (int64_t s = 0; s < warmup; ++s) exe->train_step(x.data(), y.data());
  if (profile) exe->internals().set_profiling(true);
  std::vector<double> seconds;
  const std::clock_t cpu0 = std::clock();
  for (int64_t s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    exe->train_step(x.data(), y.data());
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double cpu_per_step = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC / static_cast<double>(steps);
  if (profile)
    std::fputs(train::profile_table(exe->internals().profile(), exe->internals().profiled_steps()).c_str(), stderr);
  double total = 0;
  for (double s : seconds) total += s;
  std::printf("{\"model\": \"%s\", \"precision\": \"%s\", \"batch\": %lld, \"batch_slices\": %lld, "
              "\"images_per_second\": %.2f, \"cpu_seconds_per_step\": %.5f, \"step_seconds\": [",
              model.c_str(), precision_name(precision), static_cast<long long>(batch),
              static_cast<long long>(exe->internals().batch_slices()),
              static_cast<double>(batch * steps) / total, cpu_per_step);
  for (std::size_t i = 0; i < seconds.size(); ++i) std::printf("%s%.5f", i ? ", " : "", seconds[i]);
  std::printf("]}\n");
  return 0;
} catch (const convoy::UserError& e) {
  std::fprintf(stderr, "train_steps_convoy: %s\n", e.what());
  return 2;
}
