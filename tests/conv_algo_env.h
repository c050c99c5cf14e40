#pragma once
// Sets CONVOY_CONV_ALGO (direct | winograd | auto) for a scope, so a test
// compiles its models with one convolution algorithm whatever the timing
// rule would pick; restores the previous value after.
#include <cstdlib>
#include <optional>
#include <string>

namespace convoy::testing {

class ScopedConvAlgo {
 public:
  explicit ScopedConvAlgo(const char* algo) {
    if (const char* v = std::getenv(kVar)) previous_ = v;
    setenv(kVar, algo, 1);
  }
  ~ScopedConvAlgo() {
    if (previous_) setenv(kVar, previous_->c_str(), 1);
    else unsetenv(kVar);
  }
  ScopedConvAlgo(const ScopedConvAlgo&) = delete;
  ScopedConvAlgo& operator=(const ScopedConvAlgo&) = delete;

 private:
  static constexpr const char* kVar = "CONVOY_CONV_ALGO";
  std::optional<std::string> previous_;
};

}  // namespace convoy::testing
