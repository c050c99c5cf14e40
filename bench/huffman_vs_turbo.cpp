// Entropy decoding only: convoy's Huffman decoder — the library's own,
// src/image/jpeg_huffman.cpp, which every JPEG decode installs — against
// libjpeg-turbo's, on the same files, in one process, on one thread.
//
// Why it exists: issue 5 asks the decode benchmark for 2x the fastest peer,
// and most of a decode's time is entropy decoding, which the peer (PIL with
// draft) runs with libjpeg-turbo too. Our decoder is worth keeping only while
// it is clearly faster than libjpeg-turbo's and gives the same coefficients;
// this program measures both.
//
//   huffman_vs_turbo [--reps 15] FILE.jpg...
//
// Per file: first steps both decoders through the scan MCU by MCU and
// compares every block, then alternates libjpeg-turbo and ours --reps times
// (so load on a shared machine hits both alike) and prints each side's median
// CPU time and the ratio; at the end, the median ratio over all files. Files
// our decoder does not take (progressive, arithmetic, 12-bit) are reported as
// unsupported; damaged files that fail on both sides alike, as "both fail"
// (neither is timed). Exit status 1 when any file's coefficients differ, or
// when one side fails on a file where the other does not.
//
// Both sides are driven as libjpeg's single-pass decompressor drives them:
// after jpeg_start_decompress, decode_mcu once per MCU into a zeroed MCU
// buffer. Each timing covers one whole file: headers, jpeg_start_decompress
// (common to both), for ours use_fast_huffman (which unstuffs the scan and
// builds the tables), and every MCU.
#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#if __has_include(<jpegint.h>)  // the entropy decoder's decode_mcu (cinfo->entropy)
#define CONVOY_HAVE_JPEGINT 1
#define JPEG_INTERNALS
#else
#define CONVOY_HAVE_JPEGINT 0
#endif
#include <jpeglib.h>
// (jerror.h's message codes after jpeglib.h, as libjpeg's own sources include them)
#include <jerror.h>

#include "image/jpeg_errors.h"
#include "image/jpeg_huffman.h"

#if CONVOY_HAVE_JPEGINT
namespace {

namespace detail = convoy::image::detail;

// One file's decompressor, entropy decoding MCU by MCU into one reused MCU
// buffer, as libjpeg's single-pass coefficient controller does before its IDCT.
// Errors, and warnings of damaged data, end decoding as in convoy's decodes:
// through jpeg_errors.h's longjmp to the setjmp in the method that called
// into libjpeg (ours reports damage with libjpeg's warning codes too).
class McuStream {
 public:
  McuStream() {
    cinfo_.err = detail::install_errors(&err_);
    jpeg_create_decompress(&cinfo_);
    for (int i = 0; i < D_MAX_BLOCKS_IN_MCU; ++i) rows_[i] = &blocks_[i];
  }
  ~McuStream() { jpeg_destroy_decompress(&cinfo_); }
  McuStream(const McuStream&) = delete;
  McuStream& operator=(const McuStream&) = delete;

  // Reads the headers and starts decompressing; with ours, installs our
  // decoder. False when libjpeg fails (error()); then supported() says
  // whether the chosen decoder runs this file.
  bool open(const std::vector<unsigned char>& bytes, bool ours) {
    if (setjmp(err_.jump)) return false;
    jpeg_mem_src(&cinfo_, bytes.data(), static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&cinfo_, TRUE);
    jpeg_start_decompress(&cinfo_);
    supported_ = ours ? detail::use_fast_huffman(&cinfo_) : !cinfo_.inputctl->has_multiple_scans;
    left_ = static_cast<long>(cinfo_.MCUs_per_row) * static_cast<long>(cinfo_.MCU_rows_in_scan);
    return true;
  }
  bool supported() const { return supported_; }
  long mcus_left() const { return left_; }
  int blocks_in_mcu() const { return cinfo_.blocks_in_MCU; }
  int component_of(int block) const { return cinfo_.MCU_membership[block]; }
  const char* error() const { return err_.message; }

  // The next MCU's blocks; nullptr when decoding fails.
  const JBLOCK* next() {
    if (setjmp(err_.jump)) return nullptr;
    decode_one();
    return blocks_;
  }
  // Decodes every MCU left; false when decoding fails.
  bool rest() {
    if (setjmp(err_.jump)) return false;
    while (left_ > 0) decode_one();
    return true;
  }

 private:
  void decode_one() {
    std::memset(blocks_, 0, sizeof(JBLOCK) * static_cast<size_t>(cinfo_.blocks_in_MCU));
    // FALSE means suspension, which jpeg_mem_src never asks for.
    if (!(*cinfo_.entropy->decode_mcu)(&cinfo_, rows_)) ERREXIT(&cinfo_, JERR_CANT_SUSPEND);
    --left_;
  }

  jpeg_decompress_struct cinfo_;
  detail::JpegError err_;
  alignas(64) JBLOCK blocks_[D_MAX_BLOCKS_IN_MCU];
  JBLOCKROW rows_[D_MAX_BLOCKS_IN_MCU];
  bool supported_ = false;
  long left_ = 0;
};

enum class Verdict { identical, differ, both_fail, unsupported };

// Steps both decoders through the file together and compares every MCU;
// prints what is not identical.
Verdict check(const std::string& name, const std::vector<unsigned char>& bytes) {
  McuStream ours, turbo;
  const bool ours_open = ours.open(bytes, true);
  if (ours_open && !ours.supported()) {
    std::printf("%-34s unsupported by ours (not a single-scan 8-bit baseline Huffman JPEG)\n", name.c_str());
    return Verdict::unsupported;
  }
  const bool turbo_open = turbo.open(bytes, false);
  bool turbo_ok = turbo_open, ours_ok = ours_open;
  long mcu = 0;
  for (; turbo_ok && ours_ok && turbo.mcus_left() > 0; ++mcu) {
    const JBLOCK* theirs = turbo.next();
    const JBLOCK* mine = ours.next();
    turbo_ok = theirs != nullptr;
    ours_ok = mine != nullptr;
    if (!turbo_ok || !ours_ok) break;
    for (int b = 0; b < turbo.blocks_in_mcu(); ++b) {
      if (std::memcmp(theirs[b], mine[b], sizeof(JBLOCK)) == 0) continue;
      int k = 0;
      while (theirs[b][k] == mine[b][k]) ++k;
      std::printf("%-34s first difference: MCU %ld, block %d (component %d), coefficient %d: ours %d, "
                  "libjpeg-turbo %d\n",
                  name.c_str(), mcu, b, turbo.component_of(b), k, mine[b][k], theirs[b][k]);
      return Verdict::differ;
    }
  }
  if (turbo_ok && ours_ok) return Verdict::identical;
  // One side failed: the other must fail too, here or later in the scan.
  const std::string where = turbo_open && ours_open ? "at MCU " + std::to_string(mcu) : "before the scan";
  if (turbo_ok) turbo_ok = turbo.rest();
  if (ours_ok) ours_ok = ours.rest();
  const bool both = !turbo_ok && !ours_ok;
  std::printf("%-34s %s %s: libjpeg-turbo '%s', ours '%s'\n", name.c_str(), both ? "both fail" : "MISMATCH",
              where.c_str(), turbo_ok ? "ok" : turbo.error(), ours_ok ? "ok" : ours.error());
  return both ? Verdict::both_fail : Verdict::differ;
}

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// CPU seconds to entropy-decode the whole file with one side; check() has
// already seen both sides decode it.
double decode_seconds(const std::vector<unsigned char>& bytes, bool ours) {
  const double start = cpu_now();
  {
    McuStream s;
    if (!s.open(bytes, ours) || !s.supported() || !s.rest()) {
      std::fprintf(stderr, "huffman_vs_turbo: a decode failed while timing: %s\n", s.error());
      std::exit(1);
    }
  }
  return cpu_now() - start;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr const char* kUsage = "usage: huffman_vs_turbo [--reps N] FILE.jpg...\n";

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf("%s", kUsage);
      return 0;
    }
    if (!std::strcmp(argv[i], "--reps")) {
      char* end = nullptr;
      const long n = i + 1 < argc ? std::strtol(argv[++i], &end, 10) : 0;
      if (end == nullptr || *end != '\0' || n < 1 || n > 100000) {
        std::fprintf(stderr, "huffman_vs_turbo: --reps needs a whole number from 1 to 100000\n");
        return 2;
      }
      reps = static_cast<int>(n);
    } else {
      paths.push_back(argv[i]);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  if (!detail::fast_huffman_available() || !detail::fast_huffman_enabled()) {
    std::fprintf(stderr, "huffman_vs_turbo: convoy's decoder is %s\n",
                 detail::fast_huffman_available() ? "switched off"
                                                : "missing from this build (no jpegint.h)");
    return 2;
  }
  std::vector<std::vector<unsigned char>> files;
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "huffman_vs_turbo: cannot read %s\n", path.c_str());
      return 2;
    }
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bool all_same = true;
  std::vector<double> ratios;
  std::printf("%-34s %9s %9s %6s\n", "file", "turbo ms", "ours ms", "ratio");
  for (size_t f = 0; f < files.size(); ++f) {
    const std::vector<unsigned char>& bytes = files[f];
    const std::string name = paths[f].substr(paths[f].find_last_of('/') + 1);
    const Verdict verdict = check(name, bytes);
    if (verdict == Verdict::differ) all_same = false;
    if (verdict != Verdict::identical) continue;
    std::vector<double> turbo, ours;
    for (int r = 0; r < reps; ++r) {
      turbo.push_back(decode_seconds(bytes, false));
      ours.push_back(decode_seconds(bytes, true));
    }
    const double mt = median(turbo), mo = median(ours);
    ratios.push_back(mt / mo);
    std::printf("%-34s %9.3f %9.3f %6.2f\n", name.c_str(), mt * 1e3, mo * 1e3, mt / mo);
  }
  if (!ratios.empty())
    std::printf("median entropy-decoding speed ratio (libjpeg-turbo time / ours): %.2f over %zu files\n",
                median(ratios), ratios.size());
  std::printf("coefficients: %s\n", all_same ? "all identical" : "SOME DIFFER");
  return all_same ? 0 : 1;
}

#else  // !CONVOY_HAVE_JPEGINT

int main() {
  std::fprintf(stderr,
               "huffman_vs_turbo: built without libjpeg-turbo's jpegint.h, so convoy has no decoder of its own "
               "to measure\n");
  return 2;
}

#endif
