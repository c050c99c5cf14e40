#pragma once
// Small datasets of integers for the pipeline tests.
#include <vector>

#include "convoy/data/dataset.h"

namespace convoy::data::testing {

// Examples {x: i32 []} holding first, first + 1, ..., first + n - 1.
inline Dataset ints(int64_t n, int32_t first = 0) {
  Tensor x(DType::i32, {n});
  for (int64_t i = 0; i < n; ++i) x.data<int32_t>()[i] = first + static_cast<int32_t>(i);
  return Dataset::from_slices(Example().set("x", std::move(x)));
}

inline int32_t x_of(const Example& e) { return e.tensor("x").data<int32_t>()[0]; }

// Every value of feature x in one epoch, in order (batches flattened).
inline std::vector<int32_t> values(const Dataset& d, int64_t epoch = 0) {
  std::vector<int32_t> out;
  for (Example& e : d.epoch(epoch))
    for (int32_t v : e.tensor("x").data<int32_t>()) out.push_back(v);
  return out;
}

inline std::vector<int32_t> iota(int32_t n, int32_t first = 0) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) out.push_back(first + i);
  return out;
}

// A map that adds one to x.
inline Example plus_one(Example e, Rng&) {
  e.tensor("x").data<int32_t>()[0] += 1;
  return e;
}

}  // namespace convoy::data::testing
