// Which models the CUDA backend can train, decided from the model's
// description alone (no GPU needed, so CPU-only builds test it too). A layer
// or setting without a CUDA kernel is named rather than run differently.
//
// Every layer kind but clip and affine has kernels, with the CPU's semantics: dropout
// draws the CPU's masks, frozen layers (trainable: false) get no gradient, no
// update and no optimizer state, and uneven "same" padding, which cuDNN's
// symmetric padding cannot express, is padded explicitly (convolutions) or
// pooled by own kernels. The overloads below list every kind, so a new one
// in nn::Layer stops this file compiling (in every build, GPU or not) until
// someone decides how the GPU runs it or names it here.
#include <string>
#include <variant>

#include "convoy/backends/devices.h"
#include "convoy/core/error.h"

namespace convoy {
namespace {

// Where each kind runs (src/backends/cuda/); false would turn it away.
constexpr bool has_kernels(const nn::Conv2d&) { return true; }       // cuDNN (+ explicit uneven padding)
constexpr bool has_kernels(const nn::MaxPool2d&) { return true; }    // cuDNN, or own kernels for uneven windows
constexpr bool has_kernels(const nn::AvgPool2d&) { return true; }    // likewise
constexpr bool has_kernels(const nn::GlobalAvgPool&) { return true; }  // cuDNN
constexpr bool has_kernels(const nn::Dropout&) { return true; }      // gates.cu, the CPU's masks
constexpr bool has_kernels(const nn::ReLU&) { return true; }
constexpr bool has_kernels(const nn::ReLU6&) { return true; }
constexpr bool has_kernels(const nn::SiLU&) { return true; }
constexpr bool has_kernels(const nn::Sigmoid&) { return true; }
constexpr bool has_kernels(const nn::BatchNorm&) { return true; }    // cuDNN; frozen: frozen.cu
constexpr bool has_kernels(const nn::Flatten&) { return true; }      // a view
constexpr bool has_kernels(const nn::Dense&) { return true; }        // cuBLAS
constexpr bool has_kernels(const nn::LogSoftmax&) { return true; }
constexpr bool has_kernels(const nn::Add&) { return true; }
constexpr bool has_kernels(const nn::Concat&) { return true; }
constexpr bool has_kernels(const nn::Multiply&) { return true; }     // gates.cu
// Not yet on the GPU (ONNX imports of Clip with other bounds than ReLU6's and
// of constant operands of a whole example's shape): models with them train on the CPU.
constexpr bool has_kernels(const nn::Clip&) { return false; }
constexpr bool has_kernels(const nn::Affine&) { return false; }

}  // namespace

std::string cuda_unsupported(const nn::Model& model) {
  for (const auto& plan : model.layers())
    if (!std::visit([](const auto& layer) { return has_kernels(layer); }, plan.layer))
      return "the CUDA backend has no kernels for " + std::string(nn::kind_name(plan.layer)) + " (layer " +
             plan.name + ")";
  return "";
}

DeviceChoice choose_device(const std::string& requested, const nn::Model& model, int gpu) {
  DeviceChoice choice = choose_device(requested, gpu);
  if (choice.kind == DeviceKind::pjrt) {
    const std::string why = pjrt_unsupported(model);
    require(why.empty(), "--device " + requested + ": " + why + "; train this model on the CPU (--device cpu)");
  }
  if (choice.kind != DeviceKind::cuda) return choice;
  const std::string why = cuda_unsupported(model);
  if (why.empty()) return choice;
  require(requested == "auto", "--device cuda: " + why + "; train this model on the CPU (--device cpu)");
  return {.kind = DeviceKind::cpu, .fallback = why + "; training on the CPU"};
}

}  // namespace convoy
