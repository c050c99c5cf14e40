#pragma once
// Small file helpers for the TFRecord, CSV and manifest tests.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "convoy/records/tfrecord.h"

namespace convoy::records::testing {

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_records(const std::string& path, const std::vector<std::string>& records,
                          Compression compression = Compression::none) {
  TfRecordWriter w(path, compression);
  for (const std::string& r : records) w.write(r);
  w.close();
}

inline std::vector<std::string> read_records(const std::string& path, Compression compression = Compression::detect) {
  TfRecordReader r(path, compression);
  std::vector<std::string> out;
  for (std::string data; r.next(data);) out.push_back(data);
  return out;
}

// n bytes of a repeatable pattern that differs with `seed`.
inline std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

}  // namespace convoy::records::testing
