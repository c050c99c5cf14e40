#include "convoy/core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace convoy {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::i32: return 4;
    case DType::u8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
  }
  return "?";
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

int64_t bounded_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0 || (d > 0 && n > kMaxValuesPerExample / d)) return -1;
    n *= d;
  }
  return n;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

static void* aligned_zeroed(std::size_t bytes) {
  std::size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension in " + to_string(shape_));
  auto* p = static_cast<std::byte*>(aligned_zeroed(nbytes()));
  storage_ = std::shared_ptr<std::byte[]>(p, [](std::byte* q) { std::free(q); });
}

void Tensor::check_dtype(DType want) const {
  if (want != dtype_)
    throw std::logic_error(std::string("Tensor holds ") + dtype_name(dtype_) + ", accessed as " +
                           dtype_name(want));
}

AlignedBuffer::AlignedBuffer(std::size_t floats)
    : ptr_(static_cast<float*>(aligned_zeroed(floats * sizeof(float)))), size_(floats) {}

void AlignedBuffer::Free::operator()(float* p) const { std::free(p); }

}  // namespace convoy
