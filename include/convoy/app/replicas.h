#pragma once
// How a run config maps onto data-parallel replicas (dist/).
#include "convoy/dist/strategy.h"
#include "convoy/config/run_config.h"

namespace convoy::train {

dist::StrategyOptions strategy_options(const RunConfig& c);

// The settings each of `replicas` replicas trains with. With scale_lr every
// learning rate (lr, the schedule's min_lr and max_lr, the plateau's min_lr)
// is multiplied by the number of replicas: the global batch is that many
// times the per-replica batch (the linear scaling rule of the seed article).
RunConfig scaled_for_replicas(const RunConfig& c, int replicas);

// "communication: ..." (collectives, megabytes, seconds blocked) and a
// newline; empty for one replica. For --profile.
std::string communication_report(const dist::Strategy& s);

}  // namespace convoy::train
