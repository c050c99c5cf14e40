#include "convoy/app/replicas.h"

#include <cstdio>
#include <limits>
#include <string>

#include "convoy/core/error.h"

namespace convoy::train {

dist::StrategyOptions strategy_options(const RunConfig& c) {
  return {.name = c.strategy, .timeout_seconds = c.dist_timeout, .bucket_kib = c.bucket_kib};
}

RunConfig scaled_for_replicas(const RunConfig& c, int replicas) {
  RunConfig s = c;
  if (!c.scale_lr) return s;
  // Each rate is narrowed to float where it is used: one that the scaling
  // takes past what a float holds would train with inf, so it is refused.
  const auto scale = [&](double& rate, const char* key) {
    rate *= replicas;
    if (rate > static_cast<double>(std::numeric_limits<float>::max()))
      throw UserError(std::string(key) + " times " + std::to_string(replicas) +
                      " replicas (training.scale_lr) is more than a float holds (3.4e38); lower " + key);
  };
  scale(s.lr, "optimizer.lr");
  scale(s.fine_tune_lr, "transfer.fine_tune_lr");
  scale(s.schedule.min_lr, "schedule.min_lr");
  scale(s.schedule.max_lr, "schedule.max_lr");
  if (s.reduce_lr_on_plateau) scale(s.reduce_lr_on_plateau->min_lr, "callbacks.reduce_lr_on_plateau.min_lr");
  return s;
}

std::string communication_report(const dist::Strategy& s) {
  if (s.world_size() == 1) return "";
  const dist::CommStats st = s.stats();
  char line[200];
  std::snprintf(line, sizeof line, "communication (replica %d of %d): %lld collectives, %.1f MB, %.3f s blocked\n",
                s.rank(), s.world_size(), static_cast<long long>(st.collectives), st.bytes / 1e6, st.wait_seconds);
  return line;
}

}  // namespace convoy::train
