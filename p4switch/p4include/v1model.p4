/* v1model.p4 for p4switch: the v1model architecture (BMv2 simple_switch), declared from its
   public API. Behaviour of every extern is implemented by p4switch itself. */
#ifndef _V1_MODEL_P4_
#define _V1_MODEL_P4_

#include <core.p4>

#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif

match_kind {
    range,
    optional,
    selector
}

const bit<32> __v1model_version = V1MODEL_VERSION;

/* Per-packet metadata that simple_switch fills in and reads back. */
@metadata @name("standard_metadata")
struct standard_metadata_t {
    bit<9>  ingress_port;
    bit<9>  egress_spec;      /* set by ingress: where the packet goes (511 drops) */
    bit<9>  egress_port;      /* read-only in egress: the port being sent to */
    bit<32> instance_type;    /* 0 normal, 1 ingress clone, 2 egress clone, 4 recirculated,
                                 5 replica, 6 resubmitted */
    bit<32> packet_length;
    @alias("queueing_metadata.enq_timestamp")  bit<32> enq_timestamp;
    @alias("queueing_metadata.enq_qdepth")     bit<19> enq_qdepth;
    @alias("queueing_metadata.deq_timedelta")  bit<32> deq_timedelta;
    @alias("queueing_metadata.deq_qdepth")     bit<19> deq_qdepth;
    @alias("intrinsic_metadata.ingress_global_timestamp") bit<48> ingress_global_timestamp;
    @alias("intrinsic_metadata.egress_global_timestamp")  bit<48> egress_global_timestamp;
    @alias("intrinsic_metadata.mcast_grp")  bit<16> mcast_grp;
    @alias("intrinsic_metadata.egress_rid") bit<16> egress_rid;
    bit<1>  checksum_error;
    error   parser_error;
    @alias("intrinsic_metadata.priority") bit<3> priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* An indexed array of packet and/or byte counters. */
extern counter<I> {
    counter(bit<32> size, CounterType type);
    void count(in I index);
}

/* One counter per entry of the table it is attached to. */
extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

/* An indexed array of two-rate three-colour meters (0 green, 1 yellow, 2 red). */
extern meter<I> {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in I index, out T result);
}

/* One meter per entry of the table it is attached to. */
extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

/* An indexed array of values that persist across packets. */
extern register<T, I> {
    register(bit<32> size);
    @noSideEffects T read(in I index);
    void read(out T result, in I index);
    void write(in I index, in T value);
}

/* Table implementation shared by entries: a set of actions the control plane fills. */
extern action_profile {
    action_profile(bit<32> size);
}

/* Draws a uniform random number in [lo, hi]. */
extern void random<T>(out T result, in T lo, in T hi);

/* Sends `data` to the control plane as a digest message. */
extern void digest<T>(in bit<32> receiver, in T data);

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

/* Drops the packet at the end of the current pipeline. */
@pure
extern void mark_to_drop(inout standard_metadata_t standard_metadata);

/* result = base + (algo(data) mod max); max 0 keeps the whole hash. */
@pure
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

/* An action profile whose members are chosen per packet by a hash of the selector keys. */
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

enum CloneType {
    I2E,
    E2E
}

/* Incremental 16-bit ones' complement checksum. */
@deprecated("Please use verify_checksum/update_checksum instead.")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

/* Sets standard_metadata.checksum_error when `condition` holds and the checksum of `data`
   differs from `checksum`. */
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);

/* Writes the checksum of `data` into `checksum` when `condition` holds. */
@pure
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* As verify_checksum, with the packet payload appended to `data`. */
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);

/* As update_checksum, with the packet payload appended to `data`. */
@noSideEffects
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* Copies the packet to the clone session's port (I2E: the ingress input; E2E: the egress output). */
extern void clone(in CloneType type, in bit<32> session);

@deprecated("Please use 'resubmit_preserving_field_list' instead")
extern void resubmit<T>(in T data);
/* Sends the packet back to the start of ingress, keeping the metadata of @field_list(index). */
extern void resubmit_preserving_field_list(bit<8> index);

@deprecated("Please use 'recirculate_preserving_field_list' instead")
extern void recirculate<T>(in T data);
/* Sends the deparsed packet back to the parser, keeping the metadata of @field_list(index). */
extern void recirculate_preserving_field_list(bit<8> index);

@deprecated("Please use 'clone' or 'clone_preserving_field_list' instead")
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);
/* As clone, keeping the metadata of @field_list(index) in the clone. */
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);

/* Cuts the emitted packet to at most `length` bytes. */
extern void truncate(in bit<32> length);

/* Stops the switch with an error when `check` is false. */
extern void assert(in bool check);

/* Like assert for formal tools; checked the same way here. */
extern void assume(in bool check);

/* Prints a message (with `{}` replaced by the fields of `data`) to the switch log. */
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

/* The six programmable blocks of the architecture. */
parser Parser<H, M>(packet_in b, out H parsedHdr, inout M meta,
                    inout standard_metadata_t standard_metadata);
control VerifyChecksum<H, M>(inout H hdr, inout M meta);
@pipeline
control Ingress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
@pipeline
control Egress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control ComputeChecksum<H, M>(inout H hdr, inout M meta);
@deparser
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p, VerifyChecksum<H, M> vr, Ingress<H, M> ig,
                       Egress<H, M> eg, ComputeChecksum<H, M> ck, Deparser<H> dep);

#endif
