#pragma once
// The MPI strategy's constructor (mpi_strategy.cpp, built only with MPI).
#include <memory>

#include "convoy/dist/strategy.h"

namespace convoy::dist {

// Initialises MPI unless it already is; without MPI this throws (it is never
// called then: make_strategy checks mpi_available first).
std::unique_ptr<Strategy> make_mpi_strategy(const StrategyOptions& options);

}  // namespace convoy::dist
