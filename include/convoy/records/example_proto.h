#pragma once
// tf.train.Example, the record TFRecord image datasets hold, in protobuf's
// wire format, written by hand (no protoc, no libprotobuf):
//
//   message Example  { Features features = 1; }
//   message Features { map<string, Feature> feature = 1; }
//   message Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//   message BytesList { repeated bytes value = 1; }
//   message FloatList { repeated float value = 1 [packed = true]; }
//   message Int64List { repeated int64 value = 1 [packed = true]; }
//
// Decoding follows protobuf's rules: packed and unpacked repeated fields are
// both accepted, unknown fields are skipped, a repeated message is merged, a
// later map entry with the same key wins. Malformed input is a UserError and
// is never read out of bounds.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "convoy/data/example.h"

namespace convoy::records {

struct ProtoFeature {
  enum class Kind { none, bytes, floats, int64s };
  Kind kind = Kind::none;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> int64s;

  static ProtoFeature of_bytes(std::vector<std::string> v) { return {Kind::bytes, std::move(v), {}, {}}; }
  static ProtoFeature of_floats(std::vector<float> v) { return {Kind::floats, {}, std::move(v), {}}; }
  static ProtoFeature of_int64s(std::vector<int64_t> v) { return {Kind::int64s, {}, {}, std::move(v)}; }
  bool operator==(const ProtoFeature&) const = default;
};

const char* kind_name(ProtoFeature::Kind kind);  // "bytes_list", "float_list", ...

struct ExampleProto {
  std::map<std::string, ProtoFeature> features;  // sorted: encoding is deterministic
  bool operator==(const ExampleProto&) const = default;
};

// Serialises `example`. `packed` = false writes numbers one field each
// (protobuf's older encoding, which readers must still accept).
std::string encode_example(const ExampleProto& example, bool packed = true);

// Parses a serialised tf.train.Example. Throws UserError
// "malformed tf.train.Example: <what> at byte N" on bad input.
ExampleProto decode_example(std::string_view bytes);

// Every feature as a tensor: bytes_list with one value → u8 [length]
// (several values are an error, except for `text_keys`, which become text
// features holding every value); int64_list → i32 [n] (a value outside i32 is
// an error); float_list → f32 [n]. A feature with no kind is left out.
data::Example to_data_example(const ExampleProto& proto, const std::set<std::string>& text_keys = {});

// The reverse: u8 tensors → one bytes value, i32 → int64_list, f32 →
// float_list (all flattened), text features → bytes_list of their strings.
ExampleProto from_data_example(const data::Example& example);

}  // namespace convoy::records
