#include "convoy/core/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace convoy {
namespace {

// Both -1 (unknown) aware.
int64_t smaller(int64_t a, int64_t b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return std::min(a, b);
}

int64_t meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return -1;
}

int64_t read_number(const char* path) {
  std::ifstream in(path);
  int64_t v = -1;
  if (!(in >> v)) return -1;  // also "max": no limit
  return v;
}

// One "key value" line of a cgroup's memory.stat; -1 when absent.
int64_t stat_value(const char* path, const std::string& wanted) {
  std::ifstream in(path);
  std::string key;
  int64_t v = 0;
  while (in >> key >> v)
    if (key == wanted) return v;
  return -1;
}

// What an rlimit leaves beyond `used` bytes; -1 when unlimited.
int64_t rlimit_left(int resource, int64_t used) {
  rlimit lim{};
  if (::getrlimit(resource, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return -1;
  return std::max<int64_t>(static_cast<int64_t>(lim.rlim_cur) - used, 0);
}

}  // namespace

// The container's limit minus its working set: what it uses less the file
// pages it could drop (inactive_file), as the kernel reclaims them before it
// kills anything. Counting that cache as used refused a model right after
// reading a data set as large as the container (the cache at its largest).
// cgroup v2 first, then v1 (whose "no limit" is a number near 2^63).
int64_t cgroup_available_bytes(const std::string& root) {
  struct Files {
    const char *max, *current, *stat, *inactive;
  };
  constexpr Files kVersions[] = {{"memory.max", "memory.current", "memory.stat", "inactive_file"},
                                 {"memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes",
                                  "memory/memory.stat", "total_inactive_file"}};
  for (const Files& f : kVersions) {
    const int64_t max = read_number((root + "/" + f.max).c_str());
    const int64_t used = read_number((root + "/" + f.current).c_str());
    if (max < 0 || used < 0 || max >= (int64_t{1} << 60)) continue;
    const int64_t reclaimable = std::max<int64_t>(stat_value((root + "/" + f.stat).c_str(), f.inactive), 0);
    return std::max<int64_t>(max - std::max<int64_t>(used - reclaimable, 0), 0);
  }
  return -1;
}

int64_t available_memory_bytes() {
  int64_t avail = smaller(meminfo_available(), cgroup_available_bytes());
  // /proc/self/statm: total program size and data+stack size, in pages.
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0, shared = 0, text = 0, lib = 0, data = 0;
  if (statm >> size >> resident >> shared >> text >> lib >> data) {
    const int64_t page = ::sysconf(_SC_PAGESIZE);
    avail = smaller(avail, rlimit_left(RLIMIT_AS, size * page));
    avail = smaller(avail, rlimit_left(RLIMIT_DATA, data * page));
  }
  return avail;
}

std::string human_bytes(int64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024 * 1024) std::snprintf(text, sizeof text, "%.1f TiB", b / (1024.0 * 1024 * 1024 * 1024));
  else if (b >= 1024.0 * 1024 * 1024) std::snprintf(text, sizeof text, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  else std::snprintf(text, sizeof text, "%.0f MiB", b / (1024.0 * 1024));
  return text;
}

}  // namespace convoy
