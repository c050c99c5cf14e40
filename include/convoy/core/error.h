#pragma once
// Errors are values people can act on. A UserError is something the user can
// fix (a missing file, a bad flag, a corrupt dataset): its message names the
// thing and says what to do, and the CLI prints it as one line and exits 2.
// Anything else that escapes is a bug in convoy.
#include <stdexcept>
#include <string>

namespace convoy {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws UserError(message) when `ok` is false.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw UserError(message);
}

}  // namespace convoy
