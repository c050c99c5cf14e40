// Allreduce time against message size between the replicas of an MPI job,
// and the latency + bandwidth line that fits it (docs/distributed.md's model:
// ring allreduce t = 2(N-1)/N * bytes / bandwidth + 2(N-1) * latency).
//   mpirun -np 2 build/dist_allreduce [FLOATS]    # a table, the fit, and FLOATS
//                                                 # (default 21900: the seed CNN's gradients)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "convoy/dist/strategy.h"

// Seconds per allreduce of `floats` values, as slow as the slowest replica.
double time_allreduce(convoy::dist::Strategy& s, std::size_t floats) {
  using Clock = std::chrono::steady_clock;
  std::vector<float> v(floats, 1.0f);
  const int reps = static_cast<int>(std::clamp<std::size_t>((std::size_t{1} << 26) / (floats * 4 + 4096), 5, 2000));
  s.allreduce_mean(v);  // warm-up
  s.barrier();
  const auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) s.allreduce_mean(v);
  double t = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
  std::span<double> slowest(&t, 1);
  s.allreduce_sum(slowest);
  return t / s.world_size();
}

int main(int argc, char** argv) {
  auto s = convoy::dist::make_strategy({.name = "mpi", .timeout_seconds = 120});
  const int n = s->world_size();
  if (s->is_primary()) std::printf("%12s %14s %12s\n", "bytes", "us/allreduce", "GB/s (bus)");
  std::vector<double> xs, ys;
  for (std::size_t floats = 1; floats <= (std::size_t{1} << 24); floats *= 4) {
    const double t = time_allreduce(*s, floats);
    const double bytes = static_cast<double>(floats) * 4;
    // Bus bandwidth: what each link carries in a ring allreduce per second.
    const double bus = n > 1 ? 2.0 * (n - 1) / n * bytes / t / 1e9 : 0;
    if (s->is_primary()) std::printf("%12.0f %14.1f %12.2f\n", bytes, t * 1e6, bus);
    xs.push_back(bytes);
    ys.push_back(t);
  }
  // Least squares t = a + b * bytes, weighted by 1/t (relative error) so that
  // small messages fix the latency and large ones the bandwidth.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double w = 1 / (ys[i] * ys[i]);
    sw += w, sx += w * xs[i], sy += w * ys[i], sxx += w * xs[i] * xs[i], sxy += w * xs[i] * ys[i];
  }
  const double b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx), a = (sy - b * sx) / sw;
  if (s->is_primary() && n > 1) {
    // Express the fit in the ring model's terms.
    const double latency = a / (2.0 * (n - 1)), bandwidth = 2.0 * (n - 1) / n / b;
    std::printf("fit: t = %.1f us + bytes / %.2f GB/s  ->  ring model latency %.1f us, bandwidth %.2f GB/s (%d ranks)\n",
                a * 1e6, 1 / b / 1e9, latency * 1e6, bandwidth / 1e9, n);
  }
  const std::size_t model = argc > 1 ? std::stoul(argv[1]) : 21900;
  const double t = time_allreduce(*s, model);
  if (s->is_primary()) std::printf("allreduce of %zu floats (%.1f KB): %.1f us\n", model, model * 4 / 1e3, t * 1e6);
  return 0;
}
