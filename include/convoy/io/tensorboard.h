#pragma once
// TensorBoard event files: TFRecord-framed `Event` protocol buffers with
// scalar summaries, which TensorBoard's own reader loads. Written by hand
// (varints and CRC-32C) so convoy needs no protobuf library.
#include <cstdint>
#include <fstream>
#include <string>

namespace convoy::io {

class EventWriter {
 public:
  // Creates `dir` if needed and a new events.out.tfevents.<time>.<host> file in it.
  explicit EventWriter(const std::string& dir);
  void scalar(const std::string& tag, float value, int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  std::string path_;
  std::ofstream out_;
};

// CRC-32C (Castagnoli), as TFRecord frames use it; exposed for tests.
uint32_t crc32c(const void* data, std::size_t size);

}  // namespace convoy::io
