// The PJRT device's traced memory: see traced_memory.h.
#include "backends/pjrt/traced_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

#include "convoy/core/error.h"

namespace convoy::pjrt {

std::size_t elem_bytes(const std::string& elem) {
  if (elem == "f32" || elem == "i32") return 4;
  if (elem == "f64" || elem == "i64") return 8;
  throw std::logic_error("pjrt device memory: no element type " + elem);
}

const std::string TracedMemory::kNoModule;

// One replica runs on the client's first device. Several run where XLA
// places them: a module that does nothing, compiled for that many, says
// where (every buffer must live on its replica's device before any run).
TracedMemory::TracedMemory(Client& client, int replicas) : client_(client), devices_{0} {
  if (replicas <= 1) return;
  const std::string f32 = "tensor<f32>";
  devices_ = client_
                 .compile("module @convoy_placement attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = " +
                              std::to_string(replicas) + " : i32} {\n  func.func public @main(%arg0: " + f32 +
                              ") -> " + f32 + " {\n    func.return %arg0 : " + f32 + "\n  }\n}\n",
                          replicas)
                 ->devices();
}

TracedMemory::~TracedMemory() {
  args_.clear();
  pieces_.clear();
  compiled_.clear();
  for (auto [at, bytes] : reserved_) ::munmap(at, bytes);
}

void* TracedMemory::reserve(std::size_t bytes, const std::string& elem) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t size = (bytes + page - 1) / page * page + page;  // never empty: every region has its own address
  void* at = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (at == MAP_FAILED) throw std::bad_alloc();
  reserved_.emplace_back(static_cast<char*>(at), size);
  define(at, bytes, elem);
  return at;
}

void TracedMemory::define(const void* at, std::size_t bytes, const std::string& elem) {
  if (bytes == 0) return;
  const auto b = reinterpret_cast<uintptr_t>(at);
  for (auto it = pieces_.lower_bound(b); it != pieces_.end() && it->first < b + bytes;) it = pieces_.erase(it);
  pieces_[b] = {.begin = b, .end = b + bytes, .elem = elem};
}

std::vector<TracedMemory::Piece> TracedMemory::overlap(uintptr_t b, uintptr_t e) const {
  std::vector<Piece> out;
  auto it = pieces_.upper_bound(b);
  if (it != pieces_.begin()) --it;
  uintptr_t covered = b;
  for (; it != pieces_.end() && it->second.begin < e; ++it) {
    const Piece& p = it->second;
    if (p.end <= b) continue;
    if (p.begin > covered) break;
    Piece cut = p;
    cut.begin = std::max(p.begin, b);
    cut.end = std::min(p.end, e);
    cut.offset = p.offset + static_cast<int64_t>((cut.begin - p.begin) / elem_bytes(p.elem));
    covered = cut.end;
    out.push_back(std::move(cut));
  }
  if (covered < e || b == e)
    throw std::logic_error("pjrt device memory: " + std::to_string(e - b) + " bytes at " + std::to_string(b) +
                           " lie outside every region");
  return out;
}

void TracedMemory::put(Piece p) {
  std::vector<Piece> keep;
  auto it = pieces_.upper_bound(p.begin);
  if (it != pieces_.begin()) --it;
  while (it != pieces_.end() && it->second.begin < p.end) {
    const Piece& q = it->second;
    if (q.end <= p.begin) {
      ++it;
      continue;
    }
    if (p.kind == Kind::traced && q.kind == Kind::buffer) overwritten_.insert(q.buffer.get());
    if (q.begin < p.begin) {  // the part before p stays
      Piece left = q;
      left.end = p.begin;
      keep.push_back(std::move(left));
    }
    if (q.end > p.end) {  // ... and the part after it
      Piece right = q;
      right.begin = p.end;
      right.offset = q.offset + static_cast<int64_t>((p.end - q.begin) / elem_bytes(q.elem));
      keep.push_back(std::move(right));
    }
    it = pieces_.erase(it);
  }
  for (Piece& k : keep) pieces_[k.begin] = std::move(k);
  pieces_[p.begin] = std::move(p);
}

Val TracedMemory::argument_of(const std::shared_ptr<Copies>& buffer, int64_t length, const std::string& elem,
                              uintptr_t home) {
  if (auto it = arg_index_.find(buffer.get()); it != arg_index_.end()) return args_[it->second].val;
  Val v{"%arg" + std::to_string(args_.size()), {length}, elem};
  arg_index_[buffer.get()] = args_.size();
  args_.push_back({buffer, v, home});
  return v;
}

Val TracedMemory::argument(std::shared_ptr<Copies> buffers, int64_t length, const std::string& elem) {
  return argument_of(buffers, length, elem, 0);
}

std::shared_ptr<Copies> TracedMemory::copies(const std::vector<const void*>& from, const std::string& elem, int64_t n) {
  if (from.size() != 1 && from.size() != devices_.size())
    throw std::logic_error("pjrt device memory: values for " + std::to_string(from.size()) + " of " +
                           std::to_string(devices_.size()) + " replicas");
  auto out = std::make_shared<Copies>();
  for (std::size_t r = 0; r < devices_.size(); ++r)
    out->push_back(client_.upload(from[from.size() == 1 ? 0 : r], elem, std::span<const int64_t>(&n, 1), devices_[r]));
  return out;
}

void TracedMemory::scratch(const void* at, std::size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(at);
  if (bytes) scratch_.emplace_back(b, b + bytes);
}

void TracedMemory::keep(const void* at, std::size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(at);
  if (bytes) kept_.emplace_back(b, b + bytes);
}

bool TracedMemory::in_scratch(const Piece& p) const {
  for (auto [b, e] : kept_)
    if (p.begin < e && p.end > b) return false;
  for (auto [b, e] : scratch_)
    if (p.begin >= b && p.end <= e) return true;
  return false;
}

Val TracedMemory::flat(const Piece& p) {
  Val whole;
  int64_t length = 0;
  switch (p.kind) {
    case Kind::zero: return b_.constant(0, {p.count()}, p.elem);
    case Kind::lost: throw std::logic_error("pjrt device memory: read of values an earlier failed execution lost");
    case Kind::dead: throw std::logic_error("pjrt device memory: read of a training step's scratch values, not kept");
    case Kind::buffer:
      whole = argument_of(p.buffer, p.length, p.elem,
                          p.begin - static_cast<uintptr_t>(p.offset) * elem_bytes(p.elem));
      length = p.length;
      break;
    case Kind::traced:
      length = numel(p.value.shape);
      whole = p.value.shape == Shape{length} ? p.value : b_.reshape(p.value, {length});
      break;
  }
  if (p.offset == 0 && p.count() == length) return whole;
  return b_.slice(whole, {p.offset}, {p.offset + p.count()});
}

Val TracedMemory::read(const void* at, const Shape& shape) {
  const auto b = reinterpret_cast<uintptr_t>(at);
  const std::vector<Piece> parts = overlap(b, b + 1);  // the element type
  const std::size_t bytes = static_cast<std::size_t>(numel(shape)) * elem_bytes(parts[0].elem);
  std::vector<Val> vals;
  for (const Piece& p : overlap(b, b + bytes)) {
    if (p.kind == Kind::zero) {
      // Zeros become a buffer of zeros: a module reads its arguments the
      // same way whatever they hold, so its text stays the same.
      std::vector<char> zeros(p.end - p.begin, 0);
      Piece z = p;
      z.kind = Kind::buffer;
      const int64_t n = p.count();
      z.buffer = copies({zeros.data()}, p.elem, n);
      z.length = n;
      z.offset = 0;
      put(z);
      vals.push_back(flat(z));
      continue;
    }
    vals.push_back(flat(p));
  }
  Val v = vals.size() == 1 ? vals[0] : b_.concatenate(vals, 0);
  return v.shape == shape ? v : b_.reshape(v, shape);
}

void TracedMemory::write(const void* at, const Val& value) {
  const auto b = reinterpret_cast<uintptr_t>(at);
  const std::size_t bytes = static_cast<std::size_t>(numel(value.shape)) * elem_bytes(value.elem);
  for (const Piece& p : overlap(b, b + bytes))
    if (p.elem != value.elem)
      throw std::logic_error("pjrt device memory: a " + value.elem + " value written over " + p.elem + " elements");
  put({.begin = b, .end = b + bytes, .elem = value.elem, .kind = Kind::traced, .value = value});
}

void TracedMemory::zero(const void* at, std::size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(at);
  for (Piece p : overlap(b, b + bytes)) {
    p.kind = Kind::zero;
    p.buffer.reset();
    p.value = {};
    p.offset = 0;
    put(std::move(p));
  }
}

void TracedMemory::upload(void* at, const void* src, std::size_t bytes) { upload_each(at, {src}, bytes); }

void TracedMemory::upload_each(void* at, const std::vector<const void*>& from, std::size_t bytes) {
  if (bytes == 0) return;
  run();
  const auto b = reinterpret_cast<uintptr_t>(at);
  const std::string elem = overlap(b, b + 1)[0].elem;
  const int64_t n = static_cast<int64_t>(bytes / elem_bytes(elem));
  put({.begin = b, .end = b + bytes, .elem = elem, .kind = Kind::buffer, .buffer = copies(from, elem, n), .length = n});
}

void TracedMemory::download(void* dst, const void* at, std::size_t bytes) {
  run();
  download_now(dst, at, bytes);
}

void TracedMemory::download_each(void* dst, const void* at, std::size_t bytes) {
  run();
  for (int r = 0; r < replicas(); ++r) download_now(static_cast<char*>(dst) + r * bytes, at, bytes, r);
}

void TracedMemory::download_now(void* dst, const void* at, std::size_t bytes, int replica) {
  if (bytes == 0) return;
  const auto b = reinterpret_cast<uintptr_t>(at);
  auto* out = static_cast<char*>(dst);
  std::vector<char> whole;
  for (const Piece& p : overlap(b, b + bytes)) {
    char* to = out + (p.begin - b);
    const std::size_t n = p.end - p.begin;
    if (p.kind == Kind::zero) {
      std::memset(to, 0, n);
      continue;
    }
    if (p.kind == Kind::lost)
      throw std::logic_error("pjrt device memory: read of values an earlier failed execution lost");
    if (p.kind == Kind::dead)
      throw std::logic_error("pjrt device memory: a host read of a training step's scratch values, not kept");
    if (p.kind != Kind::buffer) throw std::logic_error("pjrt device memory: a host read of a value still being traced");
    const std::size_t es = elem_bytes(p.elem);
    whole.resize(static_cast<std::size_t>(p.length) * es);
    client_.download(p.buffer->at(static_cast<std::size_t>(replica)), whole.data(), whole.size());
    std::memcpy(to, whole.data() + static_cast<std::size_t>(p.offset) * es, n);
  }
}

std::vector<int> TracedMemory::donations(const std::vector<Piece*>& written) const {
  std::unordered_map<uintptr_t, std::size_t> at;  // result by its range's start
  for (std::size_t j = 0; j < written.size(); ++j) at[written[j]->begin] = j;
  std::vector<int> to(args_.size(), -1);
  for (std::size_t i = 0; i < args_.size(); ++i) {
    const Argument& a = args_[i];
    // Only args_ holds it: no piece of memory reads it after this run.
    if (a.home == 0 || a.buffer.use_count() != 1) continue;
    const auto it = at.find(a.home);
    if (it == at.end()) continue;
    const Piece& p = *written[it->second];
    if (p.elem == a.val.elem && p.count() == a.val.shape.at(0)) to[i] = static_cast<int>(it->second);
  }
  return to;
}

std::string TracedMemory::module_text(const std::vector<Val>& results, const std::vector<int>& donated) const {
  std::string sig, names;
  for (std::size_t i = 0; i < args_.size(); ++i) {
    sig += (i ? ", " : "") + args_[i].val.name + ": " + args_[i].val.type();
    if (donated[i] >= 0) sig += " {tf.aliasing_output = " + std::to_string(donated[i]) + " : i32}";
  }
  for (std::size_t i = 0; i < results.size(); ++i) names += (i ? ", " : "") + results[i].name;
  return "module @convoy_trace attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = " +
         std::to_string(devices_.size()) + " : i32} {\n"
         "  func.func public @main(" + sig + ") -> (" + type_list(results) + ") {\n" + b_.body() +
         "    func.return " + names + " : " + type_list(results) + "\n  }\n}\n";
}

void TracedMemory::reset_trace() {
  b_.clear();
  args_.clear();
  arg_index_.clear();
  overwritten_.clear();
  drop_scratch_ = false;
  kept_.clear();
  ++trace_;
}

TracedMemory::Arguments TracedMemory::arguments_in(const std::vector<const Copies*>& buffers) const {
  Arguments in(devices_.size());
  for (std::size_t r = 0; r < devices_.size(); ++r)
    for (const Copies* c : buffers) in[r].push_back(c->at(r).get());
  return in;
}

void TracedMemory::execute(const std::string& text, const Arguments& in, const std::vector<Piece*>& into) {
  auto found = compiled_.find(text);
  if (found == compiled_.end()) {
    std::unique_ptr<Program> program = client_.compile(text, replicas());
    if (program->devices() != devices_) throw std::logic_error("pjrt device memory: a module placed on other devices");
    found = compiled_.emplace(text, std::move(program)).first;
  }
  last_module_ = &found->first;
  std::vector<std::vector<Buffer>> out = client_.execute(*found->second, in);
  for (std::size_t i = 0; i < into.size(); ++i) {
    Piece& p = *into[i];
    p.kind = Kind::buffer;
    p.buffer = std::make_shared<Copies>();
    for (auto& replica : out) p.buffer->push_back(std::move(replica.at(i)));
    p.length = p.count();
    p.offset = 0;
    p.value = {};
  }
}

void TracedMemory::run() {
  std::vector<Piece*> written, dead;
  std::vector<Val> results;
  for (auto& [at, p] : pieces_) {
    if (p.kind != Kind::traced) continue;
    if (drop_scratch_ && in_scratch(p)) {
      dead.push_back(&p);
      continue;
    }
    written.push_back(&p);
    results.push_back(flat(p));
  }
  std::vector<int> donated(args_.size(), -1);
  try {
    if (!written.empty()) {
      donated = donations(written);
      donated_ = static_cast<std::size_t>(std::count_if(donated.begin(), donated.end(), [](int j) { return j >= 0; }));
      std::vector<const Copies*> in;
      for (const Argument& a : args_) in.push_back(a.buffer.get());
      execute(module_text(results, donated), arguments_in(in), written);
    }
  } catch (...) {
    for (Piece* p : written) p->kind = Kind::lost;
    for (Piece* p : dead) p->kind = Kind::lost;
    reset_trace();
    throw;
  }
  try {
    if (!dead.empty()) keep_scratch(dead, donated);
  } catch (...) {  // the run itself went through: only the scratch is lost
    for (Piece* p : dead) p->kind = Kind::lost;
    reset_trace();
    throw;
  }
  reset_trace();
}

// The scratch values of the trace that just ran, dead unless wanted: then
// the trace runs again, exporting them and donating nothing. Each argument
// is what the first run read, or for one it donated, the result written
// over its home (a step that commits nothing, as after a fault, changes
// none of them). A buffer the run overwrote in part without donating it
// would be read stale: the values stay dead then.
void TracedMemory::keep_scratch(const std::vector<Piece*>& dead, const std::vector<int>& donated) {
  bool again = keep_scratch_if_ && keep_scratch_if_();
  std::vector<const Copies*> in;
  for (std::size_t i = 0; again && i < args_.size(); ++i) {
    if (donated[i] < 0) {
      again = !overwritten_.count(args_[i].buffer.get());
      in.push_back(args_[i].buffer.get());
      continue;
    }
    in.push_back(pieces_.at(args_[i].home).buffer.get());
  }
  if (!again) {
    for (Piece* p : dead) {
      p->kind = Kind::dead;
      p->value = {};
    }
    return;
  }
  std::vector<Val> results;
  for (Piece* p : dead) results.push_back(flat(*p));
  execute(module_text(results, std::vector<int>(args_.size(), -1)), arguments_in(in), dead);
}

}  // namespace convoy::pjrt
