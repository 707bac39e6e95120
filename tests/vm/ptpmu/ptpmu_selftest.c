// SPDX-License-Identifier: GPL-2.0
/*
 * ptpmu_selftest: records itself through the intel_pt PMU (the ptpmu module
 * in a VM, or anything else that registers intel_pt) with plain
 * perf_event_open, and checks what the AUX area holds. Static, no perf, no
 * libipt: for an initramfs.
 *
 *   ptpmu_selftest [--snapshot] [--aux-kib N] [--ms N] [--kernel] [--both]
 *                  [--cpu N] [--psb-period N] [--drop N] [--term NAME=V]...
 *                  [--sleep-us N] [--plain-reenable] [--expect-wrap] [--dump]
 *
 * Opens the event per task on itself (or per CPU with --cpu: pid -1), user
 * scope unless --kernel (kernel only) or --both; maps 16 data pages and the
 * AUX area, read-only for --snapshot (overwrite mode), read-write for full
 * mode; enables, busy-loops N ms (full mode: draining AUX as it goes and
 * restarting the event after a TRUNCATED record), disables; then prints
 * the AUX records (offset, size, flags), whether ITRACE_START came, and the
 * PTW sequence numbers its packet walker finds, and checks them:
 *   full:     the PTWs are 1..last, none missing (with --drop N: exactly N
 *             missing, one OVF, a TRUNCATED record), last = read(2)'s count;
 *   snapshot: the bytes ending at aux_head hold a contiguous run of PTWs
 *             ending with the newest (= the count).
 * --sleep-us N sleeps N us about every millisecond of the loop, so that the
 * task is scheduled out and in (a transaction and window pair each time).
 * --plain-reenable restarts after TRUNCATED with ENABLE alone, as perf does
 * (to show whether the kernel disabled the event; see drain_data).
 * --expect-wrap: the snapshot must have wrapped (checked).
 * --term sets one more format term in attr.config (e.g. ptw=1, which the
 * PMU must refuse: the open's errno is printed as "open_errno N").
 * --dump prints the bytes (full: all drained; snapshot: the buffer from
 * aux_head) in base64 between "ptpmu-dump-begin" and "ptpmu-dump-end" lines.
 * Exit status 0 when every check passes. One line per fact, "key value".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PMU "/sys/bus/event_source/devices/intel_pt/"
#define DATA_PAGES 16

static int failures;
static int plain_reenable;
static int expect_wrap;

#define CHECK(cond, ...)                             \
	do {                                         \
		if (!(cond)) {                       \
			printf("FAIL " __VA_ARGS__); \
			printf("\n");                \
			failures++;                  \
		}                                    \
	} while (0)

static long read_long(const char *path, int base)
{
	char buf[64] = { 0 };
	FILE *f = fopen(path, "r");

	if (!f || !fgets(buf, sizeof buf, f)) {
		fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
		exit(2);
	}
	fclose(f);
	return strtol(buf, NULL, base);
}

/* format/<term>: "config:N" or "config:A-B"; returns value placed in the field. */
static uint64_t format_bits(const char *term, uint64_t value)
{
	char path[256], buf[64] = { 0 };
	unsigned lo, hi;
	FILE *f;

	snprintf(path, sizeof path, PMU "format/%s", term);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof buf, f)) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(2);
	}
	fclose(f);
	if (sscanf(buf, "config:%u-%u", &lo, &hi) != 2)
		hi = lo = (unsigned)strtoul(buf + 7, NULL, 10);
	return (value & ((hi - lo == 63) ? ~0ull : ((1ull << (hi - lo + 1)) - 1))) << lo;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* --- The data ring: AUX, ITRACE_START and LOST records ---------------- */

struct records {
	int aux, itrace_start, lost, truncated, partial, overwrite;
	uint64_t last_flags;
};

static void drain_data(struct perf_event_mmap_page *pc, struct records *r, int fd)
{
	unsigned char *data = (unsigned char *)pc + pc->data_offset;
	uint64_t size = pc->data_size;
	uint64_t head = __atomic_load_n(&pc->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = pc->data_tail;

	while (tail < head) {
		struct perf_event_header h;
		unsigned char rec[512];
		uint64_t i;

		for (i = 0; i < sizeof h; i++)
			((unsigned char *)&h)[i] = data[(tail + i) % size];
		for (i = 0; i < h.size && i < sizeof rec; i++)
			rec[i] = data[(tail + i) % size];
		if (h.type == PERF_RECORD_AUX) {
			uint64_t off, sz, fl;

			memcpy(&off, rec + 8, 8);
			memcpy(&sz, rec + 16, 8);
			memcpy(&fl, rec + 24, 8);
			if (r->aux < 20 || (fl & ~PERF_AUX_FLAG_OVERWRITE))
				printf("aux_record offset %llu size %llu flags 0x%llx\n",
				       (unsigned long long)off, (unsigned long long)sz,
				       (unsigned long long)fl);
			r->aux++;
			r->last_flags = fl;
			if (fl & PERF_AUX_FLAG_TRUNCATED) {
				r->truncated++;
				/*
				 * perf only re-enables after a TRUNCATED record. On
				 * 6.1 and 6.12 the perf core's disable after it
				 * may never come (ring_buffer.c stores
				 * smp_processor_id() in pending_disable, 0 on CPU
				 * 0, and 6.12 never queues the irq_work that reads
				 * it), leaving the event active and stopped: a
				 * plain ENABLE is then a no-op. DISABLE + ENABLE
				 * restarts it either way.
				 */
				if (fd >= 0 && plain_reenable) {
					printf("reenabled enable %d\n",
					       ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
				} else if (fd >= 0) {
					int d = ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
					int e = ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);

					printf("reenabled disable %d enable %d\n", d, e);
				}
			}
			if (fl & PERF_AUX_FLAG_PARTIAL)
				r->partial++;
			if (fl & PERF_AUX_FLAG_OVERWRITE)
				r->overwrite++;
		} else if (h.type == PERF_RECORD_ITRACE_START) {
			r->itrace_start++;
		} else if (h.type == PERF_RECORD_LOST) {
			r->lost++;
		}
		tail += h.size;
		if (!h.size)
			break;
	}
	__atomic_store_n(&pc->data_tail, tail, __ATOMIC_RELEASE);
}

/* --- AUX bytes ------------------------------------------------------------- */

struct bytes {
	unsigned char *p;
	size_t n, cap;
};

static void append(struct bytes *b, const unsigned char *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

/* Full mode: copy [aux_tail, aux_head) out and release it. */
static void drain_aux(struct perf_event_mmap_page *pc, unsigned char *aux, struct bytes *out)
{
	uint64_t head = __atomic_load_n(&pc->aux_head, __ATOMIC_ACQUIRE);
	uint64_t tail = pc->aux_tail, size = pc->aux_size;

	while (tail < head) {
		uint64_t off = tail % size, n = head - tail;

		if (n > size - off)
			n = size - off;
		append(out, aux + off, n);
		tail += n;
	}
	__atomic_store_n(&pc->aux_tail, tail, __ATOMIC_RELEASE);
}

/* --- A walker for the packets the module writes ------------------------- */

struct scan {
	uint64_t first, last, count, gaps, missing, repeats, ovf, psb;
	uint64_t after_gap; /* the first PTW after the last gap */
	int error;
	size_t error_at;
};

static int is_psb(const unsigned char *p, size_t left)
{
	size_t i;

	if (left < 16)
		return 0;
	for (i = 0; i < 16; i += 2)
		if (p[i] != 0x02 || p[i + 1] != 0x82)
			return 0;
	return 1;
}

static void take_ptw(struct scan *s, uint64_t v)
{
	if (s->count && v != s->last + 1) {
		if (v <= s->last) {
			s->repeats++;
		} else {
			s->gaps++;
			s->missing += v - s->last - 1;
			s->after_gap = v;
		}
	}
	if (!s->count)
		s->first = v;
	s->last = v;
	s->count++;
}

/* From the first PSB to the end; any byte it does not know is an error. */
static struct scan walk(const unsigned char *p, size_t n)
{
	static const int ip_bytes[8] = { 0, 2, 4, 6, 6, -1, 8, -1 };
	struct scan s = { 0 };
	size_t i = 0;

	while (i < n && !is_psb(p + i, n - i))
		i++;
	while (i < n) {
		unsigned char b = p[i];
		size_t len = 0;

		if (b == 0x00) {
			len = 1; /* PAD */
		} else if (b == 0x02 && i + 1 < n) {
			unsigned char e = p[i + 1];

			if (e == 0x82) {
				len = 16;
				s.psb++;
			} else if (e == 0x23) {
				len = 2; /* PSBEND */
			} else if (e == 0x73) {
				len = 7; /* TMA */
			} else if (e == 0x03) {
				len = 4; /* CBR */
			} else if (e == 0xf3) {
				len = 2;
				s.ovf++;
			} else if ((e & 0x1f) == 0x12) {
				int pl = (e >> 5) & 3;

				len = 2 + (pl == 0 ? 4 : 8);
				if (i + len <= n) {
					uint64_t v = 0;
					int k;

					for (k = (int)len - 3; k >= 0; k--)
						v = v << 8 | p[i + 2 + k];
					take_ptw(&s, v);
				}
			}
		} else if (b == 0x19) {
			len = 8; /* TSC */
		} else if (b == 0x99) {
			len = 2; /* MODE */
		} else if ((b & 0x1f) == 0x0d || (b & 0x1f) == 0x11 || (b & 0x1f) == 0x01 ||
			   (b & 0x1f) == 0x1d) {
			int ipb = ip_bytes[b >> 5];

			if (ipb >= 0)
				len = 1 + ipb;
		}
		if (!len || i + len > n) {
			s.error = 1;
			s.error_at = i;
			break;
		}
		i += len;
	}
	return s;
}

static void dump(const unsigned char *p, size_t n)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;
	int col = 0;

	printf("ptpmu-dump-begin %zu\n", n);
	for (i = 0; i < n; i += 3) {
		uint32_t v =
			p[i] << 16 | (i + 1 < n ? p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);

		putchar(t[v >> 18 & 63]);
		putchar(t[v >> 12 & 63]);
		putchar(i + 1 < n ? t[v >> 6 & 63] : '=');
		putchar(i + 2 < n ? t[v & 63] : '=');
		if (++col == 19) {
			putchar('\n');
			col = 0;
		}
	}
	printf("\nptpmu-dump-end\n");
}

static void write_param(const char *name, long v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof path, "/sys/module/ptpmu/parameters/%s", name);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%ld\n", v) < 0 || fclose(f)) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	int snapshot = 0, kernel = 0, both = 0, cpu = -1, psb_period = 3, drop = 0, do_dump = 0;
	long sleep_us = 0;
	double last_sleep;
	long aux_kib = 1024, ms = 50;
	struct perf_event_attr attr;
	struct perf_event_mmap_page *pc;
	struct records rec = { 0 };
	struct bytes bytes = { 0 };
	size_t page = (size_t)sysconf(_SC_PAGESIZE), data_len, aux_len;
	unsigned char *aux;
	uint64_t count = 0;
	volatile uint64_t spin = 0;
	double t0, last_drain;
	int fd, i, dropped_once = 0;
	uint64_t extra = 0;
	struct scan s;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--snapshot"))
			snapshot = 1;
		else if (!strcmp(argv[i], "--kernel"))
			kernel = 1;
		else if (!strcmp(argv[i], "--both"))
			both = 1;
		else if (!strcmp(argv[i], "--expect-wrap"))
			expect_wrap = 1;
		else if (!strcmp(argv[i], "--plain-reenable"))
			plain_reenable = 1;
		else if (!strcmp(argv[i], "--dump"))
			do_dump = 1;
		else if (!strcmp(argv[i], "--aux-kib") && i + 1 < argc)
			aux_kib = atol(argv[++i]);
		else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
			ms = atol(argv[++i]);
		else if (!strcmp(argv[i], "--cpu") && i + 1 < argc)
			cpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--psb-period") && i + 1 < argc)
			psb_period = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--sleep-us") && i + 1 < argc)
			sleep_us = atol(argv[++i]);
		else if (!strcmp(argv[i], "--drop") && i + 1 < argc)
			drop = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--term") && i + 1 < argc && strchr(argv[i + 1], '=')) {
			char *t = argv[++i], *eq = strchr(t, '=');

			*eq = 0;
			extra |= format_bits(t, strtoull(eq + 1, NULL, 0));
		} else {
			fprintf(stderr, "usage: see the comment at the top of ptpmu_selftest.c\n");
			return 2;
		}
	}

	memset(&attr, 0, sizeof attr);
	attr.size = sizeof attr;
	attr.type = (uint32_t)read_long(PMU "type", 10);
	attr.config = format_bits("pt", 1) | format_bits("tsc", 1) | format_bits("branch", 1) |
		      format_bits("psb_period", (uint64_t)psb_period) | extra;
	attr.disabled = 1;
	attr.exclude_kernel = !(kernel || both);
	attr.exclude_user = kernel && !both;
	attr.exclude_hv = 1;
	if (!snapshot)
		attr.aux_watermark = (uint32_t)(aux_kib * 1024 / 4);
	printf("mode %s aux_kib %ld scope %s target %s config 0x%llx type %u\n",
	       snapshot ? "snapshot" : "full", aux_kib,
	       both	? "both"
	       : kernel ? "kernel"
			: "user",
	       cpu >= 0 ? "cpu" : "task", (unsigned long long)attr.config, attr.type);

	fd = (int)syscall(SYS_perf_event_open, &attr, cpu >= 0 ? -1 : 0, cpu, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		printf("open_errno %d (%s)\n", errno, strerror(errno));
		return 1;
	}
	data_len = (1 + DATA_PAGES) * page;
	pc = mmap(NULL, data_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (pc == MAP_FAILED) {
		printf("mmap_data_errno %d (%s)\n", errno, strerror(errno));
		return 1;
	}
	aux_len = (size_t)aux_kib * 1024;
	pc->aux_offset = data_len;
	pc->aux_size = aux_len;
	aux = mmap(NULL, aux_len, PROT_READ | (snapshot ? 0 : PROT_WRITE), MAP_SHARED, fd,
		   (off_t)data_len);
	if (aux == MAP_FAILED) {
		printf("mmap_aux_errno %d (%s)\n", errno, strerror(errno));
		return 1;
	}

	if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
		printf("enable_errno %d\n", errno);
		return 1;
	}
	t0 = last_drain = last_sleep = now_ms();
	/*
	 * A snapshot ring must wrap for the snapshot checks to mean anything:
	 * past --ms, go on until the module has written more PTWs (10 bytes
	 * each) than the ring holds, for at most 20 times --ms. A loaded host
	 * runs the guest slower, and a fixed time once left a 16 KiB ring
	 * unwrapped.
	 */
	while (now_ms() - t0 < ms ||
	       (snapshot && now_ms() - t0 < 20.0 * ms &&
		read_long("/sys/module/ptpmu/parameters/last_seq", 10) < (long)(aux_len / 8))) {
		for (i = 0; i < 10000; i++)
			spin += (uint64_t)i;
		if (drop && !dropped_once && now_ms() - t0 > ms / 3.0) {
			write_param("drop_ptws", drop);
			dropped_once = 1;
		}
		if (sleep_us && now_ms() - last_sleep > 1) {
			usleep((useconds_t)sleep_us);
			last_sleep = now_ms();
		}
		if (!snapshot && now_ms() - last_drain > 1) {
			drain_data(pc, &rec, fd);
			drain_aux(pc, aux, &bytes);
			last_drain = now_ms();
		}
	}
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	drain_data(pc, &rec, -1);
	{
		/* The module's view: every live event's id and last sequence number. */
		uint64_t id = 0;
		char line[160];
		FILE *f = fopen("/sys/kernel/debug/ptpmu/events", "r");

		ioctl(fd, PERF_EVENT_IOC_ID, &id);
		while (f && fgets(line, sizeof line, f)) {
			unsigned long long eid, seq;

			if (sscanf(line, "id %llu pid %*d cpu %*d seq %llu", &eid, &seq) == 2 &&
			    eid == id)
				printf("debugfs_seq %llu\n", seq);
		}
		if (f)
			fclose(f);
	}
	if (read(fd, &count, sizeof count) != sizeof count)
		count = 0;

	if (snapshot) {
		/* aux_head is the write offset (pt.c pt_update_head/pt_event_stop). */
		uint64_t head = __atomic_load_n(&pc->aux_head, __ATOMIC_ACQUIRE);
		uint64_t off = head % aux_len;
		int wrapped = 0;
		size_t k;

		for (k = off; k < aux_len; k++)
			if (aux[k]) {
				wrapped = 1;
				break;
			}
		printf("aux_head %llu wrapped %d\n", (unsigned long long)head, wrapped);
		CHECK(wrapped || !expect_wrap, "snapshot: the buffer did not wrap");
		if (wrapped)
			append(&bytes, aux + off, aux_len - off);
		append(&bytes, aux, off);
	} else {
		drain_aux(pc, aux, &bytes);
		printf("aux_head %llu\n", (unsigned long long)pc->aux_head);
	}

	s = walk(bytes.p, bytes.n);
	printf("aux_records %d truncated %d partial %d overwrite %d lost %d\n", rec.aux,
	       rec.truncated, rec.partial, rec.overwrite, rec.lost);
	printf("itrace_start %s\n", rec.itrace_start ? "yes" : "no");
	printf("bytes %zu psb %llu ovf %llu\n", bytes.n, (unsigned long long)s.psb,
	       (unsigned long long)s.ovf);
	printf("ptw first %llu last %llu count %llu gaps %llu missing %llu repeats %llu"
	       " after_gap %llu\n",
	       (unsigned long long)s.first, (unsigned long long)s.last, (unsigned long long)s.count,
	       (unsigned long long)s.gaps, (unsigned long long)s.missing,
	       (unsigned long long)s.repeats,
	       (unsigned long long)(s.gaps ? s.last - s.after_gap : 0));
	printf("event_count %llu\n", (unsigned long long)count);

	CHECK(!s.error, "packet walk: unknown bytes at offset %zu of %zu", s.error_at, bytes.n);
	CHECK(rec.itrace_start, "no ITRACE_START record");
	CHECK(s.count > 0, "no PTW found");
	CHECK(s.repeats == 0, "%llu PTWs repeated", (unsigned long long)s.repeats);
	CHECK(s.last == count, "newest PTW %llu, but the event's count is %llu",
	      (unsigned long long)s.last, (unsigned long long)count);
	CHECK(rec.lost == 0, "%d LOST records", rec.lost);
	if (!snapshot) {
		CHECK(s.first == 1, "full mode: first PTW %llu, not 1",
		      (unsigned long long)s.first);
		if (drop) {
			CHECK(s.missing == (uint64_t)drop && s.gaps == 1,
			      "full mode: %llu missing in %llu gaps, want %d in 1",
			      (unsigned long long)s.missing, (unsigned long long)s.gaps, drop);
			CHECK(s.ovf == 1, "full mode: %llu OVF, want 1", (unsigned long long)s.ovf);
			CHECK(s.last > s.after_gap, "full mode: nothing written after the drop");
		} else {
			CHECK(s.missing == 0, "full mode: %llu PTWs missing",
			      (unsigned long long)s.missing);
			CHECK(rec.truncated == 0, "full mode: %d TRUNCATED records", rec.truncated);
		}
		CHECK(s.count == s.last - s.first + 1 - s.missing, "full mode: count mismatch");
	} else {
		CHECK(s.missing == 0 || drop, "snapshot: %llu PTWs missing in the run",
		      (unsigned long long)s.missing);
	}
	if (do_dump)
		dump(bytes.p, bytes.n);
	printf("result %s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}
