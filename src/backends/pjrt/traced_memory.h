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
// whose results are the values it left in memory (an argument no range
// holds any more is donated to a result of its type: updated in place); it
// is compiled once per distinct module text (a chunk of training steps is
// the same text every time) and run, and its results become the pieces' new
// buffers.
//
// Replicas (XLA's num_replicas): the trace is SPMD, one program every
// replica runs on its own device, and behind each buffer piece lies one
// buffer per replica (Copies). Most ranges hold the same values on every
// replica (parameters: uploaded to each, then updated alike); a range
// uploaded with upload_each holds each replica's own (its rows of a batch),
// and so do the values computed from it until an all-reduce joins them.
//
// Liveness: ranges marked scratch (the Program's arena: each layer's output
// and gradient) are dead after a trace marked drop_scratch() (a step reads
// them only after writing them), so such a trace exports only the other
// ranges and those keep() names, and XLA fuses through the layers. Reading a dead range
// is a bug, but for the one case the host needs them: when keep_scratch_if
// says so right after the run (the numerical guard flagged a fault), the
// trace runs once more, donating nothing, with its scratch exported.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/pjrt/hlo_builder.h"
#include "backends/pjrt/plugin.h"

namespace convoy::pjrt {

// Bytes per element of a StableHLO element type (f32, f64, i32, i64).
std::size_t elem_bytes(const std::string& elem);

// One buffer per replica, alike in length and type; replica r's on its device.
using Copies = std::vector<Buffer>;

class TracedMemory {
 public:
  // replicas: the devices every module runs on at once (the client must
  // have that many: else the one-line UserError too_few_devices).
  explicit TracedMemory(Client& client, int replicas = 1);
  ~TracedMemory();
  TracedMemory(const TracedMemory&) = delete;
  TracedMemory& operator=(const TracedMemory&) = delete;

  HloBuilder& builder() { return b_; }
  int replicas() const { return static_cast<int>(devices_.size()); }
  // The trace under way: values kept from an earlier one are stale.
  uint64_t trace() const { return trace_; }

  // [at, at + bytes) holds values no later trace reads before writing them.
  void scratch(const void* at, std::size_t bytes);
  // The trace under way leaves its scratch values dead (not exported) but
  // for the ranges keep() names (the model's output, which the host reads).
  void drop_scratch() { drop_scratch_ = true; }
  void keep(const void* at, std::size_t bytes);
  // Asked after such a trace ran (its results in memory): true keeps its
  // scratch values after all, by running it again (see above).
  void keep_scratch_if(std::function<bool()> wanted) { keep_scratch_if_ = std::move(wanted); }

  // `bytes` of address space, every byte of it zero elements of `elem`.
  void* reserve(std::size_t bytes, const std::string& elem);
  // [at, at + bytes) becomes zeros of `elem` (fields of a struct in one reservation).
  void define(const void* at, std::size_t bytes, const std::string& elem);

  // The range's value as `shape` (its element type is the memory's).
  Val read(const void* at, const Shape& shape);
  void write(const void* at, const Val& value);
  // Zeros over the range (no work: a piece of zeros).
  void zero(const void* at, std::size_t bytes);
  // `n` elements to every replica's device: from[r] to replica r, or from[0]
  // to each when there is one.
  std::shared_ptr<Copies> copies(const std::vector<const void*>& from, const std::string& elem, int64_t n);
  // Buffers the trace reads that live nowhere in memory (dropout's masks).
  Val argument(std::shared_ptr<Copies> buffers, int64_t length, const std::string& elem);

  // Host <-> device copies; each runs the trace first. upload: the same
  // values to every replica; upload_each: from[r] to replica r.
  void upload(void* at, const void* src, std::size_t bytes);
  void upload_each(void* at, const std::vector<const void*>& from, std::size_t bytes);
  // Replica 0's values (the ranges the host reads are the same everywhere).
  void download(void* dst, const void* at, std::size_t bytes);
  // Every replica's values of the range, one after the other.
  void download_each(void* dst, const void* at, std::size_t bytes);
  // download without running the trace: the range must hold no value of it.
  void download_now(void* dst, const void* at, std::size_t bytes, int replica = 0);
  // The trace as one module, run; memory holds buffers only afterwards.
  void run();
  // Distinct modules compiled so far (each text once).
  std::size_t compiled() const { return compiled_.size(); }
  // Arguments the last run donated to its results.
  std::size_t donated() const { return donated_; }
  // The text of the module run last (tests).
  const std::string& last_module() const { return *last_module_; }

 private:
  // dead: scratch a run did not export.
  enum class Kind { zero, buffer, traced, lost, dead };
  struct Piece {
    uintptr_t begin = 0, end = 0;  // bytes
    std::string elem;
    Kind kind = Kind::zero;
    std::shared_ptr<Copies> buffer;  // Kind::buffer: flat arrays of `length` elements
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
  // home: the address the buffer's first element lies at (0: in no range).
  Val argument_of(const std::shared_ptr<Copies>& buffer, int64_t length, const std::string& elem, uintptr_t home);
  bool in_scratch(const Piece& p) const;
  // Compiles `text` (once) and runs it on `in` (per replica); result i
  // becomes piece into[i]'s buffers.
  using Arguments = std::vector<std::vector<PJRT_Buffer*>>;
  void execute(const std::string& text, const Arguments& in, const std::vector<Piece*>& into);
  Arguments arguments_in(const std::vector<const Copies*>& buffers) const;
  void keep_scratch(const std::vector<Piece*>& dead, const std::vector<int>& donated);
  // For each argument, the result it is donated to (-1: none): a buffer no
  // piece reads after the run (the trace overwrote every range it backed)
  // goes to the result written over its home range, so XLA updates it in
  // place. `written`: the results' pieces.
  std::vector<int> donations(const std::vector<Piece*>& written) const;
  std::string module_text(const std::vector<Val>& results, const std::vector<int>& donated) const;
  void reset_trace();

  Client& client_;
  std::vector<int> devices_;  // replica r's device on the client
  HloBuilder b_;
  std::map<uintptr_t, Piece> pieces_;  // by begin
  struct Argument {
    std::shared_ptr<Copies> buffer;
    Val val;
    uintptr_t home = 0;
  };
  std::vector<Argument> args_;
  std::unordered_map<const Copies*, std::size_t> arg_index_;
  std::unordered_map<std::string, std::unique_ptr<Program>> compiled_;  // by module text
  const std::string* last_module_ = &kNoModule;
  static const std::string kNoModule;
  std::vector<std::pair<char*, std::size_t>> reserved_;
  uint64_t trace_ = 0;
  std::size_t donated_ = 0;
  std::vector<std::pair<uintptr_t, uintptr_t>> scratch_;  // [begin, end)
  bool drop_scratch_ = false;
  std::vector<std::pair<uintptr_t, uintptr_t>> kept_;  // [begin, end), this trace
  std::function<bool()> keep_scratch_if_;
  // Buffers the trace under way wrote over some range of (a run again would
  // read them stale unless donated: then their successors are read).
  std::unordered_set<const Copies*> overwritten_;
};

}  // namespace convoy::pjrt
