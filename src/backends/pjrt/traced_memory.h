#pragma once
// The PJRT device's memory (pjrt_device.cpp), a lazy tracing one (the idea of
// PyTorch/XLA's tensors): device pointers are addresses the host reserves
// but never maps (PROT_NONE: a stray host read crashes at once), and behind
// every byte range lies a *piece*: zeros, a slice of a PJRT buffer on the
// device, or a StableHLO value of the trace under way.
//
// A kernel reads a range (the value written there, a slice of it, or the
// pieces it spans joined) and writes one (the value replaces whatever
// overlapped it: the graph plan reuses memory). Nothing runs until run():
// the trace becomes one module whose arguments are the buffers it read and
// whose results are the values it left in memory; it is compiled once per
// distinct module text (a chunk of training steps is the same text every
// time) and run, and its results become the pieces' new buffers.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/pjrt/hlo_builder.h"
#include "backends/pjrt/plugin.h"

namespace convoy::pjrt {

// Bytes per element of a StableHLO element type (f32, f64, i32, i64).
std::size_t elem_bytes(const std::string& elem);

class TracedMemory {
 public:
  explicit TracedMemory(Client& client) : client_(client) {}
  ~TracedMemory();
  TracedMemory(const TracedMemory&) = delete;
  TracedMemory& operator=(const TracedMemory&) = delete;

  HloBuilder& builder() { return b_; }
  Client& client() { return client_; }
  // The trace under way: values kept from an earlier one are stale.
  uint64_t trace() const { return trace_; }

  // `bytes` of address space, every byte of it zero elements of `elem`.
  void* reserve(std::size_t bytes, const std::string& elem);
  // [at, at + bytes) becomes zeros of `elem` (fields of a struct in one reservation).
  void define(const void* at, std::size_t bytes, const std::string& elem);

  // The range's value as `shape` (its element type is the memory's).
  Val read(const void* at, const Shape& shape);
  void write(const void* at, const Val& value);
  // Zeros over the range (no work: a piece of zeros).
  void zero(const void* at, std::size_t bytes);
  // A buffer the trace reads that lives nowhere in memory (dropout's masks).
  Val argument(std::shared_ptr<Buffer> buffer, int64_t length, const std::string& elem);

  // Host <-> device copies; both run the trace first.
  void upload(void* at, const void* src, std::size_t bytes);
  void download(void* dst, const void* at, std::size_t bytes);
  // The same without running the trace: the range must hold no value of it.
  void download_now(void* dst, const void* at, std::size_t bytes);
  // The trace as one module, run; memory holds buffers only afterwards.
  void run();
  // Distinct modules compiled so far (each text once).
  std::size_t compiled() const { return compiled_.size(); }

 private:
  enum class Kind { zero, buffer, traced, lost };
  struct Piece {
    uintptr_t begin = 0, end = 0;  // bytes
    std::string elem;
    Kind kind = Kind::zero;
    std::shared_ptr<Buffer> buffer;  // Kind::buffer: a flat array of `length` elements
    int64_t length = 0;
    Val value;                       // Kind::traced: any shape, read flat
    int64_t offset = 0;              // this piece's first element in its buffer or value
    int64_t count() const { return static_cast<int64_t>((end - begin) / elem_bytes(elem)); }
  };
  // The pieces overlapping [b, e), cut to it, in address order; throws when
  // some byte of it lies in no piece.
  std::vector<Piece> overlap(uintptr_t b, uintptr_t e) const;
  // Puts `p` in, cutting away whatever it overlaps.
  void put(Piece p);
  Val flat(const Piece& p);  // the piece's elements as a 1-D value of the trace
  Val argument_of(const std::shared_ptr<Buffer>& buffer, int64_t length, const std::string& elem);
  std::string module_text(const std::vector<Val>& results) const;
  void reset_trace();

  Client& client_;
  HloBuilder b_;
  std::map<uintptr_t, Piece> pieces_;  // by begin
  struct Argument {
    std::shared_ptr<Buffer> buffer;
    Val val;
  };
  std::vector<Argument> args_;
  std::unordered_map<const Buffer*, std::size_t> arg_index_;
  std::unordered_map<std::string, std::unique_ptr<Program>> compiled_;  // by module text
  std::vector<std::pair<char*, std::size_t>> reserved_;
  uint64_t trace_ = 0;
};

}  // namespace convoy::pjrt
