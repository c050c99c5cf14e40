#pragma once
// Small helpers shared by the tests.
#include <cmath>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "convoy/core/error.h"
#include "convoy/core/rng.h"

// For a test's reference loops in double: under the sanitizer build (ASan,
// UBSan and libFuzzer's coverage hooks on every comparison) they ran ~40x
// slower than in a release build and were most of the kernel tests' time
// there. They check the library, which stays instrumented; they need no
// checks of their own. (Clang does not inline across differing sanitizer
// attributes, so their small helpers carry it too.)
#if defined(__clang__)
#define CONVOY_REFERENCE_LOOPS __attribute__((no_sanitize("address", "undefined", "coverage")))
#else
#define CONVOY_REFERENCE_LOOPS
#endif

namespace convoy::testing {

// A fresh, empty folder under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("convoy-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

// The message of the E that fn throws, or "(no exception)".
template <class E = UserError>
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception)";
}

// max |a - b| / max |b|: the relative error of a whole tensor.
inline double relative_error(std::span<const float> a, std::span<const float> b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace convoy::testing
