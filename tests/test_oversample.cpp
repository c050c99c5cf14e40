// data.oversample: the training split's rarer classes repeated up to the largest's count.
#include <gtest/gtest.h>

#include <map>

#include "app/oversample.h"

namespace convoy::train {
namespace {

records::ManifestEntry entry(const std::string& id, int32_t label) { return {.id = id, .path = id, .label = label}; }

TEST(Oversample, RareClassesRepeatInOrderUpToTheLargest) {
  records::Manifest m;
  m.label_kind = records::LabelKind::index;
  m.entries = {entry("a0", 0), entry("a1", 0), entry("a2", 0), entry("a3", 0), entry("b0", 1), entry("c0", 2),
               entry("c1", 2)};
  const records::Manifest o = oversampled(m);
  ASSERT_EQ(o.entries.size(), 12u);
  std::map<int32_t, std::vector<std::string>> ids;
  for (const auto& e : o.entries) ids[e.label].push_back(e.id);
  EXPECT_EQ(ids[0], (std::vector<std::string>{"a0", "a1", "a2", "a3"}));
  EXPECT_EQ(ids[1], (std::vector<std::string>{"b0", "b0", "b0", "b0"}));
  EXPECT_EQ(ids[2], (std::vector<std::string>{"c0", "c1", "c0", "c1"}));
  // The originals first, in their order.
  for (std::size_t i = 0; i < m.entries.size(); ++i) EXPECT_EQ(o.entries[i].id, m.entries[i].id);
}

TEST(Oversample, OneHotRowsCountByTheirPattern) {
  records::Manifest m;
  m.label_kind = records::LabelKind::one_hot;
  m.entries = {{.id = "x", .one_hot = {1, 0}}, {.id = "y", .one_hot = {1, 0}}, {.id = "z", .one_hot = {0, 1}}};
  const records::Manifest o = oversampled(m);
  ASSERT_EQ(o.entries.size(), 4u);
  EXPECT_EQ(o.entries[3].id, "z");
  // Balanced already: unchanged.
  EXPECT_EQ(oversampled(o).entries.size(), 4u);
}

}  // namespace
}  // namespace convoy::train
