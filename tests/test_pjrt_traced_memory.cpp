// The PJRT device's traced memory (backends/pjrt/traced_memory.h) on XLA's
// CPU plugin: values written over parts of ranges, reads across pieces,
// zeros, one compile per distinct trace, donation, and dead scratch.
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

// A buffer the trace overwrote everywhere is donated (updated in place);
// one a range still holds after the run is not, and its values stay.
TEST(PjrtTracedMemory, DonatesOnlyBuffersNoRangeHoldsAfterTheRun) {
  REQUIRE_PJRT();
  TracedMemory m(cpu_client());
  auto* a = static_cast<float*>(m.reserve(4 * sizeof(float), "f32"));
  auto* b = static_cast<float*>(m.reserve(4 * sizeof(float), "f32"));
  const std::vector<float> start{1, 2, 3, 4};
  m.upload(a, start.data(), sizeof(float) * start.size());
  m.upload(b, start.data(), sizeof(float) * start.size());
  auto& hlo = m.builder();
  m.write(a, hlo.add(m.read(a, {4}), hlo.constant(1, {4})));
  m.run();
  EXPECT_EQ(m.donated(), 1u) << "a's old buffer: no range holds it";
  EXPECT_EQ(host(m, a, 4), (std::vector<float>{2, 3, 4, 5}));
  // b[0..2) overwritten, b[2..4) still b's buffer: kept, not donated.
  m.write(b, hlo.mul(m.read(b + 2, {2}), hlo.constant(10, {2})));
  m.run();
  EXPECT_EQ(m.donated(), 0u);
  EXPECT_EQ(host(m, b, 4), (std::vector<float>{30, 40, 3, 4}));
}

// A trace that drops its scratch exports only the other ranges; reading the
// scratch afterwards is a bug. When keep_scratch_if asks for it, the trace
// runs again and the scratch holds the values it computed.
TEST(PjrtTracedMemory, ScratchIsDeadAfterADroppingTraceUnlessWanted) {
  REQUIRE_PJRT();
  for (bool wanted : {false, true}) {
    TracedMemory m(cpu_client());
    auto* a = static_cast<float*>(m.reserve(4 * sizeof(float), "f32"));
    auto* s = static_cast<float*>(m.reserve(4 * sizeof(float), "f32"));
    auto* b = static_cast<float*>(m.reserve(4 * sizeof(float), "f32"));
    m.scratch(s, 4 * sizeof(float));
    int asked = 0;
    m.keep_scratch_if([&] { return ++asked, wanted; });
    const std::vector<float> start{1, 2, 3, 4};
    m.upload(a, start.data(), sizeof(float) * start.size());
    auto& hlo = m.builder();
    m.drop_scratch();
    m.write(s, hlo.add(m.read(a, {4}), hlo.constant(1, {4})));
    m.write(b, hlo.mul(m.read(s, {4}), hlo.constant(2, {4})));
    m.run();
    EXPECT_EQ(asked, 1);
    EXPECT_EQ(host(m, b, 4), (std::vector<float>{4, 6, 8, 10}));
    if (wanted)
      EXPECT_EQ(host(m, s, 4), (std::vector<float>{2, 3, 4, 5}));
    else
      EXPECT_THROW(host(m, s, 4), std::logic_error);
    // A trace that does not drop it exports it, and asks nothing.
    m.write(s, hlo.add(m.read(b, {4}), hlo.constant(1, {4})));
    m.run();
    EXPECT_EQ(host(m, s, 4), (std::vector<float>{5, 7, 9, 11}));
    EXPECT_EQ(asked, 1);
  }
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
