// One training-mode gradient of the PJRT parity test's ResNet-18 (3x64x64,
// 5 classes, weights from seed 31, batch 8 of uniform inputs), written out for
// bench/resnet_grad_error.py to hold against an fp64 PyTorch step: how far
// each convolution algorithm (and XLA's CPU plugin) lands from exact sums.
//
//   resnet_grad_dump --out FILE [--input-seed 32] [--batch 8] [--algos auto,direct,winograd,pjrt]
//
// FILE (safetensors): "input", "labels", the weights and running statistics
// under their own names, and per algorithm "grad.<algo>.<name>" and the
// training-mode logits "logits.<algo>".
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/rng.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/safetensors.h"
#include "convoy/nn/zoo.h"

int main(int argc, char** argv) try {
  using namespace convoy;
  std::string out, algos = "auto,direct,winograd,pjrt";
  uint64_t input_seed = 32;
  int64_t batch = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--out") out = value;
    else if (flag == "--input-seed") input_seed = std::stoull(value);
    else if (flag == "--batch") batch = std::stoll(value);
    else if (flag == "--algos") algos = value;
    else throw UserError("unknown flag " + flag + "; flags: --out --input-seed --batch --algos");
  }
  if (out.empty()) throw UserError("--out FILE is required");
  const nn::Model model = nn::resnet18({.input = {3, 64, 64}, .classes = 5});
  CompileOptions o{.batch_size = batch, .loss = Loss::softmax_cross_entropy,
                   .optimizer = {.kind = optim::Kind::sgd, .lr = 0.01f, .momentum = 0.9f, .weight_decay = 1e-4f}};
  // The parity test's input and labels (tests/cuda_test_helpers.h's uniform_values and class_indices).
  Rng xr(input_seed), yr(input_seed + 1);
  Tensor x(DType::f32, {batch, 3, 64, 64}), y(DType::i32, {batch});
  for (float& v : x.data<float>()) v = xr.uniform(-1, 1);
  for (int32_t& v : y.data<int32_t>()) v = static_cast<int32_t>(yr.below(5));

  io::NamedTensors file;
  std::vector<float> params, state;
  std::stringstream list(algos);
  for (std::string algo; std::getline(list, algo, ',');) {
    std::unique_ptr<Executable> exe;
    if (algo == "pjrt") {
      exe = compile_pjrt(model, o, 31);
    } else {
      o.conv_algo = parse_conv_algo(algo);
      exe = compile_cpu(model, o, 31);
    }
    if (params.empty()) {
      params = exe->internals().copy_of(Held::parameters);
      state = exe->internals().copy_of(Held::state);
      file = io::to_named(model, params, state);
    }
    exe->internals().write(Held::parameters, params);  // identical weights, as compile_cpu_and_pjrt makes them
    exe->internals().write(Held::state, state);
    exe->internals().loss_and_gradients(x.data<float>().data(), Targets(y.data<int32_t>().data()));
    Tensor logits(DType::f32, {batch, 5});
    exe->internals().read(Held::output, logits.data<float>());
    file["logits." + algo] = logits;
    const auto g = exe->internals().copy_of(Held::gradients);
    for (auto& [name, t] : io::to_named(model, g, state))
      if (!name.ends_with("running_mean") && !name.ends_with("running_var")) file["grad." + algo + "." + name] = t;
  }
  file["input"] = x;
  file["labels"] = y;
  io::write_safetensors(out, file);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "resnet_grad_dump: %s\n", e.what());
  return 1;
}
