/* p4switch native backend: what every generated program runs on (bit cursor, hashes, tables,
 * stateful externs). Values are __int128 so that P4's exact width arithmetic, written by the
 * lowering as Python expressions with explicit masks, keeps its meaning for bit<W> up to 64. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <time.h>

typedef __int128 i128;
typedef unsigned __int128 u128;

#define MAXARGS 16
#define MAXKEYS 16
#define NO_ID UINT64_MAX

/* ------------------------------------------------------------------ control flow signals */
typedef struct { const uint8_t *data; uint64_t bo, n; } cursor_t;   /* packet_in: bits */
typedef struct { uint8_t *buf; uint64_t bits; } outbuf_t;          /* packet_out */

static jmp_buf *REJECT_JMP;   /* the parser's `_Reject` */
static jmp_buf *EXIT_JMP;     /* `exit` inside a control */
static jmp_buf *ASSERT_JMP;   /* assert()/assume() failed: the whole packet stops */
static int ASSERT_LINE, ASSERT_KIND;
static uint8_t EXIT_VAL[4096];  /* the out/inout values of an action that exits */

static void reject(int code) { longjmp(*REJECT_JMP, code + 1); }
static void p4exit(void) { longjmp(*EXIT_JMP, 1); }
static void assert_fail(int kind, int line) { ASSERT_KIND = kind; ASSERT_LINE = line; longjmp(*ASSERT_JMP, 1); }

/* ------------------------------------------------------------------ bits */
static inline uint64_t mask64(unsigned w) { return w >= 64 ? ~0ULL : ((1ULL << w) - 1); }

static inline uint64_t getbits(const uint8_t *d, uint64_t bo, unsigned w) {
    if (!(bo & 7) && !(w & 7)) {             /* whole bytes: the common case */
        const uint8_t *p = d + (bo >> 3);
        uint64_t v = 0;
        for (unsigned i = 0; i < (w >> 3); i++) v = (v << 8) | p[i];
        return v;
    }
    uint64_t first = bo >> 3, last = (bo + w + 7) >> 3;
    u128 v = 0;
    for (uint64_t i = first; i < last; i++) v = (v << 8) | d[i];
    v >>= (last << 3) - (bo + w);
    return (uint64_t)v & mask64(w);
}

static inline void putbits(uint8_t *d, uint64_t bo, unsigned w, uint64_t val) {
    if (!(bo & 7) && !(w & 7)) {
        uint8_t *p = d + (bo >> 3);
        for (int i = (int)(w >> 3) - 1; i >= 0; i--) { p[i] = (uint8_t)val; val >>= 8; }
        return;
    }
    val &= mask64(w);
    while (w) {
        unsigned off = bo & 7, n = 8 - off;
        if (n > w) n = w;
        unsigned shift = 8 - off - n;
        uint8_t bits = (uint8_t)((val >> (w - n)) & ((1u << n) - 1));
        uint8_t m = (uint8_t)(((1u << n) - 1) << shift);
        d[bo >> 3] = (uint8_t)((d[bo >> 3] & ~m) | (bits << shift));
        bo += n;
        w -= n;
    }
}

static inline void putbits128(uint8_t *d, uint64_t bo, unsigned w, i128 val) {
    if (w > 64) { putbits(d, bo, w - 64, (uint64_t)((u128)val >> 64)); bo += w - 64; w = 64; }
    putbits(d, bo, w, (uint64_t)val);
}

static inline i128 sext(uint64_t v, unsigned w) {
    return (v >> (w - 1)) & 1 ? (i128)v - ((i128)1 << w) : (i128)v;
}

static inline uint64_t pkt_peek(cursor_t *c, unsigned w) {
    if (c->bo + w > c->n) reject(1);
    return getbits(c->data, c->bo, w);
}
static inline void pkt_advance(cursor_t *c, i128 bits) {
    if ((i128)c->bo + bits > (i128)c->n) reject(1);
    c->bo += (uint64_t)bits;
}

static inline i128 p4_shl(i128 a, i128 b, unsigned width, int is_signed) {
    if (b >= width) return 0;
    u128 m = width >= 128 ? ~(u128)0 : (((u128)1 << width) - 1);
    i128 v = (i128)(((u128)a << (unsigned)b) & m);
    if (is_signed && ((v >> (width - 1)) & 1)) v -= (i128)1 << width;
    return v;
}
static inline i128 p4_div(i128 a, i128 b, int mod) { return b == 0 ? 0 : (mod ? a % b : a / b); }
static inline i128 p4_mod(i128 h, i128 m) { return m ? h % m : h; }
static inline i128 p4_ix(i128 i, i128 size) { return (i >= 0 && i < size) ? i : size - 1; }
static inline i128 p4_min(i128 a, i128 b) { return a < b ? a : b; }
static inline i128 p4_max(i128 a, i128 b) { return a > b ? a : b; }

static uint64_t RNG = P4_RNG_SEED;     /* engine.Rng.SEED: both backends draw alike */
static inline uint64_t rng_next(void) { RNG ^= RNG << 13; RNG ^= RNG >> 7; RNG ^= RNG << 17; return RNG; }
static inline i128 p4_random(i128 lo, i128 hi) { return hi <= lo ? lo : lo + (i128)(rng_next() % (uint64_t)(hi - lo + 1)); }

/* ------------------------------------------------------------------ hashes (as engine.py) */
enum { H_CRC32, H_CRC16, H_CSUM16, H_XOR16, H_IDENTITY, H_RANDOM };
static uint32_t CRC32_T[256];
static uint16_t CRC16_T[256];
static void hash_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        CRC32_T[i] = c;
        uint16_t d = (uint16_t)i;
        for (int k = 0; k < 8; k++) d = (d & 1) ? (uint16_t)((d >> 1) ^ 0xA001) : (uint16_t)(d >> 1);
        CRC16_T[i] = d;
    }
}
/* the data is two pieces (the field list's bytes, then maybe the payload) */
static i128 hash_run(int algo, const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb) {
    uint64_t n = na + nb;
#define BYTE(i) ((i) < na ? a[i] : b[(i) - na])
    if (algo == H_CRC32) {
        uint32_t c = 0xFFFFFFFFu;
        for (uint64_t i = 0; i < n; i++) c = CRC32_T[(c ^ BYTE(i)) & 0xFF] ^ (c >> 8);
        return (i128)(c ^ 0xFFFFFFFFu);
    }
    if (algo == H_CRC16) {
        uint16_t c = 0;
        for (uint64_t i = 0; i < n; i++) c = (uint16_t)((c >> 8) ^ CRC16_T[(c ^ BYTE(i)) & 0xFF]);
        return c;
    }
    if (algo == H_CSUM16 || algo == H_XOR16) {
        uint64_t s = 0;
        for (uint64_t i = 0; i < n; i += 2) {
            uint64_t w = ((uint64_t)BYTE(i) << 8) | (i + 1 < n ? BYTE(i + 1) : 0);
            if (algo == H_CSUM16) s += w; else s ^= w;
        }
        if (algo == H_XOR16) return (i128)s;
        while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
        return (i128)(~s & 0xFFFF);
    }
    if (algo == H_IDENTITY) {   /* the low 120 bits are exact; callers mask to <= 64 */
        u128 v = 0;
        for (uint64_t i = n > 15 ? n - 15 : 0; i < n; i++) v = (v << 8) | BYTE(i);
        return (i128)v;
    }
    return (i128)(rng_next() & 0xFFFFFFFFu);
#undef BYTE
}

/* ------------------------------------------------------------------ registers, counters */
typedef struct { uint64_t *v; uint64_t size, mask; } reg_t;
typedef struct { uint64_t *packets, *bytes; uint64_t size; } cnt_t;

/* ------------------------------------------------------------------ tables
 * An entry is a row of uint64 words, in the order the Python Table sorts them (-priority,
 * insertion): handle, action id (NO_ID: indirect), member id, group id, then per key
 * (kind, a.lo, a.hi, b.lo, b.hi) with kind 0 wildcard / 1 value-mask / 2 range (keys up to 128
 * bits), then the action arguments. */
#define KW 5
static inline u128 kval(const uint64_t *w) { return ((u128)w[1] << 64) | w[0]; }
typedef struct {
    uint32_t n, stride;
    uint64_t *rows;
    uint64_t *packets, *bytes;      /* direct counter per row */
    uint64_t *hit;                  /* CLOCK_MONOTONIC ns of the row's last hit (idle tables) */
    uint32_t *hidx, hcap;           /* exact-only tables: open addressing, row+1, 0 = empty */
} tsnap_t;

/* trTCM (RFC 2698) as stateful.MeterState; unconfigured = GREEN */
typedef struct { int on; double cir, cburst, pir, pburst, ct, pt, last; } mstate_t;
typedef struct { mstate_t *s; uint64_t size; int bytes; } meter_t;
static meter_t *METERS;
static i128 *DMCOLOR;       /* per direct meter: the colour of the last hit entry */
static double mono_s(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec / 1e9; }
static i128 mstate_exec(mstate_t *m, double amount) {
    if (!m->on) return 0;
    double now = mono_s(), el = now - m->last;
    m->last = now;
    m->ct = m->ct + el * m->cir < m->cburst ? m->ct + el * m->cir : m->cburst;
    m->pt = m->pt + el * m->pir < m->pburst ? m->pt + el * m->pir : m->pburst;
    if (m->pt < amount) return 2;
    m->pt -= amount;
    if (m->ct < amount) return 1;
    m->ct -= amount;
    return 0;
}
static inline i128 meter_execute(meter_t *m, i128 i, uint64_t plen) {
    if (i < 0 || (u128)i >= m->size) return 0;
    return mstate_exec(&m->s[(uint64_t)i], m->bytes ? (double)plen : 1.0);
}

typedef struct {
    uint32_t nkeys, nargs, exact_only, counting, idle;
    int dmeter, dmeter_bytes;       /* direct meter id or -1 */
    mstate_t *dm; uint64_t dm_cap;  /* direct meter states by entry handle */
    int profile;
    tsnap_t *snap;
    uint64_t dact, dargs[MAXARGS];
} table_t;

typedef struct {
    uint32_t nmembers, ngroups, nargs, algo;
    uint64_t out_mask;
    uint64_t *members;     /* id, action, args[nargs] */
    uint64_t *groups;      /* id, count, member row indices (creation order) ... */
    uint64_t **group_rows; /* per group: pointer into groups */
} profile_t;

static inline uint64_t key_hash(const i128 *key, uint32_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (uint32_t i = 0; i < n; i++) { h ^= (uint64_t)key[i]; h *= 1099511628211ULL; h ^= h >> 29; }
    return h;
}

static int row_matches(const uint64_t *row, const i128 *key, uint32_t nkeys) {
    const uint64_t *k = row + 4;
    for (uint32_t i = 0; i < nkeys; i++, k += KW) {
        if (k[0] == 1) { if (((u128)key[i] & kval(k + 3)) != kval(k + 1)) return 0; }
        else if (k[0] == 2) { if ((u128)key[i] < kval(k + 1) || (u128)key[i] > kval(k + 3)) return 0; }
    }
    return 1;
}

static int64_t table_find(const table_t *t, const tsnap_t *s, const i128 *key) {
    if (!s || !s->n) return -1;
    if (s->hidx) {
        uint64_t h = key_hash(key, t->nkeys);
        for (uint32_t i = 0; i < s->hcap; i++) {
            uint32_t slot = s->hidx[(h + i) & (s->hcap - 1)];
            if (!slot) return -1;
            const uint64_t *row = s->rows + (uint64_t)(slot - 1) * s->stride;
            uint32_t j;
            for (j = 0; j < t->nkeys; j++) if (kval(row + 4 + KW * j + 1) != (u128)key[j]) break;
            if (j == t->nkeys) return slot - 1;
        }
        return -1;
    }
    for (uint32_t r = 0; r < s->n; r++)
        if (row_matches(s->rows + (uint64_t)r * s->stride, key, t->nkeys)) return r;
    return -1;
}

static void tsnap_index(table_t *t, tsnap_t *s) {
    if (!t->exact_only || !s->n) return;
    uint32_t cap = 8;
    while (cap < s->n * 2) cap <<= 1;
    s->hcap = cap;
    s->hidx = calloc(cap, sizeof(uint32_t));
    i128 key[MAXKEYS];
    for (uint32_t r = 0; r < s->n; r++) {
        const uint64_t *row = s->rows + (uint64_t)r * s->stride;
        for (uint32_t j = 0; j < t->nkeys; j++) key[j] = (i128)kval(row + 4 + KW * j + 1);
        uint64_t h = key_hash(key, t->nkeys);
        for (uint32_t i = 0;; i++) {
            uint32_t *slot = &s->hidx[(h + i) & (cap - 1)];
            if (!*slot) { *slot = r + 1; break; }
        }
    }
}

static void tsnap_free(tsnap_t *s) {
    if (!s) return;
    free(s->rows); free(s->packets); free(s->bytes); free(s->hit); free(s->hidx); free(s);
}

static table_t *TABLES;
static profile_t *PROFILES;
static reg_t *REGS;
static cnt_t *CNTS;

/* A member or group of an action profile/selector, as ActionProfile.pick: a group's members
 * come in creation order, the selector hashes its key bits and takes the hash modulo the count. */
static int profile_pick(const profile_t *p, const uint64_t *row, const i128 *sel, const unsigned *selw,
                        uint32_t nsel, uint64_t *act, const uint64_t **args) {
    uint32_t mw = 2 + p->nargs;
    const uint64_t *m = NULL;
    if (row[2] != NO_ID) {
        for (uint32_t i = 0; i < p->nmembers; i++)
            if (p->members[(uint64_t)i * mw] == row[2]) { m = p->members + (uint64_t)i * mw; break; }
    } else {
        const uint64_t *g = NULL;
        for (uint32_t i = 0; i < p->ngroups; i++) if (p->group_rows[i][0] == row[3]) { g = p->group_rows[i]; break; }
        if (!g || !g[1]) return 0;
        uint64_t pick = 0;
        if (g[1] > 1 && sel) {
            uint8_t buf[MAXKEYS * 8 + 8] = {0};
            uint64_t bits = 0;
            for (uint32_t i = 0; i < nsel; i++) { putbits(buf, bits, selw[i], (uint64_t)sel[i]); bits += selw[i]; }
            uint64_t h = (uint64_t)hash_run((int)p->algo, buf, (bits + 7) >> 3, NULL, 0) & p->out_mask;
            pick = h % g[1];
        }
        m = p->members + g[2 + pick] * mw;
    }
    if (!m) return 0;
    *act = m[1];
    *args = m + 2;
    return 1;
}

typedef struct { int hit; uint64_t act; } tres_t;

/* Table.apply: the first matching row (or the hash index), direct counter, profile pick. */
static inline tres_t table_apply(table_t *t, const i128 *key, const i128 *sel, const unsigned *selw,
                                 uint32_t nsel, uint64_t plen, const uint64_t **args) {
    tsnap_t *s = t->snap;
    int64_t r = table_find(t, s, key);
    if (r < 0) { *args = t->dargs; return (tres_t){0, t->dact}; }
    const uint64_t *row = s->rows + (uint64_t)r * s->stride;
    if (t->counting) { s->packets[r]++; s->bytes[r] += plen; }
    if (t->idle) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); s->hit[r] = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec; }
    if (t->dmeter >= 0)
        DMCOLOR[t->dmeter] = row[0] < t->dm_cap ? mstate_exec(&t->dm[row[0]], t->dmeter_bytes ? (double)plen : 1.0) : 0;
    if (t->profile >= 0) {
        uint64_t act;
        if (!profile_pick(&PROFILES[t->profile], row, sel, selw, nsel, &act, args)) {
            *args = t->dargs;
            return (tres_t){0, t->dact};
        }
        return (tres_t){1, act};
    }
    *args = row + 4 + KW * t->nkeys;
    return (tres_t){1, row[1]};
}

/* a parser value_set: (value, mask) members, as ValueSet.match */
typedef struct { uint32_t n; uint64_t vm[2 * 256]; } vset_t;
static vset_t *VSETS;
static inline int vset_match(const vset_t *s, i128 key) {
    for (uint32_t i = 0; i < s->n; i++) if (((uint64_t)key & s->vm[2 * i + 1]) == s->vm[2 * i]) return 1;
    return 0;
}

static inline i128 reg_read(reg_t *r, i128 i) { return (i >= 0 && (u128)i < r->size) ? (i128)r->v[(uint64_t)i] : 0; }
static inline void reg_write(reg_t *r, i128 i, i128 v) { if (i >= 0 && (u128)i < r->size) r->v[(uint64_t)i] = (uint64_t)v & r->mask; }
static inline void cnt_count(cnt_t *c, i128 i, uint64_t len) {
    if (i >= 0 && (u128)i < c->size) { c->packets[(uint64_t)i]++; c->bytes[(uint64_t)i] += len; }
}

typedef struct buf { int ref; uint32_t len; uint8_t d[]; } buf_t;

static inline int stack_next(i128 nxt, int size) { if (nxt >= size) reject(3); return (int)nxt; }
static inline int stack_last(i128 nxt) { if (nxt == 0) reject(3); return (int)nxt - 1; }

/* ------------------------------------------------------------------ values wider than 127 bits
 * (up to 512: fabric.p4's port bitmap) as 8 little-endian words, two's complement */
#define WW 8
typedef struct { uint64_t w[WW]; } wide_t;
static inline wide_t wide_from(i128 v) {
    wide_t r; uint64_t s = v < 0 ? ~0ULL : 0;
    r.w[0] = (uint64_t)v; r.w[1] = (uint64_t)((u128)v >> 64);
    for (int i = 2; i < WW; i++) r.w[i] = s;
    return r;
}
static inline wide_t wide_load(const uint64_t *a, int n) { wide_t r; memset(&r, 0, sizeof r); memcpy(r.w, a, n * 8); return r; }
static inline i128 wide_low(wide_t a) { return (i128)(((u128)a.w[1] << 64) | a.w[0]); }
static inline wide_t wide_and(wide_t a, wide_t b) { for (int i = 0; i < WW; i++) a.w[i] &= b.w[i]; return a; }
static inline wide_t wide_or(wide_t a, wide_t b) { for (int i = 0; i < WW; i++) a.w[i] |= b.w[i]; return a; }
static inline wide_t wide_xor(wide_t a, wide_t b) { for (int i = 0; i < WW; i++) a.w[i] ^= b.w[i]; return a; }
static inline wide_t wide_not(wide_t a) { for (int i = 0; i < WW; i++) a.w[i] = ~a.w[i]; return a; }
static inline wide_t wide_add(wide_t a, wide_t b) {
    u128 c = 0;
    for (int i = 0; i < WW; i++) { c += (u128)a.w[i] + b.w[i]; a.w[i] = (uint64_t)c; c >>= 64; }
    return a;
}
static inline wide_t wide_sub(wide_t a, wide_t b) { return wide_add(a, wide_add(wide_not(b), wide_from(1))); }
static inline wide_t wide_neg(wide_t a) { return wide_sub(wide_from(0), a); }
static inline wide_t wide_shr(wide_t a, i128 n) {   /* arithmetic, as Python's >> */
    wide_t r; uint64_t s = (int64_t)a.w[WW - 1] < 0 ? ~0ULL : 0;
    if (n >= 64 * WW) { for (int i = 0; i < WW; i++) r.w[i] = s; return r; }
    int q = (int)(n / 64), b = (int)(n % 64);
    for (int i = 0; i < WW; i++) {
        uint64_t lo = i + q < WW ? a.w[i + q] : s, hi = i + q + 1 < WW ? a.w[i + q + 1] : s;
        r.w[i] = b ? (lo >> b) | (hi << (64 - b)) : lo;
    }
    return r;
}
static inline wide_t wide_shl(wide_t a, i128 n) {
    wide_t r; memset(&r, 0, sizeof r);
    if (n >= 64 * WW) return r;
    int q = (int)(n / 64), b = (int)(n % 64);
    for (int i = WW - 1; i >= q; i--) {
        uint64_t lo = a.w[i - q], below = i - q - 1 >= 0 ? a.w[i - q - 1] : 0;
        r.w[i] = b ? (lo << b) | (below >> (64 - b)) : lo;
    }
    return r;
}
static inline int wide_cmp(wide_t a, wide_t b) {
    if (a.w[WW - 1] != b.w[WW - 1]) return (int64_t)a.w[WW - 1] < (int64_t)b.w[WW - 1] ? -1 : 1;
    for (int i = WW - 2; i >= 0; i--) if (a.w[i] != b.w[i]) return a.w[i] < b.w[i] ? -1 : 1;
    return 0;
}
static inline int wide_nz(wide_t a) { for (int i = 0; i < WW; i++) if (a.w[i]) return 1; return 0; }
static inline wide_t getwide(const uint8_t *d, uint64_t bo, unsigned w) {
    wide_t r; memset(&r, 0, sizeof r);
    for (unsigned i = 0; i * 64 < w; i++) {
        unsigned n = w - i * 64 < 64 ? w - i * 64 : 64;
        r.w[i] = getbits(d, bo + w - i * 64 - n, n);
    }
    return r;
}
static inline void putwide(uint8_t *d, uint64_t bo, unsigned w, wide_t v) {
    for (unsigned i = 0; i * 64 < w; i++) {
        unsigned n = w - i * 64 < 64 ? w - i * 64 : 64;
        putbits(d, bo + w - i * 64 - n, n, v.w[i]);
    }
}
