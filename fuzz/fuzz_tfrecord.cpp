// libFuzzer entry point: arbitrary bytes as a TFRecord file (plain, or gzip
// when they start with gzip's magic). Reading may fail only with
// convoy::UserError; anything else (a crash, an overread, another exception)
// is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "convoy/core/error.h"
#include "convoy/records/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: give it an in-memory file.
  static const int fd = ::memfd_create("fuzz.tfrecord", 0);
  if (fd < 0) std::abort();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    convoy::records::TfRecordReader reader(path, convoy::records::Compression::detect);
    std::string record;
    for (;;) {
      try {
        if (!reader.next(record)) break;
      } catch (const convoy::UserError&) {
        if (!reader.can_continue()) break;
      }
    }
  } catch (const convoy::UserError&) {
  }
  return 0;
}
