#pragma once
// Batches of positions for in-memory data, made a batch at a time. The
// per-element chain range(n).shuffle(n, seed).batch(B) builds, moves and
// frees one Example per position (60,000 an epoch on Fashion-MNIST, ~0.15 s
// of a core on the machine the benchmarks ran on, taken from the training
// threads); these give the same positions in the same order with one
// Example per batch and one vector of ints per epoch.
#include <cstdint>
#include <functional>
#include <vector>

#include "convoy/data/dataset.h"

namespace convoy::data {

// 0, 1, ..., n - 1 in the order range(n).shuffle(n, seed) hands them out in
// `epoch`: a whole-dataset shuffle buffer is a Fisher-Yates draw from the back.
std::vector<int32_t> shuffled_positions(int64_t n, uint64_t seed, int64_t epoch);

// `index` i32 [size] per example: positions(epoch), `size` at a time, as
// Dataset::range(...).batch(size, drop_remainder) over those positions would
// give them. positions runs once per epoch, when the epoch is opened.
using PositionOrder = std::function<std::vector<int32_t>(int64_t epoch)>;
Dataset index_batches(PositionOrder positions, int64_t size, bool drop_remainder);

}  // namespace convoy::data
