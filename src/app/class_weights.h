#pragma once
// Private to app/: data.class_weight in the training loss. Each training
// example's target row becomes its class's weight at its label (zeros
// elsewhere); the backends' cross-entropy, sum_j t_j (lse - o_j) with the
// gradient p * sum(t) - t, then weighs the example's loss and gradient by
// it, as Keras's class_weight. Validation and reports stay unweighted.
#include <cstdint>
#include <string>
#include <vector>

#include "convoy/data/dataset.h"
#include "convoy/config/run_config.h"

namespace convoy::train {

// One weight per class in label order (empty: no weighting). balanced:
// examples / (classes x the class's count in the training split), sklearn's
// and Keras's formula. A map: the named classes' weights, others 1; a name
// that is not a class is a UserError listing the classes.
std::vector<double> class_weights_for(const DataConfig& data, const std::vector<std::string>& classes,
                                      const std::vector<int64_t>& train_counts);

// `label` i32 [] -> f32 [weights.size()]: the class's weight at its index.
data::MapFn weighted_one_hot(std::vector<double> weights);

// "healthy 0.83, rust 0.9, scab 1.5"
std::string describe_weights(const std::vector<double>& weights, const std::vector<std::string>& classes);

}  // namespace convoy::train
