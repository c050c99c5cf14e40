#include "convoy/backends/executable.h"

#include <stdexcept>

#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy {

ConvAlgo parse_conv_algo(const std::string& name) {
  if (name == "auto") return ConvAlgo::automatic;
  if (name == "direct") return ConvAlgo::direct;
  if (name == "winograd") return ConvAlgo::winograd;
  throw UserError("convolution algorithm '" + shown(name) + "' is not one: use auto, direct or winograd");
}

const char* conv_algo_name(ConvAlgo algo) {
  switch (algo) {
    case ConvAlgo::automatic: return "auto";
    case ConvAlgo::direct: return "direct";
    case ConvAlgo::winograd: return "winograd";
  }
  return "?";
}

Parallelism parse_parallelism(const std::string& name) {
  if (name == "auto") return Parallelism::automatic;
  if (name == "per_op") return Parallelism::per_op;
  if (name == "batch_slices") return Parallelism::batch_slices;
  throw UserError("parallelism '" + shown(name) + "' is not one: use auto, per_op or batch_slices");
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  throw UserError("precision '" + shown(name) + "' is not one: use fp32 or bf16 (--precision, training.precision)");
}

const char* precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "fp32"; }

void require_fp32(Precision precision, const std::string& device) {
  require(precision == Precision::fp32, "--precision " + std::string(precision_name(precision)) + ": the " + device +
                                            " backend trains in fp32 only; use --precision fp32, or --device cpu on "
                                            "a CPU with AVX512-BF16");
}

int64_t Executable::train_steps(const float* x, Targets y, int64_t n) {
  const CompiledFor& c = compiled_for();
  const int64_t batch = c.batch_size;
  for (int64_t i = 0; i < n; ++i) {
    const Targets step = y.dense ? Targets::rows(y.dense + i * batch * c.output_size) : Targets(y.labels + i * batch);
    train_step(x + i * batch * c.input_size, step);
    if (!last_step_finite()) return i + 1;
  }
  return n;
}

const char* held_name(Held held) {
  switch (held) {
    case Held::parameters: return "parameters";
    case Held::state: return "state";
    case Held::optimizer_state: return "optimizer state";
    case Held::gradients: return "gradients";
    case Held::output: return "output";
    case Held::input_gradient: return "input gradient";
  }
  return "?";
}

void require_writable(Held held) {
  if (held != Held::parameters && held != Held::state && held != Held::optimizer_state)
    throw std::invalid_argument(std::string(held_name(held)) + " cannot be written: it is computed by a step");
}

std::vector<float> ExecutableInternals::copy_of(Held held) const {
  std::vector<float> v(static_cast<std::size_t>(size(held)));
  read(held, v);
  return v;
}

Weights Executable::weights() const {
  const ExecutableInternals& in = internals();
  return {.parameters = in.copy_of(Held::parameters),
          .state = in.copy_of(Held::state),
          .optimizer_state = in.copy_of(Held::optimizer_state)};
}

void Executable::set_weights(const Weights& w) {
  ExecutableInternals& in = internals();
  if (!w.parameters.empty()) in.write(Held::parameters, w.parameters);
  if (!w.state.empty()) in.write(Held::state, w.state);
  if (!w.optimizer_state.empty()) in.write(Held::optimizer_state, w.optimizer_state);
}

}  // namespace convoy
