#pragma once
// How much memory this process may still allocate, so that a plan too big
// for the machine (a huge batch) fails with a clear message before it
// allocates, rather than being killed by the kernel half-way.
#include <cstdint>
#include <string>

namespace convoy {

// The smallest of: the system's available memory (MemAvailable), what the
// cgroup limit leaves (containers), and what RLIMIT_AS / RLIMIT_DATA leave.
// -1 when none of them can be read.
int64_t available_memory_bytes();

// What a cgroup's memory limit leaves, read from the cgroup file system at
// `root` (v2, else v1): the limit minus the working set (usage less the
// inactive file cache the kernel reclaims first). -1 without a limit.
int64_t cgroup_available_bytes(const std::string& root = "/sys/fs/cgroup");

// "1.5 GiB", "320 MiB": sizes for messages.
std::string human_bytes(int64_t bytes);

}  // namespace convoy
