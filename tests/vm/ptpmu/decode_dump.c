// SPDX-License-Identifier: GPL-2.0
/*
 * Host side of ptpmu_selftest --dump: reads a console log on stdin, takes
 * each base64 block between "ptpmu-dump-begin" and "ptpmu-dump-end" lines
 * (any prefix before the text on a line is skipped up to the last space),
 * and decodes it with libipt's packet decoder and block decoder, the block
 * decoder with an empty image (the module's stream needs none). Prints per
 * block: bytes, PTWs both decoders found, first and last, contiguous or not,
 * and the first decode error. Exit status 1 if any block had an error.
 *
 *   cc -O2 -o decode_dump tests/vm/ptpmu/decode_dump.c -lipt
 */
#include <intel-pt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct u64s {
	uint64_t *v;
	size_t n, cap;
};

static void push(struct u64s *a, uint64_t x)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 1024;
		a->v = realloc(a->v, a->cap * sizeof(*a->v));
	}
	a->v[a->n++] = x;
}

static int b64(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static int decode(uint8_t *buf, size_t len, int n)
{
	struct u64s pkt = { 0 }, blk = { 0 };
	struct pt_packet_decoder *pd;
	struct pt_block_decoder *bd;
	struct pt_config cfg;
	const char *err = NULL;
	char where[16] = "";
	int r, status, contiguous, same;
	size_t i;

	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + len;
	cfg.cpu.vendor = pcv_intel;
	cfg.cpu.family = 6;
	cfg.cpu.model = 0x9e; /* Kaby Lake */
	pt_cpu_errata(&cfg.errata, &cfg.cpu);

	pd = pt_pkt_alloc_decoder(&cfg);
	r = pt_pkt_sync_forward(pd);
	while (r >= 0) {
		struct pt_packet p;

		r = pt_pkt_next(pd, &p, sizeof(p));
		if (r >= 0 && p.type == ppt_ptw)
			push(&pkt, p.payload.ptw.payload);
	}
	if (r != -pte_eos) {
		err = pt_errstr(pt_errcode(r));
		strcpy(where, "packet");
	}
	pt_pkt_free_decoder(pd);

	bd = pt_blk_alloc_decoder(&cfg);
	status = pt_blk_sync_forward(bd);
	while (status >= 0) {
		struct pt_block block;

		while (status & pts_event_pending) {
			struct pt_event ev;

			status = pt_blk_event(bd, &ev, sizeof(ev));
			if (status >= 0 && ev.type == ptev_ptwrite)
				push(&blk, ev.variant.ptwrite.payload);
		}
		if (status < 0 || (status & pts_eos))
			break;
		status = pt_blk_next(bd, &block, sizeof(block));
	}
	if (status < 0 && status != -pte_eos && !err) {
		err = pt_errstr(pt_errcode(status));
		strcpy(where, "block");
	}
	pt_blk_free_decoder(bd);

	contiguous = blk.n > 0;
	for (i = 1; i < blk.n; i++)
		contiguous &= blk.v[i] == blk.v[i - 1] + 1;
	same = pkt.n == blk.n && (!blk.n || !memcmp(pkt.v, blk.v, blk.n * sizeof(*blk.v)));
	printf("dump %d: bytes %zu packet_ptws %zu block_ptws %zu first %llu last %llu "
	       "contiguous %s same %s error %s%s%s\n",
	       n, len, pkt.n, blk.n, blk.n ? (unsigned long long)blk.v[0] : 0ull,
	       blk.n ? (unsigned long long)blk.v[blk.n - 1] : 0ull, contiguous ? "yes" : "no",
	       same ? "yes" : "no", err ? where : "", err ? ": " : "", err ? err : "none");
	free(pkt.v);
	free(blk.v);
	return err ? 1 : 0;
}

int main(void)
{
	static char line[4096];
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	int in = 0, n = 0, bad = 0;
	uint32_t acc = 0;
	int bits = 0;

	while (fgets(line, sizeof(line), stdin)) {
		char *p;

		if (strstr(line, "ptpmu-dump-begin")) {
			in = 1;
			len = 0;
			acc = 0;
			bits = 0;
			continue;
		}
		if (strstr(line, "ptpmu-dump-end") && in) {
			in = 0;
			bad |= decode(buf, len, n++);
			continue;
		}
		if (!in)
			continue;
		p = strrchr(line, ' ');
		for (p = p ? p + 1 : line; *p; p++) {
			int d = b64((unsigned char)*p);

			if (d < 0)
				continue;
			acc = acc << 6 | (uint32_t)d;
			bits += 6;
			if (bits >= 8) {
				bits -= 8;
				if (len == cap) {
					cap = cap ? 2 * cap : 65536;
					buf = realloc(buf, cap);
				}
				buf[len++] = (uint8_t)(acc >> bits);
			}
		}
	}
	free(buf);
	return bad;
}
