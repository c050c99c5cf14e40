#pragma once
// Helpers shared by the fuzz targets.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace convoy::fuzz {

// Writes the input to a file of this process's own (in /dev/shm when it
// exists: no disk traffic) and returns its path, for parsers that take a path.
inline std::string input_file(const uint8_t* data, std::size_t size, const char* suffix) {
  static const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/convoy-fuzz-" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace convoy::fuzz
