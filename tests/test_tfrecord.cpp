// TFRecord files: round trips, and every kind of damage gives one error
// naming the file, the record and its offset.
#include <gtest/gtest.h>

#include <cstring>

#include "convoy/records/crc32c.h"
#include "convoy/records/tfrecord.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy::records {
namespace {

using convoy::testing::error_of;
using convoy::testing::TempDir;
using testing::pattern;
using testing::read_bytes;
using testing::read_records;
using testing::write_bytes;
using testing::write_records;

std::vector<std::string> some_records() {
  return {pattern(10, 1), "", pattern(1 << 17, 2), pattern(3, 3), pattern(70000, 4)};
}

// Offset of record `k` in a plain file of `records`.
uint64_t offset_of(const std::vector<std::string>& records, std::size_t k) {
  uint64_t off = 0;
  for (std::size_t i = 0; i < k; ++i) off += 16 + records[i].size();
  return off;
}

}  // namespace

TEST(TfRecord, PlainRoundTripKeepsEveryRecordExactly) {
  TempDir dir;
  const auto records = some_records();
  write_records(dir.file("a.tfrecord"), records);
  EXPECT_EQ(read_records(dir.file("a.tfrecord"), Compression::none), records);
  EXPECT_EQ(read_records(dir.file("a.tfrecord"), Compression::detect), records);
  EXPECT_EQ(read_bytes(dir.file("a.tfrecord")).size(), offset_of(records, records.size()));
}

TEST(TfRecord, GzipRoundTripIsCompressedAndDetected) {
  TempDir dir;
  const auto records = some_records();
  write_records(dir.file("a.tfrecord.gz"), records, Compression::gzip);
  const std::string raw = read_bytes(dir.file("a.tfrecord.gz"));
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(raw[0]), 0x1f);
  EXPECT_EQ(static_cast<uint8_t>(raw[1]), 0x8b);
  EXPECT_EQ(read_records(dir.file("a.tfrecord.gz"), Compression::gzip), records);
  EXPECT_EQ(read_records(dir.file("a.tfrecord.gz"), Compression::detect), records);
  TfRecordReader r(dir.file("a.tfrecord.gz"));
  EXPECT_TRUE(r.gzipped());
}

TEST(TfRecord, APlainFileStartingLikeGzipIsStillReadPlain) {
  // A first record of 0x8b1f bytes makes the file start with gzip's magic.
  TempDir dir;
  const std::vector<std::string> records = {pattern(0x8b1f, 9), "x"};
  write_records(dir.file("a.tfrecord"), records);
  const std::string raw = read_bytes(dir.file("a.tfrecord"));
  ASSERT_EQ(static_cast<uint8_t>(raw[0]), 0x1f);
  ASSERT_EQ(static_cast<uint8_t>(raw[1]), 0x8b);
  EXPECT_EQ(read_records(dir.file("a.tfrecord")), records);
}

TEST(TfRecord, WriterLeavesNoFileUntilClosedAndNoneWhenAbandoned) {
  TempDir dir;
  {
    TfRecordWriter w(dir.file("a.tfrecord"));
    w.write("abc");
    EXPECT_FALSE(std::filesystem::exists(dir.file("a.tfrecord")));
  }  // destroyed without close
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_NE(error_of([&] { TfRecordWriter w(dir.file("no/such/folder/a.tfrecord")); }).find("no/such/folder/a.tfrecord"),
            std::string::npos);
}

TEST(TfRecord, FlippedDataByteIsADataCrcMismatchNamingFileRecordAndOffset) {
  TempDir dir;
  const auto records = some_records();
  const std::string path = dir.file("train-00003.tfrecord");
  write_records(path, records);
  std::string raw = read_bytes(path);
  raw[offset_of(records, 2) + 12 + 500] ^= 0x20;
  write_bytes(path, raw);
  TfRecordReader r(path);
  std::string data;
  ASSERT_TRUE(r.next(data));
  ASSERT_TRUE(r.next(data));
  const std::string msg = error_of([&] { r.next(data); });
  EXPECT_EQ(msg, path + ": record 2 at byte " + std::to_string(offset_of(records, 2)) +
                     ": data CRC mismatch (file corrupt); re-create the file");
  EXPECT_TRUE(r.can_continue());  // the framing is intact: the next record reads
  ASSERT_TRUE(r.next(data));
  EXPECT_EQ(data, records[3]);
}

TEST(TfRecord, FlippedLengthByteIsALengthCrcMismatchAndStopsTheFile) {
  TempDir dir;
  const auto records = some_records();
  const std::string path = dir.file("a.tfrecord");
  write_records(path, records);
  std::string raw = read_bytes(path);
  raw[offset_of(records, 3) + 1] ^= 0x01;
  write_bytes(path, raw);
  TfRecordReader r(path);
  std::string data;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.next(data));
  EXPECT_EQ(error_of([&] { r.next(data); }),
            path + ": record 3 at byte " + std::to_string(offset_of(records, 3)) +
                ": length CRC mismatch (file corrupt); re-create the file");
  EXPECT_FALSE(r.can_continue());
}

TEST(TfRecord, HugeDeclaredLengthIsRejectedBeforeAllocating) {
  // A length with a valid CRC but far more bytes than the file holds.
  TempDir dir;
  const std::string path = dir.file("a.tfrecord");
  for (uint64_t length : {uint64_t{1} << 40, uint64_t{1} << 20}) {
    std::string header(12, '\0');
    std::memcpy(header.data(), &length, 8);
    const uint32_t crc = masked_crc32c(header.substr(0, 8));
    std::memcpy(header.data() + 8, &crc, 4);
    write_bytes(path, header + "only a few bytes");
    const std::string msg = error_of([&] { read_records(path); });
    EXPECT_NE(msg.find(path + ": record 0 at byte 0: "), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(length)), std::string::npos) << msg;
  }
}

TEST(TfRecord, TruncatedFilesNameTheCutRecord) {
  TempDir dir;
  const auto records = some_records();
  const std::string path = dir.file("a.tfrecord");
  write_records(path, records);
  const std::string whole = read_bytes(path);
  const uint64_t last = offset_of(records, 4);
  // Cut inside the header, inside the data, and inside the data CRC.
  for (uint64_t cut : {last + 5, last + 12 + 100, whole.size() - 2}) {
    write_bytes(path, whole.substr(0, cut));
    const std::string msg = error_of([&] { read_records(path); });
    EXPECT_NE(msg.find(path + ": record 4 at byte " + std::to_string(last) + ": truncated"), std::string::npos) << msg;
  }
}

TEST(TfRecord, TruncatedGzipFileIsOneClearError) {
  TempDir dir;
  const std::string path = dir.file("a.tfrecord.gz");
  write_records(path, some_records(), Compression::gzip);
  const std::string whole = read_bytes(path);
  write_bytes(path, whole.substr(0, whole.size() / 2));
  const std::string msg = error_of([&] { read_records(path); });
  EXPECT_EQ(msg.rfind(path + ": record ", 0), 0u) << msg;
  EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("gzip") != std::string::npos) << msg;
}

TEST(TfRecord, EmptyFileIsAnError) {
  TempDir dir;
  write_bytes(dir.file("empty.tfrecord"), "");
  EXPECT_EQ(error_of([&] { read_records(dir.file("empty.tfrecord")); }),
            dir.file("empty.tfrecord") + ": empty file, it holds no records; re-create it or leave it out");
  write_records(dir.file("empty.tfrecord.gz"), {}, Compression::gzip);
  EXPECT_NE(error_of([&] { read_records(dir.file("empty.tfrecord.gz")); }).find("empty file"), std::string::npos);
}

TEST(TfRecord, MissingFileAndWrongCompressionAreNamed) {
  TempDir dir;
  EXPECT_NE(error_of([&] { TfRecordReader r(dir.file("nope.tfrecord")); }).find(dir.file("nope.tfrecord")),
            std::string::npos);
  write_records(dir.file("a.tfrecord"), {"abc"});
  EXPECT_NE(error_of([&] { TfRecordReader r(dir.file("a.tfrecord"), Compression::gzip); }).find("not gzip"),
            std::string::npos);
  EXPECT_EQ(parse_compression("gzip", "x"), Compression::gzip);
  EXPECT_NE(error_of([&] { parse_compression("zip", "tfrecord.compression"); }).find("tfrecord.compression"),
            std::string::npos);
}

}  // namespace convoy::records
