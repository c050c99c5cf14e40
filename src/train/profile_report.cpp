#include "convoy/train/profile_report.h"

#include <cmath>
#include <cstdio>

namespace convoy::train {

std::string profile_table(const std::vector<LayerProfile>& layers, int64_t steps) {
  if (steps <= 0) return "profile: no training steps were profiled\n";
  if (!layers.empty() && std::isnan(layers[0].forward_seconds))
    return "profile: per-layer times are not available: the device runs each training step as one compiled module (" +
           std::to_string(steps) + " steps profiled)\n";
  double total = 0, flops = 0;
  for (const auto& l : layers) {
    total += l.forward_seconds + l.backward_seconds;
    flops += l.forward_flops + l.backward_flops;
  }
  const double n = static_cast<double>(steps);
  auto gflops = [&](double f, double s) { return s > 0 ? f * n / s / 1e9 : 0.0; };
  std::string out;
  char line[200];
  std::snprintf(line, sizeof line, "%-16s %10s %10s %7s %9s %9s\n", "layer", "fwd ms", "bwd ms", "share",
                "fwd GF/s", "bwd GF/s");
  out += line;
  out += std::string(66, '-') + "\n";
  for (const auto& l : layers) {
    const double share = total > 0 ? 100 * (l.forward_seconds + l.backward_seconds) / total : 0.0;
    if (!l.runs_in.empty()) {  // fused: its work, and its FLOPs in the rates, are in that layer's line
      std::snprintf(line, sizeof line, "%-16s %10.3f %10.3f %6.1f%%   runs in %s\n", l.name.c_str(),
                    1e3 * l.forward_seconds / n, 1e3 * l.backward_seconds / n, share, l.runs_in.c_str());
      out += line;
      continue;
    }
    double forward_flops = l.forward_flops, backward_flops = l.backward_flops;
    for (const auto& m : layers)
      if (m.runs_in == l.name) forward_flops += m.forward_flops, backward_flops += m.backward_flops;
    std::snprintf(line, sizeof line, "%-16s %10.3f %10.3f %6.1f%% %9.1f %9.1f\n", l.name.c_str(),
                  1e3 * l.forward_seconds / n, 1e3 * l.backward_seconds / n, share,
                  gflops(forward_flops, l.forward_seconds), gflops(backward_flops, l.backward_seconds));
    out += line;
  }
  out += std::string(66, '-') + "\n";
  std::snprintf(line, sizeof line, "%lld steps; layers take %.3f ms per step, %.2f GFLOP per step, %.1f GFLOP/s\n",
                static_cast<long long>(steps), 1e3 * total / n, flops / 1e9, total > 0 ? flops * n / total / 1e9 : 0.0);
  return out + line;
}

}  // namespace convoy::train
