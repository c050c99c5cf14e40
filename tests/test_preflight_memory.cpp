// What the memory check before training counts (app/preflight.h): the
// optimizer's state of the trainable parameters only, and one example's
// activations as the CPU backend's batch check counts them (nn::activation_floats).
#include <gtest/gtest.h>

#include "app/preflight.h"
#include "convoy/config/run_config.h"
#include "convoy/nn/model.h"
#include "convoy/optim/optimizer.h"

namespace convoy::train {
namespace {

nn::Model small_cnn() {
  return nn::Model({3, 16, 16}, {nn::Conv2d{.filters = 32, .kernel = 3}, nn::ReLU{}, nn::BatchNorm{}, nn::Flatten{},
                                 nn::Dense{.units = 10}});
}

TEST(PreflightMemory, FrozenLayersKeepNoOptimizerState) {
  const optim::OptimizerOptions adam{.kind = optim::Kind::adam};
  nn::Model model = small_cnn();
  const double all = training_memory(model, adam).bytes;
  model.set_trainable(false, "conv2d_0");
  const double frozen = training_memory(model, adam).bytes;
  const int64_t conv = model.layers()[0].params[0].size() + model.layers()[0].params[1].size();
  EXPECT_EQ(model.num_trainable_parameters(), model.num_parameters() - conv);
  // Adam keeps two floats per trainable parameter; the frozen conv's are gone.
  // With a layer frozen the step gathers the trainable values and gradients
  // into packed copies (Program::plan_memory): two floats per trainable one.
  const auto trainable = static_cast<double>(model.num_trainable_parameters());
  EXPECT_DOUBLE_EQ(all - frozen, (2.0 * static_cast<double>(conv) - 2.0 * trainable) * sizeof(float));
}

TEST(PreflightMemory, CountsOneExamplesActivationsAsTheBatchCheck) {
  const nn::Model model = small_cnn();
  double outputs = 0;
  for (const auto& plan : model.layers()) outputs += static_cast<double>(numel(plan.output_shape));
  EXPECT_DOUBLE_EQ(nn::activation_floats(model), 2.0 * (3 * 16 * 16 + outputs));  // input staged twice, each output and gradient
  const optim::OptimizerOptions sgd{};
  // Each parameter's host copy, backend copy and gradient, and SGD's velocity;
  // the batch norm's running statistics and their copy from before the step.
  const double weights = 3.0 * static_cast<double>(model.num_parameters()) +
                         static_cast<double>(optim::state_size(sgd, model.num_parameters()));
  EXPECT_DOUBLE_EQ(training_memory(model, sgd).bytes,
                   (nn::activation_floats(model) + weights + 2.0 * static_cast<double>(model.num_state())) * sizeof(float));
}

}  // namespace
}  // namespace convoy::train
