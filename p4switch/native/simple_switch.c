/* p4switch native backend: the v1model traffic manager and the exported control API, compiled
 * after the generated stages (PARSE, VERIFY, INGRESS, EGRESS, COMPUTE, DEPARSE, PRESERVE,
 * DIGEST_RUN). It follows p4switch/pipeline.py (the reference semantics) step by step: the
 * same order of replicas, clones, resubmit and recirculation rounds. */
#include <pthread.h>

#define DROP_PORT 511
#define MAX_LOOPS 32
enum { NORMAL = 0, INGRESS_CLONE = 1, EGRESS_CLONE = 2, RECIRC = 4, REPLICATION = 5, RESUBMIT = 6 };

static pthread_mutex_t LOCK = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ packet buffers */
static buf_t *buf_new(const uint8_t *d, uint32_t n) {
    buf_t *b = malloc(sizeof(buf_t) + n + 1);
    b->ref = 1; b->len = n;
    if (n) memcpy(b->d, d, n);
    return b;
}
static void buf_put(buf_t *b) { if (b && --b->ref == 0) free(b); }

/* packet states are recycled (a free list under the pipeline lock): malloc/free per packet
 * cost more than the pipeline of a small program */
static state_t *FREE_STATES[256];
static int NFREE;
static state_t *state_new(void) {
    state_t *S = NFREE ? FREE_STATES[--NFREE] : malloc(sizeof(state_t));
    memset(S, 0, sizeof(state_t));
    S->clone_kind = S->resubmit = S->recirculate = S->truncate = S->digest = -1;
    return S;
}
static void state_free(state_t *S) {
    buf_put(S->data);
    if (NFREE < 256) FREE_STATES[NFREE++] = S; else free(S);
}

/* the clock is read once per packet (or per receive batch), not at every pipeline step:
 * clock_gettime is a good part of a small program's time per packet */
static uint64_t NOW_US;
static uint64_t clock_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL) & 0xFFFFFFFFFFFFULL;
}
static uint64_t tick(void) { return NOW_US = clock_us(); }
static uint64_t now_us(void) { return NOW_US; }

/* ------------------------------------------------------------------ replication engine */
typedef struct { uint32_t n; uint32_t *pr; } replicas_t;          /* (port, rid) pairs */
static replicas_t *MC[65536];
typedef struct { uint64_t id; uint32_t clip; replicas_t r; } session_t;
static session_t *SESSIONS;
static uint32_t NSESSIONS;

static const session_t *session_get(uint64_t id) {
    for (uint32_t i = 0; i < NSESSIONS; i++) if (SESSIONS[i].id == id) return &SESSIONS[i];
    return NULL;
}

/* ------------------------------------------------------------------ digests */
#define DIGEST_QMAX 4096
static uint64_t DIGQ[DIGEST_QMAX][1 + MAXARGS];
static uint32_t DIGQ_N;
static int DIGQ_SIGNALED;      /* Python was told that digests wait (device.c) */
static void digest_push(uint64_t id, const uint64_t *vals, uint32_t n) {
    if (DIGQ_N >= DIGEST_QMAX) return;
    DIGQ[DIGQ_N][0] = id;
    memcpy(&DIGQ[DIGQ_N][1], vals, n * sizeof(uint64_t));
    DIGQ_N++;
}

/* ------------------------------------------------------------------ the pipeline */
typedef struct { int is_job; uint32_t port; state_t *S; buf_t *b; } item_t;
typedef struct { item_t *v; uint32_t n, cap; } items_t;
static void items_add(items_t *l, item_t it) {
    if (l->n == l->cap) { l->cap = l->cap ? 2 * l->cap : 8; l->v = realloc(l->v, l->cap * sizeof(item_t)); }
    l->v[l->n++] = it;
}
static void items_cat(items_t *dst, items_t *src) {
    for (uint32_t i = 0; i < src->n; i++) items_add(dst, src->v[i]);
    free(src->v);
    src->v = NULL; src->n = src->cap = 0;
}

static state_t *parse_packet(uint32_t port, buf_t *data, int instance, state_t *src, int64_t fl) {
    state_t *S = state_new();
    S->data = data; data->ref++;
    S->plen = data->len;
    S->sm.ingress_port = port; S->sm.instance_type = instance; S->sm.packet_length = data->len;
    S->sm.ingress_global_timestamp = now_us();
    if (src && fl >= 0) PRESERVE(src, S, fl);
    CUR = S;
    /* the cursor lives outside this frame: after a longjmp only memory is trustworthy */
    static cursor_t c;
    c = (cursor_t){data->d, 0, (uint64_t)data->len * 8};
    jmp_buf j; jmp_buf *saved = REJECT_JMP;
    REJECT_JMP = &j;
    int code = setjmp(j);
    if (!code) PARSE(S, &c);
    else S->sm.parser_error = code - 1;
    REJECT_JMP = saved;
    S->payload_off = (uint32_t)((c.bo + 7) >> 3);
    if (S->payload_off > data->len) S->payload_off = data->len;
    VERIFY(S);
    return S;
}

/* a multicast replica: headers and metadata copied, the v1model requests (clone, resubmit,
 * recirculate, truncate, digest) fresh, as Pipeline._copy_state */
static state_t *copy_state(state_t *S) {
    state_t *R = NFREE ? FREE_STATES[--NFREE] : malloc(sizeof(state_t));
    *R = *S;
    R->data->ref++;
    R->clone_kind = R->resubmit = R->recirculate = R->truncate = R->digest = -1;
    R->clip = 0;
    return R;
}

static void run_control(void (*fn)(state_t *), state_t *S) {
    jmp_buf j; jmp_buf *saved = EXIT_JMP;
    EXIT_JMP = &j;
    if (!setjmp(j)) fn(S);
    EXIT_JMP = saved;
}

static void ingress(uint32_t port, buf_t *data, int instance, state_t *src, int64_t fl, int depth, items_t *res) {
    if (depth > MAX_LOOPS) return;
    state_t *S = parse_packet(port, data, instance, src, fl);
    S->depth = depth;
    run_control(INGRESS, S);
    items_t jobs = {0};
    if (S->clone_kind == 0) {
        const session_t *ses = session_get((uint64_t)S->clone_session & 0xFFFFFFFFULL);
        for (uint32_t i = 0; ses && i < ses->r.n; i++) {
            state_t *C = parse_packet(port, data, INGRESS_CLONE, S, S->clone_fl);
            C->sm.egress_port = ses->r.pr[2 * i]; C->sm.egress_rid = ses->r.pr[2 * i + 1]; C->clip = ses->clip;
            items_add(&jobs, (item_t){1, ses->r.pr[2 * i], C, NULL});
        }
    }
    if (S->digest >= 0) DIGEST_RUN(S);
    if (S->resubmit >= 0) {
        ingress(port, data, RESUBMIT, S, S->resubmit, depth + 1, res);
        items_cat(res, &jobs);
        state_free(S);
        return;
    }
    if (S->sm.mcast_grp) {
        const replicas_t *r = MC[(uint64_t)S->sm.mcast_grp & 0xFFFF];
        for (uint32_t i = 0; r && i < r->n; i++) {
            state_t *R = copy_state(S);
            R->sm.egress_port = r->pr[2 * i]; R->sm.egress_rid = r->pr[2 * i + 1]; R->sm.instance_type = REPLICATION;
            items_add(res, (item_t){1, r->pr[2 * i], R, NULL});
        }
        items_cat(res, &jobs);
        state_free(S);
        return;
    }
    if (S->sm.egress_spec == DROP_PORT) {
        items_cat(res, &jobs);
        state_free(S);
        return;
    }
    S->sm.egress_port = S->sm.egress_spec;
    items_add(res, (item_t){1, (uint32_t)S->sm.egress_spec, S, NULL});
    items_cat(res, &jobs);
}

static uint8_t DEPARSE_BUF[1 << 16];

static void egress_md(item_t job, uint64_t enq_ts, uint32_t enq_depth, uint64_t deq_td, uint32_t deq_depth,
                      items_t *res) {
    state_t *S = job.S;
    S->sm.egress_port = job.port;
    S->sm.enq_timestamp = enq_ts & 0xFFFFFFFFULL; S->sm.enq_qdepth = enq_depth & 0x7FFFF;
    S->sm.deq_timedelta = deq_td & 0xFFFFFFFFULL; S->sm.deq_qdepth = deq_depth & 0x7FFFF;
    S->sm.egress_global_timestamp = now_us();
    S->clone_kind = S->recirculate = S->digest = -1;
    CUR = S;
    run_control(EGRESS, S);
    items_t clones = {0};
    if (S->clone_kind == 1) {
        const session_t *ses = session_get((uint64_t)S->clone_session & 0xFFFFFFFFULL);
        for (uint32_t i = 0; ses && i < ses->r.n; i++) {
            state_t *C = state_new();
            C->data = S->data; C->data->ref++;
            C->plen = S->plen; C->payload_off = S->payload_off; C->depth = S->depth;
            C->hdr = S->hdr;
            if (S->clone_fl >= 0) PRESERVE(S, C, S->clone_fl);
            C->sm.ingress_port = S->sm.ingress_port;
            C->sm.packet_length = S->sm.packet_length;
            C->sm.instance_type = EGRESS_CLONE;
            C->sm.egress_rid = ses->r.pr[2 * i + 1]; C->clip = ses->clip;
            items_add(&clones, (item_t){1, ses->r.pr[2 * i], C, NULL});
        }
    }
    if (S->sm.egress_spec != DROP_PORT) {
        CUR = S;
        COMPUTE(S);
        outbuf_t o = {DEPARSE_BUF, 0};
        DEPARSE(S, &o);
        uint32_t hlen = (uint32_t)((o.bits + 7) >> 3);
        if (o.bits & 7) DEPARSE_BUF[o.bits >> 3] &= (uint8_t)(0xFF << (8 - (o.bits & 7)));
        uint32_t plen = S->data->len - S->payload_off;
        uint32_t n = hlen + plen;
        if (S->truncate >= 0 && (uint64_t)S->truncate < n) n = (uint32_t)S->truncate;
        if (S->clip && S->clip < n) n = S->clip;
        buf_t *b = malloc(sizeof(buf_t) + hlen + plen + 1);
        b->ref = 1; b->len = n;
        memcpy(b->d, DEPARSE_BUF, hlen);
        memcpy(b->d + hlen, S->data->d + S->payload_off, plen);
        if (S->recirculate >= 0) {
            ingress((uint32_t)S->sm.ingress_port, b, RECIRC, S, S->recirculate, S->depth + 1, res);
            buf_put(b);
        } else {
            items_add(res, (item_t){0, job.port, NULL, b});
        }
    }
    items_cat(res, &clones);
    state_free(S);
}

static void egress(item_t job, items_t *res) { egress_md(job, 0, 0, 0, 0, res); }

/* ------------------------------------------------------------------ exported API */
static int READY;

int sw_init(void) {
    if (READY) return 0;
    hash_init();
    program_init();
    READY = 1;
    return 0;
}

void sw_lock(void) { pthread_mutex_lock(&LOCK); }
void sw_unlock(void) { pthread_mutex_unlock(&LOCK); }

/* One packet through the whole pipeline (as Switch.process). Outputs go to `out` back to back,
 * `meta` gets (port, length) per output. Returns the number of outputs; -1: an assert failed
 * (sw_assert_info says where), -2: the outputs did not fit. */
int sw_process_locked(uint32_t port, const uint8_t *data, uint32_t len, uint8_t *out, uint32_t cap,
                      uint32_t *meta, uint32_t maxpk) {
    jmp_buf aj;
    ASSERT_JMP = &aj;
    items_t pending = {0}, res = {0};
    uint32_t head = 0, nout = 0, used = 0;
    int rc = 0;
    buf_t *b = buf_new(data, len);
    tick();
    if (setjmp(aj)) { rc = -1; goto done; }
    ingress(port, b, NORMAL, NULL, -1, 0, &pending);
    while (head < pending.n) {
        item_t job = pending.v[head++];
        items_t r = {0};
        egress(job, &r);
        for (uint32_t i = 0; i < r.n; i++) {
            if (r.v[i].is_job) { items_add(&pending, r.v[i]); continue; }
            buf_t *o = r.v[i].b;
            if (nout < maxpk && used + o->len <= cap) {
                memcpy(out + used, o->d, o->len);
                meta[2 * nout] = r.v[i].port; meta[2 * nout + 1] = o->len;
                used += o->len; nout++;
            } else rc = -2;
            buf_put(o);
        }
        free(r.v);
    }
done:
    free(pending.v); free(res.v);
    buf_put(b);
    ASSERT_JMP = NULL;
    return rc ? rc : (int)nout;
}

int sw_process(uint32_t port, const uint8_t *data, uint32_t len, uint8_t *out, uint32_t cap,
               uint32_t *meta, uint32_t maxpk) {
    pthread_mutex_lock(&LOCK);
    int rc = sw_process_locked(port, data, len, out, cap, meta, maxpk);
    pthread_mutex_unlock(&LOCK);
    return rc;
}

void sw_assert_info(int *kind, int *line) { *kind = ASSERT_KIND; *line = ASSERT_LINE; }

/* ns per packet of sw_process over `count` copies of one packet (the in-process benchmark) */
double sw_bench(uint32_t port, const uint8_t *data, uint32_t len, uint32_t count) {
    static uint8_t out[1 << 16];
    uint32_t meta[512];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (uint32_t i = 0; i < count; i++) sw_process(port, data, len, out, sizeof out, meta, 256);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / count;
}

/* A new snapshot of table t. carry: keep the counters of entries that stay (the packets/bytes
 * given are then ignored for them); otherwise the given counters are taken. The last-hit times
 * of entries that stay always follow them. */
void sw_table_set(int t, uint32_t n, const uint64_t *rows, const uint64_t *packets, const uint64_t *bytes, int carry) {
    table_t *tb = &TABLES[t];
    tsnap_t *s = calloc(1, sizeof(tsnap_t));
    s->n = n; s->stride = 4 + KW * tb->nkeys + tb->nargs;
    s->rows = malloc((uint64_t)n * s->stride * sizeof(uint64_t) + 8);
    s->packets = calloc(n + 1, sizeof(uint64_t)); s->bytes = calloc(n + 1, sizeof(uint64_t));
    s->hit = calloc(n + 1, sizeof(uint64_t));
    if (n) {
        memcpy(s->rows, rows, (uint64_t)n * s->stride * sizeof(uint64_t));
        memcpy(s->packets, packets, n * sizeof(uint64_t)); memcpy(s->bytes, bytes, n * sizeof(uint64_t));
    }
    tsnap_index(tb, s);
    pthread_mutex_lock(&LOCK);
    tsnap_t *old = tb->snap;
    if (old && old->n && n) {
        /* direct counters and hit times follow their entry (by handle) into the new snapshot,
         * under the lock */
        uint32_t cap = 8;
        while (cap < old->n * 2) cap <<= 1;
        uint32_t *map = calloc(cap, sizeof(uint32_t));
        for (uint32_t i = 0; i < old->n; i++) {
            uint64_t h = old->rows[(uint64_t)i * old->stride];
            uint32_t k = (uint32_t)(h * 2654435761u) & (cap - 1);
            while (map[k]) k = (k + 1) & (cap - 1);
            map[k] = i + 1;
        }
        for (uint32_t i = 0; i < n; i++) {
            uint64_t h = s->rows[(uint64_t)i * s->stride];
            for (uint32_t k = (uint32_t)(h * 2654435761u) & (cap - 1); map[k]; k = (k + 1) & (cap - 1)) {
                uint32_t j = map[k] - 1;
                if (old->rows[(uint64_t)j * old->stride] != h) continue;
                if (carry) { s->packets[i] = old->packets[j]; s->bytes[i] = old->bytes[j]; }
                s->hit[i] = old->hit[j];
                break;
            }
        }
        free(map);
    }
    tb->snap = s;
    pthread_mutex_unlock(&LOCK);
    tsnap_free(old);
}

void sw_table_default(int t, uint64_t act, const uint64_t *args) {
    pthread_mutex_lock(&LOCK);
    TABLES[t].dact = act;
    memcpy(TABLES[t].dargs, args, TABLES[t].nargs * sizeof(uint64_t));
    pthread_mutex_unlock(&LOCK);
}

uint32_t sw_table_counters(int t, uint64_t *handles, uint64_t *packets, uint64_t *bytes) {
    pthread_mutex_lock(&LOCK);
    tsnap_t *s = TABLES[t].snap;
    uint32_t n = s ? s->n : 0;
    for (uint32_t i = 0; i < n; i++) {
        handles[i] = s->rows[(uint64_t)i * s->stride];
        packets[i] = s->packets[i]; bytes[i] = s->bytes[i];
    }
    pthread_mutex_unlock(&LOCK);
    return n;
}

uint32_t sw_table_hits(int t, uint64_t *handles, uint64_t *hits) {
    pthread_mutex_lock(&LOCK);
    tsnap_t *s = TABLES[t].snap;
    uint32_t n = s ? s->n : 0;
    for (uint32_t i = 0; i < n; i++) { handles[i] = s->rows[(uint64_t)i * s->stride]; hits[i] = s->hit[i]; }
    pthread_mutex_unlock(&LOCK);
    return n;
}

void sw_profile_set(int p, uint32_t nm, const uint64_t *members, uint32_t ng, const uint64_t *groups, uint32_t gwords) {
    profile_t *pr = &PROFILES[p];
    uint32_t mw = 2 + pr->nargs;
    uint64_t *m = malloc((uint64_t)nm * mw * 8 + 8), *g = malloc((uint64_t)gwords * 8 + 8);
    uint64_t **gr = malloc((ng + 1) * sizeof(uint64_t *));
    memcpy(m, members, (uint64_t)nm * mw * 8);
    memcpy(g, groups, (uint64_t)gwords * 8);
    uint64_t *q = g;
    for (uint32_t i = 0; i < ng; i++) { gr[i] = q; q += 2 + q[1]; }
    pthread_mutex_lock(&LOCK);
    uint64_t *om = pr->members, *og = pr->groups, **ogr = pr->group_rows;
    pr->members = m; pr->groups = g; pr->group_rows = gr; pr->nmembers = nm; pr->ngroups = ng;
    pthread_mutex_unlock(&LOCK);
    free(om); free(og); free(ogr);
}

void sw_mc_set(uint32_t gid, int exists, uint32_t n, const uint32_t *pr) {
    replicas_t *r = NULL;
    if (exists) {
        r = malloc(sizeof(replicas_t));
        r->n = n; r->pr = malloc(2 * n * sizeof(uint32_t) + 4);
        memcpy(r->pr, pr, 2 * n * sizeof(uint32_t));
    }
    pthread_mutex_lock(&LOCK);
    replicas_t *old = MC[gid & 0xFFFF];
    MC[gid & 0xFFFF] = r;
    pthread_mutex_unlock(&LOCK);
    if (old) { free(old->pr); free(old); }
}

/* all clone sessions at once: per session id, clip, count, then count (port, rid) pairs */
void sw_clone_set_all(uint32_t nsessions, const uint64_t *blob) {
    session_t *s = calloc(nsessions + 1, sizeof(session_t));
    const uint64_t *q = blob;
    for (uint32_t i = 0; i < nsessions; i++) {
        s[i].id = q[0]; s[i].clip = (uint32_t)q[1]; s[i].r.n = (uint32_t)q[2];
        s[i].r.pr = malloc(2 * s[i].r.n * sizeof(uint32_t) + 4);
        for (uint32_t k = 0; k < 2 * s[i].r.n; k++) s[i].r.pr[k] = (uint32_t)q[3 + k];
        q += 3 + 2 * s[i].r.n;
    }
    pthread_mutex_lock(&LOCK);
    session_t *old = SESSIONS; uint32_t oldn = NSESSIONS;
    SESSIONS = s; NSESSIONS = nsessions;
    pthread_mutex_unlock(&LOCK);
    for (uint32_t i = 0; i < oldn; i++) free(old[i].r.pr);
    free(old);
}

void sw_value_set(int v, uint32_t n, const uint64_t *vm) {
    pthread_mutex_lock(&LOCK);
    VSETS[v].n = n;
    memcpy(VSETS[v].vm, vm, 2 * n * sizeof(uint64_t));
    pthread_mutex_unlock(&LOCK);
}

/* configure (on) or reset (!on) meter m's cell i; m < 0: table -m-1's direct meter of entry i */
void sw_meter_set(int m, uint64_t i, int on, double cir, double cburst, double pir, double pburst) {
    pthread_mutex_lock(&LOCK);
    mstate_t *s = NULL;
    if (m >= 0) {
        if (i < METERS[m].size) s = &METERS[m].s[i];
    } else {
        table_t *t = &TABLES[-m - 1];
        if (i >= t->dm_cap) {
            uint64_t cap = t->dm_cap ? t->dm_cap : 64;
            while (cap <= i) cap *= 2;
            t->dm = realloc(t->dm, cap * sizeof(mstate_t));
            memset(t->dm + t->dm_cap, 0, (cap - t->dm_cap) * sizeof(mstate_t));
            t->dm_cap = cap;
        }
        s = &t->dm[i];
    }
    if (s) *s = (mstate_t){on, cir, cburst, pir, pburst, cburst, pburst, mono_s()};
    pthread_mutex_unlock(&LOCK);
}

uint64_t *sw_register(int r) { return REGS[r].v; }
uint64_t *sw_counter(int c, int bytes) { return bytes ? CNTS[c].bytes : CNTS[c].packets; }

uint32_t sw_digests(uint64_t *out, uint32_t cap) {
    pthread_mutex_lock(&LOCK);
    uint32_t n = DIGQ_N < cap ? DIGQ_N : cap;
    memcpy(out, DIGQ, (uint64_t)n * sizeof(DIGQ[0]));
    DIGQ_N = 0;
    DIGQ_SIGNALED = 0;
    pthread_mutex_unlock(&LOCK);
    return n;
}
