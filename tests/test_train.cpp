// End to end: the seed CNN learns Fashion-MNIST, deterministically.
#include <gtest/gtest.h>

#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/train/fit.h"

namespace convoy {
namespace {

const data::TrainTest& fashion() {
  static const data::TrainTest d = data::load_fashion_mnist(data::kFashionMnistDir);
  return d;
}

CompileOptions seed_options(int64_t batch = 128) {
  return {.batch_size = batch, .loss = Loss::nll, .optimizer = {.lr = 0.01f, .momentum = 0.5f}};
}

}  // namespace

// The seed's optimizer settings with batch 32 over 10,000 images. One epoch
// reaches ~79% in convoy and in PyTorch alike (bench/pytorch_seed_cnn.py
// --epochs 1 --batch-size 32 --train-subset 10000: 79.6% and 78.4% for seeds
// 1 and 2), so the bar is two epochs.
TEST(Train, TwoEpochsOnTenThousandImagesReachEightyPercent) {
  const auto train = data::take(fashion().train, 10000);
  auto exe = compile_cpu(nn::seed_cnn(), seed_options(32), 1);
  const Metrics before = train::evaluate(*exe, fashion().test);
  train::History h = train::fit(*exe, train, fashion().test, {.epochs = 2, .seed = 1});
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(h.images_trained, 2 * 312 * 32);  // full batches only
  EXPECT_LT(before.accuracy(), 0.3);
  EXPECT_GT(h.epochs[1].test_accuracy, 0.80);
  EXPECT_LT(h.epochs[1].test_loss, h.epochs[0].test_loss);
  EXPECT_LT(h.epochs[0].test_loss, before.mean_loss());
  EXPECT_GT(h.images_per_second(), 0);
  // evaluate() covers every test image, including the short last batch.
  const Metrics after = train::evaluate(*exe, fashion().test);
  EXPECT_EQ(after.count, 10000);
  EXPECT_DOUBLE_EQ(after.accuracy(), h.epochs[1].test_accuracy);
}

TEST(Train, SameSeedSameThreadsGivesIdenticalWeights) {
  const auto train = data::take(fashion().train, 2560);
  const auto test = data::take(fashion().test, 256);
  auto run = [&](uint64_t seed) {
    auto exe = compile_cpu(nn::seed_cnn(), seed_options(), seed);
    train::fit(*exe, train, test, {.epochs = 2, .seed = seed});
    std::vector<float> p(nn::seed_cnn().num_parameters()), s(nn::seed_cnn().num_state());
    exe->internals().read(Held::parameters, p);
    exe->internals().read(Held::state, s);
    p.insert(p.end(), s.begin(), s.end());
    return p;
  };
  const auto a = run(7);
  EXPECT_EQ(a, run(7));  // bit for bit
  EXPECT_NE(a, run(8));
}

TEST(Train, RejectsABatchLargerThanTheDataset) {
  const auto tiny = data::take(fashion().train, 100);
  auto exe = compile_cpu(nn::seed_cnn(), seed_options(), 1);
  EXPECT_THROW(train::fit(*exe, tiny, tiny, {.epochs = 1}), UserError);
}

}  // namespace convoy
