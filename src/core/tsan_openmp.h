#pragma once
// ThreadSanitizer cannot check an OpenMP region of libgomp: libgomp is not
// built with TSan, so it sees neither the hand-off of the region's shared
// variables to the team's (reused) threads nor the barrier that ends the
// region, and reports every access around it as a race. TSan builds therefore
// run such regions on the calling thread: TSan still checks the threads the
// code starts itself (the input pipeline's pool and prefetch threads), and the
// other builds' tests check the region's result with its threads.
#if defined(__SANITIZE_THREAD__)
#define CONVOY_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CONVOY_TSAN_BUILD 1
#endif
#endif

namespace convoy {

// The team size to give an OpenMP region that code in the TSan build runs.
constexpr int openmp_team_for_tsan(int threads) {
#ifdef CONVOY_TSAN_BUILD
  (void)threads;
  return 1;
#else
  return threads;
#endif
}

}  // namespace convoy
