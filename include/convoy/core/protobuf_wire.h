#pragma once
// Protocol buffers' wire format, by hand (no protoc, no libprotobuf), shared
// by every protobuf convoy reads or writes: tf.train.Example
// (records/example_proto.h) and ONNX models (io/onnx.h).
//
// A message is a sequence of fields, each a tag (field_number << 3 |
// wire_type) and a value: a varint, 4 or 8 fixed bytes, or a length and that
// many bytes (strings, packed numbers, nested messages). Readers skip fields
// they do not know, as protobuf does.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace convoy::proto {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

std::size_t varint_size(uint64_t v);
void put_varint(std::string& out, uint64_t v);
void put_tag(std::string& out, uint32_t field, WireType wire);
// A length-delimited field's payload size plus its tag (one byte: fields < 16) and length.
std::size_t field_size(std::size_t payload);

// Appends fields to a message. Nested messages are written into their own
// Writer first and added with message(): their length must be known first.
class Writer {
 public:
  void varint(uint32_t field, uint64_t v);
  void int64(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
  void f32(uint32_t field, float v);
  void bytes(uint32_t field, std::string_view v);  // strings and bytes
  void message(uint32_t field, const Writer& m) { bytes(field, m.out_); }
  void packed_floats(uint32_t field, std::span<const float> v);
  void packed_int64s(uint32_t field, std::span<const int64_t> v);
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields from a byte range; every read checks the bytes are there.
// Errors are UserErrors "<context>: <what> (at byte N)", N counted from
// `origin` (the start of the whole file or record).
class Reader {
 public:
  Reader(std::string_view bytes, std::string_view context);
  Reader(const uint8_t* begin, const uint8_t* end, const uint8_t* origin, std::string_view context)
      : p_(begin), end_(end), origin_(origin), context_(context) {}

  bool done() const { return p_ == end_; }
  uint64_t varint();
  // Reads a tag: the field number and wire type.
  void tag(uint32_t& field, uint32_t& wire_type);
  // The payload of a length-delimited field, as a reader over its bytes.
  Reader sub();
  std::string_view rest() const { return {reinterpret_cast<const char*>(p_), static_cast<std::size_t>(end_ - p_)}; }
  uint32_t fixed32();
  float f32();
  // Skips an unknown field of any wire type, groups included.
  void skip(uint32_t field, uint32_t wire_type, int depth = 0);
  [[noreturn]] void fail(const std::string& what) const;

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* origin_;
  std::string_view context_;
};

}  // namespace convoy::proto
