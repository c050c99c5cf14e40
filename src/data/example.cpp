#include "convoy/data/example.h"

#include <algorithm>
#include <cstring>

#include "convoy/core/error.h"

namespace convoy::data {
namespace {

template <typename Features>
auto find(Features& features, std::string_view name) {
  return std::find_if(features.begin(), features.end(), [&](const auto& f) { return f.first == name; });
}

template <typename Features, typename Value>
void put(Features& features, std::string name, Value value) {
  auto it = find(features, name);
  if (it != features.end())
    it->second = std::move(value);
  else
    features.emplace_back(std::move(name), std::move(value));
}

}  // namespace

Example& Example::set(std::string name, Tensor value) {
  put(tensors_, std::move(name), std::move(value));
  return *this;
}

Example& Example::set_text(std::string name, std::string value) {
  return set_texts(std::move(name), std::vector<std::string>{std::move(value)});
}

Example& Example::set_texts(std::string name, std::vector<std::string> values) {
  put(texts_, std::move(name), std::move(values));
  return *this;
}

bool Example::has(std::string_view name) const {
  return find(tensors_, name) != tensors_.end() || find(texts_, name) != texts_.end();
}

const Tensor& Example::tensor(std::string_view name) const {
  auto it = find(tensors_, name);
  if (it == tensors_.end())
    throw UserError("example has no tensor feature '" + std::string(name) + "' (it has " + describe() +
                    "); check the feature names your source and maps produce");
  return it->second;
}

Tensor& Example::tensor(std::string_view name) {
  return const_cast<Tensor&>(static_cast<const Example&>(*this).tensor(name));
}

const std::vector<std::string>& Example::texts(std::string_view name) const {
  auto it = find(texts_, name);
  if (it == texts_.end())
    throw UserError("example has no text feature '" + std::string(name) + "' (it has " + describe() +
                    "); check the feature names your source and maps produce");
  return it->second;
}

const std::string& Example::text(std::string_view name) const {
  const auto& all = texts(name);
  require(!all.empty(), "text feature '" + std::string(name) + "' is empty");
  return all.front();
}

std::string Example::describe() const {
  std::string out = "{";
  for (const auto& [name, t] : tensors_)
    out += (out.size() > 1 ? ", " : "") + name + ": " + dtype_name(t.dtype()) + " " + to_string(t.shape());
  for (const auto& [name, values] : texts_) out += (out.size() > 1 ? ", " : "") + name + ": text";
  return out + "}";
}

Tensor copy_of(const Tensor& t) {
  if (t.empty()) return t;
  Tensor out(t.dtype(), t.shape());
  std::memcpy(out.raw(), t.raw(), t.nbytes());
  return out;
}

Example deep_copy(const Example& e) {
  Example out;
  for (const auto& [name, t] : e.tensors()) out.set(name, copy_of(t));
  for (const auto& [name, values] : e.text_features()) out.set_texts(name, values);
  return out;
}

}  // namespace convoy::data
