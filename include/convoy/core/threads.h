#pragma once
// One process-wide pool of worker threads (OpenMP's, shared with oneDNN so the
// two never oversubscribe the cores).

namespace convoy {

int hardware_threads();
// More than this (or than the machine's hardware threads, where that is more)
// is a typo such as --threads 100000, not a machine: thousands of threads that
// cannot all start would end the process inside OpenMP.
inline constexpr int kMaxThreads = 1024;
int max_threads();
// Sets the number of worker threads; n <= 0 means all cores. Applies to
// OpenMP's pool and sizes ThreadPool::shared() (the input pipeline's), when
// called before that pool's first use. More than max_threads() is a UserError.
void set_num_threads(int n);
// OpenMP's thread count in the calling thread.
int num_threads();
// What set_num_threads last set, from any thread (all cores when never set).
int configured_threads();

}  // namespace convoy
