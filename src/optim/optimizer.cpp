#include "convoy/optim/optimizer.h"

#include <cmath>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::optim {

Kind parse_kind(const std::string& name) {
  if (name == "sgd") return Kind::sgd;
  if (name == "adam") return Kind::adam;
  if (name == "adamw") return Kind::adamw;
  if (name == "rmsprop") return Kind::rmsprop;
  throw UserError("unknown optimizer '" + shown(name) + "'; available: sgd, adam, adamw, rmsprop");
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::sgd: return "sgd";
    case Kind::adam: return "adam";
    case Kind::adamw: return "adamw";
    case Kind::rmsprop: return "rmsprop";
  }
  return "?";
}

int64_t state_size(const OptimizerOptions& opt, int64_t n) {
  switch (opt.kind) {
    case Kind::sgd: return n;
    case Kind::adam:
    case Kind::adamw: return 2 * n + 1;
    case Kind::rmsprop: return 2 * n;
  }
  return 0;
}

}  // namespace convoy::optim
