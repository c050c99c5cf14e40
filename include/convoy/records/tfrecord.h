#pragma once
// TFRecord files: a sequence of records, each
//
//   uint64 length | uint32 masked crc32c(length) | data[length] | uint32 masked crc32c(data)
//
// (little-endian), the whole file optionally gzip-compressed. The reader
// checks both CRCs and every length; each problem is one UserError naming the
// file, the record index and its byte offset (in the uncompressed stream).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "convoy/core/error.h"
#include "convoy/io/atomic_file.h"

namespace convoy::records {

namespace detail {
class ByteSource;  // plain or gzip bytes (tfrecord_reader.cpp)
class ByteSink;    // plain or gzip bytes (tfrecord_writer.cpp)
}  // namespace detail

enum class Compression {
  none,
  gzip,
  detect,  // reading only: gzip when the file starts with gzip's magic and is not a valid plain TFRecord
};
// "none"/"" , "gzip" or "detect"; anything else is a UserError naming `where`.
Compression parse_compression(const std::string& value, const std::string& where);

// A bad record: the message names the file, the record and its byte offset
// and ends with what to do; `problem()` is the same without the advice (for
// the list of skipped records).
class BadRecord : public UserError {
 public:
  BadRecord(std::string problem, const std::string& advice)
      : UserError(problem + "; " + advice), problem_(std::move(problem)) {}
  const std::string& problem() const { return problem_; }

 private:
  std::string problem_;
};

// A record larger than this is taken as a corrupt length (TensorFlow has no
// such limit, but no image dataset comes near it).
inline constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 31;

class TfRecordReader {
 public:
  // Throws UserError when the file cannot be opened or is empty.
  explicit TfRecordReader(std::string path, Compression compression = Compression::detect);
  ~TfRecordReader();
  TfRecordReader(const TfRecordReader&) = delete;
  TfRecordReader& operator=(const TfRecordReader&) = delete;

  // Reads the next record into `data`; false at the end of the file. Throws
  // BadRecord for an empty file, a truncated record, a length or data CRC
  // mismatch, or a gzip stream that cannot be inflated.
  bool next(std::string& data);

  // After a data CRC mismatch the framing is still sound, so reading can go
  // on with the next record; after any other error it cannot.
  bool can_continue() const { return can_continue_; }

  const std::string& path() const { return path_; }
  bool gzipped() const { return gzipped_; }
  int64_t record_index() const { return index_; }    // of the record last read (or failing)
  uint64_t record_offset() const { return offset_; }  // its first byte
  // "<path>: record <i> at byte <offset>" for the record last read.
  std::string record_name() const;

 private:
  [[noreturn]] void fail(const std::string& what, bool can_continue = false);
  std::size_t read_up_to(char* dst, std::size_t n);

  std::string path_;
  std::unique_ptr<detail::ByteSource> source_;
  bool gzipped_ = false;
  bool can_continue_ = true;
  int64_t index_ = -1;
  uint64_t offset_ = 0, position_ = 0;
};

// Writes records to `path` through a temporary file beside it, renamed over
// `path` by close(): readers never see a half-written file. Destroying a
// writer that was not closed removes the temporary file.
class TfRecordWriter {
 public:
  explicit TfRecordWriter(std::string path, Compression compression = Compression::none);
  ~TfRecordWriter();
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  void write(std::string_view data);
  void close();  // flushes, syncs and renames; throws UserError naming the path

  int64_t records() const { return records_; }
  uint64_t bytes_written() const { return bytes_; }  // before compression

 private:
  std::string path_, temp_;
  io::InFlightTemporary listed_;  // temp_, for a stop that ends the process at once
  std::unique_ptr<detail::ByteSink> sink_;
  int64_t records_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace convoy::records
