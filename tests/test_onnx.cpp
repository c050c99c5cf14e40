// ONNX out and in (io/onnx.h): convoy's exported file decodes to the graph it
// should (BN folded or kept), imports back to a model with the same outputs,
// a PyTorch-exported file (committed fixture) imports with PyTorch's logits,
// and an op convoy lacks is one error naming it. The peer checks (ONNX
// Runtime, OpenCV, torch.onnx.export of torchvision models) live in
// tests/onnx_peers.py and tests/onnx_torch_import.py, which drive the
// env-gated cases at the end of this file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "convoy/backends/executable.h"
#include "convoy/core/rng.h"
#include "convoy/io/onnx.h"
#include "convoy/io/pretrained.h"
#include "convoy/io/safetensors.h"
#include "convoy/nn/zoo.h"
#include "test_helpers.h"
#include "zoo_weights.h"

namespace convoy::io {
namespace {

using testing::relative_error;

std::vector<float> random_input(const nn::Model& m, int64_t batch, uint64_t seed) {
  std::vector<float> x(static_cast<std::size_t>(batch * numel(m.input_shape())));
  Rng rng(seed);
  for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
  return x;
}

// Inference-mode outputs of `model` with these weights on x.
std::vector<float> infer(const nn::Model& model, std::span<const float> params, std::span<const float> state,
                         const std::vector<float>& x, int64_t batch) {
  auto exe = compile_cpu(model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy}, 0);
  exe->set_parameters(params);
  exe->set_state(state);
  std::vector<int32_t> labels(static_cast<std::size_t>(batch), 0);
  exe->eval_step(x.data(), labels.data(), batch);
  std::vector<float> out(static_cast<std::size_t>(batch * exe->output_size()));
  exe->get_output(out);
  return out;
}

std::vector<std::string> ops(const onnx::Model& m) {
  std::vector<std::string> out;
  for (const auto& n : m.graph.nodes) out.push_back(n.op_type);
  return out;
}

// Export, encode, decode, import: the imported model computes what the original did.
void round_trip(const nn::Model& model, bool fold) {
  const auto w = testing::deterministic_weights(model);
  const std::string bytes = onnx::encode(to_onnx(model, w.params, w.state, {.fold_batch_norm = fold}));
  const ImportedModel back = from_onnx(onnx::decode(bytes, "round trip"), "round trip");
  const int64_t batch = 2;
  const auto x = random_input(model, batch, 7);
  const auto want = infer(model, w.params, w.state, x, batch);
  const auto got = infer(back.model, back.weights.params, back.weights.state, x, batch);
  EXPECT_LT(relative_error(got, want), 1e-5);
  if (!fold) {  // nothing folded: the same parameters under the same names
    EXPECT_EQ(back.model.num_parameters(), model.num_parameters());
    EXPECT_EQ(back.weights.params, w.params);
    EXPECT_EQ(back.weights.state, w.state);
  }
}

Tensor f32_tensor(Shape shape, const std::vector<float>& values) {
  Tensor t(DType::f32, std::move(shape));
  std::copy(values.begin(), values.end(), t.data<float>().begin());
  return t;
}

}  // namespace

TEST(Onnx, SeedCnnExportsAsTheArticlesGraph) {
  const nn::Model m = nn::seed_cnn();
  const auto w = testing::deterministic_weights(m);
  const onnx::Model o = onnx::decode(onnx::encode(to_onnx(m, w.params, w.state)), "seed");
  EXPECT_EQ(o.opset, 13);
  // Its batch norms follow a ReLU, not a convolution: they stay.
  EXPECT_EQ(ops(o), (std::vector<std::string>{"Conv", "MaxPool", "Relu", "BatchNormalization", "Conv", "MaxPool", "Relu",
                                              "BatchNormalization", "Flatten", "Gemm", "Relu", "Gemm", "LogSoftmax"}));
  ASSERT_EQ(o.graph.inputs.size(), 1u);
  EXPECT_EQ(o.graph.inputs[0].dims, (std::vector<int64_t>{-1, 1, 28, 28}));
  EXPECT_EQ(o.graph.inputs[0].dim_params[0], "N");
  EXPECT_EQ(o.graph.outputs[0].name, "output");
  EXPECT_EQ(o.graph.outputs[0].dims, (std::vector<int64_t>{-1, 10}));
  EXPECT_EQ(o.graph.nodes.back().outputs[0], "output");
  EXPECT_EQ(o.graph.initializers.size(), 4u + 8u + 4u);  // 2 convs, 2 BNs (4 each), 2 dense
  round_trip(m, true);
}

TEST(Onnx, ResNetBatchNormsFoldIntoConvolutions) {
  const nn::Model m = nn::resnet18({.input = {3, 32, 32}, .classes = 10});
  const auto w = testing::deterministic_weights(m);
  const onnx::Model folded = to_onnx(m, w.params, w.state);
  const onnx::Model kept = to_onnx(m, w.params, w.state, {.fold_batch_norm = false});
  auto count = [](const onnx::Model& o, const std::string& op) {
    return std::count_if(o.graph.nodes.begin(), o.graph.nodes.end(), [&](const auto& n) { return n.op_type == op; });
  };
  EXPECT_EQ(count(folded, "BatchNormalization"), 0);
  EXPECT_EQ(count(kept, "BatchNormalization"), 20);
  EXPECT_EQ(count(folded, "Conv"), 20);
  EXPECT_EQ(count(folded, "Add"), 8);
  round_trip(m, true);
  round_trip(m, false);
}

TEST(Onnx, ZooModelsRoundTrip) {
  for (const char* name : {"mobilenet_v2", "efficientnet_b0", "tf_efficientnet_lite0", "plant_cnn"}) {
    SCOPED_TRACE(name);
    round_trip(nn::model_by_name(name, {.input = {3, 48, 48}, .classes = 5}), true);
  }
}

TEST(Onnx, ImportsAPyTorchExport) {
  // tests/fixtures/make_onnx_fixtures.py: a small CNN with every op the zoo
  // uses, exported by torch.onnx.export, and PyTorch's logits.
  const std::string dir = CONVOY_FIXTURES_DIR;
  const ImportedModel m = load_onnx(dir + "/onnx_torch_small.onnx");
  const auto fixture = read_safetensors(dir + "/onnx_torch_small.safetensors");
  const auto x = fixture.at("input").data<float>();
  const auto want = fixture.at("logits").data<float>();
  const int64_t batch = fixture.at("input").dim(0);
  const auto got = infer(m.model, m.weights.params, m.weights.state, {x.begin(), x.end()}, batch);
  EXPECT_LT(relative_error(got, want), 1e-5);
  EXPECT_EQ(m.model.find_layer("fc")->output_shape, (Shape{7}));  // names from the weights: "fc.weight"
  EXPECT_NE(m.model.find_layer("post_bn"), nullptr);

  // It trains: a step moves every parameter tensor and keeps the loss finite.
  auto exe = compile_cpu(m.model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy}, 0);
  exe->set_parameters(m.weights.params);
  exe->set_state(m.weights.state);
  const std::vector<int32_t> labels{1, 5};
  exe->train_step(x.data(), labels.data());
  EXPECT_TRUE(std::isfinite(exe->take_metrics().mean_loss()));
  std::vector<float> after(m.weights.params.size());
  exe->get_parameters(after);
  for (const auto& plan : m.model.layers())
    for (const auto& slot : plan.params)
      EXPECT_FALSE(std::equal(after.begin() + slot.offset, after.begin() + slot.offset + slot.size(),
                              m.weights.params.begin() + slot.offset))
          << slot.name << " did not train";
}

TEST(Onnx, AnUnsupportedOpIsOneErrorNamingIt) {
  onnx::Model o;
  o.graph.inputs = {{.name = "x", .dims = {1, 4}, .dim_params = {"", ""}}};
  o.graph.nodes = {{.name = "gelu_erf", .op_type = "Erf", .inputs = {"x"}, .outputs = {"y"}}};
  o.graph.outputs = {{.name = "y", .dims = {1, 4}, .dim_params = {"", ""}}};
  testing::TempDir tmp;
  const std::string path = tmp.file("erf.onnx");
  std::ofstream(path, std::ios::binary) << onnx::encode(o);
  const std::string e = testing::error_of([&] { load_onnx(path); });
  EXPECT_NE(e.find(path + ": node 'gelu_erf' has op Erf, which convoy cannot import"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);

  const std::string bytes = onnx::encode(o);
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_NE(testing::error_of([&] { load_onnx(path); }).find(path + ": malformed ONNX model"), std::string::npos);
}

// Every prefix and many one-byte corruptions of a real file: imported, or
// one UserError; never a crash, another exception or a read out of bounds (ASan).
TEST(Onnx, DamagedFilesAreUserErrors) {
  std::ifstream in(std::string(CONVOY_FIXTURES_DIR) + "/onnx_torch_small.onnx", std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string good = buf.str();
  ASSERT_GT(good.size(), 1000u);
  auto try_import = [](const std::string& bytes) {
    try {
      from_onnx(onnx::decode(bytes, "damaged"), "damaged");
    } catch (const UserError&) {
    }
  };
  for (std::size_t n = 0; n < good.size(); n += 7) try_import(good.substr(0, n));
  Rng rng(3);
  for (int k = 0; k < 400; ++k) {
    std::string bad = good;
    bad[static_cast<std::size_t>(rng.uniform(0.0f, 1.0f) * (bad.size() - 1))] = static_cast<char>(rng.uniform(0.0f, 255.0f));
    try_import(bad);
  }
}

// Writes convoy's ONNX files, inputs and outputs for tests/onnx_peers.py
// (ONNX Runtime and OpenCV run the files; convoy's outputs are the oracle).
TEST(OnnxPeerCases, Write) {
  const char* dir = std::getenv("CONVOY_ONNX_PEER_DIR");
  if (!dir) GTEST_SKIP() << "set CONVOY_ONNX_PEER_DIR (tests/onnx_peers.py does)";
  // tf_efficientnet_lite0: "same" pads (asymmetric), Clip, depthwise groups;
  // efficientnet_b0: SiLU as Sigmoid + Mul, squeeze-excitation gates.
  const nn::ZooOptions small{.input = {3, 64, 64}, .classes = 10};
  const std::pair<std::string, nn::Model> cases[] = {{"seed_cnn", nn::seed_cnn()},
                                                     {"resnet18", nn::resnet18(small)},
                                                     {"tf_efficientnet_lite0", nn::tf_efficientnet_lite0(small)},
                                                     {"efficientnet_b0", nn::efficientnet_b0(small)}};
  for (const auto& [name, model] : cases) {
    const auto w = testing::deterministic_weights(model);
    const int64_t batch = 4;
    const auto x = random_input(model, batch, 11);
    export_onnx(std::string(dir) + "/" + name + ".onnx", model, w.params, w.state);
    Shape in{batch};
    in.insert(in.end(), model.input_shape().begin(), model.input_shape().end());
    NamedTensors t;
    t.emplace("input", f32_tensor(in, x));
    t.emplace("output", f32_tensor({batch, 10}, infer(model, w.params, w.state, x, batch)));
    write_safetensors(std::string(dir) + "/" + name + ".safetensors", t);
  }
  // The ImageNet-pretrained Lite0 (tools/fetch_pretrained.sh), when present,
  // at 224x224: the script checks its top-5 classes on real photos.
  const std::string pretrained = std::string(CONVOY_SOURCE_DIR) + "/pretrained/tf_efficientnet_lite0.safetensors";
  if (std::filesystem::exists(pretrained)) {
    const nn::Model lite0 = nn::tf_efficientnet_lite0();
    FlatWeights w{lite0.initial_parameters(0), lite0.initial_state()};
    load_pytorch_weights(lite0, pretrained, w);
    export_onnx(std::string(dir) + "/pretrained_lite0.onnx", lite0, w.params, w.state);
  }
}

// Checks convoy's import of the files tests/onnx_torch_import.py exported
// with torch.onnx.export against PyTorch's logits (<name>.onnx + <name>.safetensors).
TEST(OnnxTorchExports, ImportWithPyTorchsLogits) {
  const char* dir = std::getenv("CONVOY_ONNX_TORCH_DIR");
  if (!dir) GTEST_SKIP() << "set CONVOY_ONNX_TORCH_DIR (tests/onnx_torch_import.py does)";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".onnx") continue;
    SCOPED_TRACE(entry.path().string());
    const ImportedModel m = load_onnx(entry.path().string());
    auto fixture = read_safetensors(std::filesystem::path(entry.path()).replace_extension(".safetensors").string());
    const auto x = fixture.at("input").data<float>();
    const auto want = fixture.at("logits").data<float>();
    const auto got = infer(m.model, m.weights.params, m.weights.state, {x.begin(), x.end()}, fixture.at("input").dim(0));
    const double err = relative_error(got, want);
    std::cout << "[ figures  ] " << entry.path().filename().string() << ": " << m.model.layers().size()
              << " layers, max |logit diff| / max |logit| = " << err << "\n";
    EXPECT_LT(err, 1e-4);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no .onnx files in " << dir;
}

}  // namespace convoy::io
