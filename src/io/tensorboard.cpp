#include "convoy/io/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "convoy/core/error.h"

namespace convoy::io {
namespace {

std::array<uint32_t, 256> crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

// TFRecord stores CRCs "masked" so that CRCs of CRCs stay well distributed.
uint32_t masked_crc(const void* data, std::size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// Protocol buffer wire format, just what an Event with scalars needs.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void key(std::string& out, int field, int wire_type) { varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }
void bytes_field(std::string& out, int field, const std::string& v) {
  key(out, field, 2);
  varint(out, v.size());
  out += v;
}
template <class T> void fixed_field(std::string& out, int field, T v) {
  key(out, field, sizeof(T) == 8 ? 1 : 5);
  char raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));  // little-endian on every machine convoy builds for
  out.append(raw, sizeof(T));
}

std::string event(int64_t step, const std::string& body_field) {
  std::string e;
  const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  fixed_field(e, 1, wall);  // wall_time
  key(e, 2, 0);             // step
  varint(e, static_cast<uint64_t>(step));
  return e + body_field;
}

}  // namespace

uint32_t crc32c(const void* data, std::size_t size) {
  static const auto table = crc_table();
  uint32_t c = 0xffffffffu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

EventWriter::EventWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(now) + "." + host)).string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  require(static_cast<bool>(out_), path_ + ": cannot write TensorBoard events; check that the folder is writable");
  std::string version;
  bytes_field(version, 3, "brain.Event:2");  // file_version
  write_record(event(0, version));
}

void EventWriter::scalar(const std::string& tag, float value, int64_t step) {
  std::string v;  // Summary.Value { tag = 1; simple_value = 2 }
  bytes_field(v, 1, tag);
  fixed_field(v, 2, value);
  std::string summary;  // Summary { repeated Value value = 1 }
  bytes_field(summary, 1, v);
  std::string body;  // Event.summary = 5
  bytes_field(body, 5, summary);
  write_record(event(step, body));
}

void EventWriter::write_record(const std::string& payload) {
  const uint64_t len = payload.size();
  char header[12];
  std::memcpy(header, &len, 8);
  const uint32_t len_crc = masked_crc(header, 8);
  std::memcpy(header + 8, &len_crc, 4);
  const uint32_t data_crc = masked_crc(payload.data(), payload.size());
  out_.write(header, 12);
  out_.write(payload.data(), static_cast<std::streamsize>(payload.size()));
  out_.write(reinterpret_cast<const char*>(&data_crc), 4);
  require(static_cast<bool>(out_), path_ + ": cannot write TensorBoard events (disk full?)");
}

void EventWriter::flush() { out_.flush(); }

}  // namespace convoy::io
