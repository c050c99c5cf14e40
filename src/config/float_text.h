#pragma once
// Private to config/ (and app/model_files.cpp, which writes a KerasModel's run config):
// a float setting as a config shows it.
#include <charconv>
#include <cstdlib>
#include <string>

namespace convoy::train {

// The shortest decimal that reads back as `v`, as a double: 0.05f shows as
// 0.05 in a written config or report, not as the float's exact double
// 0.05000000074505806, and parses back to the same float.
inline double as_written(float v) {
  char text[32];
  char* end = std::to_chars(text, text + sizeof text - 1, v).ptr;
  *end = '\0';
  return std::strtod(text, nullptr);
}

// A float as an error message shows it: "1e-05", "nan", "-inf".
inline std::string float_text(float v) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, v).ptr);
}

}  // namespace convoy::train
