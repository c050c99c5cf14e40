#include "app/compile_run.h"

#include "convoy/core/error.h"
#include "convoy/app/replicas.h"

namespace convoy::train {

void require_replica_device(const RunConfig& c, const DeviceChoice& device) {
  if (c.replicas > 1 && device.kind != DeviceKind::pjrt) {
    std::string why = device.fallback;
    if (const auto cut = why.rfind("; training on the CPU"); cut != std::string::npos) why.resize(cut);
    throw UserError("training.replicas (--replicas) " + std::to_string(c.replicas) + " needs a PJRT device: " + why +
                    "; make the plugin available, or train without --replicas");
  }
}

std::unique_ptr<Executable> compile_for(const nn::Model& model, const RunConfig& c, int gpu, std::string* fallback) {
  CompileOptions options;
  options.batch_size = c.batch_size * c.replicas;  // the global batch; a PJRT program splits it over its replicas
  options.pjrt = {.replicas = static_cast<int>(c.replicas), .sync_batch_norm = c.sync_batch_norm};
  options.loss = loss_kind(c);
  options.label_smoothing = static_cast<float>(c.label_smoothing);
  options.optimizer = optimizer_options(c);
  options.steps_per_execution = c.steps_per_execution;
  options.conv_algo = parse_conv_algo(c.conv_algo);
  options.parallelism = parse_parallelism(c.parallelism);
  options.precision = parse_precision(c.precision);
  const DeviceChoice device = choose_device(c.device, model, gpu);
  require_replica_device(c, device);
  if (fallback && !device.fallback.empty() && (c.device != "auto" || !find_gpus(gpu).gpus.empty()))
    *fallback = device.fallback;
  return compile_on(device, model, options, c.seed);
}

}  // namespace convoy::train
