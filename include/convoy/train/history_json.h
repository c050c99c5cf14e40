#pragma once
// A run's per-epoch history as JSON: stored in checkpoints (train/checkpoint.h)
// and, its "epochs" list, in summary.json (report/run_summary.h).
#include <string>

#include "convoy/train/fit.h"

namespace convoy::train {

std::string history_json(const History& history);
// Throws UserError naming `where` when the text is not such a history.
History parse_history_json(const std::string& text, const std::string& where);

}  // namespace convoy::train
