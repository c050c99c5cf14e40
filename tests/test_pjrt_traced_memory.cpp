// The PJRT device's traced memory (backends/pjrt/traced_memory.h) on XLA's
// CPU plugin: values written over parts of ranges, reads across pieces,
// zeros, and one compile per distinct trace.
#include <gtest/gtest.h>

#include <vector>

#include "pjrt_test_helpers.h"

#if defined(CONVOY_PJRT_RUNTIME)
#include "backends/pjrt/traced_memory.h"

namespace convoy {
namespace {

using pjrt::TracedMemory;
using pjrt::Val;

pjrt::Client& cpu_client() { return pjrt::Client::open(find_pjrt("pjrt").plugin); }

std::vector<float> host(TracedMemory& m, const void* at, std::size_t n) {
  std::vector<float> v(n);
  m.download(v.data(), at, sizeof(float) * n);
  return v;
}

TEST(PjrtTracedMemory, WritesOverPartsAndReadsAcrossPieces) {
  REQUIRE_PJRT();
  TracedMemory m(cpu_client());
  auto* a = static_cast<float*>(m.reserve(8 * sizeof(float), "f32"));
  auto* b = static_cast<float*>(m.reserve(8 * sizeof(float), "f32"));
  EXPECT_EQ(host(m, a, 8), std::vector<float>(8, 0.0f)) << "regions start as zeros";
  const std::vector<float> values{1, 2, 3, 4, 5, 6, 7, 8};
  m.upload(a, values.data(), sizeof(float) * values.size());
  auto& hlo = m.builder();
  // a[2..4) = 10 * a[2..4): a piece in the middle of the uploaded buffer.
  m.write(a + 2, hlo.mul(m.read(a + 2, {2}), hlo.constant(10, {2})));
  // b[0..6) = a[1..7) + 1: the read spans three pieces (buffer, value, buffer).
  m.write(b, hlo.add(m.read(a + 1, {2, 3}), hlo.constant(1, {2, 3})));
  EXPECT_EQ(host(m, a, 8), (std::vector<float>{1, 2, 30, 40, 5, 6, 7, 8}));
  EXPECT_EQ(host(m, b, 8), (std::vector<float>{3, 31, 41, 6, 7, 8, 0, 0}));
  // Zeros over a part: no work, and read back as zeros inside a trace too.
  m.zero(a + 3, 2 * sizeof(float));
  m.write(b + 6, m.read(a + 2, {2}));
  EXPECT_EQ(host(m, a, 8), (std::vector<float>{1, 2, 30, 0, 0, 6, 7, 8}));
  EXPECT_EQ(host(m, b + 6, 2), (std::vector<float>{30, 0}));
}

TEST(PjrtTracedMemory, TheSameTraceCompilesOnce) {
  REQUIRE_PJRT();
  TracedMemory m(cpu_client());
  auto* a = static_cast<float*>(m.reserve(4 * sizeof(float), "f32"));
  const std::vector<float> start{1, 2, 3, 4};
  m.upload(a, start.data(), sizeof(float) * start.size());
  for (int step = 0; step < 5; ++step) {
    m.write(a, m.builder().add(m.read(a, {4}), m.builder().constant(1, {4})));
    m.run();
  }
  EXPECT_EQ(host(m, a, 4), (std::vector<float>{6, 7, 8, 9}));
  EXPECT_EQ(m.compiled(), 1u) << "five runs of one trace: one module";
  const uint64_t before = m.trace();
  m.run();  // nothing traced: nothing to run
  EXPECT_EQ(m.compiled(), 1u);
  EXPECT_EQ(m.trace(), before + 1);
}

TEST(PjrtTracedMemory, WritesOfAnotherElementTypeAndStrayRangesAreBugs) {
  REQUIRE_PJRT();
  TracedMemory m(cpu_client());
  auto* a = static_cast<int32_t*>(m.reserve(4 * sizeof(int32_t), "i32"));
  EXPECT_THROW(m.write(a, m.builder().constant(0, {4})), std::logic_error) << "f32 over i32";
  EXPECT_THROW(m.read(a + 3, {2}), std::logic_error) << "past the region's end";
}

}  // namespace
}  // namespace convoy
#endif
