/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pt_packets.h: the Intel PT packet encoder of the ptpmu test module, and the
 * stream rules the module writes by, shared with its host unit test
 * (tests/vm/ptpmu_packets_test.cpp), which decodes what these functions write with
 * libipt's packet and block decoders.
 *
 * Plain C, no includes: the kernel module and a C++ host test both include
 * it. Every multi-byte field is written byte by byte, little-endian, as the
 * SDM lays the packets out (Intel SDM vol. 3C, 33.4.2 "Packet Definitions";
 * libipt's pt_opcodes.h has the same opcodes and sizes).
 *
 * Each ptpkt_* encoder writes one packet at p (room for PTPKT_MAX bytes) and
 * returns its size. ptpkt_ring is the writer the module uses: packets go
 * into a power-of-two ring at a free-running position, split at the wrap.
 */
#ifndef PTPMU_PT_PACKETS_H
#define PTPMU_PT_PACKETS_H

/* The longest packet written here: PSB (16 bytes). */
#define PTPKT_MAX 16

/* Packet sizes (libipt pt_opcodes.h: ptps_*). */
#define PTPKT_PSB_SIZE 16
#define PTPKT_PSBEND_SIZE 2
#define PTPKT_TSC_SIZE 8
#define PTPKT_TMA_SIZE 7
#define PTPKT_CBR_SIZE 4
#define PTPKT_MODE_SIZE 2
#define PTPKT_IP_SIZE 7 /* header + 6 bytes: IPBytes 011b (sext48) */
#define PTPKT_IP_SUPPRESSED_SIZE 1
#define PTPKT_PTW_SIZE 10 /* 02 + header + 8-byte payload */
#define PTPKT_OVF_SIZE 2

/* IP packet opcodes, IPBytes in bits 7:5 (SDM table "Compressed IP"). */
#define PTPKT_OPC_TIP 0x0d
#define PTPKT_OPC_TIP_PGE 0x11
#define PTPKT_OPC_TIP_PGD 0x01
#define PTPKT_OPC_FUP 0x1d
#define PTPKT_IPC_SUPPRESSED 0 /* no IP bytes */
#define PTPKT_IPC_SEXT48 3 /* IP[47:0], sign-extended from bit 47 */

static inline void ptpkt_le(unsigned char *p, unsigned long long v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* PSB: 02 82 repeated 8 times. */
static inline int ptpkt_psb(unsigned char *p)
{
	int i;

	for (i = 0; i < PTPKT_PSB_SIZE; i += 2) {
		p[i] = 0x02;
		p[i + 1] = 0x82;
	}
	return PTPKT_PSB_SIZE;
}

/* PSBEND: 02 23. */
static inline int ptpkt_psbend(unsigned char *p)
{
	p[0] = 0x02;
	p[1] = 0x23;
	return PTPKT_PSBEND_SIZE;
}

/* TSC: 19, then TSC[55:0]. */
static inline int ptpkt_tsc(unsigned char *p, unsigned long long tsc)
{
	p[0] = 0x19;
	ptpkt_le(p + 1, tsc, 7);
	return PTPKT_TSC_SIZE;
}

/* TMA: 02 73, CTC[15:0], a reserved byte, FastCounter[7:0], FC[8] in bit 0. */
static inline int ptpkt_tma(unsigned char *p, unsigned int ctc, unsigned int fc)
{
	p[0] = 0x02;
	p[1] = 0x73;
	ptpkt_le(p + 2, ctc & 0xffff, 2);
	p[4] = 0;
	p[5] = (unsigned char)fc;
	p[6] = (unsigned char)((fc >> 8) & 1);
	return PTPKT_TMA_SIZE;
}

/* CBR: 02 03, the core:bus ratio, a reserved byte. */
static inline int ptpkt_cbr(unsigned char *p, unsigned int ratio)
{
	p[0] = 0x02;
	p[1] = 0x03;
	p[2] = (unsigned char)ratio;
	p[3] = 0;
	return PTPKT_CBR_SIZE;
}

/* MODE.Exec (leaf 000b in bits 7:5), CS.L set: 64-bit code. */
static inline int ptpkt_mode_exec64(unsigned char *p)
{
	p[0] = 0x99;
	p[1] = 0x01;
	return PTPKT_MODE_SIZE;
}

/*
 * TIP / TIP.PGE / TIP.PGD / FUP (opc one of PTPKT_OPC_*). With suppress the
 * IP is left out (IPBytes 000b); else IP[47:0] with IPBytes 011b, which needs
 * no last-IP state and is exact for any canonical 48-bit address (user and
 * kernel alike).
 */
static inline int ptpkt_ip(unsigned char *p, unsigned int opc, unsigned long long ip, int suppress)
{
	if (suppress) {
		p[0] = (unsigned char)(opc | (PTPKT_IPC_SUPPRESSED << 5));
		return PTPKT_IP_SUPPRESSED_SIZE;
	}
	p[0] = (unsigned char)(opc | (PTPKT_IPC_SEXT48 << 5));
	ptpkt_le(p + 1, ip, 6);
	return PTPKT_IP_SIZE;
}

/* PTW: 02, then 0x12 | PayloadBytes (01b: 8 bytes) << 5, IP bit 7 clear. */
static inline int ptpkt_ptw(unsigned char *p, unsigned long long payload)
{
	p[0] = 0x02;
	p[1] = 0x12 | (1 << 5);
	ptpkt_le(p + 2, payload, 8);
	return PTPKT_PTW_SIZE;
}

/* OVF: 02 f3. */
static inline int ptpkt_ovf(unsigned char *p)
{
	p[0] = 0x02;
	p[1] = 0xf3;
	return PTPKT_OVF_SIZE;
}

/*
 * The ring the module writes: base[0..mask] (a power-of-two AUX buffer),
 * pos a free-running byte position (masked on each store), written the
 * bytes stored since the writer was set up, limit the most it may store
 * (full mode: the room perf_aux_output_begin gave; ~0 in snapshot mode).
 */
struct ptpkt_ring {
	unsigned char *base;
	unsigned long mask;
	unsigned long pos;
	unsigned long written;
	unsigned long limit;
};

static inline int ptpkt_room(const struct ptpkt_ring *r, unsigned long n)
{
	return r->limit - r->written >= n;
}

/* Stores n bytes (caller checked ptpkt_room), split at the wrap. */
static inline void ptpkt_put(struct ptpkt_ring *r, const unsigned char *b, unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		r->base[(r->pos + i) & r->mask] = b[i];
	r->pos += n;
	r->written += n;
}

/*
 * The stream rules. One place decides what the module writes, so that the
 * host test writes exactly the module's sequences:
 *
 *   schedule-in:   PSB+ (PSB, [TSC, TMA], CBR, PSBEND), then for each traced
 *                  scope an empty enable window: MODE.Exec, TIP.PGE(ip),
 *                  FUP(ip), TIP.PGD(suppressed)
 *   every tick:    [PSB+ when psb_period bytes have passed since the last]
 *                  [OVF after dropped payloads] PTW(seq)
 *   schedule-out:  the enable window again at the IP the task leaves at
 *
 * Every PTW sits where tracing is disabled (after TIP.PGD): the decoders
 * apply a PTW event at once when not tracing, so libipt's block and
 * instruction decoders accept the stream without any image of the code.
 */

/* psb+ bytes: PSB, optionally TSC+TMA, CBR, PSBEND. */
static inline unsigned long ptpkt_psb_plus_size(int tsc)
{
	return PTPKT_PSB_SIZE + (tsc ? PTPKT_TSC_SIZE + PTPKT_TMA_SIZE : 0) + PTPKT_CBR_SIZE +
	       PTPKT_PSBEND_SIZE;
}

/* Writes PSB+ if it fits; returns the bytes written (0: no room). */
static inline unsigned long ptpkt_write_psb_plus(struct ptpkt_ring *r, int tsc,
						 unsigned long long tsc_value, unsigned int cbr)
{
	unsigned char b[64];
	unsigned long n = 0;

	if (!ptpkt_room(r, ptpkt_psb_plus_size(tsc)))
		return 0;
	n += ptpkt_psb(b + n);
	if (tsc) {
		n += ptpkt_tsc(b + n, tsc_value);
		/* CTC 0, fast counter 0: libipt only needs TMA after TSC. */
		n += ptpkt_tma(b + n, 0, 0);
	}
	n += ptpkt_cbr(b + n, cbr);
	n += ptpkt_psbend(b + n);
	ptpkt_put(r, b, n);
	return n;
}

/* Enable window bytes: MODE.Exec, TIP.PGE, FUP, TIP.PGD. */
#define PTPKT_WINDOW_SIZE (PTPKT_MODE_SIZE + 2 * PTPKT_IP_SIZE + PTPKT_IP_SUPPRESSED_SIZE)

/*
 * Tracing enabled at ip and disabled again at the same ip before an
 * instruction retires: MODE.Exec + TIP.PGE(ip) + FUP(ip) + TIP.PGD. Returns
 * the bytes written (0: no room).
 */
static inline unsigned long ptpkt_write_window(struct ptpkt_ring *r, unsigned long long ip)
{
	unsigned char b[PTPKT_WINDOW_SIZE];
	unsigned long n = 0;

	if (!ptpkt_room(r, PTPKT_WINDOW_SIZE))
		return 0;
	n += ptpkt_mode_exec64(b + n);
	n += ptpkt_ip(b + n, PTPKT_OPC_TIP_PGE, ip, 0);
	n += ptpkt_ip(b + n, PTPKT_OPC_FUP, ip, 0);
	n += ptpkt_ip(b + n, PTPKT_OPC_TIP_PGD, 0, 1);
	ptpkt_put(r, b, n);
	return n;
}

/* PTW(seq), preceded by OVF if ovf. Returns bytes written (0: no room). */
static inline unsigned long ptpkt_write_ptw(struct ptpkt_ring *r, unsigned long long seq, int ovf)
{
	unsigned char b[PTPKT_OVF_SIZE + PTPKT_PTW_SIZE];
	unsigned long n = 0;

	if (!ptpkt_room(r, (ovf ? PTPKT_OVF_SIZE : 0) + PTPKT_PTW_SIZE))
		return 0;
	if (ovf)
		n += ptpkt_ovf(b + n);
	n += ptpkt_ptw(b + n, seq);
	ptpkt_put(r, b, n);
	return n;
}

/* Bytes between PSBs for the psb_period config field: 2^(value + 11). */
static inline unsigned long ptpkt_psb_period_bytes(unsigned int psb_period)
{
	return 1ul << (psb_period + 11);
}

/*
 * One event's stream on one CPU, between a schedule-in and a schedule-out
 * (the module's per-CPU state holds one; the host test builds its streams
 * with it). psb_period is in bytes; last_psb the ring.written value at the
 * last PSB.
 */
struct ptpkt_stream {
	struct ptpkt_ring ring;
	unsigned long psb_period;
	unsigned long last_psb;
	int tsc;
	unsigned int cbr;
};

/*
 * Schedule-in: PSB+, then an enable window at each of the n ips (kernel
 * and/or user, as the event's scope asks). Returns 0, or -1 when the ring
 * had no room for all of it.
 */
static inline int ptpkt_sched_in(struct ptpkt_stream *s, unsigned long long tsc_value,
				 const unsigned long long *ips, int n)
{
	int i;

	s->last_psb = s->ring.written;
	if (!ptpkt_write_psb_plus(&s->ring, s->tsc, tsc_value, s->cbr))
		return -1;
	for (i = 0; i < n; i++)
		if (!ptpkt_write_window(&s->ring, ips[i]))
			return -1;
	return 0;
}

/*
 * A tick: PSB+ first when psb_period bytes have passed since the last one
 * (as the hardware's PacketByteCnt asks for one), then [OVF] PTW(seq).
 * Returns 0, or -1 when the ring had no room (the PTW was not written).
 */
static inline int ptpkt_tick(struct ptpkt_stream *s, unsigned long long tsc_value,
			     unsigned long long seq, int ovf)
{
	if (s->ring.written - s->last_psb >= s->psb_period) {
		s->last_psb = s->ring.written;
		if (!ptpkt_write_psb_plus(&s->ring, s->tsc, tsc_value, s->cbr))
			return -1;
	}
	return ptpkt_write_ptw(&s->ring, seq, ovf) ? 0 : -1;
}

/* Schedule-out: the enable windows again. Returns 0, or -1 (no room). */
static inline int ptpkt_sched_out(struct ptpkt_stream *s, const unsigned long long *ips, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!ptpkt_write_window(&s->ring, ips[i]))
			return -1;
	return 0;
}

#endif /* PTPMU_PT_PACKETS_H */
