// This CPU's practical fp32 peak: GFLOP/s of a large oneDNN matrix product
// (2048 x 2048 x 2048, the best of several), on 1 thread and on all of them.
// The benchmarks report achieved GFLOP/s as a share of this figure.
//
//   peak_gflops [--size 2048] [--repeats 5]
// Prints one JSON line: {"size": 2048, "gflops": {"1": ..., "2": ...}}
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "oneapi/dnnl/dnnl.h"

int main(int argc, char** argv) {
  int64_t n = 2048;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--size")) n = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "peak_gflops: unknown flag %s; flags: --size N --repeats R\n", argv[i]);
      return 2;
    }
  }
  std::vector<float> a(static_cast<std::size_t>(n * n), 0.5f), b(a.size(), 0.25f), c(a.size());
  const int max_threads = omp_get_max_threads();
  std::printf("{\"size\": %lld, \"gflops\": {", static_cast<long long>(n));
  for (int threads = 1; threads <= max_threads; threads = threads == max_threads ? threads + 1 : std::min(threads * 2, max_threads)) {
    omp_set_num_threads(threads);
    double best = 0;
    for (int r = 0; r < repeats + 1; ++r) {  // the first is warm-up
      const auto t0 = std::chrono::steady_clock::now();
      if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n) != dnnl_success) {
        std::fprintf(stderr, "peak_gflops: dnnl_sgemm failed\n");
        return 1;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r) best = std::max(best, 2.0 * n * n * n / s / 1e9);
    }
    std::printf("%s\"%d\": %.1f", threads == 1 ? "" : ", ", threads, best);
  }
  std::printf("}}\n");
  return 0;
}
