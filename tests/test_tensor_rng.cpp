#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "convoy/core/rng.h"
#include "convoy/core/tensor.h"

namespace convoy {

TEST(Tensor, ZeroFilledAlignedAndTyped) {
  Tensor t(DType::f32, {2, 3, 5});
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.nbytes(), 120u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (float v : t.data<float>()) EXPECT_EQ(v, 0.0f);
  EXPECT_THROW(t.data<int32_t>(), std::logic_error);
  EXPECT_EQ(to_string(t.shape()), "[2, 3, 5]");
}

TEST(Rng, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
}

TEST(Rng, UniformStaysInRangeAndBelowIsUnbiasedEnough) {
  Rng rng(7);
  std::vector<int> counts(10);
  for (int i = 0; i < 100000; ++i) {
    const float u = rng.uniform(-2.0f, 3.0f);
    ASSERT_GE(u, -2.0f);
    ASSERT_LT(u, 3.0f);
    counts[rng.below(10)]++;
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
}

TEST(Rng, ShuffleIsAPermutationAndSeeded) {
  std::vector<int64_t> a(1000), b(1000);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  Rng r1(5), r2(5);
  shuffle(a, r1);
  shuffle(b, r2);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(std::is_sorted(a.begin(), a.end()));
  std::sort(a.begin(), a.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(a[i], i);
}

}  // namespace convoy
