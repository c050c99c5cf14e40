#pragma once
// One process-wide pool of worker threads (OpenMP's, shared with oneDNN so the
// two never oversubscribe the cores).

namespace convoy {

int hardware_threads();
// Sets the number of worker threads; n <= 0 means all cores.
void set_num_threads(int n);
int num_threads();

}  // namespace convoy
