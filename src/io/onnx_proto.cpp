// ONNX's protobuf messages, encoded and decoded field by field (see onnx_proto.h).
#include "convoy/io/onnx_proto.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "convoy/core/error.h"
#include "convoy/core/protobuf_wire.h"

namespace convoy::io::onnx {
namespace {

using proto::Reader;
using proto::Writer;

// ---- encoding ----

Writer tensor_message(const Tensor& t) {
  Writer w;
  w.packed_int64s(1, t.dims);
  // The values as they are held: FLOAT or INT64 (a decoded FLOAT16 or UINT8 tensor is written widened).
  const int32_t type = is_floating(t.data_type) ? kFloat : is_integer(t.data_type) ? kInt64 : t.data_type;
  w.varint(2, static_cast<uint64_t>(type));
  w.bytes(8, t.name);
  // raw_data: little-endian values, the form every ONNX reader takes fastest.
  if (type == kFloat)
    w.bytes(9, {reinterpret_cast<const char*>(t.floats.data()), 4 * t.floats.size()});
  else if (type == kInt64)
    w.bytes(9, {reinterpret_cast<const char*>(t.int64s.data()), 8 * t.int64s.size()});
  return w;
}

Writer attribute_message(const Attribute& a) {
  Writer w;
  w.bytes(1, a.name);
  switch (a.type) {
    case Attribute::kFloatAttr: w.f32(2, a.f); break;
    case Attribute::kInt: w.int64(3, a.i); break;
    case Attribute::kString: w.bytes(4, a.s); break;
    case Attribute::kTensor: w.message(5, tensor_message(*a.t)); break;
    case Attribute::kFloats:
      for (float f : a.floats) w.f32(7, f);  // repeated float, unpacked as onnx.proto2 declares it
      break;
    case Attribute::kInts:
      for (int64_t i : a.ints) w.int64(8, i);
      break;
  }
  w.varint(20, static_cast<uint64_t>(a.type));
  return w;
}

Writer node_message(const Node& n) {
  Writer w;
  for (const auto& i : n.inputs) w.bytes(1, i);
  for (const auto& o : n.outputs) w.bytes(2, o);
  w.bytes(3, n.name);
  w.bytes(4, n.op_type);
  for (const auto& a : n.attributes) w.message(5, attribute_message(a));
  if (!n.domain.empty()) w.bytes(7, n.domain);
  return w;
}

Writer value_info_message(const ValueInfo& v) {
  Writer shape;
  for (std::size_t i = 0; i < v.dims.size(); ++i) {
    Writer dim;
    if (v.dims[i] >= 0)
      dim.int64(1, v.dims[i]);
    else
      dim.bytes(2, i < v.dim_params.size() ? v.dim_params[i] : std::string("?"));
    shape.message(1, dim);
  }
  Writer tensor_type;
  tensor_type.varint(1, static_cast<uint64_t>(v.elem_type));
  tensor_type.message(2, shape);
  Writer type;
  type.message(1, tensor_type);
  Writer w;
  w.bytes(1, v.name);
  w.message(2, type);
  return w;
}

// ---- decoding ----

void read_int64s(Reader& r, uint32_t wire, std::vector<int64_t>& out) {
  if (wire == proto::kLengthDelimited) {
    Reader packed = r.sub();
    while (!packed.done()) out.push_back(static_cast<int64_t>(packed.varint()));
  } else if (wire == proto::kVarint) {
    out.push_back(static_cast<int64_t>(r.varint()));
  } else {
    r.fail("an integer list has wire type " + std::to_string(wire));
  }
}

void read_floats(Reader& r, uint32_t wire, std::vector<float>& out) {
  if (wire == proto::kLengthDelimited) {
    Reader packed = r.sub();
    if (packed.rest().size() % 4) packed.fail("a packed float list is not a multiple of 4 bytes");
    while (!packed.done()) out.push_back(packed.f32());
  } else if (wire == proto::kFixed32) {
    out.push_back(r.f32());
  } else {
    r.fail("a float list has wire type " + std::to_string(wire));
  }
}

// Bytes per element of raw_data for a decodable type (0 for any other).
std::size_t element_size(int32_t type) {
  switch (type) {
    case kUint8: case kInt8: case kBool: return 1;
    case kUint16: case kInt16: case kFloat16: case kBfloat16: return 2;
    case kFloat: case kInt32: case kUint32: return 4;
    case kInt64: case kUint64: case kDouble: return 8;
    default: return 0;
  }
}

float half_to_float(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0) magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  else if (exponent == 31) magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  uint32_t bits;
  std::memcpy(&bits, &magnitude, 4);
  bits |= sign;
  std::memcpy(&magnitude, &bits, 4);
  return magnitude;
}

float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element i of little-endian raw data as an unsigned integer of `size` bytes.
uint64_t raw_element(std::string_view raw, std::size_t i, std::size_t size) {
  uint64_t v = 0;
  for (std::size_t b = 0; b < size; ++b) v |= static_cast<uint64_t>(static_cast<uint8_t>(raw[i * size + b])) << (8 * b);
  return v;
}

// One element's bits (as raw_data or int32_data/uint64_data hold them) as convoy's value.
void push_element(Tensor& t, uint64_t bits) {
  switch (t.data_type) {
    case kFloat: t.floats.push_back(bits_to_float(static_cast<uint32_t>(bits))); break;
    case kFloat16: t.floats.push_back(half_to_float(static_cast<uint32_t>(bits & 0xffffu))); break;
    case kBfloat16: t.floats.push_back(bits_to_float(static_cast<uint32_t>(bits & 0xffffu) << 16)); break;
    case kDouble: {
      double d;
      std::memcpy(&d, &bits, 8);
      t.floats.push_back(static_cast<float>(d));
      break;
    }
    case kBool: t.int64s.push_back((bits & 0xffu) != 0); break;
    case kUint8: t.int64s.push_back(static_cast<int64_t>(bits & 0xffu)); break;
    case kInt8: t.int64s.push_back(static_cast<int8_t>(bits & 0xffu)); break;
    case kUint16: t.int64s.push_back(static_cast<int64_t>(bits & 0xffffu)); break;
    case kInt16: t.int64s.push_back(static_cast<int16_t>(bits & 0xffffu)); break;
    case kInt32: t.int64s.push_back(static_cast<int32_t>(bits & 0xffffffffu)); break;
    case kUint32: t.int64s.push_back(static_cast<int64_t>(bits & 0xffffffffu)); break;
    case kInt64: t.int64s.push_back(static_cast<int64_t>(bits)); break;
    case kUint64:
      t.int64s.push_back(bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                                          : static_cast<int64_t>(bits));
      break;
    default: break;
  }
}

// A repeated integer field (int32_data, uint64_data), packed or not, as raw bits.
void read_varints(Reader& r, uint32_t wire, std::vector<uint64_t>& out) {
  if (wire == proto::kLengthDelimited) {
    Reader packed = r.sub();
    while (!packed.done()) out.push_back(packed.varint());
  } else if (wire == proto::kVarint) {
    out.push_back(r.varint());
  } else {
    r.fail("an integer list has wire type " + std::to_string(wire));
  }
}

// double_data, packed or not, as raw bits.
void read_doubles(Reader& r, uint32_t wire, std::vector<uint64_t>& out) {
  auto fixed64 = [](Reader& from) {
    const uint64_t low = from.fixed32();
    return low | static_cast<uint64_t>(from.fixed32()) << 32;
  };
  if (wire == proto::kLengthDelimited) {
    Reader packed = r.sub();
    if (packed.rest().size() % 8) packed.fail("a packed double list is not a multiple of 8 bytes");
    while (!packed.done()) out.push_back(fixed64(packed));
  } else if (wire == proto::kFixed64) {
    out.push_back(fixed64(r));
  } else {
    r.fail("a double list has wire type " + std::to_string(wire));
  }
}

// Every decodable type is read with its own element width, from raw_data or
// from the typed field onnx.proto stores it in (float_data for FLOAT;
// int32_data for the narrow integers, BOOL, FLOAT16 and BFLOAT16 bits;
// int64_data for INT64; double_data for DOUBLE; uint64_data for UINT32 and UINT64).
Tensor read_tensor(Reader r) {
  Tensor t;
  std::string_view raw;
  bool has_raw = false;
  std::vector<float> float_data;
  std::vector<int64_t> int64_data;
  std::vector<uint64_t> other_data;  // int32_data, double_data, uint64_data: the type's field, as bits
  while (!r.done()) {
    uint32_t f, w;
    r.tag(f, w);
    if (f == 1) read_int64s(r, w, t.dims);
    else if (f == 2 && w == proto::kVarint) t.data_type = static_cast<int32_t>(r.varint());
    else if (f == 4) read_floats(r, w, float_data);
    else if (f == 5 || f == 11) read_varints(r, w, other_data);
    else if (f == 7) read_int64s(r, w, int64_data);
    else if (f == 10) read_doubles(r, w, other_data);
    else if (f == 8 && w == proto::kLengthDelimited) t.name = std::string(r.sub().rest());
    else if (f == 9 && w == proto::kLengthDelimited) raw = r.sub().rest(), has_raw = true;
    else if (f == 14 && w == proto::kVarint) {
      if (r.varint() != 0) r.fail("tensor '" + t.name + "' keeps its data in an external file, which convoy does not read");
    } else r.skip(f, w);
  }
  const std::size_t size = element_size(t.data_type);
  if (size == 0) return t;  // a type convoy does not read: no values; the importer names it where it is used
  if (has_raw) {
    if (raw.size() % size)
      r.fail("tensor '" + t.name + "' has " + std::to_string(raw.size()) + " raw bytes, not a whole number of " +
             data_type_name(t.data_type) + " elements of " + std::to_string(size) + " bytes");
    const std::size_t count = raw.size() / size;
    (is_floating(t.data_type) ? t.floats.reserve(count) : t.int64s.reserve(count));
    for (std::size_t i = 0; i < count; ++i) push_element(t, raw_element(raw, i, size));
  } else if (t.data_type == kFloat) {
    t.floats = std::move(float_data);
  } else if (t.data_type == kInt64) {
    t.int64s = std::move(int64_data);
  } else {
    for (uint64_t bits : other_data) push_element(t, bits);
  }
  return t;
}

Attribute read_attribute(Reader r) {
  Attribute a;
  while (!r.done()) {
    uint32_t f, w;
    r.tag(f, w);
    if (f == 1 && w == proto::kLengthDelimited) a.name = std::string(r.sub().rest());
    else if (f == 2 && w == proto::kFixed32) a.f = r.f32();
    else if (f == 3 && w == proto::kVarint) a.i = static_cast<int64_t>(r.varint());
    else if (f == 4 && w == proto::kLengthDelimited) a.s = std::string(r.sub().rest());
    else if (f == 5 && w == proto::kLengthDelimited) a.t = read_tensor(r.sub());
    else if (f == 7) read_floats(r, w, a.floats);
    else if (f == 8) read_int64s(r, w, a.ints);
    else if (f == 20 && w == proto::kVarint) a.type = static_cast<Attribute::Type>(r.varint());
    else r.skip(f, w);
  }
  return a;
}

Node read_node(Reader r) {
  Node n;
  while (!r.done()) {
    uint32_t f, w;
    r.tag(f, w);
    if (w != proto::kLengthDelimited || f < 1 || f > 7) {
      r.skip(f, w);
      continue;
    }
    Reader s = r.sub();
    switch (f) {
      case 1: n.inputs.emplace_back(s.rest()); break;
      case 2: n.outputs.emplace_back(s.rest()); break;
      case 3: n.name = std::string(s.rest()); break;
      case 4: n.op_type = std::string(s.rest()); break;
      case 5: n.attributes.push_back(read_attribute(s)); break;
      case 7: n.domain = std::string(s.rest()); break;
      default: break;
    }
  }
  return n;
}

ValueInfo read_value_info(Reader r) {
  ValueInfo v;
  while (!r.done()) {
    uint32_t f, w;
    r.tag(f, w);
    if (f == 1 && w == proto::kLengthDelimited) {
      v.name = std::string(r.sub().rest());
    } else if (f == 2 && w == proto::kLengthDelimited) {
      Reader type = r.sub();
      while (!type.done()) {
        uint32_t tf, tw;
        type.tag(tf, tw);
        if (tf != 1 || tw != proto::kLengthDelimited) {
          type.skip(tf, tw);
          continue;
        }
        Reader tensor = type.sub();
        while (!tensor.done()) {
          uint32_t ef, ew;
          tensor.tag(ef, ew);
          if (ef == 1 && ew == proto::kVarint) {
            v.elem_type = static_cast<int32_t>(tensor.varint());
          } else if (ef == 2 && ew == proto::kLengthDelimited) {
            Reader shape = tensor.sub();
            while (!shape.done()) {
              uint32_t sf, sw;
              shape.tag(sf, sw);
              if (sf != 1 || sw != proto::kLengthDelimited) {
                shape.skip(sf, sw);
                continue;
              }
              Reader dim = shape.sub();
              int64_t value = -1;
              std::string param;
              while (!dim.done()) {
                uint32_t df, dw;
                dim.tag(df, dw);
                if (df == 1 && dw == proto::kVarint) value = static_cast<int64_t>(dim.varint());
                else if (df == 2 && dw == proto::kLengthDelimited) param = std::string(dim.sub().rest());
                else dim.skip(df, dw);
              }
              v.dims.push_back(value);
              v.dim_params.push_back(param);
            }
          } else {
            tensor.skip(ef, ew);
          }
        }
      }
    } else {
      r.skip(f, w);
    }
  }
  return v;
}

Graph read_graph(Reader r) {
  Graph g;
  while (!r.done()) {
    uint32_t f, w;
    r.tag(f, w);
    if (w != proto::kLengthDelimited) {
      r.skip(f, w);
      continue;
    }
    switch (f) {
      case 1: g.nodes.push_back(read_node(r.sub())); break;
      case 2: g.name = std::string(r.sub().rest()); break;
      case 5: g.initializers.push_back(read_tensor(r.sub())); break;
      case 11: g.inputs.push_back(read_value_info(r.sub())); break;
      case 12: g.outputs.push_back(read_value_info(r.sub())); break;
      default: r.skip(f, w);
    }
  }
  return g;
}

}  // namespace

std::string data_type_name(int32_t type) {
  static constexpr const char* kNames[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                           "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                           "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                           "FLOAT8E5M2FNUZ", "UINT4", "INT4"};
  if (type >= 0 && type < static_cast<int32_t>(std::size(kNames))) return kNames[type];
  return "data type " + std::to_string(type);
}

bool is_floating(int32_t type) { return type == kFloat || type == kFloat16 || type == kBfloat16 || type == kDouble; }

bool is_integer(int32_t type) { return element_size(type) != 0 && !is_floating(type); }

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / d)) return -1;
    n *= d;
  }
  return n;
}

const Attribute* Node::find(const std::string& attribute) const {
  for (const auto& a : attributes)
    if (a.name == attribute) return &a;
  return nullptr;
}

std::string encode(const Model& model) {
  Writer graph;
  for (const auto& n : model.graph.nodes) graph.message(1, node_message(n));
  graph.bytes(2, model.graph.name);
  for (const auto& t : model.graph.initializers) graph.message(5, tensor_message(t));
  for (const auto& v : model.graph.inputs) graph.message(11, value_info_message(v));
  for (const auto& v : model.graph.outputs) graph.message(12, value_info_message(v));
  Writer opset;
  opset.bytes(1, "");  // the default domain, ai.onnx
  opset.int64(2, model.opset);
  Writer w;
  w.int64(1, model.ir_version);
  w.bytes(2, model.producer_name);
  if (!model.producer_version.empty()) w.bytes(3, model.producer_version);
  w.message(7, graph);
  w.message(8, opset);
  return w.take();
}

Tensor decode_tensor(std::string_view bytes, const std::string& where) {
  return read_tensor(Reader(bytes, where + ": malformed ONNX tensor"));
}

Model decode(std::string_view bytes, const std::string& where) {
  const std::string context = where + ": malformed ONNX model";
  Reader r(bytes, context);
  Model m;
  m.opset = 0;
  bool has_graph = false;
  while (!r.done()) {
    uint32_t f, w;
    r.tag(f, w);
    if (f == 1 && w == proto::kVarint) m.ir_version = static_cast<int64_t>(r.varint());
    else if (f == 2 && w == proto::kLengthDelimited) m.producer_name = std::string(r.sub().rest());
    else if (f == 3 && w == proto::kLengthDelimited) m.producer_version = std::string(r.sub().rest());
    else if (f == 7 && w == proto::kLengthDelimited) m.graph = read_graph(r.sub()), has_graph = true;
    else if (f == 8 && w == proto::kLengthDelimited) {
      Reader s = r.sub();
      std::string domain;
      int64_t version = 0;
      while (!s.done()) {
        uint32_t sf, sw;
        s.tag(sf, sw);
        if (sf == 1 && sw == proto::kLengthDelimited) domain = std::string(s.sub().rest());
        else if (sf == 2 && sw == proto::kVarint) version = static_cast<int64_t>(s.varint());
        else s.skip(sf, sw);
      }
      if (domain.empty() || domain == "ai.onnx") m.opset = version;
    } else r.skip(f, w);
  }
  require(has_graph, where + ": not an ONNX model (no graph)");
  return m;
}

}  // namespace convoy::io::onnx
