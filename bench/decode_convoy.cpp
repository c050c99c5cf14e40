// The decode benchmark's convoy side: every JPEG in a folder, already in
// memory, through the pipeline maps a training run uses — decode_map (DCT
// scaling, then area resize to 224 x 224), augment (random horizontal flip,
// random rotation up to +-0.1 turn, reflect fill) and to_float_chw — on the
// calling thread only. Prints one JSON line: images per second of each round,
// by CPU time (per core: robust on a busy machine) and by wall time.
//
//   decode_convoy --dir DIR [--rounds 5] [--passes 4] [--size 224]
//
// CONVOY_JPEG_HUFFMAN=libjpeg in the environment decodes with libjpeg-turbo's
// own Huffman decoder instead of convoy's (A/B timing, docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/image/maps.h"
#include "image/jpeg_huffman.h"

namespace {

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

constexpr const char* kUsage = "usage: decode_convoy --dir DIR [--rounds 5] [--passes 4] [--size 224]\n";

// A whole number from 1 to 100000 for flag, or 0 (after printing why).
int positive(const char* flag, const char* text) {
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (*end != '\0' || n < 1 || n > 100000) {
    std::fprintf(stderr, "decode_convoy: %s needs a whole number from 1 to 100000, not '%s'\n", flag, text);
    return 0;
  }
  return static_cast<int>(n);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace convoy;
  std::string dir;
  int rounds = 5, passes = 4, size = 224;
  if (const char* h = std::getenv("CONVOY_JPEG_HUFFMAN"); h && !std::strcmp(h, "libjpeg"))
    image::detail::set_fast_huffman_enabled(false);
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];
    if (!std::strcmp(flag, "--help") || !std::strcmp(flag, "-h")) {
      std::printf("%s", kUsage);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "decode_convoy: %s needs a value\n%s", flag, kUsage);
      return 2;
    }
    const char* value = argv[++i];
    if (!std::strcmp(flag, "--dir")) {
      dir = value;
      continue;
    }
    int* target = !std::strcmp(flag, "--rounds") ? &rounds
                  : !std::strcmp(flag, "--passes") ? &passes
                  : !std::strcmp(flag, "--size")   ? &size
                                                   : nullptr;
    if (!target) {
      std::fprintf(stderr, "decode_convoy: unknown flag %s\n%s", flag, kUsage);
      return 2;
    }
    if ((*target = positive(flag, value)) == 0) return 2;
  }
  if (dir.empty()) {
    std::fprintf(stderr, "decode_convoy: --dir DIR is missing (the JPEGs bench/decode_vs_peers.py makes)\n");
    return 2;
  }
  try {
    std::vector<std::string> paths;
    std::error_code error;
    for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error))
      if (it->path().extension() == ".jpg") paths.push_back(it->path().string());
    if (error) {
      std::fprintf(stderr, "decode_convoy: cannot read the folder %s (%s)\n", dir.c_str(), error.message().c_str());
      return 2;
    }
    std::sort(paths.begin(), paths.end());
    convoy::require(!paths.empty(), dir + ": no .jpg files; run bench/decode_vs_peers.py to make them");
    std::vector<Tensor> files;
    for (const auto& p : paths) {
      std::ifstream in(p, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      Tensor t(DType::u8, {static_cast<int64_t>(bytes.size())});
      std::memcpy(t.raw(), bytes.data(), bytes.size());
      files.push_back(std::move(t));
    }
    const auto decode = image::decode_map("image_bytes", "image", {.width = size, .height = size});
    const auto augment = image::augment({.horizontal_flip = true, .rotation = 0.1f});
    const auto to_float = image::to_float_chw({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
    std::string cpu_rates, wall_rates;
    double checksum = 0;  // touch the output, as a training step would
    for (int r = -1; r < rounds; ++r) {  // round -1 warms up
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = cpu_seconds();
      int64_t images = 0;
      for (int pass = 0; pass < passes; ++pass) {
        for (std::size_t i = 0; i < files.size(); ++i) {
          Rng rng(data::element_seed(7, pass, static_cast<int64_t>(i)));
          data::Example e;
          e.set("image_bytes", files[i]);
          e = to_float(augment(decode(std::move(e), rng), rng), rng);
          checksum += e.tensor("image").data<float>()[0];
          ++images;
        }
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double cpu = cpu_seconds() - cpu_start;
      if (r < 0) continue;
      cpu_rates += (cpu_rates.empty() ? "" : ", ") + std::to_string(images / cpu);
      wall_rates += (wall_rates.empty() ? "" : ", ") + std::to_string(images / seconds);
    }
    if (checksum != checksum) return 1;
    std::printf("{\"images_per_second_cpu\": [%s], \"images_per_second_wall\": [%s]}\n", cpu_rates.c_str(),
                wall_rates.c_str());
  } catch (const convoy::UserError& e) {
    std::fprintf(stderr, "decode_convoy: %s\n", e.what());
    return 2;
  }
}
