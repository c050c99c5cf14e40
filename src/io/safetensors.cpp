#include "convoy/io/safetensors.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "convoy/core/error.h"
#include "convoy/io/atomic_file.h"

namespace convoy::io {
namespace {

// safetensors spells convoy's dtype names in capitals: f32 -> F32.
std::string dtype_tag(DType t) {
  std::string tag = dtype_name(t);
  for (char& ch : tag) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return tag;
}

DType parse_dtype(const std::string& tag, const std::string& where) {
  for (DType t : {DType::f32, DType::i32, DType::u8})
    if (tag == dtype_tag(t)) return t;
  throw UserError(where + ": dtype " + tag + " is not supported (F32, I32, U8)");
}

}  // namespace

NamedTensors read_safetensors(const std::string& path, Metadata* metadata,
                              const std::function<bool(const std::string&)>& skip) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open; check the path");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) throw UserError(path + ": truncated safetensors file (no header)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_len > bytes.size() - 8) throw UserError(path + ": truncated safetensors file (header past the end)");
  const std::size_t data_start = 8 + header_len;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + static_cast<std::ptrdiff_t>(data_start));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": bad safetensors header (" + e.what() + ")");
  }
  NamedTensors out;
  try {
    for (auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (metadata) *metadata = entry.get<Metadata>();
        continue;
      }
      if (skip && skip(name)) continue;
      const std::string where = path + ": tensor '" + name + "'";
      Tensor t(parse_dtype(entry.at("dtype").get<std::string>(), where), entry.at("shape").get<Shape>());
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] - offsets[0] != t.nbytes() ||
          offsets[1] > bytes.size() - data_start)
        throw UserError(where + ": data_offsets do not match its shape or the file size; the file is corrupt");
      std::memcpy(t.raw(), bytes.data() + data_start + offsets[0], t.nbytes());
      out.emplace(name, std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": bad safetensors header entry (" + e.what() + ")");
  }
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  nlohmann::json header = nlohmann::json::object();
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
  file += head;
  for (const auto& [name, t] : tensors) file.append(static_cast<const char*>(t.raw()), t.nbytes());
  write_file_atomic(path, file);
}

}  // namespace convoy::io
