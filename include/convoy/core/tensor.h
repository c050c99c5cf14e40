#pragma once
// Host tensors: a dtype, a shape and shared, 64-byte-aligned storage. Used at
// the library's edges (datasets, parameters, fixtures); backends keep their
// own layouts internally and copy in and out of these.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace convoy {

enum class DType { f32, i32, u8 };

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);

// The most values a tensor may hold per example (2^31: 8 GiB of floats), and
// the largest kernel, stride or pad: far beyond what trains on one machine,
// small enough that no shape, window or size arithmetic can overflow. Models
// (nn::Model) and ONNX imports are refused past it.
inline constexpr int64_t kMaxValuesPerExample = int64_t{1} << 31;
// numel(s), or -1 when a dimension is negative or the count would pass
// kMaxValuesPerExample (checked before each multiplication, so it never overflows).
int64_t bounded_numel(const Shape& s);
std::string to_string(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i); }
  int64_t numel() const { return convoy::numel(shape_); }
  std::size_t nbytes() const { return numel() * dtype_size(dtype_); }
  bool empty() const { return storage_ == nullptr; }
  // Whether another Tensor holds this one's storage (copies share it).
  bool storage_shared() const { return storage_.use_count() > 1; }

  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }

  // Typed views; check that T matches the dtype.
  template <typename T> std::span<T> data();
  template <typename T> std::span<const T> data() const;

 private:
  void check_dtype(DType want) const;
  DType dtype_ = DType::f32;
  Shape shape_;
  std::shared_ptr<std::byte[]> storage_;
};

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }

template <typename T> std::span<T> Tensor::data() {
  check_dtype(dtype_of<T>());
  return {reinterpret_cast<T*>(storage_.get()), static_cast<std::size_t>(numel())};
}
template <typename T> std::span<const T> Tensor::data() const {
  check_dtype(dtype_of<T>());
  return {reinterpret_cast<const T*>(storage_.get()), static_cast<std::size_t>(numel())};
}

// 64-byte-aligned, zero-filled float buffer that owns its memory: the one
// allocation behind a memory arena, a parameter block or a gradient block.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t floats);
  float* data() { return ptr_.get(); }
  const float* data() const { return ptr_.get(); }
  std::size_t size() const { return size_; }
  std::span<float> span() { return {data(), size_}; }
  std::span<const float> span() const { return {data(), size_}; }

 private:
  struct Free { void operator()(float* p) const; };
  std::unique_ptr<float[], Free> ptr_;
  std::size_t size_ = 0;
};

}  // namespace convoy
