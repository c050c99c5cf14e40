// Which models the CUDA backend takes, decided without a GPU: a layer or
// setting it has no kernels for is named in one line (and "auto" falls back
// to the CPU) instead of training differently from the CPU.
#include <gtest/gtest.h>

#include "convoy/backends/devices.h"
#include "convoy/core/error.h"

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

TEST(CudaSupport, DropoutMultiplyAndFrozenLayersAreNamed) {
  const Model dropout({8}, {Dense{.units = 4}, Dropout{.rate = 0.5f}});
  EXPECT_NE(cuda_unsupported(dropout).find("(layer " + dropout.layers()[1].name + ")"), std::string::npos)
      << cuda_unsupported(dropout);

  GraphBuilder g({4, 3, 3});
  const auto gate = g.add(Sigmoid{}, g.input());
  const auto mul = g.add(Multiply{}, {g.input(), gate}, "gate_mul");
  g.add(Flatten{}, mul);
  const Model multiply = g.build();
  EXPECT_NE(cuda_unsupported(multiply).find("gate_mul"), std::string::npos) << cuda_unsupported(multiply);

  Model frozen({8}, {Dense{.units = 4}, Dense{.units = 2}});
  frozen.set_trainable(false, frozen.layers()[0].name);
  const std::string why = cuda_unsupported(frozen);
  EXPECT_NE(why.find("frozen"), std::string::npos) << why;
  EXPECT_NE(why.find(frozen.layers()[0].name), std::string::npos) << why;
}

TEST(CudaSupport, SamePaddingIsSupportedWhenEvenAndNamedWhenUneven) {
  const Model even({1, 8, 8}, {Conv2d{.filters = 2, .kernel = 3, .padding = kSame}, Flatten{}});
  EXPECT_EQ(cuda_unsupported(even), "") << "one pixel each side";
  // Kernel 3, stride 2 on 8 pixels: "same" pads 0 before and 1 after, which
  // cuDNN (padding both sides alike) cannot express.
  const Model uneven({1, 8, 8}, {Conv2d{.filters = 2, .kernel = 3, .stride = 2, .padding = kSame}, Flatten{}});
  EXPECT_NE(cuda_unsupported(uneven).find("uneven padding"), std::string::npos) << cuda_unsupported(uneven);
  const Model pool({1, 8, 8}, {MaxPool2d{.kernel = 3, .stride = 2, .padding = kSame}, Flatten{}});
  EXPECT_NE(cuda_unsupported(pool).find("uneven padding"), std::string::npos) << cuda_unsupported(pool);
}

TEST(CudaSupport, AskingForCudaWithAnUnsupportedModelIsOneUserErrorAndAutoFallsBack) {
  const Model dropout({8}, {Dense{.units = 4}, Dropout{.rate = 0.5f}});
  if (!find_gpus().usable()) {
    // Without a GPU that is the reason given, whatever the model.
    EXPECT_THROW(choose_device("cuda", dropout), UserError);
    EXPECT_EQ(choose_device("auto", dropout).kind, DeviceKind::cpu);
    return;
  }
  try {
    choose_device("cuda", dropout);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
  const DeviceChoice c = choose_device("auto", dropout);
  EXPECT_EQ(c.kind, DeviceKind::cpu);
  EXPECT_NE(c.fallback.find("dropout"), std::string::npos) << c.fallback;
}

}  // namespace
}  // namespace convoy
