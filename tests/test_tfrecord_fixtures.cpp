// Files written by TensorFlow itself (tests/fixtures/make_tfrecord_fixtures.py)
// read back with the same bytes and labels.
#include <gtest/gtest.h>

#include "convoy/records/example_proto.h"
#include "convoy/records/tfrecord_dataset.h"

namespace convoy::records {
namespace {

const int kLengths[] = {0, 1, 100, 1000, 5000};

// The script's image_bytes(i).
std::string image_bytes(int i) {
  std::string s;
  for (int k = 0; k < kLengths[i]; ++k) s.push_back(static_cast<char>((i * 37 + k * 11) % 256));
  return s;
}

std::string fixture(const char* name) { return std::string(CONVOY_FIXTURES_DIR) + "/" + name; }

class TfFixture : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(TfFixture, ReaderSeesTheRecordsTensorFlowWrote) {
  TfRecordReader r(fixture(GetParam()));
  std::string data;
  int i = 0;
  for (; r.next(data); ++i) {
    ASSERT_LT(i, 5);
    const ExampleProto p = decode_example(data);
    EXPECT_EQ(p.features.at("image/encoded"), ProtoFeature::of_bytes({image_bytes(i)}));
    EXPECT_EQ(p.features.at("image/class/label"), ProtoFeature::of_int64s({i % 3}));
    std::vector<float> one_hot(3, 0.f);
    one_hot[i % 3] = 1.f;
    EXPECT_EQ(p.features.at("image/class/one_hot"), ProtoFeature::of_floats(one_hot));
    EXPECT_EQ(p.features.at("image/id"), ProtoFeature::of_bytes({"img_" + std::to_string(i)}));
    EXPECT_EQ(p.features.at("extra/ints"), ProtoFeature::of_int64s({i, -1, 2147483647}));
  }
  EXPECT_EQ(i, 5);
}

TEST_P(TfFixture, DatasetGivesImageBytesLabelsAndIds) {
  TfRecordOptions o;
  o.extra_keys = {"extra/ints"};
  int i = 0;
  for (data::Example& e : tfrecord_dataset({fixture(GetParam())}, o).epoch(0)) {
    const Tensor& bytes = e.tensor("image_bytes");
    EXPECT_EQ(std::string(static_cast<const char*>(bytes.raw()), bytes.nbytes()), image_bytes(i));
    EXPECT_EQ(e.tensor("label").shape(), Shape{});
    EXPECT_EQ(e.tensor("label").data<int32_t>()[0], i % 3);
    EXPECT_EQ(e.text("id"), "img_" + std::to_string(i));
    EXPECT_EQ(e.tensor("extra/ints").data<int32_t>()[1], -1);
    ++i;
  }
  EXPECT_EQ(i, 5);
  // The one-hot key instead of the index.
  o.label_keys = {kOneHotKey};
  i = 0;
  for (data::Example& e : tfrecord_dataset({fixture(GetParam())}, o).epoch(0)) {
    EXPECT_EQ(e.tensor("label").shape(), Shape{3});
    EXPECT_EQ(e.tensor("label").data<float>()[i % 3], 1.f);
    ++i;
  }
  EXPECT_EQ(i, 5);
}

INSTANTIATE_TEST_SUITE_P(WrittenByTensorFlow, TfFixture,
                         ::testing::Values("tfrecord_tf_plain.tfrecord", "tfrecord_tf_gzip.tfrecord.gz"));

}  // namespace convoy::records
