// Which models the CUDA backend takes, decided without a GPU. Every layer
// kind but clip and affine (ONNX imports) has CUDA kernels (dropout,
// multiply, frozen layers and uneven "same" padding included), so every zoo
// model and transfer-learning setup goes to the GPU; cuda_unsupported names
// a layer the GPU cannot run (and "auto" then falls back to the CPU).
#include <gtest/gtest.h>

#include "convoy/backends/devices.h"
#include "convoy/core/error.h"
#include "convoy/nn/zoo.h"

namespace convoy {
namespace {

using namespace nn;

TEST(CudaSupport, TheSeedCnnAndTheZooLayersWithCudnnKernelsAreSupported) {
  const Model m({3, 16, 16}, {Conv2d{.filters = 8, .kernel = 3, .padding = 1, .bias = false}, BatchNorm{}, ReLU6{},
                              Conv2d{.filters = 8, .kernel = 3, .padding = 1, .groups = 8}, SiLU{},
                              MaxPool2d{.kernel = 3, .stride = 2, .padding = 1},
                              AvgPool2d{.kernel = 3, .stride = 1, .padding = 1, .count_include_pad = false}, Sigmoid{},
                              GlobalAvgPool{}, Dense{.units = 10}, LogSoftmax{}});
  EXPECT_EQ(cuda_unsupported(m), "");
}

// What the GPU turned away until it had kernels for them.
TEST(CudaSupport, DropoutMultiplyFrozenLayersAndUnevenPaddingAreSupported) {
  EXPECT_EQ(cuda_unsupported(Model({8}, {Dense{.units = 4}, Dropout{.rate = 0.5f}})), "");

  GraphBuilder g({4, 3, 3});
  const auto gate = g.add(Sigmoid{}, g.input());
  const auto mul = g.add(Multiply{}, {g.input(), gate}, "gate_mul");
  g.add(Flatten{}, mul);
  EXPECT_EQ(cuda_unsupported(g.build()), "");

  Model frozen({8}, {Dense{.units = 4}, BatchNorm{}, Dense{.units = 2}});
  frozen.set_trainable(false, frozen.layers()[0].name);
  frozen.set_trainable(false, frozen.layers()[1].name);
  EXPECT_EQ(cuda_unsupported(frozen), "");

  // Kernel 3, stride 2 on 8 pixels: "same" pads 0 before and 1 after.
  EXPECT_EQ(cuda_unsupported(Model({1, 8, 8}, {Conv2d{.filters = 2, .kernel = 3, .stride = 2, .padding = kSame},
                                               Flatten{}})),
            "");
  EXPECT_EQ(cuda_unsupported(Model({1, 8, 8}, {MaxPool2d{.kernel = 3, .stride = 2, .padding = kSame}, Flatten{}})),
            "");
  EXPECT_EQ(cuda_unsupported(Model({1, 8, 8}, {AvgPool2d{.kernel = 3, .stride = 2, .padding = kSame,
                                                         .count_include_pad = false},
                                               Flatten{}})),
            "");
}

// Every zoo model, as trained from scratch and with a frozen backbone (the
// transfer-learning setup of docs/transfer.md).
TEST(CudaSupport, EveryZooModelIsSupportedFrozenOrNot) {
  for (const std::string& name : zoo_names()) {
    SCOPED_TRACE(name);
    Model m = model_by_name(name, {.classes = 4});
    EXPECT_EQ(cuda_unsupported(m), "");
    m.set_trainable(false);
    m.set_trainable(true, m.layers().back().name);
    EXPECT_EQ(cuda_unsupported(m), "");
  }
}

TEST(CudaSupport, ClipAndAffineAreNamedAndCudaIsRefusedForThem) {
  const Model clip({8}, {Dense{.units = 4}, Clip{.min = -1.0f, .max = 1.0f}});
  EXPECT_EQ(cuda_unsupported(clip), "the CUDA backend has no kernels for clip (layer clip_0)");
  Model affine({2, 3, 3}, {Affine{}, Flatten{}});
  affine.set_trainable(false, "affine_0");
  EXPECT_EQ(cuda_unsupported(affine), "the CUDA backend has no kernels for affine (layer affine_0)");
  try {
    choose_device("cuda", affine);
    FAIL() << "--device cuda with an affine layer was accepted";
  } catch (const UserError& e) {
    // Without a GPU the missing GPU is the reason; with one, the layer.
    if (find_gpus().usable()) {
      EXPECT_NE(std::string(e.what()).find("affine_0"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(choose_device("auto", affine).kind, DeviceKind::cpu);
}

TEST(CudaSupport, AskingForCudaWithAZooModelDependsOnlyOnTheGpu) {
  Model transfer = tf_efficientnet_lite0({.input = {3, 64, 64}, .classes = 4});
  transfer.set_trainable(false);
  transfer.set_trainable(true, "classifier");
  if (!find_gpus().usable()) {
    // Without a GPU that is the reason given, whatever the model.
    EXPECT_THROW(choose_device("cuda", transfer), UserError);
    const DeviceChoice c = choose_device("auto", transfer);
    EXPECT_EQ(c.kind, DeviceKind::cpu);
    EXPECT_EQ(c.fallback.find("kernels"), std::string::npos) << c.fallback;
    return;
  }
  EXPECT_EQ(choose_device("cuda", transfer).kind, DeviceKind::cuda);
  const DeviceChoice c = choose_device("auto", transfer);
  EXPECT_EQ(c.kind, DeviceKind::cuda);
  EXPECT_EQ(c.fallback, "");
}

}  // namespace
}  // namespace convoy
