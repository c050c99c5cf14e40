// tf.train.Example in protobuf's wire format (core/protobuf_wire.h). Sizes of
// nested messages are computed first so encoding writes every byte once.
#include "convoy/records/example_proto.h"

#include <cstring>
#include <limits>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/core/protobuf_wire.h"

namespace convoy::records {
namespace {

using proto::kFixed32;
using proto::kLengthDelimited;
using proto::kVarint;
using proto::put_tag;
using proto::put_varint;
using proto::varint_size;
using proto::field_size;
using WireReader = proto::Reader;
constexpr std::string_view kWhat = "malformed tf.train.Example";

// ---- decoding ----

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
  WireReader r(begin, begin + bytes.size(), begin, kWhat);
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
        require(f.bytes.size() == 1, "feature '" + shown(key) + "' holds " + std::to_string(f.bytes.size()) +
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
                  "feature '" + shown(key) + "' holds " + std::to_string(v) + ", outside the i32 range convoy uses for integers");
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
