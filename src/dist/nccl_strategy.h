#pragma once
// The nccl strategy's constructor (nccl_strategy.cpp, built with NCCL, MPI
// and the CUDA backend; make_strategy says what is missing otherwise).
#include <memory>

#include "convoy/dist/strategy.h"

namespace convoy::dist {

std::unique_ptr<Strategy> make_nccl_strategy(const StrategyOptions& options);

}  // namespace convoy::dist
