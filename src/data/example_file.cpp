#include "example_file.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convoy/core/error.h"
#include "convoy/core/path_kind.h"
#include "convoy/core/temporary_files.h"
#include "convoy/core/untrusted.h"

namespace convoy::data {
namespace {

constexpr char kMagic[] = "convoy-examples-1\n";
constexpr uint32_t kEnd = 0xFFFFFFFFu;

// `<path>.<n>.convoy-tmp.<pid>`: the project's temporary-file name (so a
// dead process's is recognised as convoy's), unique among this process's
// writers of one path.
std::string unique_temp(const std::string& path) {
  static std::atomic<int> counter{0};
  return temporary_name(path + "." + std::to_string(counter++));
}

}  // namespace

ExampleWriter::ExampleWriter(std::string path)
    : path_(std::move(path)), temp_(unique_temp(path_)), listed_(temp_) {
  file_.reset(std::fopen(temp_.c_str(), "wb"));
  if (!file_)
    throw UserError(path_ + ": cannot create the cache file (" + std::strerror(errno) +
                    "); pass a cache path in a writable folder");
  put(kMagic, sizeof kMagic - 1);
}

ExampleWriter::~ExampleWriter() {
  if (committed_) return;
  file_.reset();
  std::error_code ignored;
  std::filesystem::remove(temp_, ignored);
}

void ExampleWriter::put(const void* data, std::size_t bytes) {
  if (bytes && std::fwrite(data, 1, bytes, file_.get()) != bytes)
    throw UserError(path_ + ": cannot write the cache file (" + std::strerror(errno) + "); free disk space");
}

void ExampleWriter::write(const Example& e) {
  auto put_u32 = [&](uint32_t v) { put(&v, 4); };
  auto put_string = [&](const std::string& s) {
    put_u32(static_cast<uint32_t>(s.size()));
    put(s.data(), s.size());
  };
  put_u32(static_cast<uint32_t>(e.tensors().size()));
  put_u32(static_cast<uint32_t>(e.text_features().size()));
  for (const auto& [name, t] : e.tensors()) {
    put_string(name);
    const uint8_t head[2] = {static_cast<uint8_t>(t.dtype()), static_cast<uint8_t>(t.shape().size())};
    put(head, 2);
    put(t.shape().data(), t.shape().size() * sizeof(int64_t));
    put(t.raw(), t.nbytes());
  }
  for (const auto& [name, values] : e.text_features()) {
    put_string(name);
    put_u32(static_cast<uint32_t>(values.size()));
    for (const auto& v : values) put_string(v);
  }
}

void ExampleWriter::commit() {
  put(&kEnd, 4);
  if (std::fflush(file_.get()) != 0)
    throw UserError(path_ + ": cannot write the cache file (" + std::strerror(errno) + "); free disk space");
  file_.reset();
  std::error_code ec;
  std::filesystem::rename(temp_, path_, ec);
  if (ec) throw UserError(path_ + ": cannot finish the cache file (" + ec.message() + "); check the folder");
  committed_ = true;
}

namespace {

// Opens the cache file without blocking (a FIFO without a writer would wait
// forever in fopen) and refuses anything but a regular file, named as what it
// is: convoy writes its cache files as regular files, and the size bounds
// every length read below.
File open_cache(const std::string& path, struct stat& st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw UserError(path + ": cannot open the cache file (" + std::strerror(errno) + "); check the path");
  File file(::fdopen(fd, "rb"));
  if (!file) {
    ::close(fd);
    throw UserError(path + ": cannot open the cache file (" + std::strerror(errno) + "); check the path");
  }
  if (::fstat(fd, &st) != 0)
    throw UserError(path + ": cannot read the cache file (" + std::strerror(errno) + "); check the path");
  // Not "delete it": a folder or a device is not the cache's to delete.
  if (!S_ISREG(st.st_mode))
    throw UserError(path + ": is " + mode_kind(st.st_mode) + ", not a convoy cache file; pass " +
                    (S_ISDIR(st.st_mode) ? "a file's path inside it" : "the path of a regular file") +
                    " as the cache (a missing one is made)");
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    throw UserError(path + ": cannot read the cache file (" + std::strerror(errno) + "); check the path");
  return file;
}

}  // namespace

ExampleReader::ExampleReader(std::string path) : path_(std::move(path)) {
  struct stat st {};
  file_ = open_cache(path_, st);
  left_ = static_cast<uint64_t>(st.st_size);
  char magic[sizeof kMagic - 1];
  if (left_ < sizeof magic) throw UserError(path_ + ": not a convoy cache file; delete it or pass another cache path");
  get(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof magic) != 0)
    throw UserError(path_ + ": not a convoy cache file; delete it or pass another cache path");
}

void ExampleReader::corrupt() const {
  throw UserError(path_ + ": the cache file is truncated or corrupt; delete it so the next run rebuilds it");
}

void ExampleReader::need(uint64_t bytes) const {
  if (bytes > left_) corrupt();
}

void ExampleReader::get(void* data, std::size_t bytes) {
  need(bytes);
  if (bytes && std::fread(data, 1, bytes, file_.get()) != bytes) corrupt();
  left_ -= bytes;
}

std::optional<Example> ExampleReader::next() {
  auto get_u32 = [&] {
    uint32_t v;
    get(&v, 4);
    return v;
  };
  auto get_string = [&] {
    const uint32_t size = get_u32();
    need(size);
    std::string s(size, '\0');
    get(s.data(), s.size());
    return s;
  };
  const uint32_t tensors = get_u32();
  if (tensors == kEnd) return std::nullopt;
  const uint32_t texts = get_u32();
  Example e;
  for (uint32_t i = 0; i < tensors; ++i) {
    std::string name = get_string();
    uint8_t head[2];
    get(head, 2);
    if (head[0] > static_cast<uint8_t>(DType::u8) || head[1] > 8) corrupt();
    const DType dtype = static_cast<DType>(head[0]);
    Shape shape(head[1]);
    get(shape.data(), shape.size() * sizeof(int64_t));
    // The data must fit in what is left of the file, checked before anything
    // is allocated; the sizes other than zeros multiply to at most 2^40
    // elements, as any real example's do, so an empty tensor cannot carry
    // absurd ones either.
    constexpr uint64_t kMaxElements = uint64_t{1} << 40;
    const auto bytes = shape_bytes_within(shape, dtype_size(dtype), kMaxElements * dtype_size(dtype));
    if (!bytes) corrupt();
    if (std::find(shape.begin(), shape.end(), 0) == shape.end()) need(*bytes);
    Tensor t(dtype, shape);
    get(t.raw(), t.nbytes());
    e.set(std::move(name), std::move(t));
  }
  for (uint32_t i = 0; i < texts; ++i) {
    std::string name = get_string();
    const uint32_t count = get_u32();
    need(uint64_t{count} * 4);  // each string has at least its length
    // Grown as the strings are read, not made `count` long up front: an
    // empty std::string is 32 bytes against the 4 each takes in the file, so
    // a count the file's size allows could still cost ~8x the file at once.
    constexpr uint32_t kReservedStrings = 1024;
    std::vector<std::string> values;
    values.reserve(std::min(count, kReservedStrings));
    for (uint32_t k = 0; k < count; ++k) values.push_back(get_string());
    e.set_texts(std::move(name), std::move(values));
  }
  return e;
}

}  // namespace convoy::data
