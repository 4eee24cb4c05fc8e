// The per-packet half of the simulator, compiled into ns-3 at run time by cppyy.
//
// Switches (leaf/spine/agg/core) forward on ns-3 PointToPointNetDevices: a pin entry if one
// matches, else crc32 over the 5-tuple modulo the ECMP group (as p4src/fabric.p4), multicast
// replication along a tree, in-network aggregation (NetReduce), ECN marking at egress. Hosts run
// a RoCE-like reliable connection per queue pair (QP): per-QP UDP source port (the ECMP
// entropy), a window, DCQCN-like rate control driven by ECN echoes, retransmission on timeout
// only, and a receiver that places out-of-order packets by PSN (no NAK at a gap). The entropy
// policy of a QP is hash ECMP (one port), spraying (a random port per packet), REPS (recycled
// entropy) or pinned (Ethereal: the port its planner chose, re-picked on timeout by Python).
// Python is called back only when a rank starts a collective step, when a rank finishes a
// collective, on an Ethereal timeout and on a timer it set.
//
// Several collectives run at once as jobs: each job has its own steps per rank (rank = host
// node index), a rank enters a job when Python starts it there, and every QP, multicast and
// aggregation packet carries its job, so the steps of different collectives are counted apart.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mlsim {

using ns3::Ptr;

enum Flags : uint8_t { ACK = 1, CE = 2, ECE = 4, MCAST = 8, AGG = 16 };
enum Mode : int { ECMP = 0, SPRAY = 1, REPS = 2, PINNED = 3 };

constexpr uint32_t HEADER_BYTES = 56;  // Eth 14 + IPv4 20 + UDP 8 + BTH 12 (+ PPP 2 = RoCEv2's 58)
constexpr uint32_t ACK_PAYLOAD = 8;    // AETH 4 + ICRC 4
constexpr int MAX_HOPS = 6;

// ---- the wire format: the fields of Eth/IPv4/UDP/BTH the fabric looks at -----------------
class RoceHeader : public ns3::Header {
 public:
  uint32_t src = 0, dst = 0;           // IPv4 addresses
  uint16_t sport = 0, dport = 4791;
  uint8_t proto = 17, flags = 0, nhops = 0;
  uint32_t qp = 0, psn = 0;
  uint16_t ev = 0;                     // ACK: the source port of the packet it acknowledges
  uint16_t hops[MAX_HOPS] = {0};       // ingress ports on the way: the ACK retraces them

  static ns3::TypeId GetTypeId() {
    static ns3::TypeId tid = ns3::TypeId("mlsim::RoceHeader")
                                 .SetParent<ns3::Header>()
                                 .AddConstructor<RoceHeader>();
    return tid;
  }
  ns3::TypeId GetInstanceTypeId() const override { return GetTypeId(); }
  uint32_t GetSerializedSize() const override { return HEADER_BYTES; }
  void Serialize(ns3::Buffer::Iterator i) const override {
    i.WriteU32(src); i.WriteU32(dst); i.WriteU16(sport); i.WriteU16(dport);
    i.WriteU8(proto); i.WriteU8(flags); i.WriteU8(nhops);
    i.WriteU32(qp); i.WriteU32(psn); i.WriteU16(ev);
    for (int k = 0; k < MAX_HOPS; k++) i.WriteU16(hops[k]);
    i.WriteU8(0, HEADER_BYTES - 35 - 2 * MAX_HOPS);
  }
  uint32_t Deserialize(ns3::Buffer::Iterator i) override {
    src = i.ReadU32(); dst = i.ReadU32(); sport = i.ReadU16(); dport = i.ReadU16();
    proto = i.ReadU8(); flags = i.ReadU8(); nhops = i.ReadU8();
    qp = i.ReadU32(); psn = i.ReadU32(); ev = i.ReadU16();
    for (int k = 0; k < MAX_HOPS; k++) hops[k] = i.ReadU16();
    return HEADER_BYTES;
  }
  void Print(std::ostream& os) const override { os << "qp=" << qp << " psn=" << psn; }
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

using PinKey = std::tuple<uint32_t, uint32_t, uint16_t>;   // src, dst, sport (UDP to 4791)

struct Qp {
  // identity
  int id = 0, job = 0, src = 0, dst = 0, step = 0, mode = ECMP;
  uint16_t sport = 0;
  uint64_t bytes = 0;
  uint32_t npkts = 0, mtu = 0;
  // sender
  uint32_t next_new = 0, acked_count = 0, inflight = 0, first_unacked = 0;
  std::vector<uint8_t> acked, lost;
  std::vector<double> sent_at;
  std::vector<uint16_t> sent_ev;
  std::deque<uint32_t> retx;
  double next_send = 0, rate = 0, target = 0, alpha = 1, last_cut = -1;
  int increase_rounds = 0;
  bool timer_armed = false, done = false, cc_armed = false;
  uint32_t timeouts = 0, retransmitted = 0;
  // REPS
  std::deque<uint16_t> cache;
  uint32_t explored = 0;
  uint16_t explore_base = 0;
  // receiver
  std::vector<uint8_t> got;
  uint32_t got_count = 0;
  double started = 0, finished = -1;
  // a job's multicast or aggregation send: unacknowledged packets to this address
  uint32_t raw_dst = 0;
  uint8_t raw_flags = 0;

  bool has_work() const { return !done && (!retx.empty() || next_new < npkts); }
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
  double line_bps = 400e9, rto = 100e-6, min_rate_frac = 0.001;
  double cc_period = 55e-6, dcqcn_g = 1.0 / 16, ai_frac = 0.005, cnp_interval = 50e-6;
  uint32_t ecn_kmin = 100000, ecn_kmax = 400000;
  double ecn_pmax = 0.2;
  uint32_t window = 64, reps_cache = 8;
  bool cc = true;

  std::function<void(int, int, int)> on_arrive;     // (job, rank, step): Python gives the QPs
  std::function<void(int, int)> on_done;            // (job, rank): the rank finished the job
  std::function<void(int)> on_timeout;             // Ethereal re-pick (qp id)
  std::function<void(int)> on_timer;               // a timer Python set (its id)

  void add_node(Ptr<ns3::Node> node, bool is_host, uint32_t ip) {
    int idx = nodes_.size();
    nodes_.push_back(node);
    is_host_.push_back(is_host);
    ports_.emplace_back();
    port_of_if_.emplace_back();
    groups_.emplace_back();
    host_port_.emplace_back();
    node_ip_.push_back(ip);
    nic_.emplace_back();
    node->RegisterProtocolHandler(
        ns3::MakeCallback(&Fabric::receive, this).Bind(idx), 0, nullptr, false);
  }
  // The callback binding above puts the node index first.
  void receive(int node, Ptr<ns3::NetDevice> dev, Ptr<const ns3::Packet> p, uint16_t,
               const ns3::Address&, const ns3::Address&, ns3::NetDevice::PacketType) {
    int port = port_of_if_[node][dev->GetIfIndex()];
    if (is_host_[node]) host_receive(node, p->Copy());
    else switch_receive(node, port, p->Copy());
  }
  void set_port(int node, int port, Ptr<ns3::NetDevice> dev) {
    if ((int)ports_[node].size() <= port) ports_[node].resize(port + 1);
    ports_[node][port] = dev;
    auto& m = port_of_if_[node];
    if (m.size() <= dev->GetIfIndex()) m.resize(dev->GetIfIndex() + 1, -1);
    m[dev->GetIfIndex()] = port;
    tx_bytes_[key(node, port)] = 0;
  }
  void set_group(int sw, int dst_leaf, std::vector<int> ports) { groups_[sw][dst_leaf] = ports; }
  void set_host_port(int leaf, uint32_t ip, int port) { host_port_[leaf][ip] = port; }
  void add_pin(int sw, uint32_t src, uint32_t dst, uint16_t sport, int port) {
    pins_[sw][PinKey(src, dst, sport)] = port;
  }
  void fail_port(int node, int port) { failed_.insert(key(node, port)); }
  // A collective: its ranks are host node indices; each gets its steps, then is started.
  int add_job() {
    size_t n = nodes_.size();
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
  void timer(double delay, int id) {
    ns3::Simulator::Schedule(ns3::Seconds(delay), &Fabric::fire, this, id);
  }
  void seed(uint32_t s) { rng_.seed(s); }

  // ---- the collective ------------------------------------------------------------------
  // A QP from rank `src` (host node index = rank) to `dst` for step `step` of `job`.
  int add_qp(int job, int src, int dst, int step, uint64_t bytes, uint32_t mtu, uint16_t sport,
             int mode) {
    Qp q;
    q.id = qps_.size(); q.job = job; q.src = src; q.dst = dst; q.step = step; q.mode = mode;
    q.sport = sport; q.bytes = bytes; q.mtu = mtu;
    q.npkts = (bytes + mtu - 1) / mtu;
    q.acked.assign(q.npkts, 0); q.lost.assign(q.npkts, 0);
    q.sent_at.assign(q.npkts, 0); q.sent_ev.assign(q.npkts, 0);
    q.got.assign(q.npkts, 0);
    q.rate = q.target = line_bps;
    q.started = now();
    q.explore_base = 0xC000 | (rng_() & 0x3FFF);
    qps_.push_back(std::move(q));
    jobs_[job].steps[src][step].sending++;
    nic_[src].active.push_back(q.id);
    wake(src);
    return q.id;
  }
  void repath(int qp, uint16_t sport) {       // Ethereal's re-pick, decided in Python
    qps_[qp].sport = sport;
  }

  // ---- results -------------------------------------------------------------------------
  double rank_done(int job, int r) const { return jobs_[job].done_at[r]; }
  int qp_count() const { return qps_.size(); }
  double qp_started(int q) const { return qps_[q].started; }
  double qp_finished(int q) const { return qps_[q].finished; }
  uint64_t qp_received(int q) const { return uint64_t(qps_[q].got_count); }
  uint64_t tx(int node, int port) const { auto it = tx_bytes_.find(key(node, port)); return it == tx_bytes_.end() ? 0 : it->second; }
  uint64_t tx_data(int node, int port) const { auto it = tx_data_.find(key(node, port)); return it == tx_data_.end() ? 0 : it->second; }
  uint64_t dropped = 0, marked = 0, timeouts = 0, retransmitted = 0, packets_sent = 0;
  uint64_t duplicates = 0, mcast_copies = 0, agg_results = 0;
  uint32_t max_queue_bytes = 0;

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
    q.sport = 0xC000 | (host & 0x3FFF);
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
    double gap = (HEADER_BYTES + 2 + mtu) * 8.0 / line_bps;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t size = std::min<uint64_t>(mtu, bytes - uint64_t(i) * mtu);
      ns3::Simulator::Schedule(ns3::Seconds(at + i * gap), &Fabric::mcast_emit, this, host,
                               group, i, size);
    }
  }
  uint64_t host_rx_bytes(int host) const { return host_rx_[host]; }
  void set_agg(int sw, uint32_t agg_ip, std::vector<uint32_t> worker_ips, uint32_t group) {
    AggJob j; j.sw = sw; j.workers = worker_ips.size();
    agg_[agg_ip] = j; agg_group_[agg_ip] = group;
  }
  // Worker `host` sends its `bytes` of gradient to the aggregator address, paced at line rate.
  void agg_send(int host, uint32_t agg_ip, uint64_t bytes, uint32_t mtu, double at) {
    uint32_t n = (bytes + mtu - 1) / mtu;
    double gap = (HEADER_BYTES + 2 + mtu) * 8.0 / line_bps;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t size = std::min<uint64_t>(mtu, bytes - uint64_t(i) * mtu);
      ns3::Simulator::Schedule(ns3::Seconds(at + i * gap), &Fabric::agg_emit, this, host,
                               agg_ip, i, size);
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
    size_t rr = 0;
    double busy_until = 0;         // the NIC's line is busy until then
    bool pending = false;
    double pending_at = 0;
    ns3::EventId ev;
  };

  static uint64_t key(int node, int port) { return uint64_t(node) << 32 | uint32_t(port); }
  static double now() { return ns3::Simulator::Now().GetSeconds(); }
  static int leaf_of(uint32_t ip) { return (ip >> 8) & 0xFFFF; }   // 10.<l/256>.<l%256>.h

  void send_on(int node, int port, Ptr<ns3::Packet> p, bool data) {
    Ptr<ns3::NetDevice> dev = ports_[node][port];
    uint64_t k = key(node, port);
    if (failed_.count(k)) { dropped++; return; }
    tx_bytes_[k] += p->GetSize();
    if (data) tx_data_[k] += p->GetSize() - HEADER_BYTES;
    dev->Send(p, dev->GetBroadcast(), 0x0800);
  }

  uint32_t queue_bytes(int node, int port) {
    auto dev = ns3::DynamicCast<ns3::PointToPointNetDevice>(ports_[node][port]);
    return dev->GetQueue()->GetNBytes();
  }

  // ---- switch ----------------------------------------------------------------------------
  void switch_receive(int sw, int in_port, Ptr<ns3::Packet> p) {
    RoceHeader h;
    p->RemoveHeader(h);
    if (h.flags & MCAST) return switch_mcast(sw, in_port, p, h);
    if (h.flags & ACK) {             // retrace the data packet's path
      int port = h.hops[--h.nhops];
      p->AddHeader(h);
      return send_on(sw, port, p, false);
    }
    auto agg = agg_.find(h.dst);
    if (agg != agg_.end() && agg->second.sw == sw) return switch_aggregate(sw, p, h, agg->second);
    if (h.nhops < MAX_HOPS) h.hops[h.nhops++] = in_port;
    int port = route(sw, h);
    if (port < 0) { dropped++; return; }
    if (p->GetSize() > 0) {
      uint32_t q = queue_bytes(sw, port);
      max_queue_bytes = std::max(max_queue_bytes, q);
      if (q > ecn_kmin) {
        double pr = q >= ecn_kmax ? 1.0 : ecn_pmax * (q - ecn_kmin) / double(ecn_kmax - ecn_kmin);
        if (uni_(rng_) < pr) { h.flags |= CE; marked++; }
      }
    }
    p->AddHeader(h);
    send_on(sw, port, p, true);
  }

  int route(int sw, const RoceHeader& h) {
    int dl = leaf_of(h.dst);
    auto& hp = host_port_[sw];
    auto direct = hp.find(h.dst);
    if (direct != hp.end()) return direct->second;
    auto g = groups_[sw].find(dl);
    if (g == groups_[sw].end() || g->second.empty()) return -1;
    auto pt = pins_.find(sw);
    if (pt != pins_.end()) {
      auto e = pt->second.find(PinKey(h.src, h.dst, h.sport));
      if (e != pt->second.end()) return e->second;
    }
    const auto& ports = g->second;
    if (ports.size() == 1) return ports[0];
    return ports[ecmp_hash(h.src, h.dst, h.proto, h.sport, h.dport) % ports.size()];
  }

  void switch_mcast(int sw, int in_port, Ptr<ns3::Packet> p, RoceHeader& h) {
    auto t = mcast_.find(h.dst);
    if (t == mcast_.end()) { dropped++; return; }
    auto ps = t->second.ports.find(sw);
    if (ps == t->second.ports.end()) { dropped++; return; }
    p->AddHeader(h);
    for (int port : ps->second) {
      if (port == in_port) continue;   // the data plane prunes the ingress port
      mcast_copies++;
      send_on(sw, port, p->Copy(), true);
    }
  }

  void switch_aggregate(int sw, Ptr<ns3::Packet> p, RoceHeader& h, AggJob& job) {
    uint64_t chunk = uint64_t(h.qp) << 32 | h.psn;   // h.qp: the collective's job + 1
    int& n = job.arrived[chunk];
    if (++n < job.workers) return;   // the sum waits for every worker's chunk
    job.arrived.erase(chunk);
    agg_results++;
    RoceHeader r = h;
    r.dst = agg_group_[h.dst];
    r.src = h.dst;                    // the result comes from the aggregator
    r.flags = MCAST;
    r.nhops = 0;
    switch_mcast(sw, -1, p, r);
  }

  void mcast_emit(int host, uint32_t group, uint32_t psn, uint32_t size) {
    RoceHeader h;
    h.src = node_ip_[host]; h.dst = group; h.psn = psn; h.flags = MCAST;
    auto p = ns3::Create<ns3::Packet>(size);
    p->AddHeader(h);
    packets_sent++;
    send_on(host, 0, p, true);
  }
  void agg_emit(int host, uint32_t agg_ip, uint32_t psn, uint32_t size) {
    RoceHeader h;
    h.src = node_ip_[host]; h.dst = agg_ip; h.psn = psn;
    h.sport = 0xC000 | (host & 0x3FFF);
    auto p = ns3::Create<ns3::Packet>(size);
    p->AddHeader(h);
    packets_sent++;
    send_on(host, 0, p, true);
  }

  // ---- host: receiver ------------------------------------------------------------------
  void host_receive(int host, Ptr<ns3::Packet> p) {
    RoceHeader h;
    p->RemoveHeader(h);
    if (h.flags & MCAST) {
      if (host_rx_.size() < nodes_.size()) host_rx_.resize(nodes_.size(), 0);
      host_rx_[host] += p->GetSize();
      last_rx_at_ = now();
      if (h.qp > 0) credit(h.qp - 1, host, h.ev, p->GetSize());
      return;
    }
    if (h.flags & ACK) return sender_ack(h);
    Qp& q = qps_[h.qp];
    RoceHeader a;
    a.src = h.dst; a.dst = h.src; a.sport = h.sport; a.dport = h.dport;
    a.qp = h.qp; a.psn = h.psn; a.ev = h.sport; a.nhops = h.nhops;
    for (int k = 0; k < MAX_HOPS; k++) a.hops[k] = h.hops[k];
    a.flags = ACK | ((h.flags & CE) ? ECE : 0);
    if (!q.got[h.psn]) {             // placed by PSN, whatever arrived before it
      q.got[h.psn] = 1;
      q.got_count++;
      credit(q.job, q.dst, q.step, p->GetSize());
    } else {
      duplicates++;
    }
    auto ack = ns3::Create<ns3::Packet>(ACK_PAYLOAD);
    ack->AddHeader(a);
    // the host's own link is the first hop back; the rest of the route is in `hops`
    send_on(host, 0, ack, false);
  }

  void credit(int job, int rank, int step, uint32_t bytes) {
    if (step >= (int)jobs_[job].steps[rank].size()) return;   // a group member not in the job
    auto& st = jobs_[job].steps[rank][step];
    st.received += bytes;
    if (st.received >= st.expect && jobs_[job].cur[rank] == step)
      ns3::Simulator::ScheduleNow(&Fabric::advance, this, job, rank);
  }

  void fire(int id) { if (on_timer) on_timer(id); }

  // ---- host: sender ----------------------------------------------------------------------
  void sender_ack(const RoceHeader& h) {
    Qp& q = qps_[h.qp];
    if (q.done || q.acked[h.psn]) return;
    q.acked[h.psn] = 1;
    q.acked_count++;
    if (!q.lost[h.psn]) q.inflight--;
    if (q.mode == REPS && !(h.flags & ECE)) {
      q.cache.push_back(h.ev);
      if (q.cache.size() > reps_cache) q.cache.pop_front();
    }
    if (h.flags & ECE) congestion(q);
    if (q.acked_count == q.npkts) return qp_done(q);
    wake(q.src);
  }

  void congestion(Qp& q) {
    if (!cc) return;
    double t = now();
    if (q.last_cut >= 0 && t - q.last_cut < cnp_interval) return;
    q.last_cut = t;
    q.target = q.rate;
    q.rate = std::max(line_bps * min_rate_frac, q.rate * (1 - q.alpha / 2));
    q.alpha = (1 - dcqcn_g) * q.alpha + dcqcn_g;
    q.increase_rounds = 0;
    if (!q.cc_armed) {
      q.cc_armed = true;
      ns3::Simulator::Schedule(ns3::Seconds(cc_period), &Fabric::cc_tick, this, q.id);
    }
  }

  // DCQCN's timer: alpha decays without marks; the rate recovers toward the target, then
  // the target grows additively.
  void cc_tick(int id) {
    Qp& q = qps_[id];
    if (q.done) { q.cc_armed = false; return; }
    if (now() - q.last_cut >= cc_period) q.alpha *= (1 - dcqcn_g);
    if (++q.increase_rounds > 5) q.target = std::min(line_bps, q.target + line_bps * ai_frac);
    q.rate = std::min(line_bps, (q.rate + q.target) / 2);
    if (q.rate >= line_bps && q.alpha < 1e-3) { q.cc_armed = false; return; }
    ns3::Simulator::Schedule(ns3::Seconds(cc_period), &Fabric::cc_tick, this, id);
  }

  uint16_t pick_ev(Qp& q) {
    switch (q.mode) {
      case SPRAY: return 0xC000 | (rng_() & 0x3FFF);
      case REPS:
        if (q.explored < window) return 0xC000 | ((q.explore_base + q.explored++) & 0x3FFF);
        if (!q.cache.empty()) { uint16_t ev = q.cache.front(); q.cache.pop_front(); return ev; }
        return 0xC000 | (rng_() & 0x3FFF);
      default: return q.sport;
    }
  }

  bool eligible(const Qp& q, double t) const {
    return q.has_work() && q.inflight < window && q.next_send <= t + 1e-11;
  }

  void wake(int host) { schedule_pump(host, now()); }

  // The NIC sends one packet per line-rate slot, round-robin over eligible QPs.
  void pump(int host) {
    Nic& n = nic_[host];
    n.pending = false;
    double t = now(), soonest = -1;
    size_t m = n.active.size();
    for (size_t k = 0; k < m; k++) {
      size_t i = (n.rr + k) % m;
      Qp& q = qps_[n.active[i]];
      if (eligible(q, t)) {
        n.rr = (i + 1) % m;
        uint32_t size = transmit(host, q);
        if (size == 0) continue;
        n.busy_until = t + (HEADER_BYTES + 2 + size) * 8.0 / line_bps;
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
    if (n.pending) n.ev.Cancel();
    n.pending = true; n.pending_at = at;
    n.ev = ns3::Simulator::Schedule(ns3::Seconds(std::max(0.0, at - now())), &Fabric::pump, this, host);
  }

  uint32_t transmit(int host, Qp& q) {
    if (q.raw_dst) return transmit_raw(host, q);
    uint32_t psn;
    while (!q.retx.empty() && q.acked[q.retx.front()]) q.retx.pop_front();  // acked meanwhile
    if (!q.retx.empty()) {
      psn = q.retx.front(); q.retx.pop_front();
      q.lost[psn] = 0;
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
    q.sent_ev[psn] = h.sport;
    q.sent_at[psn] = now();
    q.inflight++;
    auto p = ns3::Create<ns3::Packet>(size);
    p->AddHeader(h);
    packets_sent++;
    q.next_send = now() + (HEADER_BYTES + 2 + size) * 8.0 / q.rate;
    send_on(host, 0, p, true);
    if (!q.timer_armed) {
      q.timer_armed = true;
      ns3::Simulator::Schedule(ns3::Seconds(rto), &Fabric::check_timeout, this, q.id);
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
    auto p = ns3::Create<ns3::Packet>(size);
    p->AddHeader(h);
    packets_sent++;
    q.next_send = now() + (HEADER_BYTES + 2 + size) * 8.0 / q.rate;
    send_on(host, 0, p, true);
    if (q.next_new == q.npkts) { q.done = true; q.finished = now(); }
    return size;
  }

  // Loss is declared only by timeout (never at a gap): packets unacknowledged for `rto`.
  void check_timeout(int id) {
    Qp& q = qps_[id];
    q.timer_armed = false;
    if (q.done) return;
    double t = now(), oldest = -1;
    bool fired = false;
    while (q.first_unacked < q.npkts && q.acked[q.first_unacked]) q.first_unacked++;
    for (uint32_t psn = q.first_unacked; psn < q.next_new; psn++) {
      if (q.acked[psn] || q.lost[psn]) continue;
      if (t - q.sent_at[psn] >= rto - 1e-12) {
        q.lost[psn] = 1; q.inflight--; q.retx.push_back(psn);
        fired = true;
        if (q.mode == REPS) {        // a timeout evicts the entropy that led into it
          uint16_t ev = q.sent_ev[psn];
          q.cache.erase(std::remove(q.cache.begin(), q.cache.end(), ev), q.cache.end());
        }
      } else if (oldest < 0 || q.sent_at[psn] < oldest) {
        oldest = q.sent_at[psn];
      }
    }
    if (fired) {
      q.timeouts++; timeouts++;
      if (q.mode == ECMP) q.sport = 0xC000 | (rng_() & 0x3FFF);   // re-hash, as Linux's txhash rethink
      if (q.mode == PINNED && on_timeout) on_timeout(q.id);
      wake(q.src);
    }
    if (fired || oldest >= 0) {
      q.timer_armed = true;
      double at = fired ? rto : std::max(1e-9, oldest + rto - t);
      ns3::Simulator::Schedule(ns3::Seconds(at), &Fabric::check_timeout, this, id);
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

  std::vector<Ptr<ns3::Node>> nodes_;
  std::vector<bool> is_host_;
  std::vector<std::vector<Ptr<ns3::NetDevice>>> ports_;
  std::vector<std::vector<int>> port_of_if_;
  std::vector<std::unordered_map<int, std::vector<int>>> groups_;
  std::vector<std::unordered_map<uint32_t, int>> host_port_;
  std::unordered_map<int, std::map<PinKey, int>> pins_;
  std::vector<uint32_t> node_ip_;
  std::vector<Nic> nic_;
  std::unordered_map<uint64_t, uint64_t> tx_bytes_, tx_data_;
  std::unordered_set<uint64_t> failed_;
  std::vector<Qp> qps_;
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
