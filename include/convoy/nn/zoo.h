#pragma once
// Models by name, for configs and checkpoints, and standard architectures
// laid out like torchvision's (ResNets, MobileNetV2) or geffnet's
// (EfficientNet-B0, -Lite0): the same layer names, parameter names and shapes and
// BN running statistics as state, so a PyTorch state dict maps onto them one
// to one (io/pretrained.h). Each ends in logits (no softmax): train them with
// Loss::softmax_cross_entropy.
#include <string>
#include <vector>

#include "convoy/nn/model.h"

namespace convoy::nn {

struct ZooOptions {
  Shape input = {};      // [C, H, W]; empty: the architecture's own ({3, 224, 224} for the ImageNet ones)
  int64_t classes = 0;   // 0: the architecture's own (1000 for the ImageNet ones)
  float dropout = -1;    // before the classifier; < 0: the architecture's own
};

// torchvision.models.resnet18/34 (basic blocks) and resnet50 (bottlenecks,
// stride on the 3x3 convolution: "ResNet v1.5").
Model resnet18(const ZooOptions& options = {});
Model resnet34(const ZooOptions& options = {});
Model resnet50(const ZooOptions& options = {});
// torchvision.models.mobilenet_v2 (width 1.0, dropout 0.2).
Model mobilenet_v2(const ZooOptions& options = {});
// geffnet's efficientnet_b0 (SiLU, squeeze-excitation, dropout 0.2; no
// drop-connect) and efficientnet_lite0 (no squeeze-excitation, ReLU6).
Model efficientnet_b0(const ZooOptions& options = {});
Model efficientnet_lite0(const ZooOptions& options = {});
// geffnet's tf_efficientnet_lite0: Lite0 with TensorFlow's "same" padding and
// batch-norm eps 1e-3, the layout of TensorFlow-trained weights such as the
// ImageNet-pretrained ones tools/convert_efficientnet_lite0.py converts.
Model tf_efficientnet_lite0(const ZooOptions& options = {});
// convoy's own small network for Plant-Pathology-sized problems (a few
// thousand photos, a handful of classes, ~3x224x224 or smaller inputs):
// MobileNet-style depthwise-separable blocks, ~0.13M parameters, ~0.1 GFLOP
// per 224x224 image; 4 classes by default. See zoo_plant.cpp.
Model plant_cnn(const ZooOptions& options = {});

// The names model_by_name knows.
std::vector<std::string> zoo_names();
// Throws UserError listing the known names for an unknown one. The seed CNN
// has a fixed input and class count and ignores `options`.
Model model_by_name(const std::string& name, const ZooOptions& options = {});

}  // namespace convoy::nn
