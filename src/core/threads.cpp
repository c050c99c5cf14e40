#include "convoy/core/threads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include "convoy/core/error.h"

namespace convoy {
namespace {

// OpenMP's setting is per thread (a new std::thread starts from the
// default), so the count asked for is kept here for every thread to see.
std::atomic<int> g_configured{0};

}  // namespace

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int max_threads() { return std::max(kMaxThreads, hardware_threads()); }

void set_num_threads(int n) {
  const int threads = n <= 0 ? hardware_threads() : n;
  // A thread OpenMP cannot start ends the process inside libgomp; refused here, in one line.
  if (threads > max_threads())
    throw UserError("training.threads (--threads) " + std::to_string(n) + ": more worker threads than convoy starts (" +
                    std::to_string(max_threads()) + "); use fewer, or 0 for one per core");
  g_configured.store(threads);
  omp_set_num_threads(threads);
}

int configured_threads() {
  const int n = g_configured.load();
  return n > 0 ? n : hardware_threads();
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace convoy
