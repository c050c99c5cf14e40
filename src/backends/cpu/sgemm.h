#pragma once
// oneDNN's sgemm on the calling thread, each thread's fixed share of a range,
// and a GEMM's rows in fixed chunks: what the GEMM-based convolutions
// (winograd_conv.h, small_map_conv.h, strided_gemm_conv.h) split their work
// with.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include <oneapi/dnnl/dnnl.h>

namespace convoy::cpu {

// C = A · B + beta C (row-major; 'T' takes the stored matrix transposed) on
// the calling thread: oneDNN's sgemm runs sequentially inside a parallel region.
inline void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc, float beta = 0.0f) {
  if (dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc) != dnnl_success)
    throw std::logic_error("dnnl_sgemm failed");
}

// fn(r0, r1) for chunks [r0, r1) of a GEMM's `total` rows (its M), each
// kGemmRowChunk long (the last one the rest), dealt round `threads` threads.
// Never split M in shares: oneDNN 2.6's AVX2 sgemm takes rows 24 at a time
// and sums a row in another order when it lands in a call's shorter tail,
// so its bits would depend on where the thread's share began (measured on
// an AMD EPYC: M = 48, 64 or 80 split in two changed bits, 96 and 128 did
// not; no split of the columns, N, changed any). Chunks of a fixed length
// are the same calls on any thread count.
inline constexpr int64_t kGemmRowChunk = 64;
template <class Fn>
void over_row_chunks(int threads, int64_t total, Fn&& fn) {
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (int64_t r0 = t * kGemmRowChunk; r0 < total; r0 += nt * kGemmRowChunk)
      fn(r0, std::min(total, r0 + kGemmRowChunk));
  }
}

// db[o0, o1) = Σ over the `rows` rows of dy [rows][O], row by row: the GEMM
// convolutions' bias gradient for a chunk of their filters.
inline void bias_gradient(const float* dy, int64_t rows, int64_t O, int64_t o0, int64_t o1, float* db) {
  std::fill(db + o0, db + o1, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = o0; o < o1; ++o) db[o] += dy[r * O + o];
}

// [share(total, t), share(total, t + 1)) of `total`: thread t's fixed share.
inline int64_t share(int64_t total, int t, int threads) { return total * t / threads; }

// Thread t's share bound on 16-float (cache-line) steps, the last thread's
// end at `total`, so that no two threads write one line of a row.
inline int64_t line_share(int64_t total, int t, int threads) {
  return t == threads ? total : share(total, t, threads) / 16 * 16;
}

}  // namespace convoy::cpu
