#include "convoy/core/threads.h"

#include <omp.h>

#include <thread>

namespace convoy {

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void set_num_threads(int n) { omp_set_num_threads(n <= 0 ? hardware_threads() : n); }

int num_threads() { return omp_get_max_threads(); }

}  // namespace convoy
