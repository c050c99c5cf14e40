// convoy's default for how long an idle OpenMP thread spins before it sleeps
// (openmp_spin_default.cpp says why and how).
#pragma once

#include <string>

namespace convoy::cli {

// The GOMP_SPINCOUNT convoy trains with unless the user sets one.
inline constexpr const char* kOpenmpSpinCount = "10000";

// Call first thing in main(). Where the user set neither GOMP_SPINCOUNT nor
// OMP_WAIT_POLICY (nor thread binding), re-executes this program with GOMP_SPINCOUNT set, once
// (the same process id, arguments and environment otherwise); returns where
// it need not, or cannot, do so.
void adopt_openmp_spin_default(char** argv);

// Whether the OpenMP runtime loaded is GCC's libgomp (the one GOMP_SPINCOUNT speaks to).
bool openmp_runtime_is_libgomp();

// What idle OpenMP threads do in train, evaluate and predict, in words (`convoy devices`).
std::string openmp_idle_policy();

}  // namespace convoy::cli
