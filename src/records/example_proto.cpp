// tf.train.Example in protobuf's wire format. Each message is a sequence of
// (tag, value) fields; tag = field_number << 3 | wire_type. Sizes of nested
// messages are computed first so encoding writes every byte once.
#include "convoy/records/example_proto.h"

#include <cstring>
#include <limits>

#include "convoy/core/error.h"

namespace convoy::records {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };
constexpr int kMaxGroupDepth = 64;  // protobuf's own parsers stop at 100

// ---- decoding ----

// Reads fields from a byte range; every read checks the bytes are there.
class WireReader {
 public:
  WireReader(const uint8_t* begin, const uint8_t* end, const uint8_t* origin)
      : p_(begin), end_(end), origin_(origin) {}

  bool done() const { return p_ == end_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail("a varint runs past the end of its message");
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("a varint is longer than 10 bytes");
  }

  // Reads a tag; sets the field number and wire type.
  void tag(uint32_t& field, uint32_t& wire_type) {
    const uint64_t t = varint();
    field = static_cast<uint32_t>(t >> 3);
    wire_type = static_cast<uint32_t>(t & 7);
    if (t >> 3 == 0 || t >> 32) fail("field number " + std::to_string(t >> 3) + " is invalid");
    if (wire_type > kFixed32) fail("wire type " + std::to_string(wire_type) + " is invalid");
  }

  // The payload of a length-delimited field, as a reader over its bytes.
  WireReader sub() {
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_))
      fail("a field declares " + std::to_string(n) + " bytes but only " + std::to_string(end_ - p_) + " remain");
    WireReader r(p_, p_ + n, origin_);
    p_ += n;
    return r;
  }
  std::string_view rest() const { return {reinterpret_cast<const char*>(p_), static_cast<std::size_t>(end_ - p_)}; }

  uint32_t fixed32() {
    if (end_ - p_ < 4) fail("a 4-byte field runs past the end of its message");
    uint32_t v;
    std::memcpy(&v, p_, 4);
    p_ += 4;
    return v;
  }

  // Skips an unknown field of any wire type, groups included.
  void skip(uint32_t field, uint32_t wire_type, int depth = 0) {
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

  [[noreturn]] void fail(const std::string& what) const {
    throw UserError("malformed tf.train.Example: " + what + " (at byte " + std::to_string(p_ - origin_) + ")");
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* origin_;  // start of the whole record, for offsets in errors
};

float float_of_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The list messages: field 1 is the repeated value.
void read_bytes_list(WireReader r, std::vector<std::string>& out) {
  while (!r.done()) {
    uint32_t field, wire;
    r.tag(field, wire);
    if (field == 1 && wire == kLengthDelimited)
      out.emplace_back(r.sub().rest());
    else
      r.skip(field, wire);
  }
}

void read_float_list(WireReader r, std::vector<float>& out) {
  while (!r.done()) {
    uint32_t field, wire;
    r.tag(field, wire);
    if (field == 1 && wire == kLengthDelimited) {  // packed
      WireReader packed = r.sub();
      if (packed.rest().size() % 4 != 0)
        packed.fail("a packed float list of " + std::to_string(packed.rest().size()) + " bytes is not a multiple of 4");
      out.reserve(out.size() + packed.rest().size() / 4);
      while (!packed.done()) out.push_back(float_of_bits(packed.fixed32()));
    } else if (field == 1 && wire == kFixed32) {
      out.push_back(float_of_bits(r.fixed32()));
    } else {
      r.skip(field, wire);
    }
  }
}

void read_int64_list(WireReader r, std::vector<int64_t>& out) {
  while (!r.done()) {
    uint32_t field, wire;
    r.tag(field, wire);
    if (field == 1 && wire == kLengthDelimited) {  // packed
      WireReader packed = r.sub();
      while (!packed.done()) out.push_back(static_cast<int64_t>(packed.varint()));
    } else if (field == 1 && wire == kVarint) {
      out.push_back(static_cast<int64_t>(r.varint()));
    } else {
      r.skip(field, wire);
    }
  }
}

// Feature's oneof: a field of another kind replaces the value; the same kind
// again merges (its values are appended), as protobuf does.
void read_feature(WireReader r, ProtoFeature& f) {
  while (!r.done()) {
    uint32_t field, wire;
    r.tag(field, wire);
    if (wire != kLengthDelimited || field < 1 || field > 3) {
      r.skip(field, wire);
      continue;
    }
    const auto kind = static_cast<ProtoFeature::Kind>(field);  // 1 bytes, 2 floats, 3 int64s
    if (f.kind != kind) f = ProtoFeature{.kind = kind};
    if (kind == ProtoFeature::Kind::bytes) read_bytes_list(r.sub(), f.bytes);
    if (kind == ProtoFeature::Kind::floats) read_float_list(r.sub(), f.floats);
    if (kind == ProtoFeature::Kind::int64s) read_int64_list(r.sub(), f.int64s);
  }
}

// One map<string, Feature> entry: key = 1, value = 2. A later entry with the
// same key replaces an earlier one.
void read_map_entry(WireReader r, std::map<std::string, ProtoFeature>& features) {
  std::string key;
  ProtoFeature value;
  while (!r.done()) {
    uint32_t field, wire;
    r.tag(field, wire);
    if (field == 1 && wire == kLengthDelimited)
      key = std::string(r.sub().rest());
    else if (field == 2 && wire == kLengthDelimited)
      read_feature(r.sub(), value);
    else
      r.skip(field, wire);
  }
  features[std::move(key)] = std::move(value);
}

void read_features(WireReader r, ExampleProto& out) {
  while (!r.done()) {
    uint32_t field, wire;
    r.tag(field, wire);
    if (field == 1 && wire == kLengthDelimited)
      read_map_entry(r.sub(), out.features);
    else
      r.skip(field, wire);
  }
}

// ---- encoding ----

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

void put_tag(std::string& out, uint32_t field, WireType wire) { put_varint(out, (field << 3) | wire); }

// Size of a length-delimited field's payload plus its tag and length.
std::size_t field_size(std::size_t payload) { return 1 + varint_size(payload) + payload; }

std::size_t packed_int64s_size(const std::vector<int64_t>& v) {
  std::size_t n = 0;
  for (int64_t x : v) n += varint_size(static_cast<uint64_t>(x));
  return n;
}

// Size of the BytesList / FloatList / Int64List message.
std::size_t list_size(const ProtoFeature& f, bool packed) {
  std::size_t n = 0;
  switch (f.kind) {
    case ProtoFeature::Kind::none: break;
    case ProtoFeature::Kind::bytes:
      for (const std::string& b : f.bytes) n += field_size(b.size());
      break;
    case ProtoFeature::Kind::floats:
      if (f.floats.empty()) break;
      n = packed ? field_size(4 * f.floats.size()) : 5 * f.floats.size();
      break;
    case ProtoFeature::Kind::int64s:
      if (f.int64s.empty()) break;
      n = packed ? field_size(packed_int64s_size(f.int64s)) : f.int64s.size() + packed_int64s_size(f.int64s);
      break;
  }
  return n;
}

std::size_t feature_size(const ProtoFeature& f, bool packed) {
  return f.kind == ProtoFeature::Kind::none ? 0 : field_size(list_size(f, packed));
}

std::size_t entry_size(const std::string& key, const ProtoFeature& f, bool packed) {
  return field_size(key.size()) + field_size(feature_size(f, packed));
}

void put_list(std::string& out, const ProtoFeature& f, bool packed) {
  switch (f.kind) {
    case ProtoFeature::Kind::none: break;
    case ProtoFeature::Kind::bytes:
      for (const std::string& b : f.bytes) {
        put_tag(out, 1, kLengthDelimited);
        put_varint(out, b.size());
        out += b;
      }
      break;
    case ProtoFeature::Kind::floats:
      if (f.floats.empty()) break;
      if (packed) {
        put_tag(out, 1, kLengthDelimited);
        put_varint(out, 4 * f.floats.size());
      }
      for (float x : f.floats) {
        if (!packed) put_tag(out, 1, kFixed32);
        char bits[4];
        std::memcpy(bits, &x, 4);
        out.append(bits, 4);
      }
      break;
    case ProtoFeature::Kind::int64s:
      if (f.int64s.empty()) break;
      if (packed) {
        put_tag(out, 1, kLengthDelimited);
        put_varint(out, packed_int64s_size(f.int64s));
      }
      for (int64_t x : f.int64s) {
        if (!packed) put_tag(out, 1, kVarint);
        put_varint(out, static_cast<uint64_t>(x));
      }
      break;
  }
}

}  // namespace

const char* kind_name(ProtoFeature::Kind kind) {
  switch (kind) {
    case ProtoFeature::Kind::none: return "empty feature";
    case ProtoFeature::Kind::bytes: return "bytes_list";
    case ProtoFeature::Kind::floats: return "float_list";
    case ProtoFeature::Kind::int64s: return "int64_list";
  }
  return "?";
}

std::string encode_example(const ExampleProto& example, bool packed) {
  std::size_t features = 0;
  for (const auto& [key, f] : example.features) features += field_size(entry_size(key, f, packed));
  std::string out;
  out.reserve(field_size(features));
  put_tag(out, 1, kLengthDelimited);  // Example.features
  put_varint(out, features);
  for (const auto& [key, f] : example.features) {
    put_tag(out, 1, kLengthDelimited);  // Features.feature map entry
    put_varint(out, entry_size(key, f, packed));
    put_tag(out, 1, kLengthDelimited);  // key
    put_varint(out, key.size());
    out += key;
    put_tag(out, 2, kLengthDelimited);  // value: Feature
    put_varint(out, feature_size(f, packed));
    if (f.kind != ProtoFeature::Kind::none) {
      put_tag(out, static_cast<uint32_t>(f.kind), kLengthDelimited);  // the oneof's list
      put_varint(out, list_size(f, packed));
      put_list(out, f, packed);
    }
  }
  return out;
}

ExampleProto decode_example(std::string_view bytes) {
  const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
  WireReader r(begin, begin + bytes.size(), begin);
  ExampleProto out;
  while (!r.done()) {
    uint32_t field, wire;
    r.tag(field, wire);
    if (field == 1 && wire == kLengthDelimited)
      read_features(r.sub(), out);  // a repeated message field merges
    else
      r.skip(field, wire);
  }
  return out;
}

data::Example to_data_example(const ExampleProto& proto, const std::set<std::string>& text_keys) {
  data::Example out;
  for (const auto& [key, f] : proto.features) {
    switch (f.kind) {
      case ProtoFeature::Kind::none: break;
      case ProtoFeature::Kind::bytes: {
        if (text_keys.count(key)) {
          out.set_texts(key, f.bytes);
          break;
        }
        require(f.bytes.size() == 1, "feature '" + key + "' holds " + std::to_string(f.bytes.size()) +
                                         " byte strings; a bytes feature becomes one u8 tensor, so it needs exactly one");
        Tensor t(DType::u8, {static_cast<int64_t>(f.bytes[0].size())});
        std::memcpy(t.raw(), f.bytes[0].data(), f.bytes[0].size());
        out.set(key, std::move(t));
        break;
      }
      case ProtoFeature::Kind::floats: {
        Tensor t(DType::f32, {static_cast<int64_t>(f.floats.size())});
        std::copy(f.floats.begin(), f.floats.end(), t.data<float>().begin());
        out.set(key, std::move(t));
        break;
      }
      case ProtoFeature::Kind::int64s: {
        Tensor t(DType::i32, {static_cast<int64_t>(f.int64s.size())});
        for (std::size_t i = 0; i < f.int64s.size(); ++i) {
          const int64_t v = f.int64s[i];
          require(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
                  "feature '" + key + "' holds " + std::to_string(v) + ", outside the i32 range convoy uses for integers");
          t.data<int32_t>()[i] = static_cast<int32_t>(v);
        }
        out.set(key, std::move(t));
        break;
      }
    }
  }
  return out;
}

ExampleProto from_data_example(const data::Example& example) {
  ExampleProto out;
  for (const auto& [name, t] : example.tensors()) {
    switch (t.dtype()) {
      case DType::u8: {
        const auto* p = static_cast<const char*>(t.raw());
        out.features[name] = ProtoFeature::of_bytes({std::string(p, p + t.nbytes())});
        break;
      }
      case DType::i32: {
        auto v = t.data<int32_t>();
        out.features[name] = ProtoFeature::of_int64s({v.begin(), v.end()});
        break;
      }
      case DType::f32: {
        auto v = t.data<float>();
        out.features[name] = ProtoFeature::of_floats({v.begin(), v.end()});
        break;
      }
    }
  }
  for (const auto& [name, values] : example.text_features()) out.features[name] = ProtoFeature::of_bytes(values);
  return out;
}

}  // namespace convoy::records
