// The project's packet-level simulator: a discrete-event engine over picosecond integer time,
// compiled with the system C++ compiler (sim/engine.py, through nativebuild/) after a prelude of
// the RoCEv2 numbers it shares with the project (sim/engine.py: PRELUDE, from
// fabricmodel/rocev2.py), and driven from Python through the C functions at the end (mls_*).
//
// Links are a FIFO per sending port, a busy line and a propagation delay (store and forward).
// Switches (leaf/spine/agg/core) forward a packet by a pin entry if one matches, else by crc32
// over the 5-tuple, the 16 bits of it at the switch's salt, modulo the ECMP group (as
// p4src/fabric.p4 and fabricmodel/hashing.py); they replicate multicast along a
// tree, aggregate in-network (NetReduce) and mark ECN at egress (RED-like ramp). With PFC on,
// a switch has one shared buffer: an ingress port's bytes of the data priority are held to a
// dynamic threshold (a fraction of the free buffer); past it the port sends PAUSE upstream,
// below it less a resume offset it sends RESUME, and what arrives meanwhile lands in the
// port's headroom (a drop past that is counted as a headroom drop). Control packets (ACK, NAK,
// CNP) go in a strict-priority queue that PFC never pauses. Hosts run a RoCE reliable
// connection per queue pair (QP): per-QP UDP source port (the ECMP entropy), a window, DCQCN
// (the receiver sends a CNP for a CE-marked packet at most once per QP per interval; the sender
// cuts its rate on a CNP, and recovers by timer and byte counter through fast recovery,
// additive and hyper increase), a retransmission timeout that doubles on each expiry, and a
// receiver per QP of one of two kinds: go-back-N (RoCE's: in-order only, a NAK at the first
// sequence gap, the sender resends from the gap) or selective repeat (out-of-order packets
// placed by PSN, each acknowledged; loss seen by the timeout). Every drop is counted where it
// happens (a failed link, an egress queue's limit, a full buffer or headroom, no route). The entropy
// policy of a QP is hash ECMP (one port), spraying (a random port per packet), REPS (recycled
// entropy) or pinned (Ethereal: the port its planner chose, re-picked on timeout by Python).
// Python is called back only when a rank starts a collective step, when a rank finishes a
// collective, on an Ethereal timeout and on a timer it set.
//
// Several collectives run at once as jobs: each job has its own steps per rank (rank = host
// node index), a rank enters a job when Python starts it there, and every QP, multicast and
// aggregation packet carries its job, so the steps of different collectives are counted apart.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <unordered_map>
#include <string>
#include <vector>

namespace mlsim {

// ---- time: integer picoseconds ---------------------------------------------------------
// The engine's clock counts picoseconds (at 400 Gb/s a 4 KiB packet takes 83 ns: nanoseconds
// would skew rates). Python and the transport's rate arithmetic speak seconds as doubles; the
// two conversions go through a fixed-point number with 64 fractional bits, so that a result
// recorded once (tests/sim/test_sim_exact.py) is reproduced to the last bit:
//  - seconds -> ps: the double's fraction is scaled to 64 bits in long double and rounded
//    (half up), the fixed-point value is multiplied by 10^12 exactly, and the product is
//    rounded half up to whole picoseconds;
//  - ps -> seconds: the count is multiplied by the reciprocal of 10^12 in 128-bit fixed point
//    (rounded up), the product truncated to 64 fractional bits and read in long double.
namespace clock {
typedef unsigned __int128 u128;
constexpr int64_t PS_PER_S = 1000000000000LL;
constexpr long double TWO64 = 18446744073709551616.0L;
constexpr u128 RECIPROCAL = ~u128(0) / PS_PER_S + 1;      // ceil(2^128 / 10^12)

inline int64_t ps(double seconds) {
  if (seconds == 0) return 0;
  bool neg = seconds < 0;
  long double v = neg ? -(long double)seconds : (long double)seconds;
  long double whole;
  long double frac = std::modf(v, &whole) * TWO64 + 0.5L;
  u128 fixed = (u128(uint64_t(whole)) << 64) | uint64_t(frac);
  int64_t t = int64_t((fixed * u128(PS_PER_S) + (u128(1) << 63)) >> 64);
  return neg ? -t : t;
}

inline double seconds(int64_t t) {
  if (t == 0) return 0;
  bool neg = t < 0;
  u128 a = neg ? u128(-(t + 1)) + 1 : u128(t);
  u128 hi = RECIPROCAL >> 64, lo = uint64_t(RECIPROCAL);
  u128 fixed = a * hi + ((a * lo) >> 64);                  // a * RECIPROCAL / 2^64
  long double r = (long double)uint64_t(fixed >> 64);
  r += (long double)uint64_t(fixed) / TWO64;
  return neg ? -double(r) : double(r);
}

// The time `bytes` take on a line of `bps` bits per second, rounded half up to picoseconds.
inline int64_t tx_time(uint64_t bytes, uint64_t bps) {
  u128 num = u128(bytes) * 8 * PS_PER_S;
  return int64_t((2 * num + bps) / (2 * u128(bps)));
}
}  // namespace clock

enum Flags : uint8_t { ACK = 1, CE = 2, ECE = 4, MCAST = 8, AGG = 16, NAK = 32, CNP = 64 };
constexpr uint8_t CONTROL = ACK | NAK | CNP;      // the strict-priority class, never paused
enum Mode : int { ECMP = 0, SPRAY = 1, REPS = 2, PINNED = 3 };

constexpr int MAX_HOPS = 6;

// ---- the wire format: the fields of Eth/IPv4/UDP/BTH the fabric looks at -----------------
// A packet is this record and a payload size, taken from a pool and returned to it when the
// packet is consumed: nothing is serialized, copied or allocated per packet.
struct RoceHeader {
  uint32_t src = 0, dst = 0;           // IPv4 addresses
  uint16_t sport = 0, dport = ROCEV2_PORT;
  uint8_t proto = UDP, flags = 0, nhops = 0;
  uint32_t qp = 0, psn = 0;
  uint16_t ev = 0;                     // ACK: the source port of the packet it acknowledges
  uint16_t hops[MAX_HOPS] = {0};       // ingress ports on the way: the ACK retraces them
};

struct Packet {
  RoceHeader h;
  uint32_t size = 0;                   // payload bytes; WIRE_HEADER more are on the wire
  int32_t in_link = -1;                // PFC: the ingress it is accounted to (-1: none)
  bool in_headroom = false;            // PFC: held in that ingress's headroom
};

// Reflected CRC-32 (IEEE), what v1model's HashAlgorithm.crc32 and zlib.crc32 compute.
inline uint32_t crc32(const uint8_t* data, size_t n) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// The 13 bytes fabric.p4 hashes: src, dst, protocol, sport, dport in network order.
inline uint32_t ecmp_hash(uint32_t src, uint32_t dst, uint8_t proto, uint16_t sport,
                          uint16_t dport) {
  uint8_t k[13] = {uint8_t(src >> 24), uint8_t(src >> 16), uint8_t(src >> 8), uint8_t(src),
                   uint8_t(dst >> 24), uint8_t(dst >> 16), uint8_t(dst >> 8), uint8_t(dst),
                   proto, uint8_t(sport >> 8), uint8_t(sport), uint8_t(dport >> 8),
                   uint8_t(dport)};
  return crc32(k, 13);
}

// The 16 bits of `crc` that start at bit `salt`, cyclically (fabricmodel.hashing.salted_window).
inline uint16_t salted_window(uint32_t crc, uint8_t salt) {
  return uint16_t((uint64_t(crc) << 32 | crc) >> salt);
}

// A pin entry's match: src, dst, sport (UDP to ROCEV2_PORT).
struct PinKey {
  uint32_t src, dst;
  uint16_t sport;
  bool operator==(const PinKey& o) const { return src == o.src && dst == o.dst && sport == o.sport; }
};
struct PinHash {
  size_t operator()(const PinKey& k) const {
    return std::hash<uint64_t>()((uint64_t(k.src) << 32 | k.dst) * 0x9E3779B97F4A7C15ULL ^ k.sport);
  }
};

// A FIFO on a vector (std::deque allocates about 600 bytes as soon as it exists; a QP has two
// and a 1,024-host all-to-all a million QPs).
template <typename T>
struct Fifo {
  std::vector<T> v;
  size_t head = 0;
  bool empty() const { return head == v.size(); }
  size_t size() const { return v.size() - head; }
  T front() const { return v[head]; }
  void push_back(T x) { v.push_back(x); }
  void pop_front() {
    if (++head == v.size()) { v.clear(); head = 0; }
    else if (head >= 64 && head * 2 >= v.size()) { v.erase(v.begin(), v.begin() + head); head = 0; }
  }
  void remove(T x) { v.erase(std::remove(v.begin() + head, v.end(), x), v.end()); }
};

struct Qp {
  // identity
  int id = 0, job = 0, src = 0, dst = 0, step = 0, mode = ECMP;
  uint16_t sport = 0;
  uint64_t bytes = 0;
  uint32_t npkts = 0, mtu = 0;
  uint64_t base = 0;                  // its packets' state: Fabric::pkts_[base, base + npkts)
  // sender
  uint32_t next_new = 0, acked_count = 0, inflight = 0, first_unacked = 0;
  Fifo<uint32_t> retx;
  double next_send = 0;
  bool gbn = false;                   // its receiver: go-back-N, else selective repeat
  bool timer_armed = false, done = false;
  uint32_t timeouts = 0, retransmitted = 0, backoff = 0;   // RTO = rto * 2^backoff
  // DCQCN reaction point
  double rate = 0, target = 0, alpha = 1, last_cut = -1, last_cnp = -1;
  uint64_t byte_count = 0;            // bytes sent since the byte counter last fired
  uint32_t timer_stage = 0, byte_stage = 0, increase_gen = 0;
  // REPS
  Fifo<uint16_t> cache;
  uint32_t explored = 0;
  uint16_t explore_base = 0;
  // receiver
  uint32_t got_count = 0, epsn = 0;   // epsn: go-back-N's next expected PSN
  bool nak_sent = false;              // a NAK for the gap at epsn is out
  double cnp_at = -1;                 // the last CNP it sent (notification point)
  double started = 0, finished = -1;
  // a job's multicast or aggregation send: unacknowledged packets to this address
  uint32_t raw_dst = 0;
  uint8_t raw_flags = 0;

  bool has_work() const { return !done && (!retx.empty() || next_new < npkts); }
};

// A QP's state per packet, kept for every QP in one array (a 1,024-host all-to-all has a
// million one-packet QPs: five small vectors each cost more than the packets).
struct PktState {
  double sent_at = 0;
  uint16_t sent_ev = 0;              // the source port it was sent with
  uint8_t acked = 0, lost = 0, got = 0;
};

struct McastTree {                  // a group's shared tree: ports to copy to, per switch
  std::unordered_map<int, std::vector<int>> ports;
};

struct AggJob {                     // NetReduce: the switch sums chunk i of every worker
  int sw = -1, workers = 0;
  std::unordered_map<uint64_t, int> arrived;   // (job, chunk) -> contributions so far
};

class Fabric {
 public:
  // ---- configuration (from Python, once) -----------------------------------------------
  double line_bps = 400e9, rto = 100e-6;
  uint32_t rto_max_backoff = 6;
  uint32_t ecn_kmin = 100000, ecn_kmax = 400000;
  double ecn_pmax = 0.2;
  uint32_t window = 64, reps_cache = 8;
  uint32_t host_window = 0;           // data packets in flight per NIC, all QPs (0: no cap)
  uint32_t gbn_modes = 0;             // bit m set: QPs of entropy mode m get go-back-N receivers
  // DCQCN (sim/README.md lists the defaults and their sources)
  bool cc = true;
  double cnp_interval = 50e-6;        // NP: at most one CNP per QP per interval
  double dcqcn_g = 1.0 / 256, alpha_resume = 1e-6, rate_decrease_interval = 4e-6;
  double rp_timer = 300e-6, byte_counter = 10e6, rate_ai = 80e6, rate_hai = 800e6;
  double min_rate = 100e6;
  uint32_t fast_recovery = 1;
  // PFC on a shared buffer (per switch), one lossless data priority
  bool pfc = false;
  double buffer_bytes = 32e6, pfc_alpha = 1.0 / 8, headroom_bytes = 0, pfc_resume_bytes = 0;
  double pfc_xoff_bytes = 0;          // > 0: a static XOFF threshold per ingress instead

  std::function<void(int, int, int)> on_arrive;     // (job, rank, step): Python gives the QPs
  std::function<void(int, int)> on_done;            // (job, rank): the rank finished the job
  std::function<void(int)> on_timeout;             // Ethereal re-pick (qp id)
  std::function<void(int)> on_timer;               // a timer Python set (its id)

  // Every link has this rate (bits per second), propagation delay (picoseconds) and queue
  // limit in packets.
  void set_links(uint64_t rate_bps, int64_t delay_ps, uint32_t queue_packets) {
    rate_bps_ = rate_bps;
    delay_ = delay_ps;
    queue_limit_ = queue_packets;
    tx_ticks_.clear();
  }
  int add_node(bool is_host, uint32_t ip) {
    int idx = is_host_.size();
    is_host_.push_back(is_host);
    ports_.emplace_back();
    groups_.emplace_back();
    pins_.emplace_back();
    host_port_.emplace_back();
    node_ip_.push_back(ip);
    salt_.push_back(0);
    buffer_used_.push_back(0);
    nic_.emplace_back();
    return idx;
  }
  // A full-duplex cable between (a, a_port) and (b, b_port).
  void connect(int a, int a_port, int b, int b_port) {
    int pa = new_port(a, a_port), pb = new_port(b, b_port);
    links_[pa].peer = pb;
    links_[pb].peer = pa;
  }
  void set_group(int sw, int dst_leaf, std::vector<int> ports) {
    auto& g = groups_[sw];
    if ((int)g.size() <= dst_leaf) g.resize(dst_leaf + 1);
    g[dst_leaf] = ports;
  }
  void set_host_port(int leaf, uint32_t ip, int port) { host_port_[leaf][ip] = port; }
  void add_pin(int sw, uint32_t src, uint32_t dst, uint16_t sport, int port) {
    pins_[sw][PinKey{src, dst, sport}] = port;
  }
  void fail_port(int node, int port) { links_[ports_[node][port]].failed = true; }
  void set_salt(int sw, uint8_t salt) { salt_[sw] = salt & 31; }   // fabric.p4's bit<5>
  // The data packet sent onto (node, port) after `after` more is lost (an injected loss).
  void lose_one(int node, int port, int64_t after) { links_[ports_[node][port]].lose_in = after; }
  // A collective: its ranks are host node indices; each gets its steps, then is started.
  int add_job() {
    size_t n = is_host_.size();
    jobs_.push_back({std::vector<std::vector<StepState>>(n), std::vector<int>(n, -1),
                     std::vector<double>(n, -1)});
    return jobs_.size() - 1;
  }
  // Rank r's next step of `job`: the bytes it must receive before it may go on (its sends
  // complete too).
  void add_step(int job, int rank, uint64_t expect_bytes) {
    jobs_[job].steps[rank].push_back({expect_bytes, 0, 0});
  }
  void start_rank(int job, int rank) { advance(job, rank); }
  // Python's clock: on_timer(id) runs `delay` seconds from now (compute, intra-host copies).
  void timer(double delay, int id) { schedule_ticks(clock::ps(delay), TIMER, id); }
  void seed(uint32_t s) { rng_.seed(s); }

  // ---- the collective ------------------------------------------------------------------
  // A QP from rank `src` (host node index = rank) to `dst` for step `step` of `job`.
  int add_qp(int job, int src, int dst, int step, uint64_t bytes, uint32_t mtu, uint16_t sport,
             int mode) {
    Qp q;
    q.id = qps_.size(); q.job = job; q.src = src; q.dst = dst; q.step = step; q.mode = mode;
    q.sport = sport; q.bytes = bytes; q.mtu = mtu;
    q.npkts = (bytes + mtu - 1) / mtu;
    q.base = pkts_.size();
    pkts_.resize(pkts_.size() + q.npkts);
    q.rate = q.target = line_bps;
    q.gbn = (gbn_modes >> mode) & 1;
    q.started = now();
    q.explore_base = SPORT_MIN | (rng_() & SPORT_MASK);
    qps_.push_back(std::move(q));
    jobs_[job].steps[src][step].sending++;
    nic_[src].active.push_back(q.id);
    wake(src);
    return q.id;
  }
  // add_qp for each (dsts[i], bytes[i], sports[i], modes[i] or modes[0]) of n in turn: one
  // call from Python per rank step, on its numpy arrays (int64, no copy).
  void add_qps(int job, int src, int step, int n, const int64_t* dsts, const int64_t* bytes,
               uint32_t mtu, const int64_t* sports, const int64_t* modes, int nmodes) {
    for (int i = 0; i < n; i++)
      add_qp(job, src, dsts[i], step, bytes[i], mtu, sports[i], modes[nmodes == 1 ? 0 : i]);
  }
  void repath(int qp, uint16_t sport) {       // Ethereal's re-pick, decided in Python
    qps_[qp].sport = sport;
  }

  // Runs events until none is left or, if until_s >= 0, until that much simulated time has
  // passed (events due exactly then still run); returns the simulated time at the end.
  double run(double until_s) {
    halted_ = false;
    if (until_s >= 0) schedule_ticks(clock::ps(until_s), STOP, 0);
    while (!events_.empty() && !halted_) {
      std::pop_heap(events_.begin(), events_.end(), Later());
      Event ev = events_.back();
      events_.pop_back();
      if (ev.lane >= 0) {            // the head of a lane: its next event takes its place
        Fifo<Event>& lane = lanes_[ev.lane].events;
        lane.pop_front();
        if (!lane.empty()) push_heap(lane.front());
      }
      if (ev.ts != now_) { now_ = ev.ts; now_s_ = clock::seconds(now_); }
      now_uid_ = ev.uid;
      event_count_++;
      if (ev.kind == STOP) break;
      dispatch(ev);
    }
    return now();
  }
  uint64_t events() const { return event_count_; }
  double now_s() const { return now(); }          // the simulated time, in seconds
  // Drops the Python callbacks (they hold the run that holds this engine: a cycle).
  void release() { on_arrive = nullptr; on_done = nullptr; on_timeout = nullptr; on_timer = nullptr; }
  // Ends `run` after the event under way (a Python callback failed: its error is raised).
  void halt() { halted_ = true; }

  // ---- results -------------------------------------------------------------------------
  double rank_done(int job, int r) const { return jobs_[job].done_at[r]; }
  int qp_count() const { return qps_.size(); }
  double qp_started(int q) const { return qps_[q].started; }
  double qp_finished(int q) const { return qps_[q].finished; }
  uint64_t qp_received(int q) const { return uint64_t(qps_[q].got_count); }
  uint64_t tx(int node, int port) const { const Link* l = link(node, port); return l ? l->tx_bytes : 0; }
  uint64_t tx_data(int node, int port) const { const Link* l = link(node, port); return l ? l->tx_data : 0; }
  // dropped: every packet lost in the network, the sum of the five causes after it
  uint64_t dropped = 0, drop_failed = 0, drop_queue = 0, drop_buffer = 0, drop_noroute = 0;
  uint64_t drop_injected = 0;
  uint64_t marked = 0, timeouts = 0, retransmitted = 0, packets_sent = 0;
  uint64_t duplicates = 0, mcast_copies = 0, agg_results = 0;
  uint64_t out_of_order = 0, naks = 0, cnps = 0, rate_cuts = 0, pauses = 0, resumes = 0;
  uint32_t max_queue_bytes = 0;
  double max_buffer_bytes = 0, min_rate_seen = 0, max_ingress_bytes = 0;
  uint64_t drops(int node, int port) const { const Link* l = link(node, port); return l ? l->drops : 0; }
  uint64_t paused_ps(int node, int port) const { const Link* l = link(node, port); return l ? l->paused_ps : 0; }
  double qp_rate(int q) const { return qps_[q].rate; }

  // ---- multicast and aggregation (Multicast Allgather, NetReduce) ----------------------
  // A switch copies a packet of `group` to these ports but the one it came in on (one shared
  // tree serves every sender); hosts count what arrives.
  void add_mcast(uint32_t group, int sw, std::vector<int> ports) { mcast_[group].ports[sw] = ports; }
  // A job's multicast (flags MCAST) or aggregation (flags 0) send of `bytes` to `dst_ip` at
  // most at `rate_bps`: the NIC serves it round-robin with its QPs, unacknowledged; what
  // arrives counts toward the job's step at each receiver.
  void raw_send(int job, int host, int step, uint32_t dst_ip, uint8_t flags, uint64_t bytes,
                uint32_t mtu, double rate_bps) {
    Qp q;
    q.id = qps_.size(); q.job = job; q.src = host; q.dst = host; q.step = step;
    q.bytes = bytes; q.mtu = mtu; q.npkts = (bytes + mtu - 1) / mtu;
    q.raw_dst = dst_ip; q.raw_flags = flags;
    q.sport = SPORT_MIN | (host & SPORT_MASK);
    q.rate = q.target = std::min(line_bps, rate_bps);
    q.started = now();
    qps_.push_back(std::move(q));
    nic_[host].active.push_back(q.id);
    wake(host);
  }
  // A host multicasts `bytes` to `group` in MTU packets, paced at line rate (no ACKs: the
  // paper's multicast sends without NACKs; loss repair is not modelled here).
  void mcast_send(int host, uint32_t group, uint64_t bytes, uint32_t mtu, double at) {
    uint32_t n = (bytes + mtu - 1) / mtu;
    double gap = (WIRE_HEADER + mtu) * 8.0 / line_bps;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t size = std::min<uint64_t>(mtu, bytes - uint64_t(i) * mtu);
      emits_.push_back({host, group, i, size});
      schedule_ticks(clock::ps(at + i * gap), MCAST_EMIT, 0, emits_.size() - 1);
    }
  }
  uint64_t host_rx_bytes(int host) const { return size_t(host) < host_rx_.size() ? host_rx_[host] : 0; }
  void set_agg(int sw, uint32_t agg_ip, int workers, uint32_t group) {
    AggJob j; j.sw = sw; j.workers = workers;
    agg_[agg_ip] = j; agg_group_[agg_ip] = group;
  }
  // Worker `host` sends its `bytes` of gradient to the aggregator address, paced at line rate.
  void agg_send(int host, uint32_t agg_ip, uint64_t bytes, uint32_t mtu, double at) {
    uint32_t n = (bytes + mtu - 1) / mtu;
    double gap = (WIRE_HEADER + mtu) * 8.0 / line_bps;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t size = std::min<uint64_t>(mtu, bytes - uint64_t(i) * mtu);
      emits_.push_back({host, agg_ip, i, size});
      schedule_ticks(clock::ps(at + i * gap), AGG_EMIT, 0, emits_.size() - 1);
    }
  }
  double last_rx_at() const { return last_rx_at_; }

  // The egress port switch `sw` gives a packet of this 5-tuple (the forwarding decision itself).
  int route_of(int sw, uint32_t src, uint32_t dst, uint8_t proto, uint16_t sport, uint16_t dport) {
    RoceHeader h;
    h.src = src; h.dst = dst; h.proto = proto; h.sport = sport; h.dport = dport;
    return route(sw, h);
  }

 private:
  struct StepState { uint64_t expect, received; int sending; };
  struct Job {
    std::vector<std::vector<StepState>> steps;   // per rank
    std::vector<int> cur;                        // the step each rank is in (-1: not started)
    std::vector<double> done_at;
  };
  struct Nic {
    std::vector<int> active;       // QPs with work, round-robin
    uint32_t inflight = 0;         // data packets of all its QPs in flight
    size_t rr = 0;
    double busy_until = 0;         // the NIC's line is busy until then
    bool pending = false;
    double pending_at = 0;
    uint64_t ev = 0;               // the uid of the pending pump (others were cancelled)
  };
  // One direction of a cable: the sending port's FIFO and line (a packet starts when the line
  // is free, the line is busy for its wire time, the packet arrives `delay_` after its last
  // bit). The arrival is an event; the end of transmission is one only when a packet waits
  // behind it (`line_busy` says when the line frees either way).
  struct Link {
    int node = -1, port = -1, peer = -1;     // peer: the Link of the other end
    bool failed = false;
    int64_t busy_until = 0;                  // the packet on the line ends then ...
    uint64_t done_uid = 0;                   // ... with this place among that time's events
    bool done_pending = false;               // its TX_DONE event is scheduled
    std::deque<uint32_t> queue;              // waiting data packets (not the one on the line)
    std::deque<uint32_t> ctrl;               // waiting control packets: sent first, never paused
    uint32_t queue_bytes = 0;                // the data packets' wire bytes
    uint64_t tx_bytes = 0, tx_data = 0;      // wire bytes sent, payload bytes sent
    uint64_t drops = 0;                      // packets dropped here (sent onto it, or queued)
    // PFC, sending side: paused by the peer; for how long in all
    bool paused = false;
    int64_t paused_since = 0, paused_ps = 0;
    // PFC, receiving side (this link's node is a switch, its port the ingress): the bytes of
    // packets that came in here and wait in the switch, those of them in the headroom, and
    // whether a PAUSE is out to the peer
    uint64_t ingress = 0, headroom = 0;
    bool pause_sent = false;
    int64_t lose_in = -1;                    // the data packet after this many more is lost
  };

  double now() const { return now_s_; }
  // ---- events, in the order (timestamp, then the order they were scheduled in) -----------
  enum Kind : uint8_t { TX_DONE, DELIVER, PUMP, ADVANCE, INCREASE, TIMEOUT, MCAST_EMIT, AGG_EMIT,
                        TIMER, PAUSE, STOP };
  struct Event {
    int64_t ts;                      // picoseconds
    uint64_t uid;
    int32_t a;
    uint32_t b;
    Kind kind;
    int16_t lane;                    // the lane it waits in, -1: the heap alone
  };
  // Events scheduled with one delay come due in the order they were scheduled: each such
  // delay (a packet size's wire time, with or without the propagation delay; the RTO; DCQCN's
  // period) gets a FIFO lane, and only a lane's head is in the heap. The heap then holds a few
  // thousand entries instead of one per QP's timer and per packet in flight, and the order of
  // events is unchanged (a lane's head always has its smallest (ts, uid)).
  struct Lane { int64_t delay; Fifo<Event> events; };
  static constexpr size_t MAX_LANES = 256;
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      return x.ts > y.ts || (x.ts == y.ts && x.uid > y.uid);
    }
  };
  void push_heap(const Event& ev) {
    events_.push_back(ev);
    std::push_heap(events_.begin(), events_.end(), Later());
  }
  uint64_t schedule_ticks(int64_t delay, Kind kind, int32_t a, uint32_t b = 0) {
    push_heap({now_ + delay, next_uid_, a, b, kind, -1});
    return next_uid_++;
  }
  // schedule_ticks for an event whose delay recurs (see Lane).
  uint64_t schedule_lane(int64_t delay, Kind kind, int32_t a, uint32_t b = 0) {
    int k = lane_of(delay);
    if (k < 0) return schedule_ticks(delay, kind, a, b);
    Event ev{now_ + delay, next_uid_, a, b, kind, int16_t(k)};
    Fifo<Event>& lane = lanes_[k].events;
    if (lane.empty()) push_heap(ev);
    lane.push_back(ev);
    return next_uid_++;
  }
  int lane_of(int64_t delay) {
    for (size_t k = 0; k < lanes_.size(); k++)
      if (lanes_[k].delay == delay) return k;
    if (lanes_.size() == MAX_LANES) return -1;
    lanes_.push_back({delay, {}});
    return lanes_.size() - 1;
  }
  void dispatch(const Event& ev) {
    switch (ev.kind) {
      case TX_DONE: return transmit_complete(ev.a);
      case DELIVER: return deliver(ev.a, ev.b);
      case PUMP:
        if (nic_[ev.a].pending && nic_[ev.a].ev == ev.uid) pump(ev.a);
        return;
      case ADVANCE: return advance(ev.b, ev.a);
      case INCREASE: return increase_tick(ev.a, ev.b);
      case PAUSE: return set_paused(ev.a, ev.b != 0);
      case TIMEOUT: return check_timeout(ev.a);
      case MCAST_EMIT: { const Emit& m = emits_[ev.b]; return mcast_emit(m.host, m.dst, m.psn, m.size); }
      case AGG_EMIT: { const Emit& m = emits_[ev.b]; return agg_emit(m.host, m.dst, m.psn, m.size); }
      case TIMER: if (on_timer) on_timer(ev.a); return;
      case STOP: return;
    }
  }

  static int leaf_of(uint32_t ip) { return (ip >> 8) & 0xFFFF; }   // 10.<l/256>.<l%256>.h

  int new_port(int node, int port) {
    if ((int)ports_[node].size() <= port) ports_[node].resize(port + 1, -1);
    int id = links_.size();
    links_.emplace_back();
    links_[id].node = node; links_[id].port = port;
    ports_[node][port] = id;
    return id;
  }
  const Link* link(int node, int port) const {
    if (node < 0 || node >= (int)ports_.size() || port < 0 || port >= (int)ports_[node].size() ||
        ports_[node][port] < 0)
      return nullptr;
    return &links_[ports_[node][port]];
  }

  // ---- packets and links -----------------------------------------------------------------
  uint32_t new_packet(const RoceHeader& h, uint32_t size) {
    uint32_t id;
    if (free_.empty()) { id = pool_.size(); pool_.emplace_back(); }
    else { id = free_.back(); free_.pop_back(); }
    pool_[id].h = h; pool_[id].size = size;
    return id;
  }
  void free_packet(uint32_t id) { free_.push_back(id); }

  // A packet's time on the line, once per packet size.
  int64_t tx_ticks(uint32_t wire) {
    if (wire >= tx_ticks_.size()) tx_ticks_.resize(wire + 1, -1);
    if (tx_ticks_[wire] < 0) tx_ticks_[wire] = clock::tx_time(wire, rate_bps_);
    return tx_ticks_[wire];
  }

  // A packet onto (node, port): dropped if the link failed, the egress queue is at its limit or
  // (PFC) the switch's buffer and the ingress's headroom are full; else on the line or queued.
  void send_on(int node, int port, uint32_t p) {
    Link& l = links_[ports_[node][port]];
    if (l.failed) return drop(l, p, drop_failed);
    if (pool_[p].h.flags & CONTROL) {
      if (!line_busy(l)) return transmit_start(l, p);
      l.ctrl.push_back(p);
      return end_of_line(l);
    }
    if (l.lose_in >= 0 && l.lose_in-- == 0) return drop(l, p, drop_injected);
    if (l.queue.size() >= queue_limit_) return drop(l, p, drop_queue);
    if (pool_[p].in_link >= 0 && !admit(pool_[p])) return drop(l, p, drop_buffer);
    bool busy = line_busy(l);
    if (!busy && !l.paused) return transmit_start(l, p);
    uint32_t wire = WIRE_HEADER + pool_[p].size;
    l.queue.push_back(p);
    l.queue_bytes += wire;
    if (busy) end_of_line(l);
  }

  // Whether the line is still sending: the event under way comes before the end of the packet
  // on it, (busy_until, done_uid) in the events' order, or that end's TX_DONE is yet to run.
  bool line_busy(const Link& l) const {
    return l.done_pending || now_ < l.busy_until ||
           (now_ == l.busy_until && now_uid_ < l.done_uid);
  }

  // A packet waits behind the one on the line: the end of the line's packet becomes an event,
  // in the place among the events it was given when that packet started.
  void end_of_line(Link& l) {
    if (l.done_pending) return;
    l.done_pending = true;
    push_heap({l.busy_until, l.done_uid, int32_t(&l - links_.data()), 0, TX_DONE, -1});
  }

  // (A packet is dropped before it takes buffer: one that did always leaves on its line.)
  void drop(Link& l, uint32_t p, uint64_t& cause) {
    l.drops++; cause++; dropped++;
    pool_[p].in_link = -1;
    free_packet(p);
  }

  // First the end of transmission, then the arrival (at the same time, the end runs first).
  void transmit_start(Link& l, uint32_t p) {
    Packet& pk = pool_[p];
    release(pk);                                // it leaves the switch's buffer
    uint32_t wire = WIRE_HEADER + pk.size;
    l.tx_bytes += wire;
    if (!(pk.h.flags & CONTROL)) l.tx_data += pk.size;
    int64_t tx = tx_ticks(wire);
    l.busy_until = now_ + tx;
    l.done_uid = next_uid_++;                   // its end's place, whether an event or not
    schedule_lane(tx + delay_, DELIVER, l.peer, p);
    if (!l.ctrl.empty() || !l.queue.empty()) end_of_line(l);
  }

  void transmit_complete(int id) {
    links_[id].done_pending = false;
    start_next(links_[id]);
  }

  void start_next(Link& l) {
    if (line_busy(l)) return;
    if (!l.ctrl.empty()) {
      uint32_t p = l.ctrl.front();
      l.ctrl.pop_front();
      return transmit_start(l, p);
    }
    if (l.paused || l.queue.empty()) return;
    uint32_t p = l.queue.front();
    l.queue.pop_front();
    l.queue_bytes -= WIRE_HEADER + pool_[p].size;
    transmit_start(l, p);
  }

  void deliver(int id, uint32_t p) {
    const Link& l = links_[id];
    if (is_host_[l.node]) host_receive(l.node, p);
    else switch_receive(l.node, l.port, p);
  }

  // ---- PFC -------------------------------------------------------------------------------
  // A data packet that came into a switch through `in_link` takes buffer: shared while the
  // ingress holds less than pfc_alpha x the free shared buffer (the dynamic threshold), else
  // headroom. Reaching the threshold sends PAUSE upstream; false: no room at all.
  bool admit(Packet& pk) {
    Link& in = links_[pk.in_link];
    double wire = WIRE_HEADER + pk.size;
    int sw = in.node;
    double threshold = xoff(sw);
    double shared = double(in.ingress - in.headroom);
    if (shared + wire <= threshold && buffer_used_[sw] + wire <= buffer_bytes) {
      pk.in_headroom = false;
      buffer_used_[sw] += wire;
      max_buffer_bytes = std::max(max_buffer_bytes, buffer_used_[sw]);
    } else if (in.headroom + wire <= headroom_bytes) {
      pk.in_headroom = true;
      in.headroom += uint64_t(wire);
    } else {
      pk.in_link = -1;
      return false;
    }
    in.ingress += uint64_t(wire);
    max_ingress_bytes = std::max(max_ingress_bytes, double(in.ingress));
    if (!in.pause_sent && (pk.in_headroom || shared + wire >= threshold)) {
      in.pause_sent = true;
      pauses++;
      signal_pause(in, true);
    }
    return true;
  }

  // An ingress's XOFF threshold at switch sw: the dynamic one, or the static one if set.
  double xoff(int sw) const {
    return pfc_xoff_bytes > 0 ? pfc_xoff_bytes : pfc_alpha * (buffer_bytes - buffer_used_[sw]);
  }

  // The packet leaves the buffer; the ingress sends RESUME once below the threshold by the
  // resume offset with its headroom empty.
  void release(Packet& pk) {
    if (pk.in_link < 0) return;
    Link& in = links_[pk.in_link];
    pk.in_link = -1;
    uint64_t wire = WIRE_HEADER + pk.size;
    int sw = in.node;
    if (pk.in_headroom) in.headroom -= wire;
    else buffer_used_[sw] -= wire;
    in.ingress -= wire;
    if (in.pause_sent && in.headroom == 0 &&
        double(in.ingress) + pfc_resume_bytes <= xoff(sw)) {
      in.pause_sent = false;
      resumes++;
      signal_pause(in, false);
    }
  }

  // A PAUSE (or RESUME) frame from the switch end of `in` to its peer, which sends no data
  // from when it arrives (one minimum frame's time and the propagation delay later).
  void signal_pause(const Link& in, bool on) {
    schedule_lane(tx_ticks(64) + delay_, PAUSE, in.peer, on ? 1 : 0);
  }

  void set_paused(int id, bool on) {
    Link& l = links_[id];
    if (l.paused == on) return;
    l.paused = on;
    if (on) { l.paused_since = now_; return; }
    l.paused_ps += now_ - l.paused_since;
    start_next(l);
    if (is_host_[l.node]) wake(l.node);
  }

  uint32_t queue_bytes(int node, int port) { return links_[ports_[node][port]].queue_bytes; }

  // ---- switch ----------------------------------------------------------------------------
  void switch_receive(int sw, int in_port, uint32_t p) {
    RoceHeader& h = pool_[p].h;
    if (h.flags & MCAST) return switch_mcast(sw, in_port, p, h);
    if (h.flags & CONTROL) {         // retrace the data packet's path
      int port = h.hops[--h.nhops];
      return send_on(sw, port, p);
    }
    if (!agg_.empty()) {
      auto agg = agg_.find(h.dst);
      if (agg != agg_.end() && agg->second.sw == sw) return switch_aggregate(sw, p, h, agg->second);
    }
    if (h.nhops < MAX_HOPS) h.hops[h.nhops++] = in_port;
    int port = route(sw, h);
    if (port < 0) { dropped++; drop_noroute++; free_packet(p); return; }
    if (pfc) pool_[p].in_link = ports_[sw][in_port];
    if (pool_[p].size > 0) {
      uint32_t q = queue_bytes(sw, port);
      max_queue_bytes = std::max(max_queue_bytes, q);
      if (q > ecn_kmin) {
        double pr = q >= ecn_kmax ? 1.0 : ecn_pmax * (q - ecn_kmin) / double(ecn_kmax - ecn_kmin);
        if (uni_(rng_) < pr) { h.flags |= CE; marked++; }
      }
    }
    send_on(sw, port, p);
  }

  int route(int sw, const RoceHeader& h) {
    int dl = leaf_of(h.dst);
    auto& hp = host_port_[sw];
    auto direct = hp.find(h.dst);
    if (direct != hp.end()) return direct->second;
    if (dl >= (int)groups_[sw].size() || groups_[sw][dl].empty()) return -1;
    const auto& pins = pins_[sw];
    if (!pins.empty()) {
      auto e = pins.find(PinKey{h.src, h.dst, h.sport});
      if (e != pins.end()) return e->second;
    }
    const auto& ports = groups_[sw][dl];
    if (ports.size() == 1) return ports[0];
    return ports[salted_window(ecmp_hash(h.src, h.dst, h.proto, h.sport, h.dport), salt_[sw]) %
                 ports.size()];
  }

  // `h` is the header the copies carry (p's own, or an aggregation result's).
  void switch_mcast(int sw, int in_port, uint32_t p, RoceHeader h) {
    uint32_t size = pool_[p].size;
    free_packet(p);
    auto t = mcast_.find(h.dst);
    if (t == mcast_.end()) { dropped++; drop_noroute++; return; }
    auto ps = t->second.ports.find(sw);
    if (ps == t->second.ports.end()) { dropped++; drop_noroute++; return; }
    for (int port : ps->second) {
      if (port == in_port) continue;   // the data plane prunes the ingress port
      mcast_copies++;
      send_on(sw, port, new_packet(h, size));
    }
  }

  void switch_aggregate(int sw, uint32_t p, RoceHeader& h, AggJob& job) {
    uint64_t chunk = uint64_t(h.qp) << 32 | h.psn;   // h.qp: the collective's job + 1
    int& n = job.arrived[chunk];
    if (++n < job.workers) { free_packet(p); return; }   // the sum waits for every worker's chunk
    job.arrived.erase(chunk);
    agg_results++;
    RoceHeader r = h;
    r.dst = agg_group_[h.dst];
    r.src = h.dst;                    // the result comes from the aggregator
    r.flags = MCAST;
    r.nhops = 0;
    switch_mcast(sw, -1, p, r);
  }

  struct Emit { int host; uint32_t dst, psn, size; };
  void mcast_emit(int host, uint32_t group, uint32_t psn, uint32_t size) {
    RoceHeader h;
    h.src = node_ip_[host]; h.dst = group; h.psn = psn; h.flags = MCAST;
    packets_sent++;
    send_on(host, 0, new_packet(h, size));
  }
  void agg_emit(int host, uint32_t agg_ip, uint32_t psn, uint32_t size) {
    RoceHeader h;
    h.src = node_ip_[host]; h.dst = agg_ip; h.psn = psn;
    h.sport = SPORT_MIN | (host & SPORT_MASK);
    packets_sent++;
    send_on(host, 0, new_packet(h, size));
  }

  // ---- host: receiver ------------------------------------------------------------------
  void host_receive(int host, uint32_t p) {
    const RoceHeader h = pool_[p].h;
    uint32_t size = pool_[p].size;
    free_packet(p);
    if (h.flags & MCAST) {
      if (host_rx_.size() < is_host_.size()) host_rx_.resize(is_host_.size(), 0);
      host_rx_[host] += size;
      last_rx_at_ = now();
      if (h.qp > 0) credit(h.qp - 1, host, h.ev, size);
      return;
    }
    if (h.flags & CNP) return sender_cnp(h);
    if (h.flags & (ACK | NAK)) return sender_ack(h);
    Qp& q = qps_[h.qp];
    if ((h.flags & CE) && cc && (q.cnp_at < 0 || now() - q.cnp_at >= cnp_interval - 1e-12)) {
      q.cnp_at = now();                          // the notification point: one CNP per interval
      cnps++;
      reply(host, h, CNP, h.psn);
    }
    if (q.gbn) {                                 // in order only; a NAK at the first gap
      if (h.psn == q.epsn) {
        q.epsn++;
        q.nak_sent = false;
        accept(q, h.psn, size);
        reply(host, h, ACK, q.epsn);
      } else if (h.psn > q.epsn) {
        out_of_order++;                          // discarded: it comes again after the gap
        if (!q.nak_sent) { q.nak_sent = true; naks++; reply(host, h, NAK, q.epsn); }
      } else {
        duplicates++;
        reply(host, h, ACK, q.epsn);
      }
      return;
    }
    if (!pkts_[q.base + h.psn].got) accept(q, h.psn, size);   // placed by PSN
    else duplicates++;
    reply(host, h, ACK, h.psn);
  }

  void accept(Qp& q, uint32_t psn, uint32_t size) {
    pkts_[q.base + psn].got = 1;
    q.got_count++;
    credit(q.job, q.dst, q.step, size);
  }

  // An ACK, NAK (go-back-N: `psn` is the next expected; selective repeat: the one received)
  // or CNP for data packet `h`, back along its path: the host's own link is the first hop,
  // the rest of the route is in `hops`.
  void reply(int host, const RoceHeader& h, uint8_t kind, uint32_t psn) {
    RoceHeader a;
    a.src = h.dst; a.dst = h.src; a.sport = h.sport; a.dport = h.dport;
    a.qp = h.qp; a.psn = psn; a.ev = h.sport; a.nhops = h.nhops;
    for (int k = 0; k < MAX_HOPS; k++) a.hops[k] = h.hops[k];
    a.flags = kind | ((h.flags & CE) ? ECE : 0);
    send_on(host, 0, new_packet(a, ACK_PAYLOAD));
  }

  void credit(int job, int rank, int step, uint32_t bytes) {
    if (step >= (int)jobs_[job].steps[rank].size()) return;   // a group member not in the job
    auto& st = jobs_[job].steps[rank][step];
    st.received += bytes;
    if (st.received >= st.expect && jobs_[job].cur[rank] == step)
      schedule_lane(0, ADVANCE, rank, job);
  }

  // ---- host: sender ----------------------------------------------------------------------
  void sender_ack(const RoceHeader& h) {
    Qp& q = qps_[h.qp];
    if (q.done) return;
    if (q.gbn) {                                 // cumulative: all below h.psn arrived
      uint32_t upto = std::min(h.psn, q.npkts);
      if (upto > q.first_unacked) q.backoff = 0;
      for (uint32_t psn = q.first_unacked; psn < upto; psn++) mark_acked(q, psn);
      q.first_unacked = std::max(q.first_unacked, upto);
      if (h.flags & NAK) go_back(q, upto);
    } else {
      if (pkts_[q.base + h.psn].acked) return;
      mark_acked(q, h.psn);
      q.backoff = 0;
      if (q.mode == REPS && !(h.flags & ECE)) {
        q.cache.push_back(h.ev);
        if (q.cache.size() > reps_cache) q.cache.pop_front();
      }
    }
    if (q.acked_count == q.npkts) return qp_done(q);
    wake(q.src);
  }

  void mark_acked(Qp& q, uint32_t psn) {
    PktState& st = pkts_[q.base + psn];
    if (st.acked) return;
    st.acked = 1;
    q.acked_count++;
    if (!st.lost) landed(q);
  }

  // Go-back-N: every packet sent from `from` on is sent again, in order.
  void go_back(Qp& q, uint32_t from) {
    for (uint32_t psn = from; psn < q.next_new; psn++) {
      PktState& st = pkts_[q.base + psn];
      if (st.acked || st.lost) continue;
      st.lost = 1; landed(q); q.retx.push_back(psn);
    }
  }

  // ---- DCQCN's reaction point -------------------------------------------------------------
  // alpha is updated every alpha_resume: (1-g)alpha + g in an interval with a CNP, (1-g)alpha
  // in one without; kept lazily (CNPs are at least cnp_interval apart, far more than
  // alpha_resume, so an interval holds at most one).
  void age_alpha(Qp& q, double t) {
    if (q.last_cnp < 0) return;
    double ticks = std::floor((t - q.last_cnp) / alpha_resume);
    if (ticks > 0) q.alpha *= std::pow(1 - dcqcn_g, ticks);
  }

  void sender_cnp(const RoceHeader& h) {
    Qp& q = qps_[h.qp];
    if (q.done || !cc) return;
    double t = now();
    age_alpha(q, t);
    q.alpha = (1 - dcqcn_g) * q.alpha + dcqcn_g;
    q.last_cnp = t;
    if (q.last_cut >= 0 && t - q.last_cut < rate_decrease_interval - 1e-12) return;
    q.last_cut = t;                              // cut: at most once per rate_decrease_interval
    q.target = q.rate;
    q.rate = std::max(min_rate, q.rate * (1 - q.alpha / 2));
    rate_cuts++;
    if (min_rate_seen == 0 || q.rate < min_rate_seen) min_rate_seen = q.rate;
    q.timer_stage = q.byte_stage = 0;
    q.byte_count = 0;
    q.increase_gen++;                            // the increase timer starts again
    schedule_lane(clock::ps(rp_timer), INCREASE, q.id, q.increase_gen);
  }

  // One step up, after the timer (every rp_timer) or the byte counter (every byte_counter
  // bytes sent) fired: fast recovery while both have fired fewer than F times, hyper increase
  // when both more, additive increase otherwise.
  void increase(Qp& q) {
    uint32_t lo = std::min(q.timer_stage, q.byte_stage), hi = std::max(q.timer_stage, q.byte_stage);
    if (lo > fast_recovery) q.target += (lo - fast_recovery) * rate_hai;
    else if (hi >= fast_recovery) q.target += rate_ai;
    q.target = std::min(q.target, line_bps);
    q.rate = std::min(line_bps, (q.rate + q.target) / 2);
  }

  void increase_tick(int id, uint32_t gen) {
    Qp& q = qps_[id];
    if (q.done || gen != q.increase_gen) return;
    q.timer_stage++;
    increase(q);
    if (q.rate >= line_bps) return;              // back at line rate: nothing left to recover
    schedule_lane(clock::ps(rp_timer), INCREASE, id, gen);
  }

  uint16_t pick_ev(Qp& q) {
    switch (q.mode) {
      case SPRAY: return SPORT_MIN | (rng_() & SPORT_MASK);
      case REPS:
        if (q.explored < window) return SPORT_MIN | ((q.explore_base + q.explored++) & SPORT_MASK);
        if (!q.cache.empty()) { uint16_t ev = q.cache.front(); q.cache.pop_front(); return ev; }
        return SPORT_MIN | (rng_() & SPORT_MASK);
      default: return q.sport;
    }
  }

  bool eligible(const Qp& q, double t) const {
    return q.has_work() && q.inflight < window && q.next_send <= t + 1e-11;
  }

  // A packet of q is no longer in flight (acknowledged, or declared lost).
  void landed(Qp& q) {
    q.inflight--;
    Nic& n = nic_[q.src];
    if (n.inflight-- == host_window && host_window) wake(q.src);
  }

  void wake(int host) { schedule_pump(host, now()); }

  // The NIC sends one packet per line-rate slot, round-robin over eligible QPs.
  void pump(int host) {
    Nic& n = nic_[host];
    n.pending = false;
    if (links_[ports_[host][0]].paused) return;  // PFC: woken again by the RESUME
    if (host_window && n.inflight >= host_window) return;   // woken when a packet lands
    double t = now(), soonest = -1;
    size_t m = n.active.size();
    for (size_t k = 0; k < m; k++) {
      size_t i = (n.rr + k) % m;
      Qp& q = qps_[n.active[i]];
      if (eligible(q, t)) {
        n.rr = (i + 1) % m;
        uint32_t size = transmit(host, q);
        if (size == 0) continue;
        n.busy_until = t + (WIRE_HEADER + size) * 8.0 / line_bps;
        schedule_pump(host, n.busy_until);
        return;
      }
      if (q.has_work() && q.inflight < window && (soonest < 0 || q.next_send < soonest))
        soonest = q.next_send;
    }
    // drop finished QPs from the list now and then
    if (m > 16) {
      auto& a = n.active;
      a.erase(std::remove_if(a.begin(), a.end(), [this](int id) { return qps_[id].done; }), a.end());
      n.rr = 0;
    }
    if (soonest >= 0) schedule_pump(host, std::max(soonest, t + 1e-11));
  }

  void schedule_pump(int host, double at) {
    Nic& n = nic_[host];
    at = std::max(at, n.busy_until);
    if (n.pending && n.pending_at <= at) return;
    n.pending = true; n.pending_at = at;   // a pump scheduled before is cancelled by this one
    n.ev = schedule_ticks(clock::ps(std::max(0.0, at - now())), PUMP, host);
  }

  uint32_t transmit(int host, Qp& q) {
    if (q.raw_dst) return transmit_raw(host, q);
    uint32_t psn;
    while (!q.retx.empty() && pkts_[q.base + q.retx.front()].acked) q.retx.pop_front();  // acked meanwhile
    if (!q.retx.empty()) {
      psn = q.retx.front(); q.retx.pop_front();
      pkts_[q.base + psn].lost = 0;
      q.retransmitted++; retransmitted++;
    } else if (q.next_new < q.npkts) {
      psn = q.next_new++;
    } else {
      return 0;                      // only acknowledged retransmissions were queued
    }
    uint32_t size = std::min<uint64_t>(q.mtu, q.bytes - uint64_t(psn) * q.mtu);
    RoceHeader h;
    h.src = node_ip_[host]; h.dst = node_ip_[q.dst]; h.qp = q.id; h.psn = psn;
    h.sport = pick_ev(q);
    pkts_[q.base + psn].sent_ev = h.sport;
    pkts_[q.base + psn].sent_at = now();
    q.inflight++;
    nic_[host].inflight++;
    packets_sent++;
    q.next_send = now() + (WIRE_HEADER + size) * 8.0 / q.rate;
    if (cc && q.rate < line_bps && (q.byte_count += WIRE_HEADER + size) >= byte_counter) {
      q.byte_count = 0;
      q.byte_stage++;
      increase(q);
    }
    send_on(host, 0, new_packet(h, size));
    if (!q.timer_armed) {
      q.timer_armed = true;
      schedule_lane(clock::ps(rto_now(q)), TIMEOUT, q.id);
    }
    return size;
  }

  // Multicast and aggregation packets carry their job as qp = job + 1 (0: none), step in ev.
  uint32_t transmit_raw(int host, Qp& q) {
    uint32_t psn = q.next_new++;
    uint32_t size = std::min<uint64_t>(q.mtu, q.bytes - uint64_t(psn) * q.mtu);
    RoceHeader h;
    h.src = node_ip_[host]; h.dst = q.raw_dst; h.psn = psn; h.flags = q.raw_flags;
    h.sport = q.sport; h.qp = q.job + 1; h.ev = q.step;
    packets_sent++;
    q.next_send = now() + (WIRE_HEADER + size) * 8.0 / q.rate;
    send_on(host, 0, new_packet(h, size));
    if (q.next_new == q.npkts) { q.done = true; q.finished = now(); }
    return size;
  }

  // Loss is declared only by timeout (never at a gap): packets unacknowledged for `rto`.
  double rto_now(const Qp& q) const { return rto * double(1u << q.backoff); }

  // Packets unacknowledged for the RTO are lost (go-back-N: with every one sent after the
  // first of them); the RTO doubles on each expiry up to 2^rto_max_backoff and is back at
  // `rto` after an acknowledgement.
  void check_timeout(int id) {
    Qp& q = qps_[id];
    q.timer_armed = false;
    if (q.done) return;
    double t = now(), oldest = -1, limit = rto_now(q);
    bool fired = false;
    while (q.first_unacked < q.npkts && pkts_[q.base + q.first_unacked].acked) q.first_unacked++;
    for (uint32_t psn = q.first_unacked; psn < q.next_new; psn++) {
      if (pkts_[q.base + psn].acked || pkts_[q.base + psn].lost) continue;
      if (t - pkts_[q.base + psn].sent_at >= limit - 1e-12) {
        if (q.gbn) { go_back(q, psn); fired = true; break; }
        pkts_[q.base + psn].lost = 1; landed(q); q.retx.push_back(psn);
        fired = true;
        if (q.mode == REPS) {        // a timeout evicts the entropy that led into it
          uint16_t ev = pkts_[q.base + psn].sent_ev;
          q.cache.remove(ev);
        }
      } else if (oldest < 0 || pkts_[q.base + psn].sent_at < oldest) {
        oldest = pkts_[q.base + psn].sent_at;
      }
    }
    if (fired) {
      q.timeouts++; timeouts++;
      q.backoff = std::min(q.backoff + 1, rto_max_backoff);
      if (q.mode == ECMP) q.sport = SPORT_MIN | (rng_() & SPORT_MASK);   // re-hash, as Linux's txhash rethink
      if (q.mode == PINNED && on_timeout) on_timeout(q.id);
      wake(q.src);
    }
    if (fired || oldest >= 0) {
      q.timer_armed = true;
      if (fired) schedule_lane(clock::ps(rto_now(q)), TIMEOUT, id);
      else schedule_ticks(clock::ps(std::max(1e-9, oldest + limit - t)), TIMEOUT, id);
    }
  }

  void qp_done(Qp& q) {
    q.done = true;
    q.finished = now();
    auto& st = jobs_[q.job].steps[q.src][q.step];
    st.sending--;
    if (jobs_[q.job].cur[q.src] == q.step) advance(q.job, q.src);
  }

  // A rank moves to its next step of a job once it has sent and received everything of this
  // one.
  void advance(int job, int rank) {
    Job& j = jobs_[job];
    auto& steps = j.steps[rank];
    int s = j.cur[rank];
    if (s >= 0) {
      if (s >= (int)steps.size()) return;
      if (steps[s].sending > 0 || steps[s].received < steps[s].expect) return;
    }
    while (true) {
      s = ++j.cur[rank];
      if (s >= (int)steps.size()) {
        j.done_at[rank] = now();
        if (on_done) on_done(job, rank);
        return;
      }
      if (on_arrive) on_arrive(job, rank, s);
      auto& st = jobs_[job].steps[rank][s];     // on_arrive may have added steps
      if (st.sending > 0 || st.received < st.expect) return;
    }
  }

  std::vector<bool> is_host_;
  std::vector<std::vector<int>> ports_;     // node, port -> index in links_
  std::vector<Link> links_;
  uint64_t rate_bps_ = 400000000000ULL;
  int64_t delay_ = 0;
  uint32_t queue_limit_ = 100000;
  std::vector<int64_t> tx_ticks_;           // wire bytes -> transmission time
  std::vector<Packet> pool_;
  std::vector<uint32_t> free_;
  std::vector<Event> events_;               // a binary heap, the soonest on top
  std::vector<Lane> lanes_;
  int64_t now_ = 0;
  uint64_t now_uid_ = 0;                    // the uid of the event under way
  double now_s_ = 0;                        // now_ in seconds
  bool halted_ = false;
  uint64_t next_uid_ = 0, event_count_ = 0;
  std::vector<Emit> emits_;
  std::vector<std::vector<std::vector<int>>> groups_;     // switch, destination leaf -> ports
  std::vector<std::unordered_map<uint32_t, int>> host_port_;
  std::vector<std::unordered_map<PinKey, int, PinHash>> pins_;
  std::vector<uint32_t> node_ip_;
  std::vector<uint8_t> salt_;               // per switch: its ECMP salt (fabricmodel.hashing)
  std::vector<double> buffer_used_;         // PFC: shared buffer bytes in use, per switch
  std::vector<Nic> nic_;
  std::vector<Qp> qps_;
  std::vector<PktState> pkts_;
  std::deque<Job> jobs_;             // a deque: references stay valid as jobs are added
  std::unordered_map<uint32_t, McastTree> mcast_;
  std::unordered_map<uint32_t, AggJob> agg_;
  std::unordered_map<uint32_t, uint32_t> agg_group_;
  std::vector<uint64_t> host_rx_;
  double last_rx_at_ = 0;
  std::mt19937 rng_{1};
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
};

}  // namespace mlsim

// ---- the C interface (sim/engine.py loads it with ctypes) --------------------------------
// One function per engine call; configuration and counters by name (mls_set, mls_get), each
// returning -1 for a name the engine does not have.
namespace {
using mlsim::Fabric;

struct Field { const char* name; double Fabric::*d; uint32_t Fabric::*u32; uint64_t Fabric::*u64;
               bool Fabric::*b; bool settable; };
const Field FIELDS[] = {
    {"line_bps", &Fabric::line_bps, nullptr, nullptr, nullptr, true},
    {"rto", &Fabric::rto, nullptr, nullptr, nullptr, true},
    {"ecn_pmax", &Fabric::ecn_pmax, nullptr, nullptr, nullptr, true},
    {"cnp_interval", &Fabric::cnp_interval, nullptr, nullptr, nullptr, true},
    {"dcqcn_g", &Fabric::dcqcn_g, nullptr, nullptr, nullptr, true},
    {"alpha_resume", &Fabric::alpha_resume, nullptr, nullptr, nullptr, true},
    {"rate_decrease_interval", &Fabric::rate_decrease_interval, nullptr, nullptr, nullptr, true},
    {"rp_timer", &Fabric::rp_timer, nullptr, nullptr, nullptr, true},
    {"byte_counter", &Fabric::byte_counter, nullptr, nullptr, nullptr, true},
    {"rate_ai", &Fabric::rate_ai, nullptr, nullptr, nullptr, true},
    {"rate_hai", &Fabric::rate_hai, nullptr, nullptr, nullptr, true},
    {"min_rate", &Fabric::min_rate, nullptr, nullptr, nullptr, true},
    {"buffer_bytes", &Fabric::buffer_bytes, nullptr, nullptr, nullptr, true},
    {"pfc_alpha", &Fabric::pfc_alpha, nullptr, nullptr, nullptr, true},
    {"headroom_bytes", &Fabric::headroom_bytes, nullptr, nullptr, nullptr, true},
    {"pfc_resume_bytes", &Fabric::pfc_resume_bytes, nullptr, nullptr, nullptr, true},
    {"pfc_xoff_bytes", &Fabric::pfc_xoff_bytes, nullptr, nullptr, nullptr, true},
    {"ecn_kmin", nullptr, &Fabric::ecn_kmin, nullptr, nullptr, true},
    {"ecn_kmax", nullptr, &Fabric::ecn_kmax, nullptr, nullptr, true},
    {"window", nullptr, &Fabric::window, nullptr, nullptr, true},
    {"host_window", nullptr, &Fabric::host_window, nullptr, nullptr, true},
    {"reps_cache", nullptr, &Fabric::reps_cache, nullptr, nullptr, true},
    {"gbn_modes", nullptr, &Fabric::gbn_modes, nullptr, nullptr, true},
    {"rto_max_backoff", nullptr, &Fabric::rto_max_backoff, nullptr, nullptr, true},
    {"fast_recovery", nullptr, &Fabric::fast_recovery, nullptr, nullptr, true},
    {"cc", nullptr, nullptr, nullptr, &Fabric::cc, true},
    {"pfc", nullptr, nullptr, nullptr, &Fabric::pfc, true},
    {"max_queue_bytes", nullptr, &Fabric::max_queue_bytes, nullptr, nullptr, false},
    {"max_buffer_bytes", &Fabric::max_buffer_bytes, nullptr, nullptr, nullptr, false},
    {"max_ingress_bytes", &Fabric::max_ingress_bytes, nullptr, nullptr, nullptr, false},
    {"drop_injected", nullptr, nullptr, &Fabric::drop_injected, nullptr, false},
    {"min_rate_seen", &Fabric::min_rate_seen, nullptr, nullptr, nullptr, false},
    {"dropped", nullptr, nullptr, &Fabric::dropped, nullptr, false},
    {"drop_failed", nullptr, nullptr, &Fabric::drop_failed, nullptr, false},
    {"drop_queue", nullptr, nullptr, &Fabric::drop_queue, nullptr, false},
    {"drop_buffer", nullptr, nullptr, &Fabric::drop_buffer, nullptr, false},
    {"drop_noroute", nullptr, nullptr, &Fabric::drop_noroute, nullptr, false},
    {"marked", nullptr, nullptr, &Fabric::marked, nullptr, false},
    {"timeouts", nullptr, nullptr, &Fabric::timeouts, nullptr, false},
    {"retransmitted", nullptr, nullptr, &Fabric::retransmitted, nullptr, false},
    {"packets_sent", nullptr, nullptr, &Fabric::packets_sent, nullptr, false},
    {"duplicates", nullptr, nullptr, &Fabric::duplicates, nullptr, false},
    {"mcast_copies", nullptr, nullptr, &Fabric::mcast_copies, nullptr, false},
    {"agg_results", nullptr, nullptr, &Fabric::agg_results, nullptr, false},
    {"out_of_order", nullptr, nullptr, &Fabric::out_of_order, nullptr, false},
    {"naks", nullptr, nullptr, &Fabric::naks, nullptr, false},
    {"cnps", nullptr, nullptr, &Fabric::cnps, nullptr, false},
    {"rate_cuts", nullptr, nullptr, &Fabric::rate_cuts, nullptr, false},
    {"pauses", nullptr, nullptr, &Fabric::pauses, nullptr, false},
    {"resumes", nullptr, nullptr, &Fabric::resumes, nullptr, false},
};
const Field* field(const char* name) {
  for (const Field& f : FIELDS)
    if (std::string(f.name) == name) return &f;
  return nullptr;
}
}  // namespace

extern "C" {
typedef void (*mls_cb3)(int, int, int);
typedef void (*mls_cb2)(int, int);
typedef void (*mls_cb1)(int);

Fabric* mls_new() { return new Fabric(); }
void mls_free(Fabric* e) { delete e; }
int mls_set(Fabric* e, const char* name, double v) {
  const Field* f = field(name);
  if (!f || !f->settable) return -1;
  if (f->d) e->*(f->d) = v;
  else if (f->u32) e->*(f->u32) = uint32_t(v);
  else if (f->u64) e->*(f->u64) = uint64_t(v);
  else e->*(f->b) = v != 0;
  return 0;
}
int mls_get(const Fabric* e, const char* name, double* out) {
  const Field* f = field(name);
  if (!f) return -1;
  if (f->d) *out = e->*(f->d);
  else if (f->u32) *out = e->*(f->u32);
  else if (f->u64) *out = double(e->*(f->u64));
  else *out = e->*(f->b);
  return 0;
}
void mls_on_arrive(Fabric* e, mls_cb3 f) { e->on_arrive = f ? std::function<void(int, int, int)>(f) : nullptr; }
void mls_on_done(Fabric* e, mls_cb2 f) { e->on_done = f ? std::function<void(int, int)>(f) : nullptr; }
void mls_on_timeout(Fabric* e, mls_cb1 f) { e->on_timeout = f ? std::function<void(int)>(f) : nullptr; }
void mls_on_timer(Fabric* e, mls_cb1 f) { e->on_timer = f ? std::function<void(int)>(f) : nullptr; }
void mls_halt(Fabric* e) { e->halt(); }

void mls_set_links(Fabric* e, uint64_t bps, int64_t delay_ps, uint32_t queue) { e->set_links(bps, delay_ps, queue); }
int mls_add_node(Fabric* e, int is_host, uint32_t ip) { return e->add_node(is_host, ip); }
void mls_connect(Fabric* e, int a, int ap, int b, int bp) { e->connect(a, ap, b, bp); }
void mls_set_group(Fabric* e, int sw, int leaf, const int* ports, int n) {
  e->set_group(sw, leaf, std::vector<int>(ports, ports + n));
}
void mls_set_host_port(Fabric* e, int leaf, uint32_t ip, int port) { e->set_host_port(leaf, ip, port); }
void mls_add_pin(Fabric* e, int sw, uint32_t src, uint32_t dst, uint16_t sport, int port) {
  e->add_pin(sw, src, dst, sport, port);
}
void mls_fail_port(Fabric* e, int node, int port) { e->fail_port(node, port); }
void mls_set_salt(Fabric* e, int sw, uint8_t salt) { e->set_salt(sw, salt); }
void mls_lose_one(Fabric* e, int node, int port, int64_t after) { e->lose_one(node, port, after); }
void mls_seed(Fabric* e, uint32_t s) { e->seed(s); }

int mls_add_job(Fabric* e) { return e->add_job(); }
void mls_add_step(Fabric* e, int job, int rank, uint64_t expect) { e->add_step(job, rank, expect); }
void mls_start_rank(Fabric* e, int job, int rank) { e->start_rank(job, rank); }
void mls_timer(Fabric* e, double delay, int id) { e->timer(delay, id); }
int mls_add_qp(Fabric* e, int job, int src, int dst, int step, uint64_t bytes, uint32_t mtu,
               uint16_t sport, int mode) {
  return e->add_qp(job, src, dst, step, bytes, mtu, sport, mode);
}
void mls_add_qps(Fabric* e, int job, int src, int step, int n, const int64_t* dsts,
                 const int64_t* bytes, uint32_t mtu, const int64_t* sports, const int64_t* modes,
                 int nmodes) {
  e->add_qps(job, src, step, n, dsts, bytes, mtu, sports, modes, nmodes);
}
void mls_repath(Fabric* e, int qp, uint16_t sport) { e->repath(qp, sport); }
double mls_run(Fabric* e, double until_s) { return e->run(until_s); }
uint64_t mls_events(const Fabric* e) { return e->events(); }
double mls_now_s(const Fabric* e) { return e->now_s(); }

double mls_rank_done(const Fabric* e, int job, int rank) { return e->rank_done(job, rank); }
int mls_qp_count(const Fabric* e) { return e->qp_count(); }
double mls_qp_started(const Fabric* e, int q) { return e->qp_started(q); }
double mls_qp_finished(const Fabric* e, int q) { return e->qp_finished(q); }
uint64_t mls_qp_received(const Fabric* e, int q) { return e->qp_received(q); }
uint64_t mls_tx(const Fabric* e, int node, int port) { return e->tx(node, port); }
uint64_t mls_tx_data(const Fabric* e, int node, int port) { return e->tx_data(node, port); }
uint64_t mls_drops(const Fabric* e, int node, int port) { return e->drops(node, port); }
uint64_t mls_paused_ps(const Fabric* e, int node, int port) { return e->paused_ps(node, port); }
double mls_qp_rate(const Fabric* e, int q) { return e->qp_rate(q); }

void mls_add_mcast(Fabric* e, uint32_t group, int sw, const int* ports, int n) {
  e->add_mcast(group, sw, std::vector<int>(ports, ports + n));
}
void mls_raw_send(Fabric* e, int job, int host, int step, uint32_t dst, uint8_t flags,
                  uint64_t bytes, uint32_t mtu, double rate_bps) {
  e->raw_send(job, host, step, dst, flags, bytes, mtu, rate_bps);
}
void mls_mcast_send(Fabric* e, int host, uint32_t group, uint64_t bytes, uint32_t mtu, double at) {
  e->mcast_send(host, group, bytes, mtu, at);
}
uint64_t mls_host_rx_bytes(const Fabric* e, int host) { return e->host_rx_bytes(host); }
void mls_set_agg(Fabric* e, int sw, uint32_t agg_ip, int workers, uint32_t group) {
  e->set_agg(sw, agg_ip, workers, group);
}
void mls_agg_send(Fabric* e, int host, uint32_t agg_ip, uint64_t bytes, uint32_t mtu, double at) {
  e->agg_send(host, agg_ip, bytes, mtu, at);
}
double mls_last_rx_at(const Fabric* e) { return e->last_rx_at(); }
int mls_route_of(Fabric* e, int sw, uint32_t src, uint32_t dst, uint8_t proto, uint16_t sport,
                 uint16_t dport) {
  return e->route_of(sw, src, dst, proto, sport, dport);
}
}
