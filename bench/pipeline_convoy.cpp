// The pipeline benchmark's convoy side: Fashion-MNIST's 60,000 training
// images through read -> normalise -> shuffle 10,000 -> batch 128 -> prefetch,
// consumed as fast as it comes (no training step), several epochs. Prints one
// JSON line: examples per second of each epoch after the first (warm-up).
//
//   pipeline_convoy [--epochs 4] [--data DIR] [--parallelism N]  (map parallelism; -1: kAutotune)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "convoy/core/error.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/data/transforms.h"

int main(int argc, char** argv) {
  using namespace convoy::data;
  int epochs = 4;
  int parallelism = kAutotune;
  std::string dir = kFashionMnistDir;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--epochs")) epochs = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--data")) dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--parallelism")) parallelism = std::stoi(argv[i + 1]);
  }
  try {
    const auto pipeline = Dataset::fashion_mnist(dir, "train")
                              .map(normalize("image", kSeedMean, kSeedStd), {.parallelism = parallelism})
                              .shuffle(10000, /*seed=*/1)
                              .batch(128)
                              .prefetch(2);
    std::string rates;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      int64_t examples = 0;
      double checksum = 0;  // touch the data, as a training step would
      for (Example& b : pipeline.epoch(epoch)) {
        examples += b.tensor("label").dim(0);
        checksum += b.tensor("image").data<float>()[0];
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (epoch > 0) rates += (rates.empty() ? "" : ", ") + std::to_string(examples / seconds);
      if (examples != 60000 || checksum != checksum) return 1;
    }
    std::printf("{\"examples_per_second\": [%s]}\n", rates.c_str());
  } catch (const convoy::UserError& e) {
    std::fprintf(stderr, "pipeline_convoy: %s\n", e.what());
    return 2;
  }
}
