#include <gtest/gtest.h>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/train/profile_report.h"

namespace convoy {

TEST(Profile, TimesEveryLayerAndCountsFlopsFromShapes) {
  nn::Sequential model = nn::seed_cnn();
  auto exe = compile_cpu(model, {.batch_size = 4}, 1);
  std::vector<float> x(4 * 28 * 28, 0.5f);
  std::vector<int32_t> y{0, 1, 2, 3};
  exe->train_step(x.data(), y.data());  // not profiled
  EXPECT_EQ(exe->internals().profiled_steps(), 0);
  exe->internals().set_profiling(true);
  exe->train_step(x.data(), y.data());
  exe->train_step(x.data(), y.data());
  EXPECT_EQ(exe->internals().profiled_steps(), 2);
  const auto p = exe->internals().profile();
  ASSERT_EQ(p.size(), model.layers().size());
  EXPECT_EQ(p[0].name, "conv2d_0");
  // conv 1->10, k5, 24x24 outputs: 2 * 25 * 10 * 576 flops per example, batch 4.
  EXPECT_DOUBLE_EQ(p[0].forward_flops, 4.0 * 2 * 25 * 10 * 576);
  EXPECT_DOUBLE_EQ(p[0].backward_flops, 2 * p[0].forward_flops);
  EXPECT_DOUBLE_EQ(p[9].forward_flops, 4.0 * 2 * 320 * 50);  // dense_0
  for (const auto& l : p) {
    EXPECT_GT(l.forward_seconds, 0) << l.name;
    EXPECT_GT(l.backward_seconds, 0) << l.name;
  }
  const std::string table = train::profile_table(p, exe->internals().profiled_steps());
  EXPECT_NE(table.find("conv2d_1"), std::string::npos);
  EXPECT_NE(table.find("2 steps"), std::string::npos);
  // The CPU runs the first block fused (backends/cpu/conv_pool_op.h): the
  // pool's and the ReLU's lines say where their time is.
  EXPECT_EQ(p[1].runs_in, "conv2d_0");
  EXPECT_EQ(p[2].runs_in, "conv2d_0");
  EXPECT_EQ(p[3].runs_in, "");
  EXPECT_NE(table.find("runs in conv2d_0"), std::string::npos);
}

// A fused layer's line names the layer its work runs in, and its FLOPs count
// in that layer's rates (whose time includes them).
TEST(Profile, FusedLayersCountInTheLayerTheyRunIn) {
  std::vector<LayerProfile> layers{
      {.name = "conv", .forward_seconds = 1, .backward_seconds = 2, .forward_flops = 3e9, .backward_flops = 6e9},
      {.name = "pool", .forward_seconds = 0, .backward_seconds = 0, .forward_flops = 1e9, .backward_flops = 2e9,
       .runs_in = "conv"},
  };
  const std::string table = train::profile_table(layers, 1);
  EXPECT_NE(table.find("4.0       4.0"), std::string::npos) << table;  // (3 + 1) GFLOP in 1 s, (6 + 2) in 2 s
  EXPECT_NE(table.find("runs in conv"), std::string::npos) << table;
}

}  // namespace convoy
