#pragma once
// IDX files (the MNIST family's format), raw or gzip-compressed: a 4-byte
// magic (0, 0, type, rank), rank big-endian uint32 dimensions, then the data.
#include <string>

#include "convoy/core/tensor.h"

namespace convoy::data {

// Reads an unsigned-byte IDX file (type 0x08), compressed or not. Throws
// UserError naming the file when it is missing, not IDX, or truncated.
Tensor read_idx_u8(const std::string& path);

}  // namespace convoy::data
