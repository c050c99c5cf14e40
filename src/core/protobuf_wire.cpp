// Protocol buffers' wire format: see protobuf_wire.h.
#include "convoy/core/protobuf_wire.h"

#include <cstring>

#include "convoy/core/error.h"

namespace convoy::proto {
namespace {
constexpr int kMaxGroupDepth = 64;  // protobuf's own parsers stop at 100
}  // namespace

std::size_t varint_size(uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, uint32_t field, WireType wire) { put_varint(out, (uint64_t{field} << 3) | wire); }

std::size_t field_size(std::size_t payload) { return 1 + varint_size(payload) + payload; }

void Writer::varint(uint32_t field, uint64_t v) {
  put_tag(out_, field, kVarint);
  put_varint(out_, v);
}

void Writer::f32(uint32_t field, float v) {
  put_tag(out_, field, kFixed32);
  char bits[4];
  std::memcpy(bits, &v, 4);
  out_.append(bits, 4);
}

void Writer::bytes(uint32_t field, std::string_view v) {
  put_tag(out_, field, kLengthDelimited);
  put_varint(out_, v.size());
  out_ += v;
}

void Writer::packed_floats(uint32_t field, std::span<const float> v) {
  if (v.empty()) return;
  put_tag(out_, field, kLengthDelimited);
  put_varint(out_, 4 * v.size());
  const std::size_t at = out_.size();
  out_.resize(at + 4 * v.size());
  std::memcpy(out_.data() + at, v.data(), 4 * v.size());  // little-endian, as protobuf's fixed32
}

void Writer::packed_int64s(uint32_t field, std::span<const int64_t> v) {
  if (v.empty()) return;
  std::size_t n = 0;
  for (int64_t x : v) n += varint_size(static_cast<uint64_t>(x));
  put_tag(out_, field, kLengthDelimited);
  put_varint(out_, n);
  for (int64_t x : v) put_varint(out_, static_cast<uint64_t>(x));
}

Reader::Reader(std::string_view bytes, std::string_view context)
    : Reader(reinterpret_cast<const uint8_t*>(bytes.data()), reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size(),
             reinterpret_cast<const uint8_t*>(bytes.data()), context) {}

uint64_t Reader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p_ == end_) fail("a varint runs past the end of its message");
    const uint8_t b = *p_++;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  fail("a varint is longer than 10 bytes");
}

void Reader::tag(uint32_t& field, uint32_t& wire_type) {
  const uint64_t t = varint();
  field = static_cast<uint32_t>(t >> 3);
  wire_type = static_cast<uint32_t>(t & 7);
  if (t >> 3 == 0 || t >> 32) fail("field number " + std::to_string(t >> 3) + " is invalid");
  if (wire_type > kFixed32) fail("wire type " + std::to_string(wire_type) + " is invalid");
}

Reader Reader::sub() {
  const uint64_t n = varint();
  if (n > static_cast<uint64_t>(end_ - p_))
    fail("a field declares " + std::to_string(n) + " bytes but only " + std::to_string(end_ - p_) + " remain");
  Reader r(p_, p_ + n, origin_, context_);
  p_ += n;
  return r;
}

uint32_t Reader::fixed32() {
  if (end_ - p_ < 4) fail("a 4-byte field runs past the end of its message");
  uint32_t v;
  std::memcpy(&v, p_, 4);
  p_ += 4;
  return v;
}

float Reader::f32() {
  const uint32_t bits = fixed32();
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void Reader::skip(uint32_t field, uint32_t wire_type, int depth) {
  switch (wire_type) {
    case kVarint: varint(); return;
    case kFixed64:
      if (end_ - p_ < 8) fail("an 8-byte field runs past the end of its message");
      p_ += 8;
      return;
    case kLengthDelimited: sub(); return;
    case kFixed32: fixed32(); return;
    case kStartGroup: {
      if (depth >= kMaxGroupDepth) fail("groups nest deeper than " + std::to_string(kMaxGroupDepth));
      for (;;) {
        if (done()) fail("group " + std::to_string(field) + " is never closed");
        uint32_t f, w;
        tag(f, w);
        if (w == kEndGroup) {
          if (f != field) fail("group " + std::to_string(field) + " is closed as " + std::to_string(f));
          return;
        }
        skip(f, w, depth + 1);
      }
    }
    default: fail("an end-group tag for field " + std::to_string(field) + " has no matching start");
  }
}

void Reader::fail(const std::string& what) const {
  throw UserError(std::string(context_) + ": " + what + " (at byte " + std::to_string(p_ - origin_) + ")");
}

}  // namespace convoy::proto
