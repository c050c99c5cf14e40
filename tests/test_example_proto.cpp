// tf.train.Example's wire format by hand: round trips, both encodings of
// repeated numbers, unknown fields, and malformed input.
#include <gtest/gtest.h>

#include <limits>

#include "convoy/records/example_proto.h"
#include "test_helpers.h"

namespace convoy::records {
namespace {

using convoy::testing::error_of;

ExampleProto sample() {
  ExampleProto p;
  p.features["image/encoded"] = ProtoFeature::of_bytes({std::string("\x00\xff\x10jpeg", 7)});
  p.features["several"] = ProtoFeature::of_bytes({"a", "", std::string(300, 'z')});
  p.features["image/class/label"] = ProtoFeature::of_int64s({3});
  p.features["ints"] = ProtoFeature::of_int64s(
      {0, -1, 127, 128, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()});
  p.features["floats"] = ProtoFeature::of_floats({0.0f, -1.5f, 3.25e-20f, std::numeric_limits<float>::infinity()});
  p.features["empty_floats"] = ProtoFeature::of_floats({});
  p.features["no kind"] = ProtoFeature{};
  return p;
}

// Bytes of a hand-built message, to feed the decoder forms our encoder never writes.
std::string bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

// Wraps a Feature message as Example{features{feature{key: "k", value: <feature>}}}.
std::string example_with_feature(const std::string& feature) {
  std::string entry = bytes({0x0a, 0x01, 'k', 0x12, static_cast<int>(feature.size())}) + feature;
  std::string features = bytes({0x0a, static_cast<int>(entry.size())}) + entry;
  return bytes({0x0a, static_cast<int>(features.size())}) + features;
}

}  // namespace

TEST(ExampleProto, RoundTripsPackedAndUnpacked) {
  const ExampleProto p = sample();
  const std::string packed = encode_example(p, /*packed=*/true);
  const std::string unpacked = encode_example(p, /*packed=*/false);
  EXPECT_NE(packed, unpacked);
  EXPECT_LT(packed.size(), unpacked.size());
  EXPECT_EQ(decode_example(packed), p);
  EXPECT_EQ(decode_example(unpacked), p);
  EXPECT_EQ(decode_example(""), ExampleProto{});
}

TEST(ExampleProto, EncodesTheWireFormatByteForByte) {
  // features{feature{key: "a", value{int64_list{value: [1, 300]}}}}: packed
  // varints 01 ac 02 in a length-delimited field.
  ExampleProto p;
  p.features["a"] = ProtoFeature::of_int64s({1, 300});
  EXPECT_EQ(encode_example(p), bytes({0x0a, 0x0e, 0x0a, 0x0c, 0x0a, 0x01, 'a', 0x12, 0x07, 0x1a, 0x05, 0x0a, 0x03,
                                      0x01, 0xac, 0x02}));
  // Unpacked: one tagged varint per value.
  EXPECT_EQ(encode_example(p, false), bytes({0x0a, 0x0e, 0x0a, 0x0c, 0x0a, 0x01, 'a', 0x12, 0x07, 0x1a, 0x05, 0x08,
                                             0x01, 0x08, 0xac, 0x02}));
}

TEST(ExampleProto, SkipsUnknownFieldsOfEveryWireType) {
  // Unknown fields at the top, in the map entry and in the list: varint,
  // fixed64, length-delimited, a group holding a field, fixed32.
  const std::string unknown = bytes({0x28, 0x96, 0x01,                        // field 5 varint
                                     0x31, 1, 2, 3, 4, 5, 6, 7, 8,            // field 6 fixed64
                                     0x3a, 0x02, 'h', 'i',                    // field 7 bytes
                                     0x43, 0x08, 0x05, 0x44,                  // group 8 { field 1 varint } end
                                     0x4d, 1, 2, 3, 4});                      // field 9 fixed32
  const std::string list = bytes({0x0a, 0x01, 0x07}) + unknown;               // int64 7 packed
  const std::string feature = bytes({0x1a, static_cast<int>(list.size())}) + list + unknown;
  const std::string entry = bytes({0x0a, 0x01, 'k', 0x12, static_cast<int>(feature.size())}) + feature + unknown;
  const std::string features = bytes({0x0a, static_cast<int>(entry.size())}) + entry + unknown;
  const std::string example = unknown + bytes({0x0a, static_cast<int>(features.size())}) + features + unknown;
  const ExampleProto p = decode_example(example);
  ASSERT_EQ(p.features.size(), 1u);
  EXPECT_EQ(p.features.at("k"), ProtoFeature::of_int64s({7}));
}

TEST(ExampleProto, MergesRepeatedMessagesAsProtobufDoes) {
  // The same list twice appends; another kind of list replaces; a later map
  // entry with the same key wins.
  const std::string ints_twice = bytes({0x1a, 0x03, 0x0a, 0x01, 0x01, 0x1a, 0x03, 0x0a, 0x01, 0x02});
  EXPECT_EQ(decode_example(example_with_feature(ints_twice)).features.at("k"), ProtoFeature::of_int64s({1, 2}));
  const std::string ints_then_bytes = bytes({0x1a, 0x03, 0x0a, 0x01, 0x01, 0x0a, 0x03, 0x0a, 0x01, 'x'});
  EXPECT_EQ(decode_example(example_with_feature(ints_then_bytes)).features.at("k"), ProtoFeature::of_bytes({"x"}));
  const std::string twice = example_with_feature(bytes({0x1a, 0x03, 0x0a, 0x01, 0x01})) +
                            example_with_feature(bytes({0x1a, 0x03, 0x0a, 0x01, 0x02}));
  EXPECT_EQ(decode_example(twice).features.at("k"), ProtoFeature::of_int64s({2}));
}

TEST(ExampleProto, MalformedInputIsAUserErrorNeverAnOverread) {
  const std::string good = encode_example(sample());
  // Every truncation of a valid message either parses (it ends on a field
  // boundary) or throws UserError; no other outcome.
  int errors = 0;
  for (std::size_t n = 0; n < good.size(); ++n) {
    const std::string cut = good.substr(0, n);  // a copy: ASan catches any read past it
    try {
      decode_example(cut);
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("malformed tf.train.Example"), std::string::npos);
      ++errors;
    }
  }
  EXPECT_GT(errors, static_cast<int>(good.size()) / 2);
  EXPECT_NE(error_of([] { decode_example(bytes({0x0a, 0x7f, 0x00})); }).find("declares 127 bytes but only 1 remain"),
            std::string::npos);
  EXPECT_NE(error_of([] { decode_example(std::string(11, '\x80')); }).find("varint"), std::string::npos);
  EXPECT_NE(error_of([] { decode_example(bytes({0x0f})); }).find("wire type 7"), std::string::npos);
  EXPECT_NE(error_of([] { decode_example(bytes({0x00})); }).find("field number 0"), std::string::npos);
  EXPECT_NE(error_of([] { decode_example(bytes({0x43, 0x08, 0x01})); }).find("never closed"), std::string::npos);
  EXPECT_NE(error_of([] { decode_example(bytes({0x44})); }).find("end-group"), std::string::npos);
  EXPECT_NE(error_of([] { decode_example(example_with_feature(bytes({0x12, 0x05, 0x0a, 0x03, 1, 2, 3}))); })
                .find("not a multiple of 4"),
            std::string::npos);
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += bytes({0x43});
  EXPECT_NE(error_of([&] { decode_example(deep); }).find("nest deeper"), std::string::npos);
}

TEST(ExampleProto, ConvertsToAndFromDataExamples) {
  ExampleProto p;
  p.features["image"] = ProtoFeature::of_bytes({"\x01\x02\x03"});
  p.features["label"] = ProtoFeature::of_int64s({-7, 2});
  p.features["one_hot"] = ProtoFeature::of_floats({0.f, 1.f});
  p.features["names"] = ProtoFeature::of_bytes({"a", "b"});
  const data::Example e = to_data_example(p, {"names"});
  EXPECT_EQ(e.tensor("image").dtype(), DType::u8);
  EXPECT_EQ(e.tensor("image").shape(), (Shape{3}));
  EXPECT_EQ(e.tensor("image").data<uint8_t>()[2], 3);
  EXPECT_EQ(e.tensor("label").dtype(), DType::i32);
  EXPECT_EQ(e.tensor("label").data<int32_t>()[0], -7);
  EXPECT_EQ(e.tensor("one_hot").data<float>()[1], 1.f);
  EXPECT_EQ(e.texts("names"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(from_data_example(e), p);

  ExampleProto big;
  big.features["n"] = ProtoFeature::of_int64s({int64_t{1} << 40});
  EXPECT_NE(error_of([&] { to_data_example(big); }).find("outside the i32 range"), std::string::npos);
  EXPECT_NE(error_of([&] { to_data_example(p); }).find("'names' holds 2 byte strings"), std::string::npos);
}

}  // namespace convoy::records
