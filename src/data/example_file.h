#pragma once
// The on-disk cache's file: examples one after another, then an end marker,
// so a cut-short file is told apart from a complete one. Written to a temp
// name and renamed when complete, so a reader never sees half a cache; the
// temp file is listed in core/temporary_files.h while it is written.
//
//   "convoy-examples-1\n"
//   per example: u32 tensors, u32 texts,
//     per tensor: name, u8 dtype, u8 rank, i64 dims[rank], data
//     per text:   name, u32 count, count strings
//   u32 0xFFFFFFFF
//   (name / string: u32 length + bytes; little-endian, as written)
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "convoy/core/temporary_files.h"
#include "convoy/data/example.h"

namespace convoy::data {

struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileClose>;

class ExampleWriter {
 public:
  explicit ExampleWriter(std::string path);  // opens a temp file beside `path`
  ~ExampleWriter();                          // removes the temp file unless committed
  void write(const Example& e);
  void commit();  // end marker, flush, rename onto `path`

 private:
  void put(const void* data, std::size_t bytes);
  std::string path_, temp_;
  // Listed before the file is created, so a process ending at once (a
  // second Ctrl-C, a crash) removes it.
  InFlightTemporary listed_;
  File file_;
  bool committed_ = false;
};

// Reads back what ExampleWriter wrote. A damaged or hostile file is a
// UserError: every length it declares is checked against the bytes the file
// still holds before anything of that size is allocated.
class ExampleReader {
 public:
  explicit ExampleReader(std::string path);
  std::optional<Example> next();  // nullopt at the end marker

 private:
  void get(void* data, std::size_t bytes);
  // Throws (corrupt()) unless `bytes` more are left in the file.
  void need(uint64_t bytes) const;
  [[noreturn]] void corrupt() const;
  std::string path_;
  File file_;
  uint64_t left_ = 0;  // bytes of the file not yet read
};

}  // namespace convoy::data
