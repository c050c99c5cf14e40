// The zoo's layers: PyTorch parity on one graph that holds them all, and the
// behaviour users rely on (dropout's scaling and masks, frozen layers, names).
#include <gtest/gtest.h>

#include <cmath>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/io/model_weights.h"
#include "convoy/nn/model.h"
#include "test_helpers.h"

namespace convoy::nn {
namespace {

using testing::relative_error;

// The graph of tests/fixtures/make_layer_parity_fixtures.py, its layers named
// as that script's modules.
Model layers_graph() {
  GraphBuilder g({3, 12, 12});
  auto x = g.add(Conv2d{.filters = 8, .kernel = 3, .padding = 1, .bias = false}, g.input(), "stem");
  x = g.add(BatchNorm{}, x, "bn0");
  x = g.add(ReLU6{}, x);
  x = g.add(Conv2d{.filters = 8, .kernel = 3, .stride = 2, .padding = 1, .groups = 8, .bias = false}, x, "dw");
  x = g.add(BatchNorm{}, x, "bn1");
  x = g.add(SiLU{}, x);
  auto s = g.add(GlobalAvgPool{.keep_dims = true}, x);
  s = g.add(Conv2d{.filters = 2, .kernel = 1}, s, "se_reduce");
  s = g.add(SiLU{}, s);
  s = g.add(Conv2d{.filters = 8, .kernel = 1}, s, "se_expand");
  s = g.add(Sigmoid{}, s);
  x = g.add(Multiply{}, {x, s});
  x = g.add(Conv2d{.filters = 12, .kernel = 3, .padding = kSame, .groups = 4}, x, "grouped");
  x = g.add(Conv2d{.filters = 8, .kernel = 3, .stride = 2, .padding = kSame}, x, "down");
  auto m = g.add(MaxPool2d{.kernel = 3, .stride = 1, .padding = 1}, x);
  auto a = g.add(AvgPool2d{.kernel = 3, .stride = 1, .padding = 1}, x);
  auto e = g.add(AvgPool2d{.kernel = 3, .stride = 1, .padding = 1, .count_include_pad = false}, x);
  auto c = g.add(Concat{}, {g.add(Add{}, {m, a}), e});
  g.add(Dense{.units = 5}, g.add(GlobalAvgPool{}, c), "fc");
  Model model = g.build();
  model.set_trainable(false, "bn0");
  return model;
}

std::span<const float> slice(const std::vector<float>& v, const ParamSlot& s) {
  return {v.data() + s.offset, static_cast<std::size_t>(s.size())};
}

}  // namespace

TEST(Layers, MatchPyTorchInTrainingAndInference) {
  const auto fixture = io::read_safetensors(std::string(CONVOY_FIXTURES_DIR) + "/layer_parity.safetensors");
  const Model model = layers_graph();
  const io::FlatWeights start = io::from_named(model, fixture, "layer fixture");
  const int64_t batch = fixture.at("labels").dim(0);
  auto exe = compile_cpu(model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy}, 0);
  exe->internals().write(Held::parameters, start.params);
  exe->internals().write(Held::state, start.state);
  const float* x = fixture.at("input").data<float>().data();
  const int32_t* y = fixture.at("labels").data<int32_t>().data();
  auto f = [&](const std::string& name) { return fixture.at(name).data<float>(); };

  const double loss = exe->internals().loss_and_gradients(x, y);
  EXPECT_NEAR(loss, f("loss")[0], 1e-4 * f("loss")[0]);
  std::vector<float> out(batch * 5), grads(model.num_parameters()), state(model.num_state());
  exe->internals().read(Held::output, out);
  EXPECT_LT(relative_error(out, f("output")), 1e-4);
  exe->internals().read(Held::gradients, grads);
  for (const auto& plan : model.layers())
    for (const auto& slot : plan.params) {
      if (!plan.trainable) {
        EXPECT_EQ(relative_error(slice(grads, slot), std::vector<float>(slot.size())), 0.0) << slot.name;
        continue;
      }
      EXPECT_LT(relative_error(slice(grads, slot), f("grad." + slot.name)), 1e-4) << slot.name;
    }
  exe->internals().read(Held::state, state);
  for (const auto& plan : model.layers())
    for (const auto& slot : plan.state)
      EXPECT_LT(relative_error(slice(state, slot), f("after." + slot.name)), 1e-5) << slot.name;

  exe->eval_step(x, y, batch);
  exe->internals().read(Held::output, out);
  EXPECT_LT(relative_error(out, f("inference_output")), 1e-4);
}

// The graph of tests/fixtures/make_clip_affine_parity_fixtures.py.
TEST(Layers, ClipAndAffineMatchPyTorchClampAndAProductPlusBias) {
  const auto fixture = io::read_safetensors(std::string(CONVOY_FIXTURES_DIR) + "/clip_affine_parity.safetensors");
  GraphBuilder g({3, 5, 6});
  auto x = g.add(Conv2d{.filters = 4, .kernel = 3, .padding = 1}, g.input(), "conv");
  x = g.add(Clip{.min = -0.4f, .max = 0.6f}, x);
  x = g.add(Affine{}, x, "image_affine");
  x = g.add(Clip{.min = -0.2f}, x);
  x = g.add(Dense{.units = 7}, g.add(Flatten{}, x), "fc");
  x = g.add(Affine{}, x, "row_affine");
  g.add(Clip{.max = 0.3f}, x);
  const Model model = g.build();
  const io::FlatWeights start = io::from_named(model, fixture, "clip/affine fixture");
  const int64_t batch = fixture.at("labels").dim(0);
  auto exe = compile_cpu(model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy}, 0);
  exe->internals().write(Held::parameters, start.params);
  auto f = [&](const std::string& name) { return fixture.at(name).data<float>(); };
  const double loss =
      exe->internals().loss_and_gradients(f("input").data(), fixture.at("labels").data<int32_t>().data());
  EXPECT_NEAR(loss, f("loss")[0], 1e-5 * f("loss")[0]);
  std::vector<float> out(batch * 7), grads(model.num_parameters());
  exe->internals().read(Held::output, out);
  EXPECT_LT(relative_error(out, f("output")), 1e-5);
  exe->internals().read(Held::gradients, grads);
  for (const auto& plan : model.layers())
    for (const auto& slot : plan.params)
      EXPECT_LT(relative_error(slice(grads, slot), f("grad." + slot.name)), 1e-4) << slot.name;
}

// clamp's gradient: it passes at the bounds (ReLU6's, hardtanh's, does not),
// stops outside them; NaN stays NaN; an absent bound clips nothing.
TEST(Layers, ClipPassesTheGradientAtItsBoundsAndKeepsNaN) {
  const Model m({6}, {Clip{.min = 0.0f, .max = 1.0f}});
  auto exe = compile_cpu(m, {.batch_size = 1, .loss = Loss::softmax_cross_entropy, .input_gradient = true}, 0);
  const std::vector<float> x{-1.0f, 0.0f, 0.5f, 1.0f, 2.0f, -0.5f};
  const std::vector<int32_t> y{2};
  exe->internals().loss_and_gradients(x.data(), y.data());
  std::vector<float> out(6), dx(6);
  exe->internals().read(Held::output, out);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 0.5f, 1.0f, 1.0f, 0.0f}));
  exe->internals().read(Held::input_gradient, dx);
  for (int i : {0, 4, 5}) EXPECT_EQ(dx[i], 0.0f) << "outside the bounds, x = " << x[i];
  for (int i : {1, 2, 3}) EXPECT_NE(dx[i], 0.0f) << "at or inside the bounds, x = " << x[i];

  const Model open({3}, {Clip{.max = 1.0f}});
  auto e2 = compile_cpu(open, {.batch_size = 1, .loss = Loss::softmax_cross_entropy}, 0);
  const std::vector<float> wild{-1e30f, std::nanf(""), 3.0f};
  e2->eval_step(wild.data(), y.data(), 1);
  std::vector<float> got(3);
  e2->internals().read(Held::output, got);
  EXPECT_EQ(got[0], -1e30f);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 1.0f);
  EXPECT_THROW(Model({3}, {Clip{.min = 2.0f, .max = 1.0f}}), UserError);
}

// A frozen affine (an imported constant) gets no gradient and stays as it was.
TEST(Layers, FrozenAffineStartsAsTheIdentityAndHasNoGradient) {
  Model m({2, 3, 3}, {Affine{}, Flatten{}, Dense{.units = 3}});
  EXPECT_EQ(m.layers()[0].params[0].shape, (Shape{2, 3, 3}));
  const std::vector<float> p = m.initial_parameters(1);
  for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(p[i], 1.0f);
  for (int64_t i = 18; i < 36; ++i) EXPECT_EQ(p[i], 0.0f);
  m.set_trainable(false, "affine_0");
  auto exe = compile_cpu(m, {.batch_size = 2, .loss = Loss::softmax_cross_entropy}, 0);
  std::vector<float> x(36, 0.5f), grads(m.num_parameters());
  const std::vector<int32_t> y{0, 2};
  exe->internals().loss_and_gradients(x.data(), y.data());
  exe->internals().read(Held::gradients, grads);
  for (int64_t i = 0; i < 36; ++i) ASSERT_EQ(grads[i], 0.0f);
}

// Sizes past 2^31 values per tensor are refused by the layer as soon as its
// shape is known: a padding of 10^9 made a [4, 2e9, 2e9] output whose count
// overflowed int64 (a negative parameter count in the summary, SIGFPE when
// training); 10^8 filters or 3e7 units went on to allocate.
TEST(Layers, TensorsPastTwoToThe31ValuesAreRefusedNamingTheLayer) {
  const auto error = [](std::vector<Layer> layers) {
    return testing::error_of([&] { Model({3, 16, 16}, std::move(layers)); });
  };
  EXPECT_NE(error({Conv2d{.filters = 4, .kernel = 3, .padding = 1'000'000'000}, Flatten{}, Dense{.units = 4}})
                .find("conv2d_0's output (per example) [4, 2000000014, 2000000014]"),
            std::string::npos);
  EXPECT_NE(error({Conv2d{.filters = 100'000'000, .kernel = 3}, GlobalAvgPool{}}).find("conv2d_0's output"),
            std::string::npos);
  EXPECT_NE(error({Flatten{}, Dense{.units = 30'000'000}}).find("dense_0's weight [30000000, 768]"), std::string::npos);
  EXPECT_NE(error({Conv2d{.filters = 4, .kernel = 3, .padding = int64_t{9'000'000'000'000'000'000}}}).find("at most 2^31"),
            std::string::npos);
  EXPECT_NE(error({MaxPool2d{.kernel = 3, .stride = int64_t{1} << 40}}).find("at most 2^31"), std::string::npos);
  // At the bound, not past it: [8, 16384, 16384] is 2^31 values.
  EXPECT_EQ(Model({8, 16384, 16384}, {ReLU{}}).layers()[0].output_shape, (Shape{8, 16384, 16384}));
}

TEST(Layers, SamePaddingKeepsCeilOfSizeOverStride) {
  EXPECT_EQ(window(7, 3, 2, kSame, "c").out, 4);
  EXPECT_EQ(window(6, 3, 2, kSame, "c").pad_begin, 0);
  EXPECT_EQ(window(6, 3, 2, kSame, "c").pad_end, 1);
  EXPECT_EQ(window(5, 5, 1, kSame, "c").pad_begin, 2);
  const Model m({3, 224, 224}, {Conv2d{.filters = 8, .kernel = 3, .stride = 2, .padding = kSame}, GlobalAvgPool{}});
  EXPECT_EQ(m.layers()[0].output_shape, (Shape{8, 112, 112}));
  EXPECT_EQ(m.output_shape(), (Shape{8}));
}

TEST(Layers, DropoutKeepsAboutOneMinusRateScaledUpAndRedrawsEachStep) {
  const float rate = 0.25f;
  const Model m({4000}, {Dropout{.rate = rate}});
  auto exe = compile_cpu(m, {.batch_size = 2, .loss = Loss::softmax_cross_entropy, .optimizer = {.lr = 0}}, 5);
  std::vector<float> x(8000, 1.0f), first(8000), again(8000), next(8000);
  std::vector<int32_t> y{0, 1};
  exe->internals().loss_and_gradients(x.data(), y.data());
  exe->internals().read(Held::output, first);
  int64_t kept = 0;
  for (float v : first) {
    ASSERT_TRUE(v == 0.0f || std::abs(v - 1.0f / (1.0f - rate)) < 1e-6f) << v;
    kept += v != 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 8000, 1 - rate, 0.02);
  exe->internals().loss_and_gradients(x.data(), y.data());
  exe->internals().read(Held::output, again);
  EXPECT_EQ(first, again) << "one mask within a step";
  exe->train_step(x.data(), y.data());
  exe->internals().loss_and_gradients(x.data(), y.data());
  exe->internals().read(Held::output, next);
  EXPECT_NE(first, next) << "a new mask after a training step";
  exe->eval_step(x.data(), y.data(), 2);
  exe->internals().read(Held::output, next);
  EXPECT_EQ(next, x) << "inference is the identity";
  // The same seed draws the same masks.
  auto twin = compile_cpu(m, {.batch_size = 2, .loss = Loss::softmax_cross_entropy, .optimizer = {.lr = 0}}, 5);
  twin->internals().loss_and_gradients(x.data(), y.data());
  twin->internals().read(Held::output, again);
  EXPECT_EQ(first, again);
  // A resumed run (a fresh executable told one update came before) draws the
  // second step's mask, as the uninterrupted run does: resume stays exact.
  exe->internals().loss_and_gradients(x.data(), y.data());
  exe->internals().read(Held::output, next);
  auto resumed = compile_cpu(m, {.batch_size = 2, .loss = Loss::softmax_cross_entropy, .optimizer = {.lr = 0}}, 5);
  resumed->internals().set_steps_done(1);
  resumed->internals().loss_and_gradients(x.data(), y.data());
  resumed->internals().read(Held::output, again);
  EXPECT_EQ(next, again);
}

TEST(Layers, FrozenLayersKeepTheirWeightsAndStatisticsWhileTheRestTrains) {
  Model m({2, 6, 6}, {Conv2d{.filters = 4, .kernel = 3}, BatchNorm{}, ReLU{}, GlobalAvgPool{}, Dense{.units = 3}});
  EXPECT_EQ(m.set_trainable(false, "conv2d_0"), 1);
  EXPECT_EQ(m.set_trainable(false, "batch_norm_0"), 1);
  // Weight decay and momentum would move a frozen weight with a zero gradient.
  auto exe = compile_cpu(m, {.batch_size = 4, .loss = Loss::softmax_cross_entropy,
                             .optimizer = {.kind = optim::Kind::adamw, .lr = 0.1f, .weight_decay = 0.5f}}, 1);
  std::vector<float> x(4 * 72);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 13) / 6.0f - 1.0f;
  std::vector<int32_t> y{0, 1, 2, 1};
  std::vector<float> before(m.num_parameters()), after(m.num_parameters()), state(m.num_state());
  exe->internals().read(Held::parameters, before);
  exe->train_step(x.data(), y.data());
  exe->train_step(x.data(), y.data());
  exe->internals().read(Held::parameters, after);
  exe->internals().read(Held::state, state);
  const auto& dense = m.layers()[4].params[0];
  for (const auto& plan : m.layers())
    for (const auto& slot : plan.params) {
      if (plan.trainable) continue;
      EXPECT_EQ(relative_error(slice(after, slot), slice(before, slot)), 0.0) << slot.name;
    }
  EXPECT_NE(after[dense.offset], before[dense.offset]) << "the head trains";
  EXPECT_EQ(state, m.initial_state()) << "a frozen batch norm leaves its running statistics alone";
  EXPECT_EQ(exe->internals().size(Held::optimizer_state), 2 * 15 + 1)
      << "adam state for the 15 trainable parameters only";
}

TEST(Layers, NamesMatchTorchvisionStyleAndMustBeUnique) {
  GraphBuilder g({3, 8, 8});
  auto x = g.add(Conv2d{.filters = 4, .kernel = 3, .bias = false}, g.input(), "layer1.0.conv1");
  x = g.add(BatchNorm{}, x, "layer1.0.bn1");
  x = g.add(GlobalAvgPool{}, x);
  g.add(Dense{.units = 2}, x, "fc");
  Model m = g.build();
  std::vector<std::string> names;
  for (const auto& plan : m.layers()) {
    for (const auto& s : plan.params) names.push_back(s.name);
    for (const auto& s : plan.state) names.push_back(s.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias",
                                             "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var", "fc.weight",
                                             "fc.bias"}));
  EXPECT_EQ(m.set_trainable(false, "layer1"), 2);
  EXPECT_FALSE(m.find_layer("layer1.0.bn1")->trainable);
  EXPECT_TRUE(m.find_layer("fc")->trainable);
  EXPECT_NE(m.summary().find("(frozen)"), std::string::npos);
  using testing::error_of;
  EXPECT_NE(error_of([&] { m.set_trainable(true, "layer9"); }).find("no layer is named 'layer9'"), std::string::npos);
  EXPECT_NE(error_of([] {
              GraphBuilder b({4});
              auto d = b.add(Dense{.units = 3}, b.input(), "fc");
              b.add(Dense{.units = 2}, d, "fc");
              b.build();
            }).find("two layers are named 'fc'"),
            std::string::npos);
  EXPECT_NE(error_of([] { Model({3, 8, 8}, {Conv2d{.filters = 4, .kernel = 3, .groups = 2}}); })
                .find("conv2d_0: groups (2) must divide the input channels (3)"),
            std::string::npos);
  EXPECT_NE(error_of([] { Model({3, 8, 8}, {MaxPool2d{.kernel = 2, .padding = 2}}); })
                .find("max_pool2d_0: padding 2 is more than half the kernel 2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              GraphBuilder b({3, 4, 4});
              auto p = b.add(GlobalAvgPool{}, b.input());
              auto d = b.add(Dense{.units = 2}, p);
              b.add(Multiply{}, {b.input(), d});
              b.build();
            }).find("multiply_0: multiplies x by a gate of its shape or one value per channel"),
            std::string::npos);
}

}  // namespace convoy::nn
