#include "convoy/app/replicas.h"

#include <cstdio>

namespace convoy::train {

dist::StrategyOptions strategy_options(const RunConfig& c) {
  return {.name = c.strategy, .timeout_seconds = c.dist_timeout, .bucket_kib = c.bucket_kib};
}

RunConfig scaled_for_replicas(const RunConfig& c, int replicas) {
  RunConfig s = c;
  if (!c.scale_lr) return s;
  s.lr *= replicas;
  s.fine_tune_lr *= replicas;
  s.schedule.min_lr *= replicas;
  s.schedule.max_lr *= replicas;
  if (s.reduce_lr_on_plateau) s.reduce_lr_on_plateau->min_lr *= replicas;
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
