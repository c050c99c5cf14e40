#pragma once
// NCCL, loaded at run time (dlopen of libnccl.so.2): convoy links only
// against its header, so a CUDA build starts on machines without NCCL and
// says what is missing when --strategy nccl asks for it.
#include <nccl.h>

#include <string>

namespace convoy::dist {

struct NcclLibrary {
  int version = 0;  // NCCL_VERSION_CODE of the loaded library, e.g. 22809
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;  // NCCL 2.13+; may be null
  decltype(&ncclAllReduce) all_reduce = nullptr;

  // "<error string>: <NCCL's last error text>" for a failed call.
  std::string describe(ncclResult_t r, ncclComm_t comm) const;
};

// The library, loaded once; null with `why` (one line: the loader's reason
// and what to install) when it cannot be loaded or is older than 2.10.
const NcclLibrary* nccl_library(std::string* why);

}  // namespace convoy::dist
