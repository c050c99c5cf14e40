// Which models the CUDA backend can train, decided from the model's
// description alone (no GPU needed, so CPU-only builds test it too). A layer
// or setting without a CUDA kernel is named rather than run differently.
#include <string>

#include "convoy/backends/devices.h"
#include "convoy/core/error.h"

namespace convoy {
namespace {

// cuDNN pads both sides of an axis alike. Its windows start where the
// model's do (at -pad_begin, every stride), so they agree whenever cuDNN then
// counts as many outputs as the model.
bool symmetric_windows_fit(int64_t size, int64_t kernel, int64_t stride, int64_t padding, int64_t out,
                           const std::string& name) {
  const nn::Window w = nn::window(size, kernel, stride, padding, name);
  return (size + 2 * w.pad_begin - kernel) / stride + 1 == out;
}

bool windows_fit(const nn::LayerPlan& plan, int64_t kernel, int64_t stride, int64_t padding) {
  const Shape& in = plan.input_shape;
  const Shape& out = plan.output_shape;
  return symmetric_windows_fit(in[1], kernel, stride, padding, out[1], plan.name) &&
         symmetric_windows_fit(in[2], kernel, stride, padding, out[2], plan.name);
}

// Empty when the CUDA backend has kernels for this layer as configured.
std::string unsupported(const nn::LayerPlan& plan) {
  const nn::Layer& layer = plan.layer;
  const bool learns = !plan.params.empty() || std::holds_alternative<nn::BatchNorm>(layer);
  if (!plan.trainable && learns) return "frozen layers (trainable: false, layer " + plan.name + ")";
  if (std::holds_alternative<nn::Dropout>(layer) || std::holds_alternative<nn::Multiply>(layer))
    return std::string(nn::kind_name(layer)) + " (layer " + plan.name + ")";
  const auto uneven = [&] { return "uneven padding (layer " + plan.name + ")"; };
  if (auto* c = std::get_if<nn::Conv2d>(&layer))
    if (!windows_fit(plan, c->kernel, c->stride, c->padding)) return uneven();
  if (auto* p = std::get_if<nn::MaxPool2d>(&layer))
    if (!windows_fit(plan, p->kernel, p->stride ? p->stride : p->kernel, p->padding)) return uneven();
  if (auto* p = std::get_if<nn::AvgPool2d>(&layer))
    if (!windows_fit(plan, p->kernel, p->stride ? p->stride : p->kernel, p->padding)) return uneven();
  return "";
}

}  // namespace

std::string cuda_unsupported(const nn::Model& model) {
  for (const auto& plan : model.layers())
    if (std::string what = unsupported(plan); !what.empty()) return "the CUDA backend has no kernels for " + what;
  return "";
}

DeviceChoice choose_device(const std::string& requested, const nn::Model& model) {
  DeviceChoice choice = choose_device(requested);
  if (choice.kind != DeviceKind::cuda) return choice;
  const std::string why = cuda_unsupported(model);
  if (why.empty()) return choice;
  require(requested == "auto", "--device cuda: " + why + "; train this model on the CPU (--device cpu)");
  return {.kind = DeviceKind::cpu, .fallback = why + "; training on the CPU"};
}

}  // namespace convoy
