#pragma once
// The part of ONNX's protobuf schema (onnx.proto, IR version 7) convoy
// writes and reads, as plain structs, with an encoder and decoder over
// core/protobuf_wire.h. io/onnx.h turns models into these and back.
//
//   ModelProto  { ir_version 1; producer_name 2; producer_version 3; graph 7; opset_import 8 }
//   GraphProto  { node 1; name 2; initializer 5; input 11; output 12 }
//   NodeProto   { input 1; output 2; name 3; op_type 4; attribute 5; domain 7 }
//   AttributeProto { name 1; f 2; i 3; s 4; t 5; floats 7; ints 8; type 20 }
//   TensorProto { dims 1; data_type 2; float_data 4; int32_data 5; int64_data 7; name 8; raw_data 9;
//                 double_data 10; uint64_data 11; data_location 14 }
//   ValueInfoProto { name 1; type 2 } -> TypeProto { tensor_type 1 } -> { elem_type 1; shape 2 }
//     -> TensorShapeProto { dim 1 } -> Dimension { dim_value 1; dim_param 2 }
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace convoy::io::onnx {

// TensorProto.DataType, as onnx.proto numbers them.
enum DataType : int32_t {
  kUndefined = 0, kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7, kString = 8,
  kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13, kComplex64 = 14, kComplex128 = 15, kBfloat16 = 16
};
// ONNX's name of a data type ("FLOAT", "UINT8", ...; "data type 99" for one it does not define).
std::string data_type_name(int32_t type);
// The types decoded into Tensor::floats (FLOAT, FLOAT16, BFLOAT16, DOUBLE) and into
// Tensor::int64s (BOOL, the signed and unsigned integers); any other type
// (STRING, complex, 8- and 4-bit floats and integers) decodes to no values, and
// the importer refuses a tensor of it by its name.
bool is_floating(int32_t type);
bool is_integer(int32_t type);

struct Tensor {
  std::string name;
  int32_t data_type = kFloat;  // as the file gave it; the values are converted:
  std::vector<int64_t> dims;
  std::vector<float> floats;    // is_floating: each element as a float (doubles rounded)
  std::vector<int64_t> int64s;  // is_integer: each element as an int64 (UINT64 above 2^63-1 saturates)
  int64_t numel() const;  // -1 for a negative or overflowing size
};

struct Attribute {
  enum Type : int32_t { kFloatAttr = 1, kInt = 2, kString = 3, kTensor = 4, kFloats = 6, kInts = 7 };
  std::string name;
  Type type = kInt;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::optional<Tensor> t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
};

struct Node {
  std::string name, op_type, domain;
  std::vector<std::string> inputs, outputs;
  std::vector<Attribute> attributes;
  const Attribute* find(const std::string& attribute) const;  // nullptr when absent
};

// A graph input or output: float tensors with known sizes or named ones
// ("N" for a free batch size: dim -1 with that dim_param).
struct ValueInfo {
  std::string name;
  int32_t elem_type = kFloat;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_params;  // one per dim; non-empty where dims[i] is -1
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Tensor> initializers;
  std::vector<ValueInfo> inputs, outputs;
};

struct Model {
  int64_t ir_version = 7;
  std::string producer_name = "convoy", producer_version;
  int64_t opset = 13;  // of the default domain
  Graph graph;
};

// Tensors are written as FLOAT (is_floating types) or INT64 (is_integer types) raw data.
std::string encode(const Model& model);
// Throws UserError "<where>: malformed ONNX model: ... (at byte N)" on bad
// input; tensors stored outside the file (external data) are refused by name.
Model decode(std::string_view bytes, const std::string& where);
// One TensorProto on its own (the input_*.pb and output_*.pb files of ONNX's
// backend tests), with the same errors.
Tensor decode_tensor(std::string_view bytes, const std::string& where);

}  // namespace convoy::io::onnx
