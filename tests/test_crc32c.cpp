// CRC-32C: published check values, and the fast path agrees with the table.
#include <gtest/gtest.h>

#include "convoy/records/crc32c.h"
#include "test_records_helpers.h"

namespace convoy::records {

TEST(Crc32c, MatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending(32, '\0'), descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<char>(i);
    descending[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(descending), 0x113FDB5Cu);
}

TEST(Crc32c, FastPathAndTableAgreeForEveryLengthAndAlignment) {
  const std::string data = testing::pattern(300, 7);
  for (std::size_t start = 0; start < 9; ++start)
    for (std::size_t n = 0; start + n <= data.size(); n += 13)
      ASSERT_EQ(crc32c_extend(0, data.data() + start, n), crc32c_extend_portable(0, data.data() + start, n))
          << "start " << start << " length " << n;
}

TEST(Crc32c, ExtendingInPiecesEqualsOneCall) {
  const std::string data = testing::pattern(1000, 3);
  const uint32_t whole = crc32c(data);
  for (std::size_t cut : {0, 1, 7, 8, 9, 500, 999, 1000}) {
    EXPECT_EQ(crc32c_extend(crc32c_extend(0, data.data(), cut), data.data() + cut, data.size() - cut), whole);
    EXPECT_EQ(crc32c_extend_portable(crc32c_extend_portable(0, data.data(), cut), data.data() + cut, data.size() - cut),
              whole);
  }
}

TEST(Crc32c, MaskIsInvertibleAndChangesTheValue) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x12345678u}) {
    EXPECT_EQ(unmask_crc(mask_crc(crc)), crc);
    EXPECT_NE(mask_crc(crc), crc);
  }
}

TEST(Crc32c, MaskedValuesMatchARecordWrittenByTensorFlow) {
  // tf.io.TFRecordWriter writing b"123456789": its length field (9 as u64) and
  // data carry these masked CRCs.
  const std::string length("\x09\0\0\0\0\0\0\0", 8);
  EXPECT_EQ(masked_crc32c(length), 0x3971f937u);
  EXPECT_EQ(masked_crc32c("123456789"), 0xc78ab0e5u);
}

}  // namespace convoy::records
