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
// GOMP_SPINCOUNT or OMP_WAIT_POLICY always wins; with thread binding set
// (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY), under valgrind, started
// through ld.so, with another OpenMP runtime, or where the exec cannot
// happen (no /proc, a failed exec), the program goes on unchanged.
#include "openmp_spin_default.h"

#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

namespace convoy::cli {

namespace {

bool set(const char* name) { return std::getenv(name) != nullptr; }

int note_libgomp(dl_phdr_info* info, size_t, void* found) {
  if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "libgomp") != nullptr) *static_cast<bool*>(found) = true;
  return 0;
}

// The user chose a spin or policy: theirs stands.
bool user_chose() { return set("GOMP_SPINCOUNT") || set("OMP_WAIT_POLICY"); }

// Thread binding: libgomp pinned this thread to the first place as it loaded,
// the mask survives an exec, and the second libgomp would then see one CPU
// and bind every thread to it.
bool threads_bound() { return set("OMP_PROC_BIND") || set("OMP_PLACES") || set("GOMP_CPU_AFFINITY"); }

// Started as `ld.so convoy ...` (the loader is the program: no AT_BASE) or
// under valgrind (its preload): the executable the kernel ran is not convoy.
bool not_our_executable() {
  const char* preload = std::getenv("LD_PRELOAD");
  return getauxval(AT_BASE) == 0 || (preload != nullptr && std::strstr(preload, "vgpreload") != nullptr);
}

}  // namespace

bool openmp_runtime_is_libgomp() {
  bool found = false;
  dl_iterate_phdr(note_libgomp, &found);
  return found;
}

std::string openmp_idle_policy() {
  if (!openmp_runtime_is_libgomp()) return "this OpenMP runtime's own (not libgomp)";
  if (const char* policy = std::getenv("OMP_WAIT_POLICY")) return "OMP_WAIT_POLICY=" + std::string(policy);
  if (const char* spin = std::getenv("GOMP_SPINCOUNT"))
    return "spin " + std::string(spin) + " pauses, then sleep (GOMP_SPINCOUNT)";
  if (threads_bound())
    return "libgomp's default spin, as thread binding is set (OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY); "
           "on a shared machine set GOMP_SPINCOUNT=" + std::string(kOpenmpSpinCount);
  return "spin " + std::string(kOpenmpSpinCount) +
         " pauses, then sleep (convoy's default; GOMP_SPINCOUNT or OMP_WAIT_POLICY overrides)";
}

void adopt_openmp_spin_default(char** argv) {
  // Where re-executing would do harm, or nothing (LLVM's libomp ignores GOMP_SPINCOUNT).
  if (user_chose() || threads_bound() || not_our_executable() || !openmp_runtime_is_libgomp()) return;
  // The executable's own path, not /proc/self/exe: the kernel names the
  // process after the path it executes (ps, pgrep and killall look for
  // "convoy", not "exe").
  char path[PATH_MAX];
  if (realpath("/proc/self/exe", path) == nullptr) return;
  // Set before the exec, so the new image finds it set and does not loop.
  if (setenv("GOMP_SPINCOUNT", kOpenmpSpinCount, 1) != 0) return;
  execv(path, argv);
  // Still here: the exec failed. Nothing was changed but our own environment
  // (which libgomp has already read), so carry on with libgomp's default.
  unsetenv("GOMP_SPINCOUNT");
}

}  // namespace convoy::cli
