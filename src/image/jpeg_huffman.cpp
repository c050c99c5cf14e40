// Our Huffman decoder inside libjpeg-turbo: jpeg_entropy_decoder is
// libjpeg's internal module interface (jpegint.h); jdcoefct calls
// decode_mcu once per MCU with zeroed blocks to fill, then runs its IDCT.
//
// Errors longjmp out through libjpeg's error manager (see jpeg_errors.h),
// across the functions here: nothing in them has a destructor, and all their
// memory comes from libjpeg's image pool, which jpeg_destroy_decompress
// frees. bench/huffman_vs_turbo.cpp times this decoder against
// libjpeg-turbo's and checks the coefficients (docs/benchmarks.md).
#include "jpeg_huffman.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

// jpeglib.h needs size_t and FILE declared first; JPEG_INTERNALS exposes the
// module structs (cinfo->entropy, cinfo->inputctl) from jpegint.h, which
// Debian's libjpeg-turbo package installs but upstream's install does not:
// without it, libjpeg-turbo keeps its own decoder.
#if __has_include(<jpegint.h>)
#define CONVOY_HAVE_JPEGINT 1
#define JPEG_INTERNALS
#else
#define CONVOY_HAVE_JPEGINT 0
#endif
#include <jpeglib.h>
// (jerror.h's message codes after jpeglib.h, as libjpeg's own sources include them)
#include <jerror.h>

namespace convoy::image::detail {
namespace {

std::atomic<bool> g_enabled{true};
std::atomic<long> g_uses{0};

#if CONVOY_HAVE_JPEGINT

// Zig-zag position -> natural index, with 32 extra entries so a corrupt run
// that pushes the position past 63 writes coefficient 63 (as libjpeg's own
// table does) instead of outside the block: positions reach 63 + 31 (a
// second coefficient's place in an AC entry).
constexpr uint8_t kNatural[96] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33,
                                  40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36,
                                  29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,
                                  47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
                                  63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

constexpr int kFastBits = 10;

// DC tables: one lookup of the next kFastBits bits. When the code and its
// magnitude bits both fit, the entry is "full": it holds the difference's
// value and the bits to consume. Otherwise it holds the code's length and
// symbol; length 0 means a code longer than kFastBits (decoded canonically).
//   bits 0-5: bits to consume (x86 shifts use the count's low 6 bits, so the
//   entry itself is the shift count); bit 6: full; bits 8-15: symbol (not
//   full); bits 16-31: value.
constexpr uint32_t kFull = 1u << 6;

// AC tables: one lookup of the next kFastBits bits gives one coefficient,
// or two when the second's code and bits fit too, or a coefficient and the
// end of block. Entropy decoding is bound by the serial chain of table loads
// (each needs the bits the previous one consumed), and two coefficients per
// load cut its length by a third on photos.
//   bits 0-5: bits to consume; bit 6: full (coefficients here); bit 7: end
//   of block after them; bits 8-11: zero run before the first, bits 12-15:
//   the first's bits (not full: bits 8-15 hold the symbol); bits 16-23: the
//   second's position after the current one (a single coefficient writes a
//   harmless zero there); bits 24-31: positions advanced; bits 32-47 and
//   48-63: the two values.
constexpr uint64_t kPairFull = 1u << 6, kPairEob = 1u << 7;

// Entry: uint32_t for DC tables, uint64_t for AC ones (the layouts above).
template <class Entry>
struct HuffTable {
  Entry lookup[1 << kFastBits];
  uint32_t maxcode[18];  // per length: first code above it, left-justified to 16 bits; [17] sentinel
  int valoffset[17];     // per length: index into vals minus the first code
  uint8_t vals[256];
};
using DcTable = HuffTable<uint32_t>;
using AcTable = HuffTable<uint64_t>;

int extend(uint32_t bits, int s) {  // JPEG's sign convention for s magnitude bits
  return s == 0 ? 0 : (bits < (1u << (s - 1)) ? static_cast<int>(bits) - (1 << s) + 1 : static_cast<int>(bits));
}

// first[idx]: the code that the kFastBits bits idx start with, as
// length << 8 | symbol; 0 when it is longer than kFastBits.
void build_lookup(DcTable* t, const uint16_t* first) {
  for (uint32_t idx = 0; idx < (1u << kFastBits); ++idx) {
    const int len = first[idx] >> 8, s = first[idx] & 0xFF;
    uint32_t e = 0;
    if (len != 0 && len + s <= kFastBits) {
      const uint32_t mag = s == 0 ? 0 : (idx >> (kFastBits - len - s)) & ((1u << s) - 1);
      e = static_cast<uint32_t>(len + s) | kFull | (static_cast<uint32_t>(static_cast<uint16_t>(extend(mag, s))) << 16);
    } else if (len != 0) {
      e = static_cast<uint32_t>(len) | (static_cast<uint32_t>(s) << 8);
    }
    t->lookup[idx] = e;
  }
}

void build_lookup(AcTable* t, const uint16_t* first) {
  for (uint32_t idx = 0; idx < (1u << kFastBits); ++idx) {
    const int len1 = first[idx] >> 8, sym1 = first[idx] & 0xFF;
    const int r1 = sym1 >> 4, s1 = sym1 & 15;
    uint64_t e;
    if (len1 == 0) {
      e = 0;  // a longer code: decoded canonically
    } else if (s1 == 0 && r1 != 15) {
      e = static_cast<uint64_t>(len1) | kPairEob;  // end of block (libjpeg reads every such run so)
    } else if (len1 + s1 > kFastBits) {
      e = static_cast<uint64_t>(len1) | static_cast<uint64_t>(sym1) << 8;
    } else {
      // A coefficient (r1 = 15, s1 = 0: sixteen zeros, the last one "written").
      const int used1 = len1 + s1;
      const uint32_t mag1 = s1 == 0 ? 0 : (idx >> (kFastBits - used1)) & ((1u << s1) - 1);
      int used = used1, second_at = r1 + 1, advance = r1 + 1, v2 = 0;
      uint64_t flags = kPairFull;
      // What follows in the bits left, read the same way.
      const int rest = kFastBits - used1;
      const uint32_t idx2 = (idx << used1) & ((1u << kFastBits) - 1);
      const int len2 = first[idx2] >> 8, sym2 = first[idx2] & 0xFF;
      const int r2 = sym2 >> 4, s2 = sym2 & 15;
      if (len2 != 0 && len2 <= rest && s2 == 0 && r2 != 15) {
        used += len2;
        flags |= kPairEob;
      } else if (len2 != 0 && len2 + s2 <= rest) {
        const uint32_t mag2 = s2 == 0 ? 0 : (idx2 >> (kFastBits - len2 - s2)) & ((1u << s2) - 1);
        v2 = extend(mag2, s2);
        used += len2 + s2;
        second_at = r1 + 1 + r2;
        advance = second_at + 1;
      }
      e = static_cast<uint64_t>(used) | flags | static_cast<uint64_t>(r1) << 8 | static_cast<uint64_t>(used1) << 12 |
          static_cast<uint64_t>(second_at) << 16 | static_cast<uint64_t>(advance) << 24 |
          static_cast<uint64_t>(static_cast<uint16_t>(extend(mag1, s1))) << 32 |
          static_cast<uint64_t>(static_cast<uint16_t>(v2)) << 48;
    }
    t->lookup[idx] = e;
  }
}

// False for a table we do not take (libjpeg has already refused really bad
// ones when it started the scan).
template <class Entry>
bool build_table(HuffTable<Entry>* t, const JHUFF_TBL* src) {
  constexpr bool dc = std::is_same_v<Entry, uint32_t>;
  int total = 0;
  for (int len = 1; len <= 16; ++len) total += src->bits[len];
  if (total > 256) return false;
  std::memcpy(t->vals, src->huffval, static_cast<size_t>(total));
  uint16_t first[1 << kFastBits] = {};
  uint32_t code = 0;
  int k = 0;
  for (int len = 1; len <= 16; ++len) {
    t->valoffset[len] = k - static_cast<int>(code);
    for (int i = 0; i < src->bits[len]; ++i, ++k, ++code) {
      const int sym = t->vals[k];
      if ((dc ? sym : sym & 15) > 15) return false;
      if (len > kFastBits) continue;
      const int shift = kFastBits - len;
      for (uint32_t fill = 0; fill < (1u << shift); ++fill)
        first[(code << shift) | fill] = static_cast<uint16_t>(len << 8 | sym);
    }
    if (code > (1u << len)) return false;  // over-full table
    t->maxcode[len] = code << (16 - len);
    code <<= 1;
  }
  t->maxcode[17] = 0xFFFFFFFFu;
  build_lookup(t, first);
  return true;
}

// A stretch of the scan between restart markers, as offsets into the
// unstuffed copy; marker: the RSTn that opened it (-1 for the first).
struct Segment {
  size_t begin, end;
  int marker;
};

// Worst case of one MCU read past its segment (10 blocks of 64 coefficients
// of up to 31 bits), plus the bit reader's 8-byte lookahead: reads stay in
// the buffer, and the overrun is caught after the MCU.
constexpr size_t kPad = 4096;

struct FastHuffman {
  jpeg_entropy_decoder pub;                        // first member: libjpeg holds a pointer to it
  DcTable dc[NUM_HUFF_TBLS];  // by table number: shared tables stay shared in cache
  AcTable ac[NUM_HUFF_TBLS];
  const DcTable* dc_of_block[D_MAX_BLOCKS_IN_MCU];
  const AcTable* ac_of_block[D_MAX_BLOCKS_IN_MCU];
  int comp_of_block[D_MAX_BLOCKS_IN_MCU];
  int blocks;
  const uint8_t* clean;  // the scan with 0xFF00 unstuffed and markers removed, kPad zeros after
  Segment* segments;
  int segment_count, segment;
  int end_marker;  // the marker that ended the scan, or -1: the file ended first
  unsigned restart_interval, restarts_left;
  uint64_t buf;  // bit buffer, next bit in the top bit
  int nbits;
  const uint8_t* next;  // next byte to load into buf
  int pred[MAX_COMPS_IN_SCAN];
};

// Reports damage with libjpeg's own message codes; never returns.
[[noreturn]] void fail(j_decompress_ptr cinfo, int code, int p0 = 0, int p1 = 0) {
  cinfo->err->msg_code = code;
  cinfo->err->msg_parm.i[0] = p0;
  cinfo->err->msg_parm.i[1] = p1;
  (*cinfo->err->error_exit)(reinterpret_cast<j_common_ptr>(cinfo));
  std::abort();  // error_exit must not return
}

// The scan ran out of data: premature end of the file, or of the segment
// before a marker.
[[noreturn]] void fail_short(j_decompress_ptr cinfo, const FastHuffman* e) {
  const bool at_file_end = e->end_marker < 0 && e->segment == e->segment_count - 1;
  fail(cinfo, at_file_end ? JWRN_JPEG_EOF : JWRN_HIT_MARKER);
}

// Codes longer than kFastBits, canonically; buf holds at least 16 bits.
template <class Entry>
inline int decode_long_code(j_decompress_ptr cinfo, uint64_t& buf, int& nbits, const HuffTable<Entry>& t) {
  const uint32_t code16 = static_cast<uint32_t>(buf >> 48);
  int len = kFastBits + 1;
  while (code16 >= t.maxcode[len]) ++len;
  if (len > 16) fail(cinfo, JWRN_HUFF_BAD_CODE);
  const int idx = t.valoffset[len] + static_cast<int>(code16 >> (16 - len));
  buf <<= len;
  nbits -= len;
  return t.vals[idx & 0xFF];
}

// The bit reader, in locals of decode_mcu for the whole MCU.
struct BitState {
  uint64_t buf;  // next bit in the top bit
  int nbits;
  const uint8_t* p;  // next byte to load into buf
};

// One block's coefficients into blk (zeroed by the caller), natural order.
[[gnu::always_inline]] inline void decode_block(j_decompress_ptr cinfo, BitState& st, const DcTable& dc,
                                                const AcTable& ac, int* pred, JCOEF* blk) {
  uint64_t buf = st.buf;
  int nbits = st.nbits;
  const uint8_t* p = st.p;
  auto refill = [&] {  // afterwards at least 56 bits: enough for any one code and its value
    uint64_t v;
    std::memcpy(&v, p, 8);
    buf |= __builtin_bswap64(v) >> nbits;
    p += (63 - nbits) >> 3;
    nbits |= 56;
  };
  auto skip = [&](uint32_t k) {
    buf <<= (k & 63);
    nbits -= static_cast<int>(k & 63);
  };
  auto take = [&](int s) {  // s in 1..15
    const uint32_t v = static_cast<uint32_t>(buf >> (64 - s));
    buf <<= s;
    nbits -= s;
    return extend(v, s);
  };
  refill();
  {
    const uint32_t t = dc.lookup[buf >> (64 - kFastBits)];
    int diff;
    if (t & kFull) {
      diff = static_cast<int32_t>(t) >> 16;
      skip(t);
    } else {
      int s;
      if (t & 63) {
        s = static_cast<int>(t >> 8) & 0xFF;
        skip(t);
      } else {
        s = decode_long_code(cinfo, buf, nbits, dc);
      }
      diff = s ? take(s) : 0;
    }
    // As libjpeg: a predictor that leaves int is corrupt data.
    if (__builtin_add_overflow(*pred, diff, pred)) fail(cinfo, JERR_BAD_DCT_COEF);
    blk[0] = static_cast<JCOEF>(*pred);
  }
  int k = 1;
  for (;;) {
    // Refilled, the buffer holds >= 56 bits: four full entries (<= kFastBits
    // bits each) fit without checking, so the common path never branches on
    // the bit count (that branch, taken at irregular intervals, used to be
    // mispredicted about once a block).
    refill();
    for (int j = 0; j < 4; ++j) {
      const uint64_t t = ac.lookup[buf >> (64 - kFastBits)];
      if (__builtin_expect((t & (kPairFull | kPairEob)) == kPairFull, 1)) {
        // The second first: a single coefficient's harmless zero may land
        // on the first's place (at position 63), never the other way.
        const int first_at = k + static_cast<int>((t >> 8) & 15);
        blk[kNatural[k + ((t >> 16) & 0xFF)]] = static_cast<JCOEF>(t >> 48);
        blk[kNatural[first_at]] = static_cast<JCOEF>(t >> 32);
        k += (t >> 24) & 0xFF;
        if (__builtin_expect(k >= 64, 0)) {
          // The block is full: a second symbol after a first at position
          // 63 belongs to the next block, so take the first's bits only.
          skip(first_at >= 63 ? static_cast<uint32_t>(t >> 12) & 15 : static_cast<uint32_t>(t));
          goto done;
        }
        skip(static_cast<uint32_t>(t));
        continue;
      }
      if (t & kPairEob) {
        if (t & kPairFull) {
          const int first_at = k + static_cast<int>((t >> 8) & 15);
          blk[kNatural[first_at]] = static_cast<JCOEF>(t >> 32);
          if (first_at >= 63) {  // full without an end of block: that one is the next block's
            skip(static_cast<uint32_t>(t >> 12) & 15);
            goto done;
          }
        }
        skip(static_cast<uint32_t>(t));
        goto done;
      }
      if (nbits < 32) refill();  // a long code and its bits take up to 31
      int rs;
      if (t & 63) {
        rs = static_cast<int>(t >> 8) & 0xFF;
        skip(static_cast<uint32_t>(t));
      } else {
        rs = decode_long_code(cinfo, buf, nbits, ac);
      }
      const int r = rs >> 4, s = rs & 15;
      if (s) {
        k += r;
        blk[kNatural[k]] = static_cast<JCOEF>(take(s));
        ++k;
      } else if (r == 15) {
        k += 16;
      } else {
        goto done;  // end of block (libjpeg reads any run with s = 0 but 15 so too)
      }
      if (k >= 64) goto done;
      break;  // after a long symbol, refill before the next
    }
  }
done:
  st.buf = buf;
  st.nbits = nbits;
  st.p = p;
}

void start_segment(FastHuffman* e, int index) {
  e->segment = index;
  e->next = e->clean + e->segments[index].begin;
  e->buf = 0;
  e->nbits = 0;
  for (int& p : e->pred) p = 0;
  e->restarts_left = e->restart_interval;
}

boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* blocks) {
  auto* e = reinterpret_cast<FastHuffman*>(cinfo->entropy);
  if (e->restart_interval != 0) {
    if (e->restarts_left == 0) {
      const int next = e->segment + 1;
      const int expected = JPEG_RST0 + ((next - 1) & 7);
      if (next >= e->segment_count) {
        if (e->end_marker < 0) fail(cinfo, JWRN_JPEG_EOF);
        fail(cinfo, JWRN_MUST_RESYNC, e->end_marker, (next - 1) & 7);
      }
      if (e->segments[next].marker != expected) fail(cinfo, JWRN_MUST_RESYNC, e->segments[next].marker, (next - 1) & 7);
      start_segment(e, next);
    }
    --e->restarts_left;
  }
  BitState st{e->buf, e->nbits, e->next};
  for (int i = 0; i < e->blocks; ++i) {
    const int c = e->comp_of_block[i];
    decode_block(cinfo, st, *e->dc_of_block[i], *e->ac_of_block[i], &e->pred[c], blocks[i][0]);
  }
  e->buf = st.buf;
  e->nbits = st.nbits;
  e->next = st.p;
  const size_t consumed_bits = static_cast<size_t>(e->next - e->clean) * 8 - static_cast<size_t>(e->nbits);
  if (consumed_bits > e->segments[e->segment].end * 8) fail_short(cinfo, e);
  return TRUE;
}

void start_pass_noop(j_decompress_ptr) {}

// Walks the scan from p: with out, copies it unstuffed there and fills
// segments. Returns the number of segments; *end_at is where the scan ends
// (the ending marker's 0xFF, or end); *end_marker that marker or -1.
int walk_scan(const uint8_t* p, const uint8_t* end, uint8_t* out, Segment* segments, const uint8_t** end_at,
              int* end_marker) {
  int count = 1;
  size_t o = 0;
  if (segments) segments[0] = {0, 0, -1};
  *end_marker = -1;
  while (p < end) {
    const auto* ff = static_cast<const uint8_t*>(std::memchr(p, 0xFF, static_cast<size_t>(end - p)));
    const uint8_t* stop = ff ? ff : end;
    if (out) std::memcpy(out + o, p, static_cast<size_t>(stop - p));
    o += static_cast<size_t>(stop - p);
    if (!ff) {
      p = end;
      break;
    }
    const uint8_t* q = ff + 1;
    while (q < end && *q == 0xFF) ++q;  // fill bytes
    if (q >= end) {
      p = end;
      break;
    }
    if (*q == 0x00) {  // stuffed 0xFF
      if (out) out[o] = 0xFF;
      ++o;
      p = q + 1;
    } else if (*q >= JPEG_RST0 && *q <= JPEG_RST0 + 7) {
      if (segments) {
        segments[count - 1].end = o;
        segments[count] = {o, 0, *q};
      }
      ++count;
      p = q + 1;
    } else {
      *end_marker = *q;
      p = q - 1;  // the marker's last 0xFF: libjpeg's marker reader skips fill bytes itself
      break;
    }
  }
  if (segments) segments[count - 1].end = o;
  *end_at = p;
  return count;
}

#endif  // CONVOY_HAVE_JPEGINT

}  // namespace

void set_fast_huffman_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool fast_huffman_enabled() { return g_enabled.load(std::memory_order_relaxed); }
long fast_huffman_uses() { return g_uses.load(std::memory_order_relaxed); }

bool fast_huffman_available() { return CONVOY_HAVE_JPEGINT != 0; }

#if !CONVOY_HAVE_JPEGINT
bool use_fast_huffman(jpeg_decompress_struct*) { return false; }
#else
bool use_fast_huffman(jpeg_decompress_struct* cinfo) {
  if (!fast_huffman_enabled()) return false;
  if (cinfo->progressive_mode || cinfo->arith_code || cinfo->data_precision != 8 ||
      cinfo->inputctl->has_multiple_scans || cinfo->comps_in_scan < 1 || cinfo->comps_in_scan > MAX_COMPS_IN_SCAN ||
      cinfo->blocks_in_MCU < 1 || cinfo->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU || cinfo->Ss != 0 || cinfo->Se != 63 ||
      cinfo->Ah != 0 || cinfo->Al != 0 || cinfo->src == nullptr || cinfo->entropy == nullptr)
    return false;
  auto* pool = cinfo->mem;
  const j_common_ptr common = reinterpret_cast<j_common_ptr>(cinfo);
  auto* e = static_cast<FastHuffman*>((*pool->alloc_small)(common, JPOOL_IMAGE, sizeof(FastHuffman)));
  bool built_dc[NUM_HUFF_TBLS] = {}, built_ac[NUM_HUFF_TBLS] = {};
  for (int ci = 0; ci < cinfo->comps_in_scan; ++ci) {
    const jpeg_component_info* comp = cinfo->cur_comp_info[ci];
    const int d = comp->dc_tbl_no, a = comp->ac_tbl_no;
    if (d < 0 || d >= NUM_HUFF_TBLS || a < 0 || a >= NUM_HUFF_TBLS || !cinfo->dc_huff_tbl_ptrs[d] ||
        !cinfo->ac_huff_tbl_ptrs[a])
      return false;
    if (!built_dc[d] && !build_table(&e->dc[d], cinfo->dc_huff_tbl_ptrs[d])) return false;
    if (!built_ac[a] && !build_table(&e->ac[a], cinfo->ac_huff_tbl_ptrs[a])) return false;
    built_dc[d] = built_ac[a] = true;
  }
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    const int ci = cinfo->MCU_membership[b];
    if (ci < 0 || ci >= cinfo->comps_in_scan) return false;
    e->comp_of_block[b] = ci;
    e->dc_of_block[b] = &e->dc[cinfo->cur_comp_info[ci]->dc_tbl_no];
    e->ac_of_block[b] = &e->ac[cinfo->cur_comp_info[ci]->ac_tbl_no];
  }
  e->blocks = cinfo->blocks_in_MCU;

  // The rest of the file is in memory (jpeg_mem_src): the scan starts here.
  jpeg_source_mgr* src = cinfo->src;
  const uint8_t* begin = src->next_input_byte;
  const uint8_t* end = begin + src->bytes_in_buffer;
  const uint8_t* scan_end = nullptr;
  int end_marker = -1;
  const int count = walk_scan(begin, end, nullptr, nullptr, &scan_end, &end_marker);
  const size_t size = static_cast<size_t>(scan_end - begin);
  auto* clean = static_cast<uint8_t*>((*pool->alloc_large)(common, JPOOL_IMAGE, size + kPad));
  auto* segments =
      static_cast<Segment*>((*pool->alloc_large)(common, JPOOL_IMAGE, sizeof(Segment) * static_cast<size_t>(count)));
  walk_scan(begin, end, clean, segments, &scan_end, &end_marker);
  std::memset(clean + segments[count - 1].end, 0, size + kPad - segments[count - 1].end);
  e->clean = clean;
  e->segments = segments;
  e->segment_count = count;
  e->end_marker = end_marker;
  e->restart_interval = cinfo->restart_interval;
  start_segment(e, 0);

  e->pub.start_pass = start_pass_noop;  // libjpeg starts the single scan before this; never again
  e->pub.decode_mcu = decode_mcu;
  e->pub.insufficient_data = FALSE;
  cinfo->entropy = &e->pub;
  // libjpeg reads on from the marker after the scan (jpeg_finish_decompress).
  src->next_input_byte = scan_end;
  src->bytes_in_buffer = static_cast<size_t>(end - scan_end);
  g_uses.fetch_add(1, std::memory_order_relaxed);
  return true;
}
#endif  // CONVOY_HAVE_JPEGINT

}  // namespace convoy::image::detail
