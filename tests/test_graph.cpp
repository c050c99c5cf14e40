// The functional API: graphs build, name, check and run like chains.
#include <gtest/gtest.h>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/io/model_weights.h"
#include "convoy/nn/model.h"
#include "joins_graph.h"
#include "test_helpers.h"

namespace convoy::nn {
namespace {

std::vector<float> ramp(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  return v;
}

using testing::joins_graph;

}  // namespace

TEST(Graph, MatchesPyTorchOnAResidualAddAndAConcat) {
  const auto fixture = io::read_safetensors(std::string(CONVOY_FIXTURES_DIR) + "/graph_parity.safetensors");
  const Model model = joins_graph();
  const io::FlatWeights start = io::from_named(model, fixture, "graph fixture");
  const int64_t batch = fixture.at("labels").dim(0);
  auto exe = compile_cpu(
      model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy, .optimizer = {.lr = 0.1f, .momentum = 0.9f}}, 0);
  exe->internals().write(Held::parameters, start.params);
  exe->internals().write(Held::state, start.state);
  const float* x = fixture.at("input").data<float>().data();
  const int32_t* y = fixture.at("labels").data<int32_t>().data();
  auto f = [&](const std::string& name) { return fixture.at(name).data<float>(); };

  const double loss = exe->internals().loss_and_gradients(x, y);
  EXPECT_NEAR(loss, f("loss")[0], 1e-4 * f("loss")[0]);
  std::vector<float> out(batch * 5), grads(model.num_parameters()), params(model.num_parameters());
  exe->internals().read(Held::output, out);
  EXPECT_LT(testing::relative_error(out, f("output")), 1e-4);
  exe->internals().read(Held::gradients, grads);
  for (const auto& plan : model.layers())
    for (const auto& slot : plan.params) {
      // A bias right before batch norm has a zero gradient in exact
      // arithmetic: both sides hold rounding noise (~1e-8), so compare
      // against the scale of the whole gradient instead.
      const auto want = f("grad." + slot.name);
      double diff = 0;
      for (int64_t i = 0; i < slot.size(); ++i) diff = std::max(diff, std::abs(double(grads[slot.offset + i]) - want[i]));
      EXPECT_LT(diff, 1e-4 * 0.1) << slot.name;
      if (slot.name != "conv2d_0.bias") {
        EXPECT_LT(testing::relative_error({grads.data() + slot.offset, static_cast<std::size_t>(slot.size())}, want),
                  1e-4)
            << slot.name;
      }
    }

  exe->internals().write(Held::parameters, start.params);
  exe->internals().write(Held::state, start.state);
  exe->train_step(x, y);
  exe->train_step(x, y);
  exe->internals().read(Held::parameters, params);
  for (const auto& plan : model.layers())
    for (const auto& slot : plan.params)
      EXPECT_LT(testing::relative_error({params.data() + slot.offset, static_cast<std::size_t>(slot.size())},
                                        f("step2." + slot.name)),
                1e-4)
          << slot.name;
}

TEST(Graph, AChainBuiltWithTheFunctionalApiIsTheSequentialModel) {
  const Model chain = seed_cnn();
  GraphBuilder g({1, 28, 28});
  auto x = g.input();
  for (const LayerPlan& plan : chain.layers()) x = g.add(plan.layer, x);
  const Model graph = g.build();
  ASSERT_TRUE(graph.is_chain());
  EXPECT_EQ(graph.summary(), chain.summary());
  EXPECT_EQ(graph.initial_parameters(3), chain.initial_parameters(3));

  const int64_t batch = 4;
  std::vector<float> input = ramp(batch * 28 * 28);
  std::vector<int32_t> labels{1, 2, 3, 4};
  CompileOptions opt{.batch_size = batch};
  auto a = compile_cpu(graph, opt, 3), b = compile_cpu(chain, opt, 3);
  EXPECT_EQ(a->internals().loss_and_gradients(input.data(), labels.data()),
            b->internals().loss_and_gradients(input.data(), labels.data()));
  std::vector<float> ga(graph.num_parameters()), gb(chain.num_parameters());
  a->internals().read(Held::gradients, ga);
  b->internals().read(Held::gradients, gb);
  EXPECT_EQ(ga, gb);
}

TEST(Graph, JoinsInferShapesAndTheSummaryShowsInputs) {
  GraphBuilder g({8, 6, 6});
  auto x = g.input();
  auto a = g.add(Conv2d{.filters = 8, .kernel = 3, .padding = 1}, x);
  auto s = g.add(Add{}, {x, a});
  auto b = g.add(Conv2d{.filters = 4, .kernel = 1}, x);
  auto c = g.add(Concat{}, {s, b});
  g.add(Flatten{}, c);
  const Model m = g.build();
  EXPECT_EQ(m.output_shape(), (Shape{12 * 36}));
  EXPECT_FALSE(m.is_chain());
  const std::string summary = m.summary();
  EXPECT_NE(summary.find("add_0"), std::string::npos);
  EXPECT_NE(summary.find("input, conv2d_0"), std::string::npos);
  EXPECT_NE(summary.find("add_0, conv2d_1"), std::string::npos);
}

TEST(Graph, MistakesAreOneLineNamingTheLayer) {
  using testing::error_of;
  EXPECT_NE(error_of([] {
              GraphBuilder g({4});
              auto a = g.add(Dense{.units = 3}, g.input());
              g.add(Add{}, {a, g.input()});
              g.build();
            }).find("add_0: adds inputs of one shape, got [3], [4]"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              GraphBuilder g({2, 4, 4});
              auto a = g.add(MaxPool2d{.kernel = 2}, g.input());
              g.add(Concat{}, {a, g.input()});
              g.build();
            }).find("concat_0: concatenates along channels"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              GraphBuilder g({4});
              g.add(Dense{.units = 3}, g.input());  // dense_0 feeds nothing
              g.add(Dense{.units = 2}, g.input());
              g.build();
            }).find("the output of dense_0 is not used"),
            std::string::npos);
  EXPECT_NE(error_of([] { GraphBuilder g({4}); g.add(Add{}, g.input()); g.build(); })
                .find("add_0: joins two or more inputs"),
            std::string::npos);
  EXPECT_NE(error_of([] { Model({4}, {{Dense{.units = 2}, {3}}}); }).find("not an earlier layer"), std::string::npos);
}

}  // namespace convoy::nn
