// PyTorch state dicts (safetensors) onto zoo models by name: a whole state
// dict as PyTorch writes it loads one to one; a new head can be skipped; every
// mismatch is one error naming the file and the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "convoy/io/pretrained.h"
#include "convoy/nn/zoo.h"
#include "test_helpers.h"

namespace convoy::io {
namespace {

using testing::error_of;

const std::string kStateDict = std::string(CONVOY_FIXTURES_DIR) + "/zoo_plant_cnn_state_dict.safetensors";

FlatWeights fresh(const nn::Model& m) { return {m.initial_parameters(1), m.initial_state()}; }

}  // namespace

TEST(Pretrained, APyTorchStateDictLoadsOneToOne) {
  const nn::Model m = nn::plant_cnn({.classes = 10});
  FlatWeights w = fresh(m);
  int tensors = 0;
  for (const auto& plan : m.layers()) tensors += static_cast<int>(plan.params.size() + plan.state.size());
  EXPECT_EQ(load_pytorch_weights(m, kStateDict, w), tensors);
  const NamedTensors file = read_safetensors(kStateDict, nullptr, [](const std::string& name) {
    return name.ends_with("num_batches_tracked");
  });
  for (const auto& [name, t] : to_named(m, w.params, w.state)) {
    const auto want = file.at(name).data<float>();
    EXPECT_TRUE(std::equal(want.begin(), want.end(), t.data<float>().begin())) << name;
  }
}

TEST(Pretrained, ANewHeadKeepsItsInitialWeights) {
  const nn::Model m = nn::plant_cnn({.classes = 3});
  FlatWeights w = fresh(m);
  const FlatWeights start = w;
  load_pytorch_weights(m, kStateDict, w, {.skip_prefixes = {"classifier."}});
  const NamedTensors file = read_safetensors(kStateDict, nullptr, [](const std::string& name) {
    return name.ends_with("num_batches_tracked");  // int64, which convoy does not read
  });
  for (const auto& plan : m.layers())
    for (const auto& slot : plan.params) {
      const float* got = w.params.data() + slot.offset;
      if (plan.name == "classifier")
        EXPECT_TRUE(std::equal(got, got + slot.size(), start.params.begin() + slot.offset)) << slot.name;
      else
        EXPECT_TRUE(std::equal(got, got + slot.size(), file.at(slot.name).data<float>().begin())) << slot.name;
    }
}

TEST(Pretrained, MismatchesNameTheTensor) {
  FlatWeights w = fresh(nn::plant_cnn());
  EXPECT_NE(error_of([&] { load_pytorch_weights(nn::plant_cnn(), kStateDict, w); })
                .find("tensor 'classifier.weight' has shape [10, 256], the model needs [4, 256]"),
            std::string::npos);
  const nn::Model resnet = nn::resnet18({.input = {3, 32, 32}, .classes = 10});
  FlatWeights r = fresh(resnet);
  EXPECT_NE(error_of([&] { load_pytorch_weights(resnet, kStateDict, r); }).find("no tensor 'conv1.weight'"),
            std::string::npos);

  // A tensor the model lacks: an error, unless unused tensors are allowed.
  testing::TempDir dir;
  const nn::Model m = nn::plant_cnn({.classes = 10});
  FlatWeights ok = fresh(m);
  NamedTensors extra = to_named(m, ok.params, ok.state);
  extra.emplace("blocks.9.dw.weight", Tensor(DType::f32, {4}));
  write_safetensors(dir.file("extra.safetensors"), extra);
  EXPECT_NE(error_of([&] { load_pytorch_weights(m, dir.file("extra.safetensors"), ok); })
                .find("tensor 'blocks.9.dw.weight' matches no tensor of the model"),
            std::string::npos);
  EXPECT_NO_THROW(load_pytorch_weights(m, dir.file("extra.safetensors"), ok, {.allow_unused = true}));
  EXPECT_NE(error_of([&] { load_pytorch_weights(m, dir.file("nope.safetensors"), ok); }).find("nope.safetensors"),
            std::string::npos);
}

// A NaN or infinite weight is refused by name on every way in: a state dict
// (model.pretrained) and a model file or checkpoint (from_named). Loaded, a NaN
// first convolution of the seed CNN trained silently to 10% accuracy: the ReLU
// after it turns NaN into zeros, so no loss or gradient ever showed it.
TEST(Pretrained, ANaNOrInfiniteWeightIsRefusedByName) {
  testing::TempDir dir;
  const nn::Model m = nn::plant_cnn({.classes = 10});
  const FlatWeights ok = fresh(m);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    NamedTensors named = to_named(m, ok.params, ok.state);
    const std::string tensor = named.begin()->first;
    named.begin()->second.data<float>()[1] = bad;
    write_safetensors(dir.file("bad.safetensors"), named);
    const std::string what = std::isnan(bad) ? "holds NaN (value 1 of" : "holds an infinite value (value 1 of";
    FlatWeights into = fresh(m);
    const std::string e1 = error_of([&] { load_pytorch_weights(m, dir.file("bad.safetensors"), into); });
    EXPECT_NE(e1.find("tensor '" + tensor + "' " + what), std::string::npos) << e1;
    const std::string e2 = error_of([&] { from_named(m, named, "model.safetensors"); });
    EXPECT_NE(e2.find("model.safetensors: tensor '" + tensor + "' " + what), std::string::npos) << e2;
  }
}

}  // namespace convoy::io
