#include "convoy/core/threads.h"

#include <omp.h>

#include <atomic>
#include <thread>

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

void set_num_threads(int n) {
  const int threads = n <= 0 ? hardware_threads() : n;
  g_configured.store(threads);
  omp_set_num_threads(threads);
}

int configured_threads() {
  const int n = g_configured.load();
  return n > 0 ? n : hardware_threads();
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace convoy
