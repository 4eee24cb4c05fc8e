/* core.p4 for p4switch: the P4_16 core library, declared from the language specification. */
#ifndef _CORE_P4_
#define _CORE_P4_

/* Errors a parser may signal; programs add their own with further error declarations. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* The incoming packet, read by a parser. */
extern packet_in {
    void extract<T>(out T hdr);
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

/* The outgoing packet, written by a deparser. */
extern packet_out {
    void emit<T>(in T hdr);
}

/* Stops the parser with error `toSignal` when `check` is false. */
extern void verify(in bool check, in error toSignal);

/* The action a table runs when nothing else is specified. */
@noWarn("unused")
action NoAction() {}

/* The standard match kinds. */
match_kind {
    exact,
    ternary,
    lpm
}

#endif
