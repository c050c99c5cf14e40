#pragma once
// Private to config/: the builders config_schema.cpp declares its table with.
// A plain key is its name, where its value lives in RunConfig (AT), what it
// allows and one line of help; reading, writing and checking follow from the
// member's C++ type. Keys read by a parser of their own are in
// config_structures.cpp.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/config/config_schema.h"
#include "config/float_text.h"

namespace convoy::train {

// Where a key's value lives: AT(data.width) reads and writes c.data.width.
#define AT(member) [](auto& c) -> auto& { return c.member; }

inline Allowed choices(std::vector<std::string> names) { return {.choices = std::move(names)}; }
inline Allowed range(double lo, double hi) { return {.min = lo, .max = hi}; }
inline Allowed open_range(double lo, double hi) { return {.min = lo, .max = hi, .min_open = true, .max_open = true}; }
inline Allowed left_open(double lo, double hi, std::string note = "") {
  return {.min = lo, .max = hi, .min_open = true, .note = std::move(note)};
}
inline Allowed right_open(double lo, double hi) { return {.min = lo, .max = hi, .max_open = true}; }
inline Allowed at_least(double lo, std::string note = "") { return {.min = lo, .note = std::move(note)}; }
inline Allowed above(double lo) { return {.min = lo, .min_open = true}; }

template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};

// What a file must hold for a member of type T, as an error says it.
template <class T> const char* json_type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) return "a whole number >= 0";
  else if constexpr (std::is_integral_v<T>) return "a whole number";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return "a list of strings";
  else if constexpr (is_vector<T>::value) return "a list of numbers";
  else return "a string";
}

template <class T> bool json_holds(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) return v.is_boolean();
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) return v.is_number_unsigned() || (v.is_number_integer() && v >= 0);
  else if constexpr (std::is_integral_v<T>) return v.is_number_integer();
  else if constexpr (std::is_floating_point_v<T>) return v.is_number();
  else if constexpr (is_vector<T>::value)
    return v.is_array() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& x) {
             return json_holds<typename T::value_type>(x);
           });
  else return v.is_string();
}

// A member's number type: T, or a vector's element type.
template <class T> struct number_of { using type = T; };
template <class T> struct number_of<std::vector<T>> { using type = T; };

// Whether a value meant for a float (or double) member is a number it cannot
// hold: NaN or infinite, beyond its largest, or text YAML and --set leave a
// number in when it overflows a double ("1e999", "1e-999", "nan").
template <class T> bool number_out_of_range(const nlohmann::json& x) {
  if (x.is_number()) {
    const double d = x.get<double>();
    return !std::isfinite(d) || std::abs(d) > static_cast<double>(std::numeric_limits<T>::max());
  }
  if (!x.is_string()) return false;
  const std::string& text = x.get_ref<const std::string&>();
  for (const char* yaml : {".inf", "+.inf", "-.inf", ".nan", ".Inf", "+.Inf", "-.Inf", ".NaN", ".INF", "+.INF", "-.INF", ".NAN"})
    if (text == yaml) return true;  // YAML's spellings, which strtod does not read
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(text.c_str(), &end);
  const bool parsed = !text.empty() && end == text.c_str() + text.size();
  return parsed && (errno == ERANGE || !std::isfinite(d) || std::abs(d) > static_cast<double>(std::numeric_limits<T>::max()));
}

// A value of a file typed into `out`; a whole number too large for a narrow
// member (fill_value's uint8) is refused with what the key allows, as is a
// number a float member cannot hold (checked once here for every key, so a
// key without a range of its own cannot take inf either).
template <class T>
void read_typed(const nlohmann::json& v, T& out, const std::string& name, const Allowed& allowed,
                const std::string& where) {
  using F = typename number_of<T>::type;
  if constexpr (std::is_floating_point_v<F>) {
    const auto bad = [](const nlohmann::json& x) { return number_out_of_range<F>(x); };
    const bool out_of_range = v.is_array() ? std::any_of(v.begin(), v.end(), bad) : bad(v);
    char largest[16];
    std::snprintf(largest, sizeof largest, "%.2g", static_cast<double>(std::numeric_limits<F>::max()));
    require(!out_of_range, where + ": '" + name + "' must " + (v.is_array() ? "hold finite numbers" : "be a finite number") +
                               " (a " + (sizeof(F) == sizeof(float) ? "float" : "double") + ": at most " + largest +
                               " in size, and not so small that it rounds to 0), got " + shown_json(v));
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // A fraction or a number past the type (1e23 for a seed): the range, and
    // the number as typed rather than as a double prints it (9.999999999999999e+22).
    if (v.is_number_float()) {
      char huge[32];
      std::snprintf(huge, sizeof huge, "%.6g", v.get<double>());
      const std::string got = std::abs(v.get<double>()) < 1e15 ? shown_json(v) : huge;
      const std::string top = std::to_string(std::numeric_limits<T>::max());
      const std::string range = allowed.text().empty()
                                    ? "from " + std::to_string(std::numeric_limits<T>::min()) + " to " + top
                                    : allowed.text() + (allowed.max || !allowed.choices.empty() ? "" : ", at most " + top);
      throw UserError(where + ": '" + name + "' must be a whole number, " + range + ", got " + got);
    }
  }
  // A value that is not valid UTF-8 is shown with replacement characters, not thrown on.
  require(json_holds<T>(v), where + ": '" + name + "' must be " + json_type_name<T>() + ", got " + shown_json(v));
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) < sizeof(int64_t)) {
    const int64_t wide = v.get<int64_t>();
    require(wide >= std::numeric_limits<T>::min() && wide <= std::numeric_limits<T>::max(),
            where + ": '" + name + "' must be " + (allowed.text().empty() ? json_type_name<T>() : allowed.text()) +
                ", got " + v.dump());
    out = static_cast<T>(wide);
  } else {
    out = v.get<T>();
  }
}

template <class T> nlohmann::json written(const T& value) {
  if constexpr (std::is_same_v<T, float>) return as_written(value);  // 0.05f shows as 0.05
  else return value;
}

template <class Get> ConfigKey typed_key(std::string name, Get get, Allowed allowed, std::string help) {
  using T = std::remove_cvref_t<decltype(get(std::declval<RunConfig&>()))>;
  ConfigKey k;
  k.read = [get, name, allowed](const nlohmann::json& v, RunConfig& c, const std::string& where) {
    read_typed<T>(v, get(c), name, allowed, where);
  };
  k.write = [get](const RunConfig& c) -> std::optional<nlohmann::json> { return written<T>(get(c)); };
  k.name = std::move(name);
  k.allowed = std::move(allowed);
  k.help = std::move(help);
  return k;
}

inline ConfigKey with_type(KeyType type, ConfigKey k) {
  k.type = type;
  return k;
}

template <class Get> ConfigKey boolean(std::string name, Get get, std::string help) {
  return with_type(KeyType::boolean, typed_key(std::move(name), get, {}, std::move(help)));
}
template <class Get> ConfigKey whole(std::string name, Get get, Allowed allowed, std::string help) {
  return with_type(KeyType::whole, typed_key(std::move(name), get, std::move(allowed), std::move(help)));
}
template <class Get> ConfigKey number(std::string name, Get get, Allowed allowed, std::string help) {
  return with_type(KeyType::number, typed_key(std::move(name), get, std::move(allowed), std::move(help)));
}
// What a double member that the run narrows to float (the optimizers' and
// schedules' rates and factors) allows: at most FLT_MAX too, so 1e300 is
// refused as read instead of becoming inf in the float the optimizer holds.
inline Allowed float_range(Allowed a) {
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  if (a.max && *a.max <= kFloatMax) return a;
  std::string said = a.text();
  a.max = kFloatMax;
  a.max_open = false;
  a.note = (said.empty() ? "" : said + " and ") + "at most 3.4e38 (a float)";
  return a;
}
// A number key whose double member is narrowed to float where it is used.
template <class Get> ConfigKey float_number(std::string name, Get get, Allowed allowed, std::string help) {
  return number(std::move(name), get, float_range(std::move(allowed)), std::move(help));
}
template <class Get> ConfigKey text(std::string name, Get get, Allowed allowed, std::string help) {
  return with_type(KeyType::text, typed_key(std::move(name), get, std::move(allowed), std::move(help)));
}
template <class Get> ConfigKey path(std::string name, Get get, Allowed allowed, std::string help) {
  return with_type(KeyType::path, typed_key(std::move(name), get, std::move(allowed), std::move(help)));
}
template <class Get> ConfigKey numbers(std::string name, Get get, std::string help) {
  return with_type(KeyType::numbers, typed_key(std::move(name), get, {}, std::move(help)));
}
template <class Get> ConfigKey texts(std::string name, Get get, std::string help) {
  return with_type(KeyType::texts, typed_key(std::move(name), get, {}, std::move(help)));
}

// Keys with a parser or check of their own (config_structures.cpp).
ConfigKey class_weight_key();
ConfigKey fill_mode_key();
ConfigKey model_name_key();
ConfigKey layers_key();
ConfigKey loss_name_key();
ConfigKey device_key();
ConfigKey conv_algo_key();
ConfigKey early_stopping_key();
ConfigKey reduce_lr_key();

}  // namespace convoy::train
