// predict --top-k's table: one line per input, every cell whole.
#include <gtest/gtest.h>

#include "convoy/app/predict.h"
#include "convoy/core/untrusted.h"

namespace convoy::train {
namespace {

// A class name longer than a cell is cut on a character boundary, with an
// ellipsis, and keeps its probability: a 64-byte snprintf cell cut a name of
// 40 'é' (80 bytes) mid-character and dropped the probability after it.
TEST(TopKTable, ALongNonAsciiClassNameIsCutOnACharacterBoundaryAndKeepsItsProbability) {
  std::string long_name;
  for (int i = 0; i < 40; ++i) long_name += "\xc3\xa9";  // é
  Predictions p;
  p.classes = {long_name, "rust"};
  p.ids = {"a.jpg"};
  p.probabilities = {0.75f, 0.25f};
  const std::string table = top_k_table(p, 2);
  EXPECT_TRUE(valid_utf8(table)) << table;
  const std::size_t kept = utf8_prefix_length(long_name, kShownChars);
  EXPECT_EQ(kept % 2, 0u);
  EXPECT_EQ(table, "a.jpg  " + long_name.substr(0, kept) + "\u2026 0.750  rust 0.250\n");
}

TEST(TopKTable, ShortNamesAreWholeAsBefore) {
  Predictions p;
  p.classes = {"healthy", "rust"};
  p.ids = {"x.jpg", "long_name.jpg"};
  p.probabilities = {0.9f, 0.1f, 0.2f, 0.8f};
  EXPECT_EQ(top_k_table(p, 1), "x.jpg          healthy 0.900\nlong_name.jpg  rust 0.800\n");
}

}  // namespace
}  // namespace convoy::train
