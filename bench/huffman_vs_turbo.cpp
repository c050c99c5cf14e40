// Entropy decoding only: a baseline-JPEG Huffman decoder of our own against
// libjpeg-turbo's (jpeg_read_coefficients, which stops after entropy
// decoding), on the same files, in one process, one thread.
//
// Why it exists: issue 5 asks the decode benchmark for 2x the fastest peer,
// and most of convoy's time per image is libjpeg-turbo's Huffman decoding,
// which the peer (PIL with draft) runs too. 2x is only in reach if entropy
// decoding of our own is clearly faster than libjpeg-turbo's; this program
// measures exactly that, and checks that the coefficients are bit-identical.
//
//   huffman_vs_turbo [--reps 15] FILE.jpg...
//
// Per file: alternates libjpeg-turbo and ours --reps times (so load on a
// shared machine hits both alike), prints each side's median CPU time and the
// ratio, then the median ratio over all files. Exit status 1 when any file's
// coefficients differ.
//
// Scope of our decoder: baseline sequential Huffman (SOF0/SOF1), 8-bit, 1 to
// 4 components, any sampling factors, interleaved or not, several scans,
// restart markers. Everything else is reported as unsupported (a real
// decoder would hand it to libjpeg-turbo).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if __has_include(<jpegint.h>)  // libjpeg's entropy decoder's decode_mcu, for the streaming figure
#define CONVOY_HAVE_JPEGINT 1
#define JPEG_INTERNALS
#else
#define CONVOY_HAVE_JPEGINT 0
#endif
#include <jpeglib.h>
// (jerror.h's message codes after jpeglib.h, as libjpeg's own sources include them)
#include <jerror.h>

namespace {

struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Corrupt : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Zig-zag position k -> natural index; 16 extra entries so a corrupt run
// that pushes k past 63 lands on 63 (as libjpeg's table does) instead of
// out of bounds.
constexpr uint8_t kNatural[80] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33,
                                  40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36,
                                  29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,
                                  47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

constexpr int kFastBits = 10;

// One lookup of kFastBits bits. When the code and its magnitude bits both
// fit, the entry is "full": it carries the coefficient's value, the zero run
// before it and the bits to consume, so the common coefficient costs one
// load. Otherwise it carries the code length and symbol (len 0: code longer
// than kFastBits, decode slowly).
//   bits 0-5: bits to consume (a shift by the entry itself consumes them:
//   x86 shifts use the count's low 6 bits); bit 6: full; bit 7: EOB;
//   bits 8-15: zero run (full) or symbol (not full); bits 16-31: value.
//
// gen: the branch-free variant. Every code of up to kFastBits bits gets
//   bits 0-5: code length + magnitude bits (one shift consumes both);
//   bits 8-11: magnitude bits s; bits 12-15: zero run r; bits 16-20: code
//   length; bit 24: EOB. 0: code longer than kFastBits.
// The value is then computed from the bits after the code, off the critical
// path, so the decoder never branches on whether the value fitted.
struct HuffTable {
  uint32_t fast[1 << kFastBits];
  uint32_t gen[1 << kFastBits];
  struct Pair {     // pair variant: up to two coefficients per lookup
    uint8_t total;  // bits consumed by everything below (0: long code)
    uint8_t len1;   // bits of the first symbol alone
    uint8_t flags;  // kPFull, kPEob (end of block after), kPPair (second coefficient)
    uint8_t runs;   // r1 | r2 << 4 (not full: the symbol)
    int16_t v1;
    int8_t v2;
    uint8_t unused;
  } pair[1 << kFastBits];
  uint32_t maxcode[18];  // left-justified to 16 bits, exclusive; [17] sentinel
  int valoffset[17];
  uint8_t vals[256];
  bool defined = false;
};

constexpr uint32_t kFull = 1u << 6, kEob = 1u << 7;

int extend(uint32_t bits, int s) {  // JPEG's sign convention for s magnitude bits
  return s == 0 ? 0 : (bits < (1u << (s - 1)) ? static_cast<int>(bits) - (1 << s) + 1 : static_cast<int>(bits));
}

constexpr uint32_t kGenEob = 1u << 24;

uint32_t gen_entry(int len, int sym, bool dc) {
  const int r = dc ? 0 : sym >> 4, s = dc ? sym : sym & 15;
  return static_cast<uint32_t>(len + s) | (static_cast<uint32_t>(s) << 8) | (static_cast<uint32_t>(r) << 12) |
         (static_cast<uint32_t>(len) << 16) | (!dc && s == 0 && r != 15 ? kGenEob : 0u);
}

constexpr uint8_t kPFull = 1, kPEob = 2, kPPair = 4;

// From the single-symbol table: a full coefficient followed, within the
// same kFastBits, by another full coefficient (or by the end of block)
// becomes one entry.
void build_pairs(HuffTable* t, bool dc) {
  constexpr uint32_t mask = (1u << kFastBits) - 1;
  for (uint32_t idx = 0; idx <= mask; ++idx) {
    const uint32_t e = t->fast[idx];
    HuffTable::Pair q{};
    q.total = static_cast<uint8_t>(e & 63);
    q.len1 = q.total;
    if (dc || !(e & kFull)) {
      q.flags = (!dc && (e & kEob)) ? kPEob : 0;
      q.runs = static_cast<uint8_t>(e >> 8);
      q.v1 = static_cast<int16_t>(static_cast<int32_t>(e) >> 16);
      if (e & kFull) q.flags = kPFull;
      t->pair[idx] = q;
      continue;
    }
    q.flags = kPFull;
    q.runs = static_cast<uint8_t>((e >> 8) & 15);
    q.v1 = static_cast<int16_t>(static_cast<int32_t>(e) >> 16);
    const int len1 = static_cast<int>(e & 63);
    if (len1 < kFastBits) {
      const uint32_t e2 = t->fast[(idx << len1) & mask];
      const int len2 = static_cast<int>(e2 & 63);
      const int v2 = static_cast<int32_t>(e2) >> 16;
      if (len2 != 0 && len1 + len2 <= kFastBits) {
        if (e2 & kEob) {
          q.flags |= kPEob;
          q.total = static_cast<uint8_t>(len1 + len2);
        } else if ((e2 & kFull) && v2 >= -128 && v2 <= 127) {
          q.flags |= kPPair;
          q.runs = static_cast<uint8_t>(q.runs | (((e2 >> 8) & 15) << 4));
          q.v2 = static_cast<int8_t>(v2);
          q.total = static_cast<uint8_t>(len1 + len2);
        }
      }
    }
    t->pair[idx] = q;
  }
}

void build_table(HuffTable* t, const uint8_t counts[17], const uint8_t* vals, int nvals, bool dc) {
  std::memcpy(t->vals, vals, static_cast<size_t>(nvals));
  uint32_t code = 0;
  int k = 0;
  std::fill(std::begin(t->fast), std::end(t->fast), 0u);
  std::fill(std::begin(t->gen), std::end(t->gen), 0u);
  for (int len = 1; len <= 16; ++len) {
    t->valoffset[len] = k - static_cast<int>(code);
    for (int i = 0; i < counts[len]; ++i, ++k, ++code) {
      const int sym = vals[k];
      if (dc && sym > 15) throw Corrupt("bad Huffman table");
      if (len <= kFastBits) {
        const int r = dc ? 0 : sym >> 4, s = dc ? sym : sym & 15;
        const int shift = kFastBits - len;
        for (uint32_t fill = 0; fill < (1u << shift); ++fill) {
          const uint32_t idx = (code << shift) | fill;
          uint32_t e;
          if (!dc && sym == 0) {
            e = static_cast<uint32_t>(len) | kEob;
          } else if (!dc && sym == 0xF0) {  // ZRL: sixteen zeros = run 15 then a zero
            e = static_cast<uint32_t>(len) | kFull | (15u << 8);
          } else if (len + s <= kFastBits && (s != 0 || dc)) {
            const uint32_t mag = (idx >> (shift - s)) & ((1u << s) - 1);
            const int v = extend(mag, s);
            e = static_cast<uint32_t>(len + s) | kFull | (static_cast<uint32_t>(r) << 8) |
                (static_cast<uint32_t>(static_cast<uint16_t>(v)) << 16);
          } else {
            e = static_cast<uint32_t>(len) | (static_cast<uint32_t>(sym) << 8);
          }
          t->fast[idx] = e;
          t->gen[idx] = gen_entry(len, sym, dc);
        }
      }
    }
    // All-ones codes are reserved; a table whose codes overflow is corrupt.
    if (code > (1u << len)) throw Corrupt("bad Huffman table");
    t->maxcode[len] = code << (16 - len);
    code <<= 1;
  }
  t->maxcode[17] = 0xFFFFFFFFu;
  t->defined = true;
  build_pairs(t, dc);
}

struct Component {
  int id, h, v, tq;
  int bw, bh;    // blocks stored (padded to the MCU grid)
  int wib, hib;  // blocks the component really has
  // bw*bh blocks of 64, natural order. Not zeroed up front: each block is
  // zeroed just before it is decoded, while its cache lines are being written
  // anyway (a separate pass over megabytes costs as much as decoding).
  std::unique_ptr<int16_t[]> coef;
  int dc_table = 0, ac_table = 0;
};

struct Frame {
  int width = 0, height = 0, hmax = 1, vmax = 1;
  std::vector<Component> comps;
  uint16_t quant[4][64];
};

// Bit reader over an unstuffed segment (0xFF00 already turned into 0xFF)
// followed by zero padding, so refills never branch on the end.
struct Bits {
  const uint8_t* p;
  uint64_t buf = 0;
  int n = 0;
  void refill() {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v = __builtin_bswap64(v);
    buf |= v >> n;
    p += (63 - n) >> 3;
    n |= 56;
  }
  uint32_t peek(int k) const { return static_cast<uint32_t>(buf >> (64 - k)); }
  void skip(int k) {
    buf <<= k;
    n -= k;
  }
  uint32_t get(int k) {  // k in 1..16
    const uint32_t v = peek(k);
    skip(k);
    return v;
  }
};

// Codes longer than kFastBits: canonical decoding against left-justified
// limits. buf holds at least 16 valid bits.
inline int decode_symbol_slow(uint64_t& buf, int& n, const HuffTable& t) {
  const uint32_t code16 = static_cast<uint32_t>(buf >> 48);
  int len = kFastBits + 1;
  while (code16 >= t.maxcode[len]) ++len;
  if (len > 16) throw Corrupt("bad Huffman code");
  const int idx = t.valoffset[len] + static_cast<int>(code16 >> (16 - len));
  buf <<= len;
  n -= len;
  return t.vals[idx];
}

// Decodes one block's coefficients (zig-zag order -> natural) into blk,
// which is zero. Returns the new DC predictor. The bit buffer lives in
// locals for the whole block so it stays in registers.
[[gnu::always_inline]] inline int decode_block(Bits& bits, const HuffTable& dc, const HuffTable& ac, int pred,
                                               int16_t* blk) {
  uint64_t buf = bits.buf;
  int n = bits.n;
  const uint8_t* p = bits.p;
  auto refill = [&] {
    uint64_t v;
    std::memcpy(&v, p, 8);
    buf |= __builtin_bswap64(v) >> n;
    p += (63 - n) >> 3;
    n |= 56;
  };
  auto peek = [&](int k) { return static_cast<uint32_t>(buf >> (64 - k)); };
  auto skip = [&](int k) {
    buf <<= k;
    n -= k;
  };
  refill();
  {
    const uint32_t e = dc.fast[peek(kFastBits)];
    int diff;
    if (e & kFull) {
      diff = static_cast<int32_t>(e) >> 16;
      skip(e & 63);
    } else {
      int s;
      if (e & 63) {
        s = static_cast<int>(e >> 8) & 0xFF;
        skip(e & 63);
      } else {
        s = decode_symbol_slow(buf, n, dc);
      }
      if (s) {
        diff = extend(peek(s), s);
        skip(s);
      } else {
        diff = 0;
      }
    }
    pred += diff;
    blk[0] = static_cast<int16_t>(pred);
  }
  int k = 1;
  while (k < 64) {
    if (n < 32) refill();
    const uint32_t e = ac.fast[peek(kFastBits)];
    if (e & kFull) {
      k += (e >> 8) & 0xFF;
      blk[kNatural[k]] = static_cast<int16_t>(static_cast<int32_t>(e) >> 16);
      ++k;
      skip(e & 63);
      continue;
    }
    if (e & kEob) {
      skip(e & 63);
      break;
    }
    int rs;
    if (e & 63) {
      rs = static_cast<int>(e >> 8) & 0xFF;
      skip(e & 63);
    } else {
      rs = decode_symbol_slow(buf, n, ac);
    }
    const int r = rs >> 4, s = rs & 15;
    if (s) {
      k += r;
      blk[kNatural[k]] = static_cast<int16_t>(extend(peek(s), s));
      skip(s);
      ++k;
    } else if (r == 15) {
      k += 16;
    } else {
      break;  // EOB reached through the slow path
    }
  }
  bits.buf = buf;
  bits.n = n;
  bits.p = p;
  return pred;
}

// 128 bytes of zeros as four vector stores: memset's rep stos costs more
// than decoding a typical block's few coefficients.
inline void zero_block(int16_t* blk) {
  const __m256i z = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + 16 * i), z);
}

// The value of the s magnitude bits that follow a code: after = the bit
// buffer shifted past the code. Branch-free; s = 0 gives 0.
inline int magnitude_value(uint64_t after, int s) {
  const int64_t mag = static_cast<int64_t>((after >> 1) >> (63 - s));
  // Leading magnitude bit 0: negative, value = mag - (2^s - 1).
  const int64_t negative = (static_cast<int64_t>(after) >> 63) + 1;  // 1 when top bit is 0
  return static_cast<int>(mag - ((negative << s) - negative));
}

[[gnu::always_inline]] inline int decode_block_gen(Bits& bits, const HuffTable& dc, const HuffTable& ac, int pred,
                                                   int16_t* blk) {
  uint64_t buf = bits.buf;
  int n = bits.n;
  const uint8_t* p = bits.p;
  auto refill = [&] {
    uint64_t v;
    std::memcpy(&v, p, 8);
    buf |= __builtin_bswap64(v) >> n;
    p += (63 - n) >> 3;
    n |= 56;
  };
  // Entry for a code longer than kFastBits, decoded canonically.
  auto slow_entry = [&](const HuffTable& t, bool is_dc) {
    uint64_t b2 = buf;
    int n2 = n;
    const int sym = decode_symbol_slow(b2, n2, t);
    return gen_entry(n - n2, sym, is_dc);
  };
  refill();
  {
    uint32_t e = dc.gen[buf >> (64 - kFastBits)];
    if (__builtin_expect(e == 0, 0)) e = slow_entry(dc, true);
    const int s = (e >> 8) & 15;
    pred += magnitude_value(buf << ((e >> 16) & 31), s);
    blk[0] = static_cast<int16_t>(pred);
    buf <<= (e & 63);
    n -= e & 63;
  }
  for (int k = 1; k < 64;) {
    if (n < 32) refill();
    uint32_t e = ac.gen[buf >> (64 - kFastBits)];
    if (__builtin_expect(e == 0, 0)) e = slow_entry(ac, false);
    const int value = magnitude_value(buf << ((e >> 16) & 31), (e >> 8) & 15);
    buf <<= (e & 63);
    n -= e & 63;
    if (e & kGenEob) break;
    k += (e >> 12) & 15;
    blk[kNatural[k]] = static_cast<int16_t>(value);
    ++k;
  }
  bits.buf = buf;
  bits.n = n;
  bits.p = p;
  return pred;
}

[[gnu::always_inline]] inline int decode_block_pair(Bits& bits, const HuffTable& dc, const HuffTable& ac, int pred,
                                                    int16_t* blk) {
  uint64_t buf = bits.buf;
  int n = bits.n;
  const uint8_t* p = bits.p;
  auto refill = [&] {
    uint64_t v;
    std::memcpy(&v, p, 8);
    buf |= __builtin_bswap64(v) >> n;
    p += (63 - n) >> 3;
    n |= 56;
  };
  auto skip = [&](int k) {
    buf <<= k;
    n -= k;
  };
  auto take = [&](int s) {
    const uint32_t v = static_cast<uint32_t>(buf >> (64 - s));
    buf <<= s;
    n -= s;
    return extend(v, s);
  };
  refill();
  {
    const uint32_t e = dc.fast[buf >> (64 - kFastBits)];
    int diff;
    if (e & kFull) {
      diff = static_cast<int32_t>(e) >> 16;
      skip(e & 63);
    } else {
      int s;
      if (e & 63) {
        s = static_cast<int>(e >> 8) & 0xFF;
        skip(e & 63);
      } else {
        s = decode_symbol_slow(buf, n, dc);
      }
      diff = s ? take(s) : 0;
    }
    pred += diff;
    blk[0] = static_cast<int16_t>(pred);
  }
  for (int k = 1; k < 64;) {
    if (n < 32) refill();
    const HuffTable::Pair q = ac.pair[buf >> (64 - kFastBits)];
    if (q.flags & kPFull) {
      k += q.runs & 15;
      blk[kNatural[k]] = q.v1;
      ++k;
      if (__builtin_expect(k >= 64, 0)) {  // the block is full: what follows is the next block's
        skip(q.len1);
        break;
      }
      // Without a second coefficient this writes a zero where a zero is.
      const int r2 = q.runs >> 4;
      blk[kNatural[k + r2]] = q.v2;
      k += (q.flags & kPPair) ? r2 + 1 : 0;
      skip(q.total);
      if (q.flags & kPEob) break;
      continue;
    }
    if (q.flags & kPEob) {
      skip(q.total);
      break;
    }
    int rs;
    if (q.total) {
      rs = q.runs;
      skip(q.total);
    } else {
      rs = decode_symbol_slow(buf, n, ac);
    }
    const int r = rs >> 4, s = rs & 15;
    if (s) {
      k += r;
      blk[kNatural[k]] = static_cast<int16_t>(take(s));
      ++k;
    } else if (r == 15) {
      k += 16;
    } else {
      break;
    }
  }
  bits.buf = buf;
  bits.n = n;
  bits.p = p;
  return pred;
}

int u16(const uint8_t* p) { return (p[0] << 8) | p[1]; }

// Unstuffs one entropy-coded segment starting at p: returns the position of
// the marker that ends it (or end), appends the clean bytes to out.
const uint8_t* unstuff(const uint8_t* p, const uint8_t* end, std::vector<uint8_t>& out) {
  while (p < end) {
    const uint8_t* ff = static_cast<const uint8_t*>(std::memchr(p, 0xFF, static_cast<size_t>(end - p)));
    if (!ff) {
      out.insert(out.end(), p, end);
      return end;
    }
    out.insert(out.end(), p, ff);
    if (ff + 1 >= end) return ff;
    if (ff[1] == 0x00) {
      out.push_back(0xFF);
      p = ff + 2;
    } else if (ff[1] == 0xFF) {  // fill byte before a marker
      p = ff + 1;
    } else {
      return ff;
    }
  }
  return end;
}

struct Decoder {
  Frame frame;
  HuffTable dc[4], ac[4];
  int restart_interval = 0;
  std::vector<uint8_t> clean;
  bool have_frame = false;
  // Streaming: decode each MCU into one reused buffer, as a decoder that
  // runs the IDCT right after entropy decoding does; otherwise store every
  // block (what jpeg_read_coefficients returns).
  bool streaming = false;
  // 0: decode_block (what src/image/jpeg_huffman.cpp uses); 1:
  // decode_block_gen and 2: decode_block_pair, tried and found no faster here.
  int variant = 0;
  alignas(64) int16_t mcu_buf[10][64];

  void decode(const uint8_t* data, size_t size) {
    const uint8_t* p = data;
    const uint8_t* end = data + size;
    if (size < 4 || p[0] != 0xFF || p[1] != 0xD8) throw Corrupt("not a JPEG");
    p += 2;
    for (;;) {
      while (p < end && *p != 0xFF) ++p;  // stray bytes before a marker
      while (p < end && *p == 0xFF) ++p;
      if (p >= end) throw Corrupt("truncated");
      const int marker = *p++;
      if (marker == 0xD9) break;
      if (marker >= 0xD0 && marker <= 0xD7) continue;
      if (end - p < 2) throw Corrupt("truncated");
      const int len = u16(p);
      if (len < 2 || end - p < len) throw Corrupt("truncated");
      const uint8_t* seg = p + 2;
      const int n = len - 2;
      switch (marker) {
        case 0xC0:
        case 0xC1:
          read_sof(seg, n);
          break;
        case 0xC4:
          read_dht(seg, n);
          break;
        case 0xDB:
          read_dqt(seg, n);
          break;
        case 0xDD:
          if (n < 2) throw Corrupt("bad DRI");
          restart_interval = u16(seg);
          break;
        case 0xDA:
          p = read_scan(seg, n, end);
          continue;
        default:
          if ((marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) ||
              marker == 0xCC)
            throw Unsupported("not baseline");
          break;  // APPn, COM, ...
      }
      p += len;
    }
    if (!have_frame) throw Corrupt("no frame");
  }

  void read_sof(const uint8_t* s, int n) {
    if (n < 6 || s[0] != 8) throw Unsupported("not 8-bit");
    frame.height = u16(s + 1);
    frame.width = u16(s + 3);
    const int nc = s[5];
    if (frame.width == 0 || frame.height == 0) throw Unsupported("height from DNL");
    if (nc < 1 || nc > 4 || n < 6 + 3 * nc) throw Corrupt("bad SOF");
    frame.comps.clear();
    frame.comps.resize(static_cast<size_t>(nc));
    frame.hmax = frame.vmax = 1;
    for (int i = 0; i < nc; ++i) {
      Component& c = frame.comps[static_cast<size_t>(i)];
      c.id = s[6 + 3 * i];
      c.h = s[7 + 3 * i] >> 4;
      c.v = s[7 + 3 * i] & 15;
      c.tq = s[8 + 3 * i];
      if (c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 || c.tq > 3) throw Corrupt("bad SOF");
      frame.hmax = std::max(frame.hmax, c.h);
      frame.vmax = std::max(frame.vmax, c.v);
    }
    const int mcux = (frame.width + 8 * frame.hmax - 1) / (8 * frame.hmax);
    const int mcuy = (frame.height + 8 * frame.vmax - 1) / (8 * frame.vmax);
    for (Component& c : frame.comps) {
      c.wib = (frame.width * c.h + 8 * frame.hmax - 1) / (8 * frame.hmax);
      c.hib = (frame.height * c.v + 8 * frame.vmax - 1) / (8 * frame.vmax);
      c.bw = mcux * c.h;
      c.bh = mcuy * c.v;
      if (!streaming) c.coef.reset(new int16_t[static_cast<size_t>(c.bw) * static_cast<size_t>(c.bh) * 64]);
    }
    have_frame = true;
  }

  void read_dht(const uint8_t* s, int n) {
    while (n > 0) {
      if (n < 17) throw Corrupt("bad DHT");
      const int tc = s[0] >> 4, th = s[0] & 15;
      if (tc > 1 || th > 3) throw Corrupt("bad DHT");
      uint8_t counts[17] = {0};
      int total = 0;
      for (int i = 1; i <= 16; ++i) total += counts[i] = s[i];
      if (total > 256 || n < 17 + total) throw Corrupt("bad DHT");
      build_table(tc ? &ac[th] : &dc[th], counts, s + 17, total, tc == 0);
      s += 17 + total;
      n -= 17 + total;
    }
  }

  void read_dqt(const uint8_t* s, int n) {
    while (n > 0) {
      const int pq = s[0] >> 4, tq = s[0] & 15;
      if (tq > 3 || pq > 1) throw Corrupt("bad DQT");
      const int need = 1 + 64 * (pq + 1);
      if (n < need) throw Corrupt("bad DQT");
      for (int i = 0; i < 64; ++i)
        frame.quant[tq][kNatural[i]] = static_cast<uint16_t>(pq ? u16(s + 1 + 2 * i) : s[1 + i]);
      s += need;
      n -= need;
    }
  }

  const uint8_t* read_scan(const uint8_t* s, int n, const uint8_t* end) {
    if (!have_frame) throw Corrupt("scan before frame");
    if (n < 1) throw Corrupt("bad SOS");
    const int ns = s[0];
    if (ns < 1 || ns > 4 || n < 4 + 2 * ns) throw Corrupt("bad SOS");
    Component* sc[4];
    for (int i = 0; i < ns; ++i) {
      const int id = s[1 + 2 * i];
      sc[i] = nullptr;
      for (Component& c : frame.comps)
        if (c.id == id) sc[i] = &c;
      if (!sc[i]) throw Corrupt("bad SOS");
      sc[i]->dc_table = s[2 + 2 * i] >> 4;
      sc[i]->ac_table = s[2 + 2 * i] & 15;
      if (sc[i]->dc_table > 3 || sc[i]->ac_table > 3 || !dc[sc[i]->dc_table].defined || !ac[sc[i]->ac_table].defined)
        throw Corrupt("missing Huffman table");
    }
    const uint8_t* q = s + 1 + 2 * ns;
    if (q[0] != 0 || q[1] != 63 || q[2] != 0) throw Unsupported("not sequential");
    const uint8_t* p = s + n;

    // Unstuff the whole scan once; remember where each restart segment starts.
    clean.clear();
    std::vector<size_t> seg_start{0};
    std::vector<size_t> seg_end;
    for (;;) {
      p = unstuff(p, end, clean);
      seg_end.push_back(clean.size());
      if (p + 1 < end && p[1] >= 0xD0 && p[1] <= 0xD7) {
        p += 2;
        seg_start.push_back(clean.size());
        continue;
      }
      break;
    }
    clean.resize(clean.size() + 4096, 0);  // one MCU's worst case overrun, read as zeros

    // MCU geometry.
    int mcux, mcuy, blocks = 0;
    struct Slot {
      Component* c;
      int dx, dy;
      int ci;
    };
    Slot slots[10];
    if (ns == 1) {
      // Blocks outside the component's real area are never coded here.
      if (!streaming)
        std::memset(sc[0]->coef.get(), 0, static_cast<size_t>(sc[0]->bw) * static_cast<size_t>(sc[0]->bh) * 128);
      mcux = sc[0]->wib;
      mcuy = sc[0]->hib;
      slots[0] = {sc[0], 0, 0, 0};
      blocks = 1;
    } else {
      mcux = (frame.width + 8 * frame.hmax - 1) / (8 * frame.hmax);
      mcuy = (frame.height + 8 * frame.vmax - 1) / (8 * frame.vmax);
      for (int i = 0; i < ns; ++i)
        for (int y = 0; y < sc[i]->v; ++y)
          for (int x = 0; x < sc[i]->h; ++x) {
            if (blocks == 10) throw Corrupt("too many blocks per MCU");
            slots[blocks++] = {sc[i], x, y, i};
          }
    }
    int pred[4] = {0, 0, 0, 0};
    size_t seg = 0;
    Bits b{clean.data() + seg_start[0]};
    int left = restart_interval;
    const long total = static_cast<long>(mcux) * mcuy;
    for (long m = 0; m < total; ++m) {
      if (restart_interval && left == 0) {
        if (++seg >= seg_start.size()) throw Corrupt("missing restart marker");
        b = Bits{clean.data() + seg_start[seg]};
        std::fill(pred, pred + 4, 0);
        left = restart_interval;
      }
      if (streaming) {
        for (int i = 0; i < blocks; ++i) {
          const Slot& sl = slots[i];
          zero_block(mcu_buf[i]);
          const HuffTable& dct = dc[sl.c->dc_table];
          const HuffTable& act = ac[sl.c->ac_table];
          pred[sl.ci] = variant == 2   ? decode_block_pair(b, dct, act, pred[sl.ci], mcu_buf[i])
                        : variant == 1 ? decode_block_gen(b, dct, act, pred[sl.ci], mcu_buf[i])
                                       : decode_block(b, dct, act, pred[sl.ci], mcu_buf[i]);
        }
      } else {
        const int mx = static_cast<int>(m % mcux), my = static_cast<int>(m / mcux);
        for (int i = 0; i < blocks; ++i) {
          const Slot& sl = slots[i];
          Component& c = *sl.c;
          const int bx = ns == 1 ? mx : mx * c.h + sl.dx;
          const int by = ns == 1 ? my : my * c.v + sl.dy;
          int16_t* blk =
              c.coef.get() + (static_cast<size_t>(by) * static_cast<size_t>(c.bw) + static_cast<size_t>(bx)) * 64;
          if (ns > 1) zero_block(blk);
          pred[sl.ci] = variant == 2   ? decode_block_pair(b, dc[c.dc_table], ac[c.ac_table], pred[sl.ci], blk)
                        : variant == 1 ? decode_block_gen(b, dc[c.dc_table], ac[c.ac_table], pred[sl.ci], blk)
                                       : decode_block(b, dc[c.dc_table], ac[c.ac_table], pred[sl.ci], blk);
        }
      }
      // Bits consumed beyond the segment's data: truncated or corrupt.
      const size_t used_bits = static_cast<size_t>(b.p - clean.data()) * 8 - static_cast<size_t>(b.n);
      if (used_bits > seg_end[seg] * 8) throw Corrupt("premature end of data");
      --left;
    }
    return p;
  }
};

// ---- libjpeg-turbo side ----

struct TurboErr {
  jpeg_error_mgr mgr;
};
[[noreturn]] void turbo_error(j_common_ptr cinfo) {
  char msg[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, msg);
  throw Corrupt(msg);  // test program only: libjpeg's frames hold nothing to unwind
}

// Entropy-decodes with libjpeg-turbo; when out is given, copies the
// coefficients there (per component, width_in_blocks x height_in_blocks).
void turbo_decode(const std::vector<uint8_t>& bytes, std::vector<std::vector<int16_t>>* out,
                  std::vector<std::pair<int, int>>* dims) {
  jpeg_decompress_struct cinfo;
  TurboErr err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = turbo_error;
  jpeg_create_decompress(&cinfo);
  try {
    jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&cinfo, TRUE);
    jvirt_barray_ptr* arrays = jpeg_read_coefficients(&cinfo);
    if (out) {
      out->clear();
      dims->clear();
      for (int ci = 0; ci < cinfo.num_components; ++ci) {
        const jpeg_component_info& c = cinfo.comp_info[ci];
        const int w = static_cast<int>(c.width_in_blocks), h = static_cast<int>(c.height_in_blocks);
        std::vector<int16_t> v(static_cast<size_t>(w) * static_cast<size_t>(h) * 64);
        for (int y = 0; y < h; ++y) {
          JBLOCKARRAY row = (*cinfo.mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(&cinfo), arrays[ci],
                                                             static_cast<JDIMENSION>(y), 1, FALSE);
          std::memcpy(v.data() + static_cast<size_t>(y) * static_cast<size_t>(w) * 64, row[0],
                      static_cast<size_t>(w) * 64 * sizeof(int16_t));
        }
        out->push_back(std::move(v));
        dims->push_back({w, h});
      }
    }
    jpeg_finish_decompress(&cinfo);
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  jpeg_destroy_decompress(&cinfo);
}

// libjpeg-turbo's own entropy decoder driven MCU by MCU into one reused,
// zeroed MCU buffer: what its single-pass decompressor does before the IDCT.
// Without jpegint.h (not installed by upstream libjpeg-turbo) this falls back
// to jpeg_read_coefficients, and the streaming columns equal the stored ones.
void turbo_stream(const std::vector<uint8_t>& bytes) {
#if !CONVOY_HAVE_JPEGINT
  turbo_decode(bytes, nullptr, nullptr);
#else
  jpeg_decompress_struct cinfo;
  TurboErr err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = turbo_error;
  jpeg_create_decompress(&cinfo);
  try {
    jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&cinfo, TRUE);
    jpeg_start_decompress(&cinfo);
    if (cinfo.inputctl->has_multiple_scans) throw Unsupported("several scans");
    alignas(64) JBLOCK blocks[D_MAX_BLOCKS_IN_MCU];
    JBLOCKROW rows[D_MAX_BLOCKS_IN_MCU];
    for (int i = 0; i < D_MAX_BLOCKS_IN_MCU; ++i) rows[i] = &blocks[i];
    const long total = static_cast<long>(cinfo.MCUs_per_row) * static_cast<long>(cinfo.MCU_rows_in_scan);
    for (long m = 0; m < total; ++m) {
      std::memset(blocks, 0, sizeof(JBLOCK) * static_cast<size_t>(cinfo.blocks_in_MCU));
      (*cinfo.entropy->decode_mcu)(&cinfo, rows);
    }
    jpeg_abort_decompress(&cinfo);
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  jpeg_destroy_decompress(&cinfo);
#endif
}

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// True when our coefficients equal libjpeg-turbo's in every real block;
// otherwise prints the first difference.
bool same_coefficients(const Decoder& d, const std::vector<std::vector<int16_t>>& ref,
                       const std::vector<std::pair<int, int>>& dims) {
  if (ref.size() != d.frame.comps.size()) return false;
  for (size_t ci = 0; ci < ref.size(); ++ci) {
    const Component& c = d.frame.comps[ci];
    if (c.wib != dims[ci].first || c.hib != dims[ci].second) return false;
    for (int y = 0; y < c.hib; ++y)
      for (int x = 0; x < c.wib; ++x)
        for (int i = 0; i < 64; ++i) {
          const int16_t ours =
              c.coef[(static_cast<size_t>(y) * static_cast<size_t>(c.bw) + static_cast<size_t>(x)) * 64 +
                     static_cast<size_t>(i)];
          const int16_t theirs =
              ref[ci][(static_cast<size_t>(y) * static_cast<size_t>(c.wib) + static_cast<size_t>(x)) * 64 +
                      static_cast<size_t>(i)];
          if (ours != theirs) {
            std::printf("first difference: component %zu, block (%d, %d), coefficient %d: ours %d, libjpeg-turbo %d\n",
                        ci, x, y, i, ours, theirs);
            return false;
          }
        }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  // --profile ours|ours_gen|ours_pair|turbo: only that side (ours_*: the
  // variants), streaming, reps times per file
  // (for perf stat / perf record), no comparison.
  std::string profile;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--profile") && i + 1 < argc)
      profile = argv[++i];
    else
      paths.push_back(argv[i]);
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: huffman_vs_turbo [--reps N] FILE.jpg...\n");
    return 2;
  }
  if (!profile.empty()) {
    for (const std::string& path : paths) {
      std::ifstream in(path, std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (int r = 0; r < reps; ++r) {
        if (profile == "turbo") {
          turbo_stream(bytes);
        } else {
          Decoder mine;
          mine.streaming = true;
          mine.variant = profile == "ours_gen" ? 1 : profile == "ours_pair" ? 2 : 0;
          mine.decode(bytes.data(), bytes.size());
        }
      }
    }
    return 0;
  }
  bool all_same = true;
  std::vector<double> ratios, stream_ratios;
  std::printf("%-34s %8s %8s %6s %8s %8s %6s %s\n", "", "all blocks stored", "", "", "streaming (MCU buffer)", "", "",
              "");
  std::printf("%-34s %8s %8s %6s %8s %8s %6s %s\n", "file", "turbo ms", "ours ms", "ratio", "turbo ms", "ours ms",
              "ratio", "coefficients");
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::vector<int16_t>> ref;
    std::vector<std::pair<int, int>> dims;
    std::string turbo_fail, ours_fail;
    try {
      turbo_decode(bytes, &ref, &dims);
    } catch (const std::exception& e) {
      turbo_fail = e.what();
    }
    Decoder d;
    bool unsupported = false;
    try {
      d.decode(bytes.data(), bytes.size());
    } catch (const Unsupported& e) {
      unsupported = true;
      ours_fail = e.what();
    } catch (const std::exception& e) {
      ours_fail = e.what();
    }
    const std::string name = path.substr(path.find_last_of('/') + 1);
    if (unsupported) {
      std::printf("%-44s unsupported by ours (%s)\n", name.c_str(), ours_fail.c_str());
      continue;
    }
    if (!turbo_fail.empty() || !ours_fail.empty()) {
      const bool both = !turbo_fail.empty() && !ours_fail.empty();
      std::printf("%-44s %s: turbo '%s', ours '%s'\n", name.c_str(), both ? "both fail" : "MISMATCH",
                  turbo_fail.c_str(), ours_fail.c_str());
      all_same = all_same && both;
      continue;
    }
    const bool same = same_coefficients(d, ref, dims);
    all_same = all_same && same;
    std::vector<double> t_turbo, t_ours, ts_turbo, ts_ours;
    for (int r = 0; r < reps; ++r) {
      double t0 = cpu_now();
      turbo_decode(bytes, nullptr, nullptr);
      double t1 = cpu_now();
      {
        Decoder mine;
        mine.decode(bytes.data(), bytes.size());
      }
      double t2 = cpu_now();
      turbo_stream(bytes);
      double t3 = cpu_now();
      {
        Decoder mine;
        mine.streaming = true;
        mine.decode(bytes.data(), bytes.size());
      }
      double t4 = cpu_now();
      t_turbo.push_back(t1 - t0);
      t_ours.push_back(t2 - t1);
      ts_turbo.push_back(t3 - t2);
      ts_ours.push_back(t4 - t3);
    }
    const double mt = median(t_turbo), mo = median(t_ours), st = median(ts_turbo), so = median(ts_ours);
    ratios.push_back(mt / mo);
    stream_ratios.push_back(st / so);
    std::printf("%-34s %8.3f %8.3f %6.2f %8.3f %8.3f %6.2f %s\n", name.c_str(), mt * 1e3, mo * 1e3, mt / mo, st * 1e3,
                so * 1e3, st / so, same ? "identical" : "DIFFER");
  }
  if (!ratios.empty()) {
    std::printf(
        "median entropy-decoding speed ratio (libjpeg-turbo time / ours), all blocks stored: %.2f over %zu files\n",
        median(ratios), ratios.size());
    std::printf("median entropy-decoding speed ratio (libjpeg-turbo time / ours), streaming: %.2f over %zu files\n",
                median(stream_ratios), stream_ratios.size());
  }
  std::printf("coefficients: %s\n", all_same ? "all identical" : "SOME DIFFER");
  return all_same ? 0 : 1;
}
