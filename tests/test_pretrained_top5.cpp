// ImageNet-pretrained EfficientNet-Lite0 (tools/fetch_pretrained.sh converts
// pip's weights) predicts the same top-5 classes in convoy as in PyTorch
// (geffnet) on scikit-image's sample photos, on the same input
// (tests/fixtures/make_pretrained_top5_fixture.py is the oracle and says how
// the input is made). Skips when the weights or the photos are not on this
// machine: both are optional downloads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/image/codec.h"
#include "convoy/io/pretrained.h"
#include "convoy/nn/zoo.h"

namespace convoy {
namespace {

constexpr int kSize = 224;
const char* const kPhotos[] = {"chelsea", "coffee", "astronaut", "motorcycle_left"};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Centre-crop to a square, nearest-neighbour resize, scale to [-1, 1], NCHW.
void preprocess(const image::Image& rgb, float* out) {
  const int s = std::min(rgb.width(), rgb.height());
  const int top = (rgb.height() - s) / 2, left = (rgb.width() - s) / 2;
  for (int y = 0; y < kSize; ++y) {
    const uint8_t* row = rgb.row(top + (2 * y + 1) * s / (2 * kSize));
    for (int x = 0; x < kSize; ++x) {
      const uint8_t* px = row + 3 * (left + (2 * x + 1) * s / (2 * kSize));
      for (int c = 0; c < 3; ++c) out[(c * kSize + y) * kSize + x] = (px[c] / 255.0f - 0.5f) / 0.5f;
    }
  }
}

std::vector<int> top5(const float* logits, int n) {
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + 5, idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  idx.resize(5);
  return idx;
}

}  // namespace

TEST(PretrainedLite0, SameTop5ImageNetClassesAsPyTorch) {
  const std::string weights =
      env_or("CONVOY_PRETRAINED_DIR", std::string(CONVOY_SOURCE_DIR) + "/pretrained") + "/tf_efficientnet_lite0.safetensors";
  const std::string photos = env_or("CONVOY_SKIMAGE_DATA", "/usr/lib/python3/dist-packages/skimage/data");
  if (!std::filesystem::exists(weights))
    GTEST_SKIP() << weights << " is missing: run `bash tools/fetch_pretrained.sh` to fetch and convert it";
  if (!std::filesystem::exists(photos + "/chelsea.png"))
    GTEST_SKIP() << "scikit-image's sample photos are missing (" << photos << "): apt-get install python3-skimage";

  const nn::Model model = nn::tf_efficientnet_lite0();
  io::FlatWeights w{model.initial_parameters(0), model.initial_state()};
  io::load_pytorch_weights(model, weights, w);
  const int64_t batch = std::size(kPhotos), classes = 1000;
  auto exe = compile_cpu(model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy}, 0);
  exe->internals().write(Held::parameters, w.params);
  exe->internals().write(Held::state, w.state);
  std::vector<float> x(batch * 3 * kSize * kSize), out(batch * classes);
  for (int64_t i = 0; i < batch; ++i)
    preprocess(image::read_image(photos + "/" + kPhotos[i] + ".png", {.channels = 3}), x.data() + i * 3 * kSize * kSize);
  std::vector<int32_t> labels(batch, 0);
  exe->eval_step(x.data(), labels.data(), batch);
  exe->internals().read(Held::output, out);

  const auto oracle = io::read_safetensors(std::string(CONVOY_FIXTURES_DIR) + "/pretrained_lite0_top5.safetensors");
  double worst = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const std::string photo = kPhotos[i];
    const auto want = oracle.at("logits." + photo).data<float>();
    const auto want_top5 = oracle.at("top5." + photo).data<int32_t>();
    const float* got = out.data() + i * classes;
    double diff = 0;
    for (int k = 0; k < classes; ++k) diff = std::max(diff, std::abs(static_cast<double>(got[k]) - want[k]));
    worst = std::max(worst, diff);
    EXPECT_EQ(top5(got, classes), std::vector<int>(want_top5.begin(), want_top5.end())) << photo;
    EXPECT_LT(diff, 1e-3) << photo << ": largest logit difference from PyTorch";
  }
  std::cout << "[ figures  ] largest |logit - PyTorch's| over " << batch << " photos x 1000 classes: " << worst << "\n";
}

}  // namespace convoy
