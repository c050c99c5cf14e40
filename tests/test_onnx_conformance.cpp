// ONNX's own backend node tests for the ops convoy's import claims, and a few
// built models (tests/fixtures/onnx_conformance, written by
// tests/fixtures/make_onnx_conformance_fixtures.py from the onnx 1.16.2
// wheel): each case goes through the public API as a user's file would
// (io::load_onnx, compile_cpu, eval) and either matches output_0.pb or is
// refused with one UserError naming the file. A wrong number or another
// exception fails the test; what imports must also export (io::to_onnx) and
// import again to the same numbers. OUTCOMES.tsv records which cases compute and
// which are refused, so a change in either shows up here; the per-op counts
// go to docs/zoo.md.
//
// CONVOY_ONNX_CONFORMANCE_DIR runs another directory of cases (the script's
// --all output) with the same rules and no OUTCOMES.tsv;
// CONVOY_ONNX_CONFORMANCE_OUTCOMES=path writes the outcomes seen.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/io/onnx.h"

namespace convoy::io {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

// "<case>\t<field 2>" lines of a .tsv, '#' lines left out.
std::map<std::string, std::string> read_tsv(const fs::path& path, int field) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> parts;
    std::stringstream s(line);
    for (std::string p; std::getline(s, p, '\t');) parts.push_back(p);
    if (parts.size() > static_cast<std::size_t>(field)) out[parts[0]] = parts[static_cast<std::size_t>(field)];
  }
  return out;
}

struct Outcome {
  std::string kind;    // "match", "refused", or "WRONG" (a failure)
  std::string detail;  // the refusal's message, or what was wrong
};

// One case: the model imported, compiled for the input's batch and run in
// inference mode on input_0.pb, against output_0.pb within 1e-5 (relative to
// the largest expected value, at least 1).
Outcome run_case(const fs::path& dir) {
  const std::string model_path = (dir / "model.onnx").string();
  const onnx::Tensor x = onnx::decode_tensor(read_bytes(dir / "input_0.pb"), (dir / "input_0.pb").string());
  const onnx::Tensor want = onnx::decode_tensor(read_bytes(dir / "output_0.pb"), (dir / "output_0.pb").string());
  std::optional<ImportedModel> imported;
  try {
    imported.emplace(load_onnx(model_path));
  } catch (const UserError& e) {
    const std::string what = e.what();
    if (what.rfind(model_path + ": ", 0) != 0 || what.find('\n') != std::string::npos)
      return {"WRONG", "a refusal that is not one line naming the file: " + what};
    return {"refused", what.substr(model_path.size() + 2)};
  }
  const ImportedModel& m = *imported;
  if (x.dims.empty() || x.dims[0] < 1 || !onnx::is_floating(x.data_type))
    return {"WRONG", "imported a model whose test input is not a float batch"};
  const int64_t batch = x.dims[0];
  const int64_t per_example = numel(m.model.input_shape());
  if (static_cast<int64_t>(x.floats.size()) != batch * per_example)
    return {"WRONG", "the model takes " + to_string(m.model.input_shape()) + " per example; the test gives " +
                         std::to_string(x.floats.size()) + " values for a batch of " + std::to_string(batch)};
  std::vector<float> input = x.floats;
  if (m.input_was_nhwc) {  // the file's [N, H, W, C] data as the model's [N, C, H, W]
    const Shape& s = m.model.input_shape();
    const int64_t c = s[0], hw = s[1] * s[2];
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t k = 0; k < c; ++k)
          input[static_cast<std::size_t>(n * per_example + k * hw + p)] = x.floats[static_cast<std::size_t>(n * per_example + p * c + k)];
  }
  auto outputs = [&](const ImportedModel& model) {
    auto exe = compile_cpu(model.model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy}, 0);
    exe->internals().write(Held::parameters, model.weights.params);
    exe->internals().write(Held::state, model.weights.state);
    std::vector<int32_t> labels(static_cast<std::size_t>(batch), 0);
    exe->eval_step(input.data(), labels.data(), batch);
    std::vector<float> out(static_cast<std::size_t>(batch * exe->compiled_for().output_size));
    exe->internals().read(Held::output, out);
    return out;
  };
  std::vector<float> got;
  try {
    got = outputs(m);
  } catch (const UserError& e) {
    return {"refused", std::string("at compile: ") + e.what()};
  }
  const int64_t cols = static_cast<int64_t>(got.size()) / batch;
  // What imports exports again (convoy's ONNX out) and imports to the same numbers.
  std::vector<float> again;
  try {
    const onnx::Model exported = to_onnx(m.model, m.weights.params, m.weights.state, {.fold_batch_norm = false});
    again = outputs(from_onnx(onnx::decode(onnx::encode(exported), "re-export"), "re-export"));
  } catch (const UserError& e) {
    return {"WRONG", std::string("exported, it does not import again: ") + e.what()};
  }
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(again[i] == got[i] || (std::isnan(again[i]) && std::isnan(got[i]))))
      return {"WRONG", "exported and imported again, output " + std::to_string(i) + " is " + std::to_string(again[i]) +
                           ", not " + std::to_string(got[i])};
  if (m.softmax_dropped)  // the model gives logits; the file gave their softmax
    for (int64_t n = 0; n < batch; ++n) {
      float* row = got.data() + n * cols;
      const float mx = *std::max_element(row, row + cols);
      double sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
      for (int64_t j = 0; j < cols; ++j) row[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - mx) / sum);
    }
  if (got.size() != want.floats.size())
    return {"WRONG", std::to_string(got.size()) + " outputs, the test expects " + std::to_string(want.floats.size())};
  double scale = 1, worst = 0;
  for (float v : want.floats)
    if (std::isfinite(v)) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want.floats[i];
    if (std::isnan(w) || std::isinf(w)) {
      if (!(std::isnan(w) ? std::isnan(g) : g == w))
        return {"WRONG", "output " + std::to_string(i) + " is " + std::to_string(g) + ", expected " + std::to_string(w)};
      continue;
    }
    worst = std::max(worst, std::abs(g - w));
  }
  if (!(worst <= 1e-5 * scale))
    return {"WRONG", "outputs differ by up to " + std::to_string(worst) + " (largest expected " + std::to_string(scale) + ")"};
  return {"match", {}};
}

void run_all(const fs::path& root, bool check_outcomes) {
  const auto ops = read_tsv(root / "MANIFEST.tsv", 1);
  const auto sources = read_tsv(root / "MANIFEST.tsv", 2);
  const auto recorded = check_outcomes ? read_tsv(root / "OUTCOMES.tsv", 1) : std::map<std::string, std::string>{};
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  ASSERT_FALSE(cases.empty()) << root;
  // By op: ONNX's node tests, then the built cases: matched, refused, wrong.
  std::map<std::string, std::array<std::array<int, 3>, 2>> per_op;
  std::array<std::array<int, 3>, 2> totals{};
  std::ostringstream seen;
  int matched = 0, refused = 0, wrong = 0;
  for (const auto& dir : cases) {
    const std::string name = dir.filename().string();
    Outcome o;
    try {
      o = run_case(dir);
    } catch (const std::exception& e) {
      o = {"WRONG", std::string("an exception that is no UserError: ") + e.what()};
    }
    const std::string op = ops.count(name) ? ops.at(name) : "?";
    const int built = sources.count(name) && sources.at(name).rfind("built", 0) == 0 ? 1 : 0;
    const int k = o.kind == "match" ? 0 : o.kind == "refused" ? 1 : 2;
    ++per_op[op][built][k];
    ++totals[built][k];
    (k == 0 ? matched : k == 1 ? refused : wrong)++;
    EXPECT_NE(o.kind, "WRONG") << name << ": " << o.detail;
    seen << name << '\t' << o.kind << '\t' << o.detail << '\n';
    if (check_outcomes) {
      ASSERT_TRUE(recorded.count(name)) << name << " is not in OUTCOMES.tsv";
      EXPECT_EQ(o.kind, recorded.at(name)) << name << ": " << o.detail;
    }
  }
  if (check_outcomes) {
    EXPECT_EQ(recorded.size(), cases.size()) << "OUTCOMES.tsv lists cases that are not there";
  }
  // The table docs/zoo.md shows: per op, node tests run numerically (matched) or refused, and the same for built cases.
  std::ostringstream table;
  auto cells = [&](const std::array<int, 3>& c) {
    const int all = c[0] + c[1] + c[2];
    return all ? std::to_string(all) + " | " + std::to_string(c[0]) + " | " + std::to_string(c[1]) : std::string(" | | ");
  };
  table << "| op | node tests | matched | refused | built | matched | refused |\n|---|---|---|---|---|---|---|\n";
  for (const auto& [op, c] : per_op) table << "| " << op << " | " << cells(c[0]) << " | " << cells(c[1]) << " |\n";
  table << "| all | " << cells(totals[0]) << " | " << cells(totals[1]) << " |\n";
  std::cout << table.str() << cases.size() << " cases: " << matched << " matched, " << refused << " refused, " << wrong
            << " wrong; node tests: " << totals[0][0] << " of " << totals[0][0] + totals[0][1] + totals[0][2]
            << " run numerically and matched\n";
  if (const char* out = std::getenv("CONVOY_ONNX_CONFORMANCE_OUTCOMES")) {
    std::ofstream f(out);
    f << "# case\toutcome\trefusal (tests/test_onnx_conformance.cpp writes this with CONVOY_ONNX_CONFORMANCE_OUTCOMES)\n"
      << seen.str();
  }
}

}  // namespace

TEST(OnnxConformance, NodeTestsMatchOrAreRefusedNeverWrong) {
  run_all(fs::path(CONVOY_FIXTURES_DIR) / "onnx_conformance", /*check_outcomes=*/true);
}

TEST(OnnxConformance, AnotherDirectory) {
  const char* dir = std::getenv("CONVOY_ONNX_CONFORMANCE_DIR");
  if (!dir) GTEST_SKIP() << "set CONVOY_ONNX_CONFORMANCE_DIR (tests/fixtures/make_onnx_conformance_fixtures.py --all DIR)";
  run_all(dir, /*check_outcomes=*/false);
}

}  // namespace convoy::io
