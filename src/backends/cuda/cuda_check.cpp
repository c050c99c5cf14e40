#include "backends/cuda/cuda_check.h"

#include <stdexcept>
#include <string>

namespace convoy::cuda {

void fail(const char* call, const char* what, const char* file, int line) {
  std::string where(file);
  if (const auto at = where.rfind("src/"); at != std::string::npos) where = where.substr(at + 4);
  throw std::runtime_error(std::string("CUDA backend: ") + call + " failed: " + what + " (" + where + ":" +
                           std::to_string(line) + ")");
}

void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(call, cublasGetStatusString(s), file, line);
}

}  // namespace convoy::cuda
