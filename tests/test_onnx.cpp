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
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/protobuf_wire.h"
#include "convoy/core/rng.h"
#include "convoy/io/onnx.h"
#include "convoy/io/pretrained.h"
#include "convoy/io/safetensors.h"
#include "io/onnx_fold.h"
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
  exe->internals().write(Held::parameters, params);
  exe->internals().write(Held::state, state);
  std::vector<int32_t> labels(static_cast<std::size_t>(batch), 0);
  exe->eval_step(x.data(), labels.data(), batch);
  std::vector<float> out(static_cast<std::size_t>(batch * exe->compiled_for().output_size));
  exe->internals().read(Held::output, out);
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

// Small hand-made graphs: one float input, nodes, constants, one output.
onnx::Tensor weights(const std::string& name, std::vector<int64_t> dims) {
  onnx::Tensor t{.name = name, .dims = std::move(dims)};
  t.floats.resize(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < t.floats.size(); ++i) t.floats[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  return t;
}
onnx::Tensor int64s(const std::string& name, std::vector<int64_t> values) {
  return {.name = name, .data_type = onnx::kInt64, .dims = {static_cast<int64_t>(values.size())}, .int64s = std::move(values)};
}
onnx::Attribute ints(const std::string& name, std::vector<int64_t> v) {
  return {.name = name, .type = onnx::Attribute::kInts, .ints = std::move(v)};
}
onnx::Attribute integer(const std::string& name, int64_t v) { return {.name = name, .type = onnx::Attribute::kInt, .i = v}; }
onnx::Attribute text(const std::string& name, const std::string& v) {
  return {.name = name, .type = onnx::Attribute::kString, .s = v};
}
onnx::Model graph(std::vector<int64_t> input, std::vector<onnx::Node> nodes, std::vector<onnx::Tensor> constants = {},
                  int64_t opset = 13) {
  onnx::Model o;
  o.opset = opset;
  input.insert(input.begin(), -1);
  o.graph.inputs = {{.name = "x", .dims = input, .dim_params = std::vector<std::string>(input.size())}};
  o.graph.inputs[0].dim_params[0] = "N";
  o.graph.outputs = {{.name = nodes.back().outputs.at(0)}};
  o.graph.nodes = std::move(nodes);
  o.graph.initializers = std::move(constants);
  return o;
}
ImportedModel import(const onnx::Model& o) { return from_onnx(onnx::decode(onnx::encode(o), "g.onnx"), "g.onnx"); }
std::string import_error(const onnx::Model& o) {
  return testing::error_of([&] { import(o); });
}
// A Conv node reading `in` with a [filters, C, k, k] weight named `w`.
onnx::Node conv(const std::string& name, const std::string& in, const std::string& w, int64_t k,
                std::vector<onnx::Attribute> extra = {}) {
  extra.push_back(ints("kernel_shape", {k, k}));
  return {.name = name, .op_type = "Conv", .inputs = {in, w}, .outputs = {name}, .attributes = std::move(extra)};
}
onnx::Node op(const std::string& type, const std::string& name, std::vector<std::string> in,
              std::vector<onnx::Attribute> attributes = {}) {
  return {.name = name, .op_type = type, .inputs = std::move(in), .outputs = {name}, .attributes = std::move(attributes)};
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
  exe->internals().write(Held::parameters, m.weights.params);
  exe->internals().write(Held::state, m.weights.state);
  const std::vector<int32_t> labels{1, 5};
  exe->train_step(x.data(), labels.data());
  EXPECT_TRUE(std::isfinite(exe->metrics(Metrics::reset).mean_loss()));
  std::vector<float> after(m.weights.params.size());
  exe->internals().read(Held::parameters, after);
  for (const auto& plan : m.model.layers())
    for (const auto& slot : plan.params)
      EXPECT_FALSE(std::equal(after.begin() + slot.offset, after.begin() + slot.offset + slot.size(),
                              m.weights.params.begin() + slot.offset))
          << slot.name << " did not train";
}

// tests/fixtures/make_onnx_tf_fixtures.py: Keras CNNs in the form TensorFlow's
// exporter writes them (NHWC input and Transposes, zero Pads before "valid"
// layers, Keras's NHWC Flatten, ReduceMean, Squeeze, a final Softmax; opsets
// 13 and 11), with ONNX Runtime's logits and probabilities.
TEST(Onnx, ImportsTensorFlowStyleGraphsWithOnnxRuntimesLogits) {
  for (const char* name : {"onnx_tf_keras_cnn", "onnx_tf_keras_gap"}) {
    SCOPED_TRACE(name);
    const std::string base = std::string(CONVOY_FIXTURES_DIR) + "/" + name;
    const ImportedModel m = load_onnx(base + ".onnx");
    EXPECT_TRUE(m.input_was_nhwc);
    EXPECT_TRUE(m.softmax_dropped);
    const auto fixture = read_safetensors(base + ".safetensors");
    const Tensor& nhwc = fixture.at("input");
    const int64_t batch = nhwc.dim(0), h = nhwc.dim(1), w = nhwc.dim(2), c = nhwc.dim(3);
    EXPECT_EQ(m.model.input_shape(), (Shape{c, h, w}));  // convoy's models take NCHW
    const auto in = nhwc.data<float>();
    std::vector<float> x(in.size());
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t z = 0; z < w; ++z)
          for (int64_t k = 0; k < c; ++k)
            x[static_cast<std::size_t>(((n * c + k) * h + y) * w + z)] = in[static_cast<std::size_t>(((n * h + y) * w + z) * c + k)];
    const auto logits = infer(m.model, m.weights.params, m.weights.state, x, batch);
    const auto want = fixture.at("logits").data<float>();
    const double err = relative_error(logits, want);
    std::cout << "[ figures  ] " << name << ": " << m.model.layers().size()
              << " layers, max |logit diff| / max |logit| = " << err << "\n";
    EXPECT_LT(err, 1e-4);
    // The dropped Softmax of these logits is the file's output.
    const auto probabilities = fixture.at("probabilities").data<float>();
    const int64_t classes = m.model.output_shape()[0];
    for (int64_t n = 0; n < batch; ++n) {
      const float* z = logits.data() + n * classes;
      const float top = *std::max_element(z, z + classes);
      double sum = 0;
      for (int64_t k = 0; k < classes; ++k) sum += std::exp(z[k] - top);
      for (int64_t k = 0; k < classes; ++k)
        EXPECT_NEAR(std::exp(z[k] - top) / sum, probabilities[static_cast<std::size_t>(n * classes + k)], 1e-6);
    }
    // It trains: one step keeps the loss finite and moves the weights.
    auto exe = compile_cpu(m.model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy}, 0);
    exe->internals().write(Held::parameters, m.weights.params);
    exe->internals().write(Held::state, m.weights.state);
    const std::vector<int32_t> labels{1, 3};
    exe->train_step(x.data(), labels.data());
    EXPECT_TRUE(std::isfinite(exe->metrics(Metrics::reset).mean_loss()));
    std::vector<float> after(m.weights.params.size());
    exe->internals().read(Held::parameters, after);
    EXPECT_NE(after, m.weights.params);
  }
}

TEST(Onnx, ZeroPadsFoldIntoTheConvOrPoolThatReadsThem) {
  // Keras's ZeroPadding2D(1) before a "valid" 3x3 convolution: one Conv with padding 1.
  const ImportedModel a = import(graph({2, 8, 8}, {op("Pad", "p", {"x", "pads"}), conv("c", "p", "w", 3)},
                                       {int64s("pads", {0, 0, 1, 1, 0, 0, 1, 1}), weights("w", {4, 2, 3, 3})}));
  ASSERT_EQ(a.model.layers().size(), 1u);
  EXPECT_EQ(std::get<nn::Conv2d>(a.model.layers()[0].layer).padding, 1);
  EXPECT_EQ(a.model.output_shape(), (Shape{4, 8, 8}));
  // Padding the end only, before a stride-2 convolution: TensorFlow's "same".
  const ImportedModel b = import(graph({2, 8, 8}, {op("Pad", "p", {"x", "pads"}), conv("c", "p", "w", 3, {ints("strides", {2, 2})})},
                                       {int64s("pads", {0, 0, 0, 0, 0, 0, 1, 1}), weights("w", {4, 2, 3, 3})}));
  EXPECT_EQ(std::get<nn::Conv2d>(b.model.layers()[0].layer).padding, nn::kSame);
  // opset 11's form (the pads an input, a zero constant_value) and opset 2's
  // (attributes), into an AveragePool: its mean then counts the zeros.
  for (bool old : {false, true}) {
    onnx::Node pad = old ? op("Pad", "p", {"x"}, {ints("pads", {0, 0, 1, 1, 0, 0, 1, 1}), text("mode", "constant")})
                         : op("Pad", "p", {"x", "pads", "zero"});
    onnx::Tensor zero{.name = "zero", .floats = {0.0f}};
    const ImportedModel c = import(graph({2, 8, 8}, {pad, op("AveragePool", "a", {"p"}, {ints("kernel_shape", {3, 3}), ints("strides", {1, 1})})},
                                         {int64s("pads", {0, 0, 1, 1, 0, 0, 1, 1}), zero}, old ? 10 : 11));
    const auto& pool = std::get<nn::AvgPool2d>(c.model.layers()[0].layer);
    EXPECT_EQ(pool.padding, 1);
    EXPECT_TRUE(pool.count_include_pad);
  }
  // opset 18's axes input; into a MaxPool after a ReLU (zeros never win over its output).
  const ImportedModel d = import(graph({2, 8, 8}, {op("Relu", "r", {"x"}), op("Pad", "p", {"r", "pads", "", "axes"}),
                                                   op("MaxPool", "m", {"p"}, {ints("kernel_shape", {3, 3}), ints("strides", {2, 2})})},
                                       {int64s("pads", {1, 1, 1, 1}), int64s("axes", {2, -1})}, 18));
  ASSERT_EQ(d.model.layers().size(), 2u);
  EXPECT_EQ(std::get<nn::MaxPool2d>(d.model.layers()[1].layer).padding, 1);
}

TEST(Onnx, PadsThatCannotFoldAreErrorsNamingTheNode) {
  const auto pads = int64s("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  const auto w = weights("w", {4, 2, 3, 3});
  auto error = [&](std::vector<onnx::Node> nodes, std::vector<onnx::Tensor> constants) {
    return import_error(graph({2, 8, 8}, std::move(nodes), std::move(constants)));
  };
  const onnx::Node pad = op("Pad", "p", {"x", "pads"});
  EXPECT_EQ(error({op("Pad", "p", {"x", "pads"}, {text("mode", "reflect")}), conv("c", "p", "w", 3)}, {pads, w}),
            "g.onnx: node 'p' (Pad): mode 'reflect' is not supported (only zero padding, mode 'constant')");
  EXPECT_EQ(error({pad, op("Relu", "r", {"p"})}, {pads}),
            "g.onnx: node 'p' (Pad): zero padding is imported only folded into the Conv, AveragePool or MaxPool (after a "
            "ReLU) that reads it; here its reader is not a Conv, MaxPool or AveragePool");
  EXPECT_NE(error({pad, op("MaxPool", "m", {"p"}, {ints("kernel_shape", {3, 3})})}, {pads}).find("may be negative"),
            std::string::npos);
  EXPECT_NE(error({pad, conv("c", "p", "w", 3), conv("d", "p", "w", 3), op("Add", "s", {"c", "d"})}, {pads, w})
                .find("several readers"),
            std::string::npos);
  EXPECT_EQ(error({pad, conv("c", "p", "w", 3)}, {int64s("pads", {0, 1, 0, 0, 0, 1, 0, 0}), w}),
            "g.onnx: node 'p' (Pad): pads the batch or channel axis; only H and W can be padded");
  EXPECT_NE(error({op("Pad", "p", {"x", "pads", "one"}), conv("c", "p", "w", 3)}, {pads, {.name = "one", .floats = {1.0f}}, w})
                .find("only zero padding is supported"),
            std::string::npos);
  // Before only (TensorFlow puts an odd pad after): no convoy padding says that.
  EXPECT_EQ(error({op("Pad", "p", {"x", "pads"}), conv("c", "p", "w", 2)}, {int64s("pads", {0, 0, 1, 1, 0, 0, 0, 0}), w}),
            "g.onnx: node 'c' (Conv): pads [1, 1, 0, 0] (with the Pad before it) are neither equal on all sides nor "
            "TensorFlow's \"same\"");
}

TEST(Onnx, NhwcFlattenAndGlobalPoolVariantsImport) {
  // An NHWC input, a global pool as ReduceMean over H and W of the NHWC
  // tensor, kept dims squeezed: [N, C] in either order.
  const ImportedModel a = import(graph({5, 5, 3}, {op("Transpose", "t", {"x"}, {ints("perm", {0, 3, 1, 2})}),
                                                   conv("c", "t", "w", 3), op("Transpose", "b", {"c"}, {ints("perm", {0, 2, 3, 1})}),
                                                   op("ReduceMean", "m", {"b"}, {ints("axes", {1, 2})}),
                                                   op("Squeeze", "s", {"m", "axes"}), op("Softmax", "y", {"s"})},
                                       {weights("w", {4, 3, 3, 3}), int64s("axes", {-3, 2})}));
  EXPECT_TRUE(a.input_was_nhwc);
  EXPECT_TRUE(a.softmax_dropped);
  EXPECT_EQ(a.model.input_shape(), (Shape{3, 5, 5}));
  EXPECT_EQ(a.model.output_shape(), (Shape{4}));
  // NCHW: ReduceMean over axes 2 and 3 without kept dims, Flatten with axis -3, Clip to [0, inf).
  onnx::Tensor lo{.name = "lo", .floats = {0.0f}}, hi{.name = "hi", .floats = {std::numeric_limits<float>::infinity()}};
  const ImportedModel b = import(graph({3, 5, 5}, {conv("c", "x", "w", 3), op("Clip", "r", {"c", "lo", "hi"}),
                                                   op("Flatten", "f", {"r"}, {integer("axis", -3)}),
                                                   op("Gemm", "d", {"f", "dw"}, {integer("transB", 1)})},
                                       {weights("w", {4, 3, 3, 3}), lo, hi, weights("dw", {2, 36})}));
  EXPECT_FALSE(b.input_was_nhwc);
  EXPECT_FALSE(b.softmax_dropped);
  EXPECT_TRUE(std::holds_alternative<nn::ReLU>(b.model.layers()[1].layer));
  EXPECT_EQ(b.model.output_shape(), (Shape{2}));
  const ImportedModel c = import(graph({3, 5, 5}, {op("ReduceMean", "m", {"x", "axes"}, {integer("keepdims", 0)})},
                                       {int64s("axes", {3, 2})}, 18));
  EXPECT_EQ(c.model.output_shape(), (Shape{3}));
}

// PyTorch's x.view(x.size(0), -1): with a free batch size the target shape is
// computed (Shape, Gather, Unsqueeze, Concat), with a fixed one it is [2, K].
// tests/onnx_torch_import.py checks both against PyTorch's logits.
TEST(Onnx, PyTorchViewFlattensImport) {
  const std::vector<onnx::Tensor> constants{int64s("zero", {0}), int64s("axes", {0}), int64s("minus_one", {-1}),
                                            weights("w", {3, 18})};
  auto with_index = constants;
  with_index.push_back({.name = "index", .data_type = onnx::kInt64, .int64s = {0}});  // a scalar: no dims
  const ImportedModel a = import(graph({2, 3, 3}, {op("Relu", "r", {"x"}), op("Shape", "s", {"r"}), op("Gather", "g", {"s", "index"}),
                                                   op("Unsqueeze", "u", {"g", "axes"}), op("Concat", "c", {"u", "minus_one"}, {integer("axis", 0)}),
                                                   op("Reshape", "f", {"r", "c"}), op("Gemm", "d", {"f", "w"}, {integer("transB", 1)})},
                                       with_index));
  ASSERT_EQ(a.model.layers().size(), 3u);
  EXPECT_TRUE(std::holds_alternative<nn::Flatten>(a.model.layers()[1].layer));
  EXPECT_EQ(a.model.output_shape(), (Shape{3}));
  // Fixed batch 2: [2, 18].
  const ImportedModel b = import(graph({2, 3, 3}, {op("Relu", "r", {"x"}), op("Reshape", "f", {"r", "to"}), op("Gemm", "d", {"f", "w"}, {integer("transB", 1)})},
                                       {int64s("to", {2, 18}), weights("w", {3, 18})}));
  EXPECT_EQ(b.model.output_shape(), (Shape{3}));
  // A Gather of a tensor (an embedding lookup) is no shape arithmetic.
  EXPECT_EQ(import_error(graph({6}, {op("Gather", "g", {"x", "zero"})}, constants)),
            "g.onnx: node 'g' (Gather): is supported only on shapes (Shape, Gather, Unsqueeze, Concat before a Reshape: "
            "PyTorch's x.view(x.size(0), -1))");
  // A reshape to the tensor's own shape changes nothing; one that moves the batch is refused.
  EXPECT_EQ(import(graph({2, 3, 3}, {op("Relu", "r", {"x"}), op("Shape", "s", {"r"}), op("Reshape", "f", {"r", "s"}), op("Flatten", "g", {"f"})}))
                .model.layers().size(),
            2u);
  EXPECT_EQ(import_error(graph({2, 3, 3}, {op("Relu", "r", {"x"}), op("Reshape", "f", {"r", "to"})}, {int64s("to", {-1, 3})})),
            "g.onnx: node 'f' (Reshape): reshapes [N, 2, 3, 3] to [-1, 3]: only reshapes that keep the batch as the first "
            "axis are supported");
}

TEST(Onnx, LayoutsAndSoftmaxConvoyCannotFollowAreErrors) {
  const auto w = weights("w", {4, 3, 3, 3});
  const onnx::Node to_nchw = op("Transpose", "t", {"x"}, {ints("perm", {0, 3, 1, 2})});
  EXPECT_EQ(import_error(graph({5, 5, 3}, {op("Transpose", "t", {"x"}, {ints("perm", {0, 2, 1, 3})}), conv("c", "t", "w", 3)}, {w})),
            "g.onnx: node 't' (Transpose): perm [0, 2, 1, 3] is not supported (only NHWC to NCHW, [0, 3, 1, 2], and "
            "back, [0, 2, 3, 1])");
  // The NHWC tensor read as if NCHW.
  EXPECT_EQ(import_error(graph({3, 5, 5}, {op("Transpose", "t", {"x"}, {ints("perm", {0, 2, 3, 1})}), conv("c", "t", "w", 3)}, {w})),
            "g.onnx: node 'c' (Conv): needs an [N, C, H, W] input, gets an NHWC tensor");
  // NHWC-ordered features into a batch norm (its parameters would need permuting too).
  const onnx::Tensor g{.name = "g", .dims = {12}, .floats = std::vector<float>(12, 1.0f)};
  EXPECT_NE(import_error(graph({2, 2, 3}, {to_nchw, op("Transpose", "b", {"t"}, {ints("perm", {0, 2, 3, 1})}),
                                           op("Flatten", "f", {"b"}), op("BatchNormalization", "n", {"f", "g", "g", "g", "g"})},
                               {g}))
                .find("node 'n' (BatchNormalization): reads features flattened in NHWC order"),
            std::string::npos);
  // A Softmax before another op: convoy has no Softmax layer to keep.
  EXPECT_EQ(import_error(graph({6}, {op("Softmax", "s", {"x"}), op("Relu", "r", {"s"})})),
            "g.onnx: node 's' (Softmax): Softmax is supported only as the model's last op (convoy leaves it out and "
            "outputs the logits)");
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
    // Through uint8_t: a float above 127 converted straight to char is undefined.
    bad[static_cast<std::size_t>(rng.uniform(0.0f, 1.0f) * (bad.size() - 1))] =
        static_cast<char>(static_cast<uint8_t>(rng.uniform(0.0f, 255.0f)));
    try_import(bad);
  }
}

// Regressions found by fuzz/fuzz_onnx.cpp (each input was a crash, a
// sanitizer report or an exception other than UserError before its fix).

// An empty raw_data field: decoded as no values (it was a memcpy to a null
// pointer, undefined behaviour UBSan reported, even for 0 bytes).
TEST(OnnxFuzzRegressions, EmptyRawDataIsAnEmptyTensor) {
  onnx::Model o;
  o.graph.initializers = {{.name = "w", .dims = {0}}, {.name = "shape", .data_type = onnx::kInt64, .dims = {0}}};
  const onnx::Model back = onnx::decode(onnx::encode(o), "empty");
  ASSERT_EQ(back.graph.initializers.size(), 2u);
  EXPECT_TRUE(back.graph.initializers[0].floats.empty());
  EXPECT_TRUE(back.graph.initializers[1].int64s.empty());
  EXPECT_EQ(back.graph.initializers[1].dims, (std::vector<int64_t>{0}));
}

// An imported batch norm passes the eps and momentum rule a config's
// batch_norm layer does (it skipped it: epsilon 0 divided a constant
// channel's zero variance by zero).
TEST(Onnx, BatchNormSettingsAreCheckedAsAConfigsAre) {
  std::vector<onnx::Tensor> ones;
  for (const char* name : {"s", "b", "m", "v"}) ones.push_back({.name = name, .dims = {1}, .floats = {1.0f}});
  auto bn = [&](const char* attr, float v) {
    const onnx::Attribute a{.name = attr, .type = onnx::Attribute::kFloatAttr, .f = v};
    return graph({1, 2, 2}, {op("BatchNormalization", "bn", {"x", "s", "b", "m", "v"}, {a})}, ones);
  };
  EXPECT_EQ(import_error(bn("epsilon", 0.0f)), "g.onnx: node 'bn' (BatchNormalization): 'epsilon' must be positive and finite, got 0");
  EXPECT_EQ(import_error(bn("epsilon", std::nanf(""))),
            "g.onnx: node 'bn' (BatchNormalization): 'epsilon' must be positive and finite, got nan");
  EXPECT_EQ(import_error(bn("momentum", 1.5f)), "g.onnx: node 'bn' (BatchNormalization): 'momentum' must be in [0, 1], got 1.5");
  EXPECT_NO_THROW(import(bn("momentum", 0.99f)));
}

// Sizes a file claims but does not hold: a batch norm over 2^30 channels
// with one value per tensor allocated 16 GiB of flat buffers before the sizes
// were compared (libFuzzer: out-of-memory); an input of 2^120 values per
// example, 40 doubling Concats and pads of 2^62 overflowed int64 shape and
// window arithmetic (UBSan). Each is now one UserError, nothing allocated.
TEST(OnnxFuzzRegressions, ClaimedSizesAreCheckedBeforeUse) {
  std::vector<onnx::Tensor> ones;
  for (const char* name : {"s", "b", "m", "v"}) ones.push_back({.name = name, .dims = {1}, .floats = {1.0f}});
  EXPECT_EQ(import_error(graph({int64_t{1} << 30, 1, 1}, {op("BatchNormalization", "bn", {"x", "s", "b", "m", "v"})}, ones)),
            "g.onnx: tensor for 'batch_norm_0.weight' has 1 values, the layer needs [1073741824]");
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(import_error(graph({big, big, big}, {op("Relu", "r", {"x"})})),
            "g.onnx: input 'x' is [1099511627776, 1099511627776, 1099511627776] per example: more than 2^31 values, "
            "which convoy does not take");
  std::vector<onnx::Node> doubling{op("Relu", "c0", {"x"})};
  for (int i = 1; i <= 40; ++i) {
    // append(), not "c" + std::string: GCC 12 misreports the latter under -Wrestrict
    const std::string in = std::string("c").append(std::to_string(i - 1));
    doubling.push_back(op("Concat", std::string("c").append(std::to_string(i)), {in, in}, {integer("axis", 1)}));
  }
  EXPECT_EQ(import_error(graph({2, 4, 4}, doubling)), "g.onnx: node 'c27' (Concat): its output has more than 2^31 values per example");
  const int64_t huge = int64_t{1} << 62;
  EXPECT_NE(import_error(graph({1, 8, 8}, {conv("c", "x", "w", 3, {ints("pads", {huge, huge, huge, huge})})}, {weights("w", {1, 1, 3, 3})}))
                .find("node 'c' (Conv): pads [4611686018427387904, 4611686018427387904, 4611686018427387904, "
                      "4611686018427387904] are out of range"),
            std::string::npos);
  EXPECT_NE(import_error(graph({1, 8, 8}, {conv("c", "x", "w", 3, {ints("strides", {huge, huge})})}, {weights("w", {1, 1, 3, 3})}))
                .find("stride 4611686018427387904 is out of range"),
            std::string::npos);
}

// A model of dropouts only (the identity in inference) exported a graph
// whose one node was an Identity, which imports as a model without layers:
// convoy wrote a file it could not read back (fuzz_onnx's round trip).
TEST(OnnxFuzzRegressions, ADropoutOnlyModelExportsAFileThatImportsBack) {
  const nn::Model m({4}, {nn::Dropout{.rate = 0.25f}});
  const ImportedModel back = import(to_onnx(m, {}, {}));
  ASSERT_EQ(back.model.layers().size(), 1u);
  EXPECT_EQ(std::get<nn::Dropout>(back.model.layers()[0].layer).rate, 0.25f);
  EXPECT_EQ(back.model.output_shape(), (Shape{4}));
}

// A Mul of an image [N, C, H, W] by [N, C] features imported as convoy's
// channel gate, though ONNX's broadcasting rejects it; and convoy's own
// export of such a gate (an Unsqueeze to [N, C, 1, 1]) did not import back
// (fuzz_onnx's round trip, on files crafted by hand). Now the gate must be
// [N, C, 1, 1], from a kept-dims pool or an Unsqueeze.
TEST(OnnxFuzzRegressions, ChannelGatesFollowOnnxBroadcasting) {
  nn::GraphBuilder g({3, 6, 6});
  const auto x = g.add(nn::ReLU{}, g.input());
  const auto gate = g.add(nn::Sigmoid{}, g.add(nn::Dense{.units = 3}, g.add(nn::GlobalAvgPool{}, x)));  // [C]
  g.add(nn::Dense{.units = 2}, g.add(nn::GlobalAvgPool{}, g.add(nn::Multiply{}, {x, gate})));
  const nn::Model m = g.build();
  const auto w = testing::deterministic_weights(m);
  const onnx::Model o = to_onnx(m, w.params, w.state);
  EXPECT_EQ(ops(o), (std::vector<std::string>{"Relu", "GlobalAveragePool", "Flatten", "Gemm", "Sigmoid", "Unsqueeze", "Mul",
                                              "GlobalAveragePool", "Flatten", "Gemm"}));
  round_trip(m, true);

  EXPECT_EQ(import_error(graph({2, 3, 3}, {op("Relu", "r", {"x"}), op("ReduceMean", "f", {"r"}, {ints("axes", {2, 3}), integer("keepdims", 0)}),
                                           op("Mul", "m", {"r", "f"})})),
            "g.onnx: node 'm' (Mul): multiplies [2, 3, 3] by [2]; convoy imports Mul of equal shapes or of an image by "
            "a [N, C, 1, 1] channel gate");
  // The kept-dims form, gate first: imported as convoy's gate.
  const ImportedModel kept = import(graph({2, 3, 3}, {op("Relu", "r", {"x"}), op("GlobalAveragePool", "p", {"r"}), op("Mul", "m", {"p", "r"})}));
  EXPECT_EQ(kept.model.layers().back().input_shapes, (std::vector<Shape>{{2, 3, 3}, {2, 1, 1}}));
}

// Errors from convoy's layers (a shape that does not fit) and graphs with no
// layer at all named no file; now each starts with it.
TEST(OnnxFuzzRegressions, LayerErrorsAndEmptyGraphsNameTheFile) {
  EXPECT_EQ(import_error(graph({4, 3, 3}, {conv("c", "x", "w", 1, {integer("group", 3)})}, {weights("w", {6, 1, 1, 1})})),
            "g.onnx: c: groups (3) must divide the input channels (4) and the filters (6)");
  EXPECT_EQ(import_error(graph({2}, {op("Relu", "a", {"x"}), op("Relu", "b", {"x"})})),
            "g.onnx: model: the output of relu_0 is not used by any later layer; remove it or join it into the graph");
  EXPECT_EQ(import_error(graph({3, 2, 2}, {op("Identity", "i", {"x"})})),
            "g.onnx: the graph has no node convoy imports as a layer (only Identity, Transpose, Softmax, Constant and "
            "the like)");
  // On rows such a graph is the identity: one Flatten (a Softmax left out).
  const ImportedModel softmax = import(graph({2}, {op("Softmax", "s", {"x"})}));
  ASSERT_EQ(softmax.model.layers().size(), 1u);
  EXPECT_TRUE(std::holds_alternative<nn::Flatten>(softmax.model.layers()[0].layer));
  EXPECT_TRUE(softmax.softmax_dropped);
}

// Issue 23: ONNX's conformance suite (tests/test_onnx_conformance.cpp) found
// these; each has its own regression here.

// Concat's axis is normalised by the tensor's rank: the channel axis as 1 or
// -3 (images), 1 or -1 (rows) imports; the batch axis (0, or -4 on an image)
// was imported as a channel concat, and is refused now, as is any other axis.
TEST(OnnxIssue23, ConcatAxesAreNormalisedByRankAndOnlyChannelsImport) {
  auto concat = [](std::vector<int64_t> in, int64_t axis) {
    return graph(std::move(in), {op("Relu", "a", {"x"}), op("Sigmoid", "b", {"x"}), op("Concat", "c", {"a", "b"}, {integer("axis", axis)})});
  };
  EXPECT_EQ(import(concat({3, 2, 2}, 1)).model.output_shape(), (Shape{6, 2, 2}));
  EXPECT_EQ(import(concat({3, 2, 2}, -3)).model.output_shape(), (Shape{6, 2, 2}));
  EXPECT_EQ(import(concat({5}, -1)).model.output_shape(), (Shape{10}));
  EXPECT_EQ(import(concat({5}, 1)).model.output_shape(), (Shape{10}));
  EXPECT_EQ(import_error(concat({3, 2, 2}, -4)),
            "g.onnx: node 'c' (Concat): axis -4 concatenates along the batch axis; convoy concatenates only channels (axis 1)");
  EXPECT_EQ(import_error(concat({3, 2, 2}, 0)),
            "g.onnx: node 'c' (Concat): axis 0 concatenates along the batch axis; convoy concatenates only channels (axis 1)");
  EXPECT_EQ(import_error(concat({5}, -2)),
            "g.onnx: node 'c' (Concat): axis -2 concatenates along the batch axis; convoy concatenates only channels (axis 1)");
  EXPECT_EQ(import_error(concat({3, 2, 2}, -1)),
            "g.onnx: node 'c' (Concat): axis -1 is not the channel axis; convoy concatenates only channels (axis 1)");
  EXPECT_EQ(import_error(concat({3, 2, 2}, 4)),
            "g.onnx: node 'c' (Concat): axis 4 is out of range for a tensor of 4 dimensions");
  EXPECT_EQ(import_error(concat({3, 2, 2}, -5)),
            "g.onnx: node 'c' (Concat): axis -5 is out of range for a tensor of 4 dimensions");
}

// Flatten, Softmax and LogSoftmax by either sign of their axis.
TEST(OnnxIssue23, NegativeAxesOfEveryAxisOpAreNormalised) {
  const auto w = weights("w", {4, 3, 1, 1});
  for (int64_t axis : {1, -3})
    EXPECT_EQ(import(graph({3, 2, 2}, {conv("c", "x", "w", 1), op("Flatten", "f", {"c"}, {integer("axis", axis)})}, {w}))
                  .model.output_shape(),
              (Shape{16}));
  EXPECT_EQ(import_error(graph({3, 2, 2}, {conv("c", "x", "w", 1), op("Flatten", "f", {"c"}, {integer("axis", -2)})}, {w})),
            "g.onnx: node 'f' (Flatten): axis -2 joins the batch with the next 4 values ([N*4, ...]); convoy keeps the batch "
            "axis (axis 1)");
  for (const char* type : {"LogSoftmax", "Softmax"}) {
    for (int64_t axis : {1, -1}) {
      const ImportedModel m = import(graph({5}, {op("Relu", "r", {"x"}), op(type, "s", {"r"}, {integer("axis", axis)})}));
      EXPECT_EQ(m.model.output_shape(), (Shape{5})) << type << axis;
    }
    for (int64_t axis : {0, -2})
      EXPECT_NE(import_error(graph({5}, {op("Relu", "r", {"x"}), op(type, "s", {"r"}, {integer("axis", axis)})}))
                    .find("g.onnx: node 's' (" + std::string(type) + "): only " + type + " over the features"),
                std::string::npos)
          << type << axis;
    EXPECT_EQ(import_error(graph({5}, {op("Relu", "r", {"x"}), op(type, "s", {"r"}, {integer("axis", 2)})})),
              "g.onnx: node 's' (" + std::string(type) + "): axis 2 is out of range for a tensor of 2 dimensions");
  }
  // ReduceMean, Squeeze and Unsqueeze name H and W of an image by either sign.
  for (const auto& axes : std::vector<std::vector<int64_t>>{{2, 3}, {-1, -2}, {3, -2}}) {
    EXPECT_EQ(import(graph({3, 2, 2}, {op("ReduceMean", "m", {"x"}, {ints("axes", axes), integer("keepdims", 0)})})).model.output_shape(),
              (Shape{3}));
    EXPECT_EQ(import(graph({3, 1, 1}, {op("Relu", "r", {"x"}), op("Squeeze", "s", {"r", "a"})}, {int64s("a", axes)})).model.output_shape(),
              (Shape{3}));
    EXPECT_EQ(import(graph({3, 2, 2}, {op("ReduceMean", "g", {"x"}, {ints("axes", {2, 3}), integer("keepdims", 0)}),
                                       op("Unsqueeze", "u", {"g", "a"}), op("Mul", "m", {"x", "u"})},
                           {int64s("a", axes)}))
                  .model.output_shape(),
              (Shape{3, 2, 2}))
        << "a channel gate";
  }
  for (int64_t axis : {-2, 1}) {  // [N, 3] to [N, 1, 3] by either sign, then flat again
    const ImportedModel m = import(graph({3}, {op("Unsqueeze", "u", {"x", "a"}), op("Relu", "r", {"u"}), op("Flatten", "f", {"r"})},
                                         {int64s("a", {axis})}));
    EXPECT_EQ(m.model.output_shape(), (Shape{3})) << axis;
  }
  EXPECT_EQ(import_error(graph({3, 2, 2}, {op("ReduceMean", "m", {"x"}, {ints("axes", {-3, -2})})})),
            "g.onnx: node 'm' (ReduceMean): only ReduceMean over the spatial axes of an image (a global average pool) is "
            "supported");
}

// LogSoftmax at |x| up to 1e4 (ONNX's test_logsoftmax_large_number): x - max
// first, then the log of the sum, against a double-precision reference.
TEST(OnnxIssue23, LogSoftmaxIsStableAtLargeInputs) {
  const ImportedModel m = import(graph({4}, {op("LogSoftmax", "s", {"x"}, {integer("axis", -1)})}));
  const std::vector<float> x{10000, 10001, 10002, 10003, -10000, -9999.5f, -10002, -10000, 0, 1, 2, 3};
  const auto got = infer(m.model, m.weights.params, m.weights.state, x, 3);
  for (std::size_t r = 0; r < 3; ++r) {
    double mx = -1e300, sum = 0;
    for (std::size_t j = 0; j < 4; ++j) mx = std::max(mx, static_cast<double>(x[r * 4 + j]));
    for (std::size_t j = 0; j < 4; ++j) sum += std::exp(static_cast<double>(x[r * 4 + j]) - mx);
    for (std::size_t j = 0; j < 4; ++j)
      EXPECT_NEAR(got[r * 4 + j], static_cast<double>(x[r * 4 + j]) - mx - std::log(sum), 2e-6) << r << ", " << j;
  }
}

// Every element type ONNX defines is read with its own width, from raw_data
// and from its typed field; one convoy cannot use is refused by name where it
// is used, never "malformed".
TEST(OnnxIssue23, EveryElementTypeDecodesWithItsOwnWidth) {
  auto tensor_bytes = [](int32_t type, std::vector<int64_t> dims, auto&& fill) {
    proto::Writer w;
    w.packed_int64s(1, dims);
    w.varint(2, static_cast<uint64_t>(type));
    w.bytes(8, "t");
    fill(w);
    return std::string(w.bytes());
  };
  auto raw = [&](int32_t type, std::vector<int64_t> dims, std::string bytes) {
    return onnx::decode_tensor(tensor_bytes(type, dims, [&](proto::Writer& w) { w.bytes(9, bytes); }), "t.pb");
  };
  auto le = [](std::initializer_list<int> bytes) {
    std::string s;
    for (int b : bytes) s.push_back(static_cast<char>(b));
    return s;
  };
  EXPECT_EQ(raw(onnx::kBool, {3}, le({1, 0, 1})).int64s, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(raw(onnx::kInt8, {2}, le({0xfd, 4})).int64s, (std::vector<int64_t>{-3, 4}));
  EXPECT_EQ(raw(onnx::kUint8, {2}, le({250, 7})).int64s, (std::vector<int64_t>{250, 7}));
  EXPECT_EQ(raw(onnx::kInt16, {1}, le({0xd4, 0xfe})).int64s, (std::vector<int64_t>{-300}));
  EXPECT_EQ(raw(onnx::kUint16, {1}, le({0xff, 0xff})).int64s, (std::vector<int64_t>{65535}));
  EXPECT_EQ(raw(onnx::kInt32, {1}, le({0xfe, 0xff, 0xff, 0xff})).int64s, (std::vector<int64_t>{-2}));
  EXPECT_EQ(raw(onnx::kUint32, {1}, le({0xff, 0xff, 0xff, 0xff})).int64s, (std::vector<int64_t>{4294967295}));
  EXPECT_EQ(raw(onnx::kInt64, {1}, le({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})).int64s, (std::vector<int64_t>{-1}));
  EXPECT_EQ(raw(onnx::kUint64, {1}, le({0, 0, 0, 0, 0, 1, 0, 0})).int64s, (std::vector<int64_t>{int64_t{1} << 40}));
  // 1.5 and -2.25 as float16 (0x3e00, 0xc080), 1.0 and -3.5 as bfloat16 (0x3f80, 0xc060), 0.1 as a double.
  EXPECT_EQ(raw(onnx::kFloat16, {2}, le({0x00, 0x3e, 0x80, 0xc0})).floats, (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(raw(onnx::kBfloat16, {2}, le({0x80, 0x3f, 0x60, 0xc0})).floats, (std::vector<float>{1.0f, -3.5f}));
  EXPECT_EQ(raw(onnx::kDouble, {1}, le({0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f})).floats, (std::vector<float>{0.1f}));
  // float16 subnormal, infinity.
  EXPECT_EQ(raw(onnx::kFloat16, {2}, le({0x01, 0x00, 0x00, 0x7c})).floats,
            (std::vector<float>{std::ldexp(1.0f, -24), std::numeric_limits<float>::infinity()}));
  // The typed fields: int32_data for the narrow types and float16 bits, double_data, uint64_data.
  auto int32_data = [&](int32_t type, std::vector<int64_t> values) {
    return onnx::decode_tensor(tensor_bytes(type, {static_cast<int64_t>(values.size())},
                                            [&](proto::Writer& w) { w.packed_int64s(5, values); }),
                               "t.pb");
  };
  EXPECT_EQ(int32_data(onnx::kBool, {1, 0}).int64s, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(int32_data(onnx::kInt8, {-3, 4}).int64s, (std::vector<int64_t>{-3, 4}));
  EXPECT_EQ(int32_data(onnx::kUint8, {250}).int64s, (std::vector<int64_t>{250}));
  EXPECT_EQ(int32_data(onnx::kInt32, {-70000}).int64s, (std::vector<int64_t>{-70000}));
  EXPECT_EQ(int32_data(onnx::kFloat16, {0x3e00}).floats, (std::vector<float>{1.5f}));
  const double d = 0.25;
  std::string d_bytes(8, '\0');
  std::memcpy(d_bytes.data(), &d, 8);
  EXPECT_EQ(onnx::decode_tensor(tensor_bytes(onnx::kDouble, {1}, [&](proto::Writer& w) { w.bytes(10, d_bytes); }), "t.pb").floats,
            (std::vector<float>{0.25f}));
  EXPECT_EQ(onnx::decode_tensor(tensor_bytes(onnx::kUint64, {1}, [&](proto::Writer& w) { w.varint(11, 7); }), "t.pb").int64s,
            (std::vector<int64_t>{7}));
  // Raw bytes that are no whole number of elements: malformed, saying of what.
  EXPECT_EQ(testing::error_of([&] { raw(onnx::kInt16, {1}, le({1, 2, 3})); }),
            "t.pb: malformed ONNX tensor: tensor 't' has 3 raw bytes, not a whole number of INT16 elements of 2 bytes "
            "(at byte 13)");

  // In a model: float16 weights are converted, int32 indices read, a STRING
  // weight refused by its type's name, and one bool initializer no longer
  // makes the file "malformed".
  const onnx::Model o = graph({3, 2, 2}, {conv("c", "x", "w", 1)}, {weights("w", {4, 3, 1, 1})});
  const ImportedModel plain = import(o);
  auto with_weight = [&](int32_t type, std::string weight_bytes) {
    onnx::Model typed = onnx::decode(onnx::encode(o), "g.onnx");
    typed.graph.initializers[0] = onnx::decode_tensor(tensor_bytes(type, {4, 3, 1, 1}, [&](proto::Writer& w) { w.bytes(9, weight_bytes); }), "w.pb");
    typed.graph.initializers[0].name = "w";
    return from_onnx(typed, "g.onnx");
  };
  std::string half_ones;
  for (int i = 0; i < 12; ++i) half_ones += le({0x00, 0x3c});  // 1.0 in float16
  const ImportedModel half = with_weight(onnx::kFloat16, half_ones);
  EXPECT_EQ(half.weights.params, std::vector<float>(12, 1.0f));
  EXPECT_EQ(testing::error_of([&] { with_weight(onnx::kString, ""); }),
            "g.onnx: node 'c' (Conv): tensor 'w' has ONNX data type STRING, which convoy does not read (it reads "
            "floating-point, integer and bool tensors)");
  EXPECT_EQ(testing::error_of([&] { with_weight(onnx::kUint8, std::string(12, '\1')); }),
            "g.onnx: node 'c' (Conv): tensor 'w' is UINT8; this input takes floating-point values");
  EXPECT_EQ(plain.model.num_parameters(), half.model.num_parameters());
}

// The input's element type is checked: a UINT8 input was read as floats.
TEST(OnnxIssue23, NonFloatInputsAreRefusedByTypeName) {
  onnx::Model o = graph({3}, {op("Relu", "r", {"x"})});
  o.graph.inputs[0].elem_type = onnx::kUint8;
  EXPECT_EQ(import_error(o), "g.onnx: input 'x' holds UINT8 elements; convoy models take FLOAT input");
}

// Messages locate the problem: unnamed nodes by index and op, layer errors
// of unnamed nodes too, constants where a computed tensor is needed by name.
TEST(OnnxIssue23, MessagesNameTheNodeAndTheConstantOperand) {
  auto unnamed = [](onnx::Node n) {
    n.name.clear();
    return n;
  };
  EXPECT_EQ(import_error(graph({3, 2, 2}, {unnamed(op("Relu", "a", {"x"})),
                                           unnamed(op("Concat", "c", {"a", "a"}, {integer("axis", 0)}))})),
            "g.onnx: node #1 (Concat): axis 0 concatenates along the batch axis; convoy concatenates only channels (axis 1)");
  EXPECT_EQ(import_error(graph({3, 5, 5}, {unnamed(op("MaxPool", "p", {"x"}, {ints("kernel_shape", {3, 3}), ints("pads", {2, 2, 2, 2})}))})),
            "g.onnx: node #0 (MaxPool): padding 2 is more than half the kernel 3; use a padding of at most 1");
  EXPECT_EQ(import_error(graph({3}, {unnamed(op("Erf", "e", {"x"}))})).substr(0, 41), "g.onnx: node #0 has op Erf, which convoy ");
  const auto c = weights("k", {1, 3, 2, 2});
  // A Transpose of a constant folds; the graph's output then is a constant.
  EXPECT_EQ(import_error(graph({3, 2, 2}, {op("Transpose", "t", {"k"}, {ints("perm", {0, 2, 3, 1})})}, {c})),
            "g.onnx: the graph output 't' is a constant; convoy models compute their output from the input");
  EXPECT_EQ(import_error(graph({3, 2, 2}, {op("Relu", "r", {"x"}), op("Concat", "c", {"r", "k"}, {integer("axis", 1)})}, {c})),
            "g.onnx: node 'c' (Concat): Concat with a constant operand ('k', FLOAT [1, 3, 2, 2]) is not supported; convoy "
            "takes a computed tensor there");
  EXPECT_EQ(import_error(graph({3, 2, 2}, {op("Relu", "r", {"x"}), op("Add", "a", {"r", "k"})}, {weights("k", {2, 3, 2, 2})})),
            "g.onnx: node 'a' (Add): Add with a constant operand ('k', [2, 3, 2, 2]) on [N, 3, 2, 2] is not supported: "
            "convoy takes a constant that broadcasts to one example's shape, the same for every example (it has no layer "
            "that holds one per example)");
  EXPECT_EQ(import_error(graph({3}, {op("Shape", "s", {"x"})})),
            "g.onnx: the graph output 's' is a shape (Shape, Gather, ...), which convoy evaluates at import; its models "
            "compute tensors");
  EXPECT_EQ(import_error(graph({3, 2, 2}, {op("Relu", "r", {"nothing"})})),
            "g.onnx: node 'r' (Relu): input 'nothing' is not computed by any earlier node");
}

// Limits the suite found, now imported: Gemm's alpha, beta and a scalar or
// [1] bias; Clip without bounds; weights given both as graph inputs and as
// initializers; Dropout's training_mode false (true is refused).
TEST(OnnxIssue23, GemmScalingClipWithoutBoundsAndWeightsAsInputs) {
  const onnx::Tensor one{.name = "b", .dims = {}, .floats = {0.5f}}, vec1{.name = "b", .dims = {1}, .floats = {0.5f}};
  const auto w = weights("w", {2, 3});
  for (const auto& bias : {one, vec1}) {
    const ImportedModel m = import(graph({3}, {op("Gemm", "g", {"x", "w", "b"}, {integer("transB", 1),
                                                                              {.name = "alpha", .type = onnx::Attribute::kFloatAttr, .f = 2.0f},
                                                                              {.name = "beta", .type = onnx::Attribute::kFloatAttr, .f = 3.0f}})},
                                         {w, bias}));
    std::vector<float> want = w.floats;
    for (float& v : want) v *= 2.0f;
    want.insert(want.end(), {1.5f, 1.5f});
    EXPECT_EQ(m.weights.params, want);
  }
  const onnx::Tensor rows{.name = "b", .dims = {4, 2}, .floats = std::vector<float>(8, 1.0f)};
  EXPECT_EQ(import_error(graph({3}, {op("Gemm", "g", {"x", "w", "b"}, {integer("transB", 1)})}, {w, rows})),
            "g.onnx: node 'g' (Gemm): the bias 'b' is [4, 2]; convoy's Dense takes one value per unit ([2] or [1, 2]) or "
            "a scalar, the same for every row");
  // A scalar bias is broadcast no wider than the weight: a [0, 2^40] weight is refused, not a 4 TB bias.
  const onnx::Tensor empty{.name = "w", .dims = {0, int64_t{1} << 40}};
  EXPECT_NE(import_error(graph({3}, {op("Gemm", "g", {"x", "w", "b"})}, {empty, one})).find("node 'g' (Gemm): the weight has 0 values"),
            std::string::npos);
  // Clip without bounds is the identity.
  const ImportedModel clip = import(graph({3}, {op("Clip", "c", {"x"}), op("Relu", "r", {"c"})}));
  EXPECT_EQ(clip.model.layers().size(), 1u);
  // Weights as graph inputs with initializers of the same name (IR >= 4).
  onnx::Model o = graph({3, 2, 2}, {conv("c", "x", "k", 1)}, {weights("k", {2, 3, 1, 1})});
  o.graph.inputs.push_back({.name = "k", .dims = {2, 3, 1, 1}, .dim_params = std::vector<std::string>(4)});
  EXPECT_EQ(import(o).model.output_shape(), (Shape{2, 2, 2}));
  // Dropout's training_mode.
  for (int64_t mode : {0, 1}) {
    const onnx::Tensor flag{.name = "mode", .data_type = onnx::kBool, .dims = {}, .int64s = {mode}};
    const onnx::Tensor ratio{.name = "ratio", .dims = {}, .floats = {0.25f}};
    const auto model = graph({3}, {op("Dropout", "d", {"x", "ratio", "mode"})}, {ratio, flag});
    if (mode == 0)
      EXPECT_EQ(import(model).model.layers().size(), 1u);
    else
      EXPECT_EQ(import_error(model), "g.onnx: node 'd' (Dropout): training_mode true (dropout at inference) is not supported");
  }
}

// Constant operands: nodes whose inputs are all constants fold at import (a
// Transpose of a weight, Mul of Constant nodes); x op c with one value or one
// per channel on an image is a frozen depthwise 1x1 convolution, on a Gemm's
// rows folded into it; any other constant tensor is refused by its shape.
TEST(OnnxIssue23, ConstantOperandsFoldOrBecomeFrozenLayers) {
  const onnx::Tensor mean{.name = "mean", .dims = {1, 2, 1, 1}, .floats = {0.5f, -1.0f}};
  const onnx::Tensor stdev{.name = "std", .dims = {2, 1, 1}, .floats = {2.0f, 0.25f}};
  const ImportedModel norm =
      import(graph({2, 1, 2}, {op("Sub", "s", {"x", "mean"}), op("Div", "d", {"s", "std"}), op("Flatten", "f", {"d"})}, {mean, stdev}));
  ASSERT_EQ(norm.model.layers().size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(std::holds_alternative<nn::Conv2d>(norm.model.layers()[i].layer));
    EXPECT_FALSE(norm.model.layers()[i].trainable) << "a constant stays constant";
  }
  EXPECT_EQ(infer(norm.model, norm.weights.params, norm.weights.state, {1, 2, 3, 4}, 1), (std::vector<float>{0.25f, 0.75f, 16, 20}));
  // c - x, and a product by a scalar Constant node.
  const onnx::Node three{.name = "three", .op_type = "Constant", .outputs = {"three"},
                         .attributes = {{.name = "value", .type = onnx::Attribute::kTensor, .t = onnx::Tensor{.name = "t", .floats = {3}}}}};
  const ImportedModel flip = import(graph({2, 1, 2}, {three, op("Sub", "s", {"one", "x"}), op("Mul", "m", {"s", "three"}), op("Flatten", "f", {"m"})},
                                          {onnx::Tensor{.name = "one", .dims = {1}, .floats = {1}}}));
  EXPECT_EQ(infer(flip.model, flip.weights.params, flip.weights.state, {1, 2, 3, 4}, 1), (std::vector<float>{0, -3, -6, -9}));
  // A Conv's weight as the Transpose of a constant: folded, then the Conv's.
  const onnx::Tensor kt{.name = "kt", .dims = {3, 2, 1, 1}, .floats = {1, 2, 3, 4, 5, 6}};
  const ImportedModel folded = import(graph({3, 1, 1}, {op("Transpose", "k", {"kt"}, {ints("perm", {1, 0, 2, 3})}), conv("c", "x", "k", 1)}, {kt}));
  EXPECT_EQ(folded.weights.params, (std::vector<float>{1, 3, 5, 2, 4, 6}));
  // Gemm, then Mul and Add of one value per unit: the Dense's weight and bias.
  const auto w = weights("w", {2, 3});
  const ImportedModel dense = import(graph({3}, {op("Gemm", "g", {"x", "w", "b"}, {integer("transB", 1)}), op("Mul", "m", {"g", "s"}), op("Add", "a", {"m", "t"})},
                                           {w, {.name = "b", .dims = {2}, .floats = {1, 2}}, {.name = "s", .dims = {2}, .floats = {2, -1}},
                                            {.name = "t", .dims = {1, 2}, .floats = {0.5f, 0.5f}}}));
  ASSERT_EQ(dense.model.layers().size(), 1u);
  std::vector<float> want = w.floats;
  for (std::size_t i = 0; i < 6; ++i) want[i] *= i < 3 ? 2.0f : -1.0f;
  want.insert(want.end(), {2.5f, -1.5f});
  EXPECT_EQ(dense.weights.params, want);
  // Rows no Gemm computes: a frozen Affine.
  const ImportedModel rows = import(graph({3}, {op("Relu", "r", {"x"}), op("Add", "a", {"r", "t"})}, {{.name = "t", .dims = {3}, .floats = {1, 2, 3}}}));
  ASSERT_EQ(rows.model.layers().size(), 2u);
  EXPECT_TRUE(std::holds_alternative<nn::Affine>(rows.model.layers()[1].layer));
  EXPECT_FALSE(rows.model.layers()[1].trainable);
  EXPECT_EQ(infer(rows.model, rows.weights.params, rows.weights.state, {-1, 1, 2}, 1), (std::vector<float>{1, 3, 5}));
  // Refused by name and shape: a constant dividend, constants that do not fold.
  EXPECT_EQ(import_error(graph({2, 1, 2}, {op("Div", "d", {"one", "x"})}, {{.name = "one", .dims = {1}, .floats = {1}}})),
            "g.onnx: node 'd' (Div): Div with a constant operand ('one', [1]) as the dividend is not supported (only a "
            "computed tensor divided by a constant)");
  EXPECT_EQ(import_error(graph({3}, {op("Add", "k", {"p", "q"}), op("Relu", "r", {"x"})},
                               {{.name = "p", .dims = {2}, .floats = {1, 2}}, {.name = "q", .dims = {3}, .floats = {1, 2, 3}}})),
            "g.onnx: node 'k' (Add): its inputs are constants, which convoy folds, but shapes [2] and [3] do not broadcast");
  // A fold is bounded: [2^14] + [2^14, 1] would be 2^28 values.
  const onnx::Tensor wide{.name = "p", .dims = {1 << 14}, .floats = std::vector<float>(1 << 14)};
  onnx::Tensor tall = wide;
  tall.name = "q";
  tall.dims = {1 << 14, 1};
  EXPECT_EQ(import_error(graph({3}, {op("Add", "k", {"p", "q"}), op("Relu", "r", {"x"})}, {wide, tall})),
            "g.onnx: node 'k' (Add): its inputs are constants, which convoy folds, but the result would have more than 2^26 "
            "values");
}

// Held-out models (2026-12-03, session 19): PyTorch (1.13) exports a pad
// (F.pad, nn.ZeroPad2d: TensorFlow's "same" in ported models) as a chain
// computing the pads from constants, ConstantOfShape, Slice with step -1 and
// Cast among them, which the import refused ("op ConstantOfShape, which convoy
// cannot import"). Now folded: the Pad's zeros land in the next Conv.
TEST(OnnxTorchPads, PyTorchsPadChainFoldsIntoTheConvolution) {
  const onnx::Tensor zero{.name = "zero", .data_type = onnx::kInt64, .dims = {1}, .int64s = {0}};
  const onnx::Node extension{.name = "ext", .op_type = "ConstantOfShape", .inputs = {"four"}, .outputs = {"ext"},
                             .attributes = {{.name = "value", .type = onnx::Attribute::kTensor, .t = zero}}};
  const std::vector<onnx::Node> nodes{
      extension,
      op("Concat", "cat", {"pad", "ext"}, {integer("axis", 0)}),                       // [1, 1, 1, 1, 0, 0, 0, 0]
      op("Reshape", "pairs", {"cat", "pairs_shape"}),                                  // [[1, 1], [1, 1], [0, 0], [0, 0]]
      op("Slice", "reversed", {"pairs", "starts", "ends", "axes", "steps"}),           // last axis first
      op("Transpose", "columns", {"reversed"}, {ints("perm", {1, 0})}),                // begins, then ends
      op("Reshape", "flat", {"columns", "flat_shape"}),
      op("Cast", "pads", {"flat"}, {integer("to", onnx::kInt64)}),
      op("Pad", "padded", {"x", "pads"}),
      conv("c", "padded", "w", 3)};
  auto i64 = [](const std::string& name, std::vector<int64_t> v) {
    const auto n = static_cast<int64_t>(v.size());
    return onnx::Tensor{.name = name, .data_type = onnx::kInt64, .dims = {n}, .int64s = std::move(v)};
  };
  const ImportedModel m = import(graph({2, 5, 6}, nodes,
                                       {i64("four", {4}), i64("pad", {1, 1, 1, 1}), i64("pairs_shape", {-1, 2}),
                                        i64("starts", {-1}), i64("ends", {-9223372036854775807}), i64("axes", {0}),
                                        i64("steps", {-1}), i64("flat_shape", {-1}), weights("w", {3, 2, 3, 3})}));
  ASSERT_EQ(m.model.layers().size(), 1u);
  const auto& c = std::get<nn::Conv2d>(m.model.layers()[0].layer);
  EXPECT_EQ(c.padding, 1);
  EXPECT_EQ(m.model.output_shape(), (Shape{3, 5, 6}));
  // Slice's clamping and steps on their own: every other value, backwards from past the end.
  const onnx::Tensor t = i64("t", {10, 11, 12, 13, 14}), b = i64("b", {100}), e = i64("e", {-100}), st = i64("st", {-2});
  const onnx::Tensor folded = onnx_fold::fold_node(op("Slice", "s", {"t", "b", "e", "", "st"}), {&t, &b, &e, nullptr, &st}, 13);
  EXPECT_EQ(folded.int64s, (std::vector<int64_t>{14, 12, 10}));
}

// Hostile files against the pad chain's folds (2026-12-03, session 19): each
// is one FoldError (a UserError naming the node through the import), in
// bounded memory and time, where before it allocated gigabytes, took
// rank * total steps, read out of bounds or overflowed.
TEST(OnnxFuzzRegressions, PadChainFoldsRefuseHostileShapesStepsAndCasts) {
  auto fold_error = [](const onnx::Node& n, std::vector<const onnx::Tensor*> in) {
    return testing::error_of<onnx_fold::FoldError>([&] { onnx_fold::fold_node(n, in, 13); });
  };
  auto i64 = [](const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
    return onnx::Tensor{.name = name, .data_type = onnx::kInt64, .dims = std::move(dims), .int64s = std::move(v)};
  };
  // 1. One budget for the whole import: two folds of 2^25 + 1 values each fit
  // the per-fold cap but not, together, the file's.
  const std::string over = "its inputs are constants, which convoy folds, but the result would take the constants "
                           "folded in this file past 2^26 values in all";
  EXPECT_EQ(import_error(graph({3}, {op("ConstantOfShape", "c1", {"n"}), op("ConstantOfShape", "c2", {"n"}), op("Relu", "r", {"x"})},
                               {int64s("n", {(int64_t{1} << 25) + 1})})),
            "g.onnx: node 'c2' (ConstantOfShape): " + over);
  const onnx::Tensor small = int64s("s", {2});
  EXPECT_EQ(testing::error_of<onnx_fold::FoldError>(
                [&] { onnx_fold::fold_node(op("ConstantOfShape", "c", {"s"}), {&small}, 13, 1); }),
            "the result would take the constants folded in this file past 2^26 values in all");
  // 2. ConstantOfShape's rank is capped as Reshape's and Unsqueeze's are.
  const onnx::Tensor ones = int64s("ones", std::vector<int64_t>(60000, 1));
  EXPECT_EQ(fold_error(op("ConstantOfShape", "c", {"ones"}), {&ones}), "the result would have more than 64 dimensions");
  // 3. Slice: an empty axis with a negative step, steps of INT64_MAX and
  // INT64_MIN (one value each, as ONNX defines), a step of 0.
  const onnx::Tensor empty = i64("t", {0}, {}), t = int64s("t", {10, 11, 12, 13, 14}), zero = int64s("z", {0}),
                     four = int64s("f", {4}), minus1 = int64s("m", {-1}), minus100 = int64s("m", {-100}),
                     big = int64s("b", {INT64_MAX}), five = int64s("f", {5}), most = int64s("st", {INT64_MAX}),
                     least = int64s("st", {INT64_MIN}), none = int64s("st", {0});
  const onnx::Node sl = op("Slice", "s", {"t", "b", "e", "", "st"});
  const onnx::Tensor backwards = onnx_fold::fold_node(sl, {&empty, &zero, &minus1, nullptr, &minus1}, 13);
  EXPECT_EQ(backwards.dims, (std::vector<int64_t>{0}));
  EXPECT_EQ(onnx_fold::fold_node(sl, {&t, &zero, &five, nullptr, &most}, 13).int64s, (std::vector<int64_t>{10}));
  EXPECT_EQ(onnx_fold::fold_node(sl, {&t, &zero, &big, nullptr, &most}, 13).int64s, (std::vector<int64_t>{10}));
  EXPECT_EQ(onnx_fold::fold_node(sl, {&t, &four, &minus100, nullptr, &least}, 13).int64s, (std::vector<int64_t>{14}));
  EXPECT_EQ(fold_error(sl, {&t, &zero, &five, nullptr, &none}), "a step is 0");
  // 4. Shapes: a dimension above the cap with a 0 before it, a negative one,
  // and a Reshape whose known dimensions multiply past int64.
  const onnx::Tensor vast = i64("v", {0, int64_t{1} << 40, int64_t{1} << 40}, {});
  EXPECT_EQ(fold_error(op("Identity", "i", {"v"}), {&vast}), "constant 'v' would have more than 2^26 values");
  EXPECT_EQ(fold_error(op("ConstantOfShape", "c", {"m"}), {&minus1}), "the result has a negative dimension ([-1])");
  const onnx::Tensor wide = int64s("w", {int64_t{1} << 26, int64_t{1} << 40});
  EXPECT_EQ(fold_error(op("Reshape", "r", {"t", "w"}), {&t, &wide}),
            "shape [67108864, 1099511627776] would have more than 2^26 values");
  // 5. Cast: `to` range-checked, unsupported targets refused, values converted or refused.
  const onnx::Tensor halves{.name = "h", .dims = {3}, .floats = {0.5f, -2.75f, 3.0f}};
  const onnx::Tensor wide_ints = int64s("i", {300, int64_t{1} << 40}), exact = int64s("i", {300, (int64_t{1} << 24) + 1});
  auto cast = [](int64_t to) { return op("Cast", "k", {"x"}, {integer("to", to)}); };
  EXPECT_EQ(fold_error(cast((int64_t{1} << 32) + onnx::kInt64), {&halves}),
            "a cast to data type 4294967303, which convoy folds only to INT64, INT32, FLOAT or DOUBLE");
  EXPECT_EQ(fold_error(cast(onnx::kBool), {&halves}), "a cast to BOOL, which convoy folds only to INT64, INT32, FLOAT or DOUBLE");
  EXPECT_EQ(fold_error(cast(onnx::kFloat16), {&halves}), "a cast to FLOAT16, which convoy folds only to INT64, INT32, FLOAT or DOUBLE");
  EXPECT_EQ(onnx_fold::fold_node(cast(onnx::kInt64), {&halves}, 13).int64s, (std::vector<int64_t>{0, -2, 3}));
  EXPECT_EQ(fold_error(cast(onnx::kInt32), {&wide_ints}), "a cast of 1099511627776 to INT32, which cannot hold it exactly");
  EXPECT_EQ(fold_error(cast(onnx::kDouble), {&exact}), "a cast of 16777217 to DOUBLE, which cannot hold it exactly");
  EXPECT_EQ(onnx_fold::fold_node(cast(onnx::kFloat), {&exact}, 13).floats, (std::vector<float>{300.0f, 16777216.0f}));
  // 6. ConstantOfShape's value: a tensor of one value, or absent.
  EXPECT_EQ(fold_error(op("ConstantOfShape", "c", {"s"}, {integer("value", 3)}), {&small}),
            "the attribute 'value' must be a tensor of one value");
  const onnx::Attribute pair{.name = "value", .type = onnx::Attribute::kTensor, .t = int64s("v", {1, 2})};
  EXPECT_EQ(fold_error(op("ConstantOfShape", "c", {"s"}, {pair}), {&small}),
            "the attribute 'value' must be a tensor of one value, not [2]");
}

// Clip to any bounds (attributes before opset 11, inputs after, an empty
// name absent) is convoy's clip; a constant of one example's shape is a
// frozen Affine, in convoy's (C, H, W) order where the tensor is NHWC, and
// convoy's export of it (Mul, then Add) imports as the one layer again.
TEST(OnnxIssue23, ClipToAnyBoundsAndConstantsOfOneExamplesShape) {
  const onnx::Attribute lo{.name = "min", .type = onnx::Attribute::kFloatAttr, .f = -1.0f},
      hi{.name = "max", .type = onnx::Attribute::kFloatAttr, .f = 0.5f};
  const ImportedModel old = import(graph({4}, {op("Clip", "c", {"x"}, {lo, hi})}, {}, 6));
  ASSERT_TRUE(std::holds_alternative<nn::Clip>(old.model.layers()[0].layer));
  EXPECT_EQ(infer(old.model, old.weights.params, old.weights.state, {-3, -0.5f, 0.25f, 2}, 1),
            (std::vector<float>{-1, -0.5f, 0.25f, 0.5f}));
  const onnx::Tensor top{.name = "top", .dims = {}, .floats = {0.5f}}, bottom{.name = "bottom", .dims = {}, .floats = {1.0f}};
  const ImportedModel max_only = import(graph({4}, {op("Clip", "c", {"x", "", "top"})}, {top}));
  const auto& clip = std::get<nn::Clip>(max_only.model.layers()[0].layer);
  EXPECT_TRUE(std::isinf(clip.min) && clip.min < 0);
  EXPECT_EQ(clip.max, 0.5f);
  EXPECT_EQ(import_error(graph({4}, {op("Clip", "c", {"x", "bottom", "top"})}, {top, bottom})),
            "g.onnx: node 'c' (Clip): min 1.000000 is above max 0.500000 (or one is NaN); convoy's clip takes min <= max");

  // x * k on an NHWC tensor: k is [H, W, C] = [1, 2, 3]; convoy's affine holds it as [C, H, W].
  const onnx::Tensor k{.name = "k", .dims = {1, 2, 3}, .floats = {1, 2, 3, 4, 5, 6}};
  const ImportedModel nhwc = import(graph({3, 1, 2}, {op("Transpose", "t", {"x"}, {ints("perm", {0, 2, 3, 1})}), op("Mul", "m", {"t", "k"}),
                                                      op("Transpose", "b", {"m"}, {ints("perm", {0, 3, 1, 2})}), op("Flatten", "f", {"b"})},
                                          {k}));
  ASSERT_EQ(nhwc.model.layers().size(), 2u);
  EXPECT_EQ(nhwc.model.layers()[0].params[0].shape, (Shape{3, 1, 2}));
  EXPECT_EQ(std::vector<float>(nhwc.weights.params.begin(), nhwc.weights.params.begin() + 6),
            (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(infer(nhwc.model, nhwc.weights.params, nhwc.weights.state, {1, 1, 1, 1, 1, 1}, 1),
            (std::vector<float>{1, 4, 2, 5, 3, 6}));

  // A spatial constant on an image, exported and imported back: one Affine with the same weights.
  const onnx::Tensor s{.name = "s", .dims = {1, 2, 2, 1}, .floats = {1, 2, 3, 4}};
  const ImportedModel spatial = import(graph({2, 2, 1}, {op("Sub", "d", {"x", "s"}), op("Flatten", "f", {"d"})}, {s}));
  ASSERT_TRUE(std::holds_alternative<nn::Affine>(spatial.model.layers()[0].layer));
  const ImportedModel back = import(to_onnx(spatial.model, spatial.weights.params, spatial.weights.state, {}));
  EXPECT_EQ(back.model.layers().size(), spatial.model.layers().size());
  EXPECT_EQ(back.weights.params, spatial.weights.params);
  EXPECT_FALSE(back.model.layers()[0].trainable);
}

// Flatten, Reshape, Squeeze and Unsqueeze that keep the batch first relabel
// the values (convoy keeps their order); element-wise ops pass the shape on,
// an input of rank 3 is rows of its values, other readers refuse the shape.
TEST(OnnxIssue23, ReshapesThatKeepTheBatchAreViews) {
  const ImportedModel rows = import(graph({2, 3}, {op("Unsqueeze", "u", {"x", "one"}), op("Relu", "r", {"u"}),
                                                   op("Squeeze", "s", {"r", "one"}), op("Flatten", "f", {"s"})},
                                          {int64s("one", {1})}));
  EXPECT_EQ(rows.model.input_shape(), (Shape{6}));
  EXPECT_EQ(rows.model.layers().size(), 1u);
  EXPECT_EQ(rows.model.output_shape(), (Shape{6}));
  const ImportedModel image = import(graph({2, 2, 2}, {op("Relu", "r", {"x"}), op("Reshape", "v", {"r", "to"}), op("Sigmoid", "s", {"v"}),
                                                       op("Flatten", "f", {"s"})},
                                           {int64s("to", {0, 2, 4})}));
  ASSERT_EQ(image.model.layers().size(), 3u);
  EXPECT_TRUE(std::holds_alternative<nn::Flatten>(image.model.layers()[2].layer));
  const std::vector<float> x{-1, 2, -3, 4, 5, -6, 7, -8};
  std::vector<float> want(8);
  for (std::size_t i = 0; i < 8; ++i) want[i] = 1.0f / (1.0f + std::exp(-std::max(x[i], 0.0f)));
  EXPECT_LT(relative_error(infer(image.model, image.weights.params, image.weights.state, x, 1), want), 1e-6);
  EXPECT_EQ(import_error(graph({2, 3}, {op("Softmax", "s", {"x"})})),
            "g.onnx: node 's' (Softmax): input 'x' is [N, 2, 3], which convoy imports only into element-wise ops, Flatten, "
            "Reshape, Squeeze and Unsqueeze");
  EXPECT_EQ(import_error(graph({1, 3}, {op("Squeeze", "s", {"x", "zero"}), op("Relu", "r", {"s"})}, {int64s("zero", {0})})),
            "g.onnx: node 's' (Squeeze): squeezes the batch axis; convoy keeps it");
  EXPECT_EQ(import_error(graph({3}, {op("Unsqueeze", "u", {"x", "zero"}), op("Flatten", "f", {"u"})}, {int64s("zero", {0})})),
            "g.onnx: node 'u' (Unsqueeze): unsqueezes before the batch axis; convoy keeps the batch first");
  EXPECT_EQ(import_error(graph({6}, {op("Relu", "r", {"x"}), op("Reshape", "v", {"r", "to"})}, {int64s("to", {0, 2, 3})})),
            "g.onnx: the graph output 'v' is [N, 2, 3]; convoy models give [N, C, H, W] images or [N, features] rows (flatten it)");
  // Ranks a file claims are bounded (and messages show at most 16 values).
  std::vector<int64_t> many(70);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(i) + 1;
  EXPECT_EQ(import_error(graph({3}, {op("Unsqueeze", "u", {"x", "a"}), op("Flatten", "f", {"u"})}, {int64s("a", many)})),
            "g.onnx: node 'u' (Unsqueeze): the result has more than 64 dimensions");
  EXPECT_EQ(import_error(graph({3}, {op("Unsqueeze", "u", {"k", "a"}), op("Relu", "r", {"x"})},
                               {{.name = "k", .dims = {1}, .floats = {1}}, int64s("a", many)})),
            "g.onnx: node 'u' (Unsqueeze): its inputs are constants, which convoy folds, but the result would have more "
            "than 64 dimensions");
  EXPECT_EQ(onnx_fold::list(many), "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, ... (70 values)]");
}

// SAME_LOWER with even pads is SAME_UPPER; ceil_mode where it adds no
// window; MaxPool's indices and Dropout's mask when nothing reads them;
// Dropout's training_mode with a ratio of 0, which drops nothing.
TEST(OnnxIssue23, SameLowerCeilModeAndUnreadSecondOutputs) {
  const auto w = weights("w", {1, 1, 3, 3});
  auto same_lower = [&](int64_t size) {
    return graph({1, size, size}, {conv("c", "x", "w", 3, {text("auto_pad", "SAME_LOWER"), ints("strides", {2, 2})})}, {w});
  };
  EXPECT_EQ(import(same_lower(5)).model.output_shape(), (Shape{1, 3, 3}));
  EXPECT_EQ(import_error(same_lower(4)),
            "g.onnx: node 'c' (Conv): auto_pad SAME_LOWER pads the odd row or column first; convoy's \"same\" (SAME_UPPER) "
            "pads it last");
  auto pool = [](int64_t size, int64_t k, int64_t s) {
    return graph({1, size, size}, {op("MaxPool", "p", {"x"}, {ints("kernel_shape", {k, k}), ints("strides", {s, s}), integer("ceil_mode", 1)})});
  };
  EXPECT_EQ(import(pool(2, 1, 2)).model.output_shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(import_error(pool(4, 3, 2)),
            "g.onnx: node 'p' (MaxPool): ceil_mode 1 gives 2 windows where convoy's pools give 1; only a ceil_mode that "
            "changes nothing is supported");
  onnx::Node indices = op("MaxPool", "p", {"x"}, {ints("kernel_shape", {2, 2})});
  indices.outputs.push_back("idx");
  EXPECT_EQ(import(graph({1, 2, 2}, {indices})).model.output_shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(import_error(graph({1, 2, 2}, {indices, op("Relu", "r", {"idx"})})),
            "g.onnx: node 'p' (MaxPool): its indices output 'idx' is read, which convoy does not compute");
  onnx::Node dropout = op("Dropout", "d", {"x", "ratio", "mode"});
  dropout.outputs.push_back("mask");
  const ImportedModel zero = import(graph({3}, {dropout}, {{.name = "ratio", .floats = {0}}, {.name = "mode", .data_type = onnx::kBool, .int64s = {1}}}));
  ASSERT_EQ(zero.model.layers().size(), 1u);
  EXPECT_EQ(std::get<nn::Dropout>(zero.model.layers()[0].layer).rate, 0.0f);
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

// Writes fuzz/fuzz_onnx's seed inputs: convoy's exports of tiny models with
// every op the exporter writes, each well under libFuzzer's 64 KiB -max_len
// (fuzz/make_seed_corpus.py runs this with CONVOY_ONNX_SEED_DIR=fuzz/corpus/onnx).
TEST(OnnxFuzzSeeds, Write) {
  const char* dir = std::getenv("CONVOY_ONNX_SEED_DIR");
  if (!dir) GTEST_SKIP() << "set CONVOY_ONNX_SEED_DIR (fuzz/make_seed_corpus.py does)";
  const nn::Model chain({1, 6, 6}, {nn::Conv2d{.filters = 2, .kernel = 3, .padding = 1}, nn::BatchNorm{}, nn::ReLU{},
                                    nn::MaxPool2d{.kernel = 2}, nn::Flatten{}, nn::Dense{.units = 3}, nn::LogSoftmax{}});
  nn::GraphBuilder g({2, 5, 5});
  const auto stem = g.add(nn::Conv2d{.filters = 4, .kernel = 3, .stride = 2, .padding = nn::kSame, .bias = false}, g.input());
  const auto act = g.add(nn::ReLU6{}, g.add(nn::BatchNorm{}, stem));
  const auto gate = g.add(nn::Sigmoid{}, g.add(nn::Conv2d{.filters = 4, .kernel = 1}, g.add(nn::GlobalAvgPool{.keep_dims = true}, act)));
  const auto gated = g.add(nn::Multiply{}, {act, gate});
  const auto joined = g.add(nn::Concat{}, {g.add(nn::Add{}, {gated, act}), g.add(nn::SiLU{}, act)});
  const auto pooled = g.add(nn::GlobalAvgPool{}, g.add(nn::AvgPool2d{.kernel = 3, .stride = 1, .padding = 1, .count_include_pad = false}, joined));
  g.add(nn::Dense{.units = 3}, g.add(nn::Dropout{.rate = 0.2f}, pooled));
  const nn::Model graph = g.build();
  const nn::Model rows({4}, {nn::Dense{.units = 5}, nn::ReLU{}, nn::BatchNorm{}, nn::Dense{.units = 2}});
  const std::pair<std::string, const nn::Model*> models[] = {{"chain", &chain}, {"graph", &graph}, {"rows", &rows}};
  for (const auto& [name, model] : models)
    for (bool fold : {true, false}) {
      const auto w = testing::deterministic_weights(*model);
      export_onnx(std::string(dir) + "/convoy_" + name + (fold ? "_folded" : "_kept") + ".onnx", *model, w.params, w.state,
                  {.fold_batch_norm = fold});
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
