// Where a seed-CNN epoch goes beyond its steps: the same process times, in
// interleaved rounds (one window of machine noise for every variant),
//   steps      469 training steps on the dataset's batches in stored order,
//              read where they lie (no input work at all; one batch over and
//              over would overfit into denormal gradients, 4x slower steps)
//   chain      the steps fed by the per-element chain the trainer used until
//              2026-12-02: range(n).shuffle(n).batch(B).map(rows_of).prefetch(2)
//   batches    the steps fed by the trainer's input now (data/index_batches.h):
//              index_batches(shuffled_positions).map(rows_of).prefetch(2)
//   sync       index batches gathered on the calling thread, no prefetch
//   threads    index batches gathered by the calling thread's OpenMP threads
//              between steps, no prefetch (the trainer's input when its
//              threads take every core: train::in_memory)
//   chain-only / batches-only   the input alone for one epoch, no steps
// and prints each variant's median seconds per epoch over the rounds, with the
// process CPU seconds of the input-only rows (what the input takes from the cores).
//
//   epoch_feed_convoy [--rounds 3] [--epochs-per-round 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/data/index_batches.h"
#include "convoy/data/transforms.h"
#include "convoy/nn/zoo.h"

namespace {

using namespace convoy;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  int64_t rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rounds") rounds = std::stoll(argv[i + 1]);
    else throw UserError("unknown flag " + flag + "; flags: --rounds");
  }
  const int64_t batch = 128;
  const uint64_t seed = 2;
  const data::TrainTest d = data::load_fashion_mnist(data::kFashionMnistDir);
  const int64_t n = d.train.size(), steps = n / batch;
  const nn::Model m = nn::model_by_name("seed_cnn", {.input = data::kFashionMnistShape, .classes = 10});
  auto exe = compile_cpu(m, {.batch_size = batch, .loss = Loss::softmax_cross_entropy,
                             .optimizer = {.lr = 0.01f, .momentum = 0.5f}}, 1);
  const data::MapFn rows = data::rows_of(d.train);
  const data::Dataset chain =
      data::Dataset::range(n).shuffle(n, seed).batch(batch, /*drop_remainder=*/true).map(rows);
  const data::Dataset batches =
      data::index_batches([n, seed](int64_t epoch) { return data::shuffled_positions(n, seed, epoch); }, batch,
                          /*drop_remainder=*/true)
          .map(rows);
  const data::Dataset on_threads =
      data::index_batches([n, seed](int64_t epoch) { return data::shuffled_positions(n, seed, epoch); }, batch,
                          /*drop_remainder=*/true)
          .map(data::rows_of_on_threads(d.train));
  const int64_t example = numel(data::kFashionMnistShape);
  const float* stored_x = d.train.images.data<float>().data();
  const int32_t* stored_y = d.train.labels.data<int32_t>().data();
  auto stored_step = [&](int64_t s) { exe->train_step(stored_x + s * batch * example, stored_y + s * batch); };
  for (int64_t s = 0; s < 5; ++s) stored_step(s);  // warm-up

  std::map<std::string, std::vector<double>> wall, cpu;
  auto time_it = [&](const std::string& name, auto&& body) {
    const std::clock_t c0 = std::clock();
    const auto t0 = Clock::now();
    body();
    wall[name].push_back(seconds_since(t0));
    cpu[name].push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
  };
  auto train_on = [&](const data::Dataset& input, int64_t epoch) {
    for (data::Example& b : input.epoch(epoch))
      exe->train_step(b.tensor("image").data<float>().data(), b.tensor("label").data<int32_t>().data());
  };
  auto drain = [&](const data::Dataset& input, int64_t epoch) {
    float sink = 0;
    for (data::Example& b : input.epoch(epoch)) sink += b.tensor("image").data<float>()[0];
    if (sink == 12345.678f) std::puts("");  // keeps the loop
  };
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t epoch = r + 1;
    time_it("steps", [&] {
      for (int64_t s = 0; s < steps; ++s) stored_step(s);
    });
    time_it("chain", [&] { train_on(chain.prefetch(2), epoch); });
    time_it("batches", [&] { train_on(batches.prefetch(2), epoch); });
    time_it("sync", [&] { train_on(batches, epoch); });
    time_it("threads", [&] { train_on(on_threads, epoch); });
    time_it("chain-only", [&] { drain(chain, epoch); });
    time_it("batches-only", [&] { drain(batches, epoch); });
  }
  std::printf("{\"batch_slices\": %lld, \"rounds\": %lld", static_cast<long long>(exe->internals().batch_slices()),
              static_cast<long long>(rounds));
  for (const auto& [name, w] : wall) {
    std::printf(", \"%s\": {\"seconds\": %.4f, \"cpu_seconds\": %.4f, \"rounds\": [", name.c_str(), median(w),
                median(cpu[name]));
    for (std::size_t r = 0; r < w.size(); ++r) std::printf("%s%.4f", r ? ", " : "", w[r]);
    std::printf("]}");
  }
  std::printf("}\n");
  return 0;
} catch (const convoy::UserError& e) {
  std::fprintf(stderr, "epoch_feed_convoy: %s\n", e.what());
  return 2;
}
