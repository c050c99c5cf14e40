#include "convoy/io/safetensors.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/io/atomic_file.h"

namespace convoy::io {
namespace {

using nlohmann::json;

// safetensors spells convoy's dtype names in capitals: f32 -> F32.
std::string dtype_tag(DType t) {
  std::string tag = dtype_name(t);
  for (char& ch : tag) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return tag;
}

DType parse_dtype(const json& tag, const std::string& where) {
  if (tag.is_string())
    for (DType t : {DType::f32, DType::i32, DType::u8})
      if (tag.get<std::string>() == dtype_tag(t)) return t;
  throw UserError(where + ": dtype " + shown_json(tag) +
                  " is not supported (F32, I32, U8)");
}

// A shape whose bytes fit in `available` (shape_bytes_within): checked
// before anything is allocated, so a header cannot make us reserve more than
// the file holds, nor a later product of the sizes overflow.
Shape parse_shape(const json& j, DType dtype, uint64_t available, const std::string& where) {
  require(j.is_array(), where + ": shape must be a list of sizes; the file is corrupt");
  Shape shape;
  for (const json& d : j) {
    require(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
            where + ": shape " + shown_json(j) +
                " has a size that is not a whole number >= 0; the file is corrupt");
    shape.push_back(d.get<int64_t>());
    require(shape_bytes_within(shape, dtype_size(dtype), available).has_value(),
            where + ": shape " + shown_json(j) + " needs more data than the file holds; the file is truncated or corrupt");
  }
  return shape;
}

uint64_t parse_offset(const json& j, const std::string& where) {
  require(j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0),
          where + ": data_offsets must be two whole numbers >= 0; the file is corrupt");
  return j.get<uint64_t>();
}

// The tensors' data_offsets, sorted, must tile the data section: each begins
// where the one before ends, the first at 0, the last at its end (what the
// reference safetensors reader requires). Without it, overlapping tensors
// let a file of N bytes claim ~N^2/100 bytes of tensors (2 MB -> ~20 GB).
// Skipped tensors take part: their bytes are in the file all the same.
void require_tiled(const json& header, uint64_t data_bytes, const std::string& where) {
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string tensor = where + ": tensor '" + shown(name) + "'";
    require(entry.is_object() && entry.contains("data_offsets"),
            tensor + ": not a {dtype, shape, data_offsets} entry; the file is corrupt");
    const json& offsets = entry.at("data_offsets");
    require(offsets.is_array() && offsets.size() == 2, tensor + ": data_offsets must be [begin, end]; the file is corrupt");
    const uint64_t begin = parse_offset(offsets[0], tensor), end = parse_offset(offsets[1], tensor);
    require(begin <= end, tensor + ": data_offsets end before they begin; the file is corrupt");
    spans.push_back({begin, end, name});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t next = 0;
  for (const Span& s : spans) {
    require(s.begin == next, where + ": tensor '" + shown(s.name) + "': data_offsets [" + std::to_string(s.begin) +
                                 ", " + std::to_string(s.end) + "] " +
                                 (s.begin < next ? "overlap another tensor's" : "leave a gap after the previous tensor") +
                                 "; the file is corrupt");
    next = s.end;
  }
  require(next == data_bytes, where + ": its tensors' data_offsets end at byte " + std::to_string(next) +
                                  " of a data section of " + std::to_string(data_bytes) +
                                  " bytes; the file is truncated or corrupt");
}

}  // namespace

NamedTensors parse_safetensors(std::string_view bytes, const std::string& where, Metadata* metadata,
                               const SkipTensor& skip) {
  if (bytes.empty()) throw UserError(where + ": empty file, not a safetensors file");
  if (bytes.size() < 8) throw UserError(where + ": truncated safetensors file (no header)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_len > bytes.size() - 8)
    throw UserError(where + ": not a safetensors file, or truncated (its header length " + std::to_string(header_len) +
                    " is past the end of the file)");
  const std::size_t data_start = 8 + header_len;
  const uint64_t data_bytes = bytes.size() - data_start;
  const json header = parse_json_bounded(bytes.substr(8, header_len), where + ": bad safetensors header");
  require(header.is_object(), where + ": bad safetensors header (not a JSON object)");
  NamedTensors out;
  try {
    require_tiled(header, data_bytes, where);
    for (auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (metadata) *metadata = entry.get<Metadata>();
        continue;
      }
      if (skip && skip(name)) continue;
      const std::string tensor = where + ": tensor '" + name + "'";
      require(entry.is_object(), tensor + ": not a {dtype, shape, data_offsets} entry; the file is corrupt");
      const DType dtype = parse_dtype(entry.at("dtype"), tensor);
      const Shape shape = parse_shape(entry.at("shape"), dtype, data_bytes, tensor);
      const json& offsets = entry.at("data_offsets");
      require(offsets.is_array() && offsets.size() == 2, tensor + ": data_offsets must be [begin, end]; the file is corrupt");
      const uint64_t begin = parse_offset(offsets[0], tensor), end = parse_offset(offsets[1], tensor);
      Tensor t(dtype, shape);
      if (end < begin || end - begin != t.nbytes() || end > data_bytes)
        throw UserError(tensor + ": data_offsets do not match its shape or the file size; the file is corrupt");
      if (t.nbytes()) std::memcpy(t.raw(), bytes.data() + data_start + begin, t.nbytes());
      out.emplace(name, std::move(t));
    }
  } catch (const json::exception& e) {
    throw UserError(where + ": bad safetensors header entry (" + e.what() + ")");
  }
  return out;
}

NamedTensors read_safetensors(const std::string& path, Metadata* metadata, const SkipTensor& skip) {
  return parse_safetensors(read_file_bounded(path, kMaxModelBytes, "safetensors file"), path, metadata, skip);
}

std::string safetensors_bytes(const NamedTensors& tensors, const Metadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", dtype_tag(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string head = header.dump();
  head.append((8 - head.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((head.size() >> (8 * i)) & 0xff);
  file.reserve(file.size() + head.size() + offset);
  file += head;
  for (const auto& [name, t] : tensors)
    if (t.nbytes()) file.append(static_cast<const char*>(t.raw()), t.nbytes());
  return file;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

}  // namespace convoy::io
