// tfrecord_dataset: records of several shards interleaved, keys mapped to
// features, and bad records failing or skipped and counted.
#include <gtest/gtest.h>

#include <set>

#include "convoy/app/image_data.h"
#include "convoy/config/run_config.h"
#include "convoy/records/example_proto.h"
#include "convoy/records/tfrecord_dataset.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy::records {
namespace {

using convoy::testing::error_of;
using convoy::testing::TempDir;
using testing::read_bytes;
using testing::write_bytes;
using testing::write_records;

// A record whose image bytes spell `id` and whose label is `label`.
std::string record(const std::string& id, int label) {
  ExampleProto p;
  p.features[kImageKey] = ProtoFeature::of_bytes({"bytes of " + id});
  p.features[kLabelKey] = ProtoFeature::of_int64s({label});
  p.features[kIdKey] = ProtoFeature::of_bytes({id});
  return encode_example(p);
}

// Shard `name` with `n` records "<name>/<i>", written to `dir`.
std::string shard(const TempDir& dir, const std::string& name, int n, Compression c = Compression::none) {
  std::vector<std::string> records;
  for (int i = 0; i < n; ++i) records.push_back(record(name + "/" + std::to_string(i), i));
  write_records(dir.file(name), records, c);
  return dir.file(name);
}

std::vector<std::string> ids(const data::Dataset& d, int64_t epoch = 0) {
  std::vector<std::string> out;
  for (data::Example& e : d.epoch(epoch)) out.push_back(e.text("id"));
  return out;
}

TfRecordOptions quiet(TfRecordOptions o, std::vector<std::string>* log) {
  o.log = [log](const std::string& line) { log->push_back(line); };
  return o;
}

}  // namespace

TEST(TfRecordDataset, InterleavesShardsInAFixedOrderWithOrWithoutThreads) {
  TempDir dir;
  const std::vector<std::string> files = {shard(dir, "a", 3), shard(dir, "b", 2, Compression::gzip),
                                          shard(dir, "c", 4)};
  TfRecordOptions o;
  o.cycle_length = 2;
  o.read_ahead = 0;
  const auto inline_order = ids(tfrecord_dataset(files, o));
  EXPECT_EQ(inline_order, (std::vector<std::string>{"a/0", "b/0", "a/1", "b/1", "a/2", "c/0", "c/1", "c/2", "c/3"}));
  o.read_ahead = 3;
  const auto threaded = tfrecord_dataset(files, o);
  EXPECT_EQ(ids(threaded, 0), inline_order);
  EXPECT_EQ(ids(threaded, 1), inline_order);
}

TEST(TfRecordDataset, ExamplesCarryImageBytesLabelIdAndFile) {
  TempDir dir;
  const std::string path = shard(dir, "a", 2);
  auto it = tfrecord_dataset({path}).iterate(0);
  it->next();
  const data::Example e = *it->next();
  const Tensor& bytes = e.tensor("image_bytes");
  EXPECT_EQ(std::string(static_cast<const char*>(bytes.raw()), bytes.nbytes()), "bytes of a/1");
  EXPECT_EQ(e.tensor("label").data<int32_t>()[0], 1);
  EXPECT_EQ(e.text("id"), "a/1");
  EXPECT_EQ(e.text("file").rfind(path + ": record 1 at byte ", 0), 0u) << e.text("file");
}

TEST(TfRecordDataset, UnlabeledShardsAndMissingIds) {
  TempDir dir;
  ExampleProto p;
  p.features[kImageKey] = ProtoFeature::of_bytes({"x"});
  write_records(dir.file("test.tfrecord"), {encode_example(p), encode_example(p)});
  const std::string msg = error_of([&] { ids(tfrecord_dataset({dir.file("test.tfrecord")})); });
  EXPECT_NE(msg.find(dir.file("test.tfrecord") + ": record 0 at byte 0: has no label feature 'image/class/label', "
                                                  "'image/class/one_hot' (it has: image/encoded)"),
            std::string::npos)
      << msg;
  TfRecordOptions o;
  o.require_label = false;
  std::vector<std::string> got;
  for (data::Example& e : tfrecord_dataset({dir.file("test.tfrecord")}, o).epoch(0)) {
    EXPECT_FALSE(e.has("label"));
    got.push_back(e.text("id"));
  }
  EXPECT_EQ(got, (std::vector<std::string>{dir.file("test.tfrecord") + ":0", dir.file("test.tfrecord") + ":1"}));
}

TEST(TfRecordDataset, ABadRecordFailsNamingFileRecordAndTheSkipOption) {
  TempDir dir;
  const std::string path = shard(dir, "train-00003.tfrecord", 4);
  std::string raw = read_bytes(path);
  const std::size_t second = 16 + record("train-00003.tfrecord/0", 0).size();
  raw[second + 14] ^= 1;
  write_bytes(path, raw);
  std::vector<std::string> seen;
  const std::string msg = error_of([&] {
    for (data::Example& e : tfrecord_dataset({path}).epoch(0)) seen.push_back(e.text("id"));
  });
  EXPECT_EQ(msg, path + ": record 1 at byte " + std::to_string(second) +
                     ": data CRC mismatch (file corrupt); re-create the file or set on_bad_example: skip");
  EXPECT_EQ(seen, std::vector<std::string>{"train-00003.tfrecord/0"});
}

TEST(TfRecordDataset, SkipModeCountsAndNamesBadRecordsOncePerEpoch) {
  TempDir dir;
  const std::string crc = shard(dir, "crc", 3), length = shard(dir, "length", 3), good = shard(dir, "good", 2);
  const std::size_t second = 16 + record("crc/0", 0).size();
  const std::size_t second_in_length = 16 + record("length/0", 0).size();
  std::string raw = read_bytes(crc);
  raw[second + 20] ^= 1;  // record 1's data: skip it, read record 2
  write_bytes(crc, raw);
  raw = read_bytes(length);
  raw[second_in_length + 2] ^= 1;  // record 1's length: the rest of the file is lost
  write_bytes(length, raw);
  write_bytes(dir.file("empty"), "");
  ExampleProto no_image;
  no_image.features[kLabelKey] = ProtoFeature::of_int64s({1});
  write_records(dir.file("keyless"), {encode_example(no_image), record("keyless/1", 1)});
  write_records(dir.file("garbage"), {"\x0a\x7f not a proto", record("garbage/1", 1)});

  std::vector<std::string> log;
  TfRecordOptions o = quiet({}, &log);
  o.on_bad_example = data::OnBadExample::skip;
  const auto d = tfrecord_dataset({crc, length, good, dir.file("empty"), dir.file("keyless"), dir.file("garbage")}, o);
  const auto got = ids(d);
  EXPECT_EQ(std::multiset<std::string>(got.begin(), got.end()),
            (std::multiset<std::string>{"crc/0", "crc/2", "length/0", "good/0", "good/1", "keyless/1", "garbage/1"}));
  EXPECT_EQ(o.skipped->count_in_epoch(0), 5);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].rfind("skipped 5 bad records in epoch 0: ", 0), 0u) << log[0];
  for (const std::string& needle :
       {crc + ": record 1 at byte " + std::to_string(second) + ": data CRC mismatch",
        length + ": record 1 at byte " + std::to_string(second_in_length) + ": length CRC mismatch (file corrupt) (rest of the file skipped)",
        dir.file("empty") + ": empty file", dir.file("keyless") + ": record 0 at byte 0: has no feature 'image/encoded'",
        dir.file("garbage") + ": record 0 at byte 0: malformed tf.train.Example"})
    EXPECT_NE(log[0].find(needle), std::string::npos) << needle << "\nnot in: " << log[0];

  // Reading the same epoch again names them once; the next epoch counts its own.
  ids(d);
  EXPECT_EQ(o.skipped->count_in_epoch(0), 5);
  ids(d, 1);
  EXPECT_EQ(o.skipped->count_in_epoch(1), 5);
  EXPECT_EQ(o.skipped->count(), 10);
}

TEST(TfRecordDataset, MissingFilesAndBadOptionsFailAtOnce) {
  TempDir dir;
  EXPECT_NE(error_of([&] { tfrecord_dataset({dir.file("nope.tfrecord")}); }).find(dir.file("nope.tfrecord")),
            std::string::npos);
  EXPECT_NE(error_of([&] { tfrecord_dataset({}); }).find("no files"), std::string::npos);
  TfRecordOptions o;
  o.cycle_length = 0;
  const std::string a = shard(dir, "a", 1);
  EXPECT_NE(error_of([&] { tfrecord_dataset({a}, o); }).find("cycle_length"), std::string::npos);
}

// One stray huge label among small ones made that many classes (a head of
// 2^31 outputs; label + 1 overflowed an int on the way): refused, naming the
// label, unless data.classes says what the classes are.
TEST(TfRecordDataset, AStrayHugeLabelInventsNoClasses) {
  TempDir dir;
  std::vector<std::string> records;
  for (int i = 0; i < 8; ++i) records.push_back(record("r" + std::to_string(i), i % 2));
  records.push_back(record("stray", 2147483647));
  write_records(dir.file("s.tfrecord"), records);
  train::RunConfig c;
  c.data_dir = dir.path();
  c.data.kind = "tfrecord";
  c.data.files = "s.tfrecord";
  const std::string msg = error_of([&] { train::load_image_data(c, true); });
  EXPECT_NE(msg.find("s.tfrecord: the records' largest label is 2147483647, so there would be 2147483648 classes, but "
                     "only 3 labels are used"), std::string::npos) << msg;
  c.data.classes = {"a", "b"};
  EXPECT_NE(error_of([&] { train::load_image_data(c, true); }).find("data.classes names 2 classes but the records use "
                                                                     "label 2147483647"),
            std::string::npos);
}

}  // namespace convoy::records
