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

// "1.5 GiB", "320 MiB": sizes for messages.
std::string human_bytes(int64_t bytes);

}  // namespace convoy
