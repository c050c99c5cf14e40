// Why: libgomp spins 300,000 `pause`s (~14 ms on CPUs where `pause` is slow)
// after every parallel region before an idle worker sleeps. On a quiet
// machine that costs nothing, but beside any other busy process (a browser, a
// compiler, a notebook kernel) the spinning worker holds the core that the
// input pipeline or a descheduled partner thread needs, and a 2-thread
// seed-CNN epoch becomes 3-6x slower (docs/benchmarks.md, "OpenMP's idle
// spin"). A spin of 10,000 measured the same quiet (seed CNN and ResNet-18
// steps) and 2-3x faster loaded.
//
// How: libgomp reads GOMP_SPINCOUNT once, when it loads, before main() runs,
// and has no call to change it later. Setting it from the executable's
// .preinit_array does not work either: glibc's own initialisation, which
// runs after that array and before libgomp's, resets the environment to the
// one the process started with. So the program re-executes itself with the
// variable set, before it has done anything: the same process, arguments
// and open files; the second start costs ~60 ms (loading the libraries
// again), so only the commands that train or run a model call this. The user's own
// GOMP_SPINCOUNT or OMP_WAIT_POLICY always wins, and where the re-execution
// cannot happen (no /proc, a failed exec) the program goes on unchanged.
#include "openmp_spin_default.h"

#include <unistd.h>

#include <cstdlib>

namespace convoy::cli {

void adopt_openmp_spin_default(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // Set before the exec, so the new image finds it set and does not loop.
  if (setenv("GOMP_SPINCOUNT", kOpenmpSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: the exec failed. Nothing was changed but our own environment
  // (which libgomp has already read), so carry on with libgomp's default.
  unsetenv("GOMP_SPINCOUNT");
}

}  // namespace convoy::cli
