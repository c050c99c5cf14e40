#pragma once
// CRC-32C (Castagnoli), the checksum TFRecord files carry, and TFRecord's
// "masked" form of it. Uses the CPU's crc32 instruction (SSE4.2) when the
// build targets it, a table otherwise; both give the same values.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace convoy::records {

// CRC-32C of `size` bytes, continuing from `crc` (0 to start).
uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t size);
inline uint32_t crc32c(std::string_view bytes) { return crc32c_extend(0, bytes.data(), bytes.size()); }

// The table implementation alone, so tests can check the fast path against it.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, std::size_t size);

// TFRecord stores CRCs masked (rotated and offset), because a CRC of data that
// itself embeds CRCs is weak.
constexpr uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
constexpr uint32_t unmask_crc(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}
inline uint32_t masked_crc32c(std::string_view bytes) { return mask_crc(crc32c(bytes)); }

}  // namespace convoy::records
