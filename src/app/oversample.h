#pragma once
// Private to app/: data.oversample, the training split's rare classes
// repeated until each class has as many examples as the largest (the
// validation split is left as it is, so its scores stay honest).
#include "convoy/records/manifest.h"

namespace convoy::train {

// Each class (a label index, or a one-hot row's pattern) repeated in its
// manifest order, round and round, up to the largest class's count.
// Returns the manifest with the repeats appended; the shuffle mixes them.
records::Manifest oversampled(records::Manifest manifest);

}  // namespace convoy::train
