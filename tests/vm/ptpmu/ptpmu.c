// SPDX-License-Identifier: GPL-2.0
/*
 * ptpmu: a PMU shaped like the kernel's Intel PT driver, for ptsnap's VM test
 * suite (a QEMU TCG guest has no Intel PT). It registers "intel_pt" with a
 * Kaby Lake's format/ and caps/ files, takes AUX buffers through the real
 * perf core (setup_aux, perf_aux_output_begin/end, AUX and ITRACE_START
 * records, snapshot and full mode) and writes a genuine PT packet stream
 * whose payload counts: PTW packets carrying a per-event sequence number,
 * written by a per-CPU hrtimer while the event runs. What it models and
 * what it does not: README.md beside this file.
 *
 * Each rule cites the line of arch/x86/events/intel/pt.c it mirrors, as
 * "pt.c:N": Debian's linux-source-6.1 (6.1.192, the 6.1.0-57 kernel). The
 * 6.12.107 file is the same up to line 846 and 4 lines further down after
 * it (both were read; the rules cited are the same in both).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/hrtimer.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/version.h>
#include <linux/vmalloc.h>
#include <asm/msr.h>
#include <asm/msr-index.h>

#include "pt_packets.h"

/* --- Module parameters: timing, fault injection, the counter ----------- */

static uint tick_us = 100;
module_param(tick_us, uint, 0644);
MODULE_PARM_DESC(tick_us, "microseconds between PTW packets while an event runs (default 100)");

static int drop_ptws;
module_param(drop_ptws, int, 0644);
MODULE_PARM_DESC(drop_ptws, "drop the next N PTWs (their sequence numbers are used up); an OVF "
			    "precedes the next PTW written");

static uint drop_aux_flags = PERF_AUX_FLAG_TRUNCATED;
module_param(drop_aux_flags, uint, 0644);
MODULE_PARM_DESC(
	drop_aux_flags,
	"PERF_AUX_FLAG_* raised on the AUX record that ends a drop (default 1, TRUNCATED: the "
	"transaction ends there, nothing more is written until the event restarts; 4 PARTIAL: "
	"writing goes on)");

static bool refuse_setup_aux;
module_param(refuse_setup_aux, bool, 0644);
MODULE_PARM_DESC(refuse_setup_aux, "setup_aux returns NULL: the AUX mmap fails (ENOMEM)");

static int refuse_event_init;
module_param(refuse_event_init, int, 0644);
MODULE_PARM_DESC(refuse_event_init,
		 "event_init fails with -N (e.g. 95 EOPNOTSUPP, 22 EINVAL); 0: accept");

static ulong max_aux_bytes;
module_param(max_aux_bytes, ulong, 0644);
MODULE_PARM_DESC(max_aux_bytes, "setup_aux refuses AUX buffers larger than this (0: any size)");

static uint cbr = 36;
module_param(cbr, uint, 0644);
MODULE_PARM_DESC(cbr, "core:bus ratio in CBR packets (default 36, the nominal ratio)");

static unsigned long long last_seq;
module_param(last_seq, ullong, 0444);
MODULE_PARM_DESC(last_seq, "sequence number of the last PTW written, by any event");

/* --- caps/ and format/ -------------------------------------------------- */

/*
 * caps/: pt.c's pt_caps[] names in its order (pt.c:55-72), with the values a
 * Kaby Lake (family 6, model 0x9e; same PT leaf as Skylake) enumerates in
 * CPUID leaf 0x14, as the SDM's table "CPUID Leaf 14H Enumeration of Intel
 * Processor Trace Capabilities" defines the bits; they are the values of
 * ptsnap's Skylake fixture (tests/support/fake_intel_pt.h) and of the
 * emulator's virtual Kaby Lake (src/emulate/emulate.cpp), and the mtc_periods
 * 249 / psb_periods 3f / cycle_thresholds 3fff that perf-intel-pt.txt's
 * examples show. No PTWRITE, power events, event trace or TNT disable on
 * Kaby Lake (PTWRITE came with Goldmont Plus and, on big cores, Alder Lake).
 */
static const struct ptpmu_cap {
	const char *name;
	u32 value;
} ptpmu_caps[] = {
	{ "max_subleaf", 1 },
	{ "cr3_filtering", 1 },
	{ "psb_cyc", 1 },
	{ "ip_filtering", 1 },
	{ "mtc", 1 },
	{ "ptwrite", 0 },
	{ "power_event_trace", 0 },
	{ "event_trace", 0 },
	{ "tnt_disable", 0 },
	{ "topa_output", 1 },
	{ "topa_multiple_entries", 1 },
	{ "single_range_output", 1 },
	{ "output_subsys", 0 },
	{ "payloads_lip", 0 },
	{ "num_address_ranges", 2 },
	{ "mtc_periods", 0x249 },
	{ "cycle_thresholds", 0x3fff },
	{ "psb_periods", 0x3f },
};

enum {
	CAP_psb_cyc = 2,
	CAP_mtc = 4,
	CAP_ptwrite = 5,
	CAP_power_event_trace = 6,
	CAP_event_trace = 7,
	CAP_tnt_disable = 8,
	CAP_num_address_ranges = 14,
	CAP_mtc_periods = 15,
	CAP_cycle_thresholds = 16,
	CAP_psb_periods = 17,
};

static u32 cap(int c)
{
	return ptpmu_caps[c].value;
}

/* pt_cap_show (pt.c:91-100): hex, one line. */
static ssize_t ptpmu_cap_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct dev_ext_attribute *ea = container_of(attr, struct dev_ext_attribute, attr);

	return snprintf(buf, PAGE_SIZE, "%x\n", cap((long)ea->var));
}

static struct dev_ext_attribute ptpmu_cap_attrs[ARRAY_SIZE(ptpmu_caps)];
static struct attribute *ptpmu_cap_attr_ptrs[ARRAY_SIZE(ptpmu_caps) + 1];

static struct attribute_group ptpmu_cap_group = {
	.name = "caps",
	.attrs = ptpmu_cap_attr_ptrs,
};

/* format/: pt.c:106-119, the same terms and bits in both kernels. */
PMU_FORMAT_ATTR(pt, "config:0");
PMU_FORMAT_ATTR(cyc, "config:1");
PMU_FORMAT_ATTR(pwr_evt, "config:4");
PMU_FORMAT_ATTR(fup_on_ptw, "config:5");
PMU_FORMAT_ATTR(mtc, "config:9");
PMU_FORMAT_ATTR(tsc, "config:10");
PMU_FORMAT_ATTR(noretcomp, "config:11");
PMU_FORMAT_ATTR(ptw, "config:12");
PMU_FORMAT_ATTR(branch, "config:13");
PMU_FORMAT_ATTR(event, "config:31");
PMU_FORMAT_ATTR(notnt, "config:55");
PMU_FORMAT_ATTR(mtc_period, "config:14-17");
PMU_FORMAT_ATTR(cyc_thresh, "config:19-22");
PMU_FORMAT_ATTR(psb_period, "config:24-27");

static struct attribute *ptpmu_format_attrs[] = {
	&format_attr_pt.attr,	      &format_attr_cyc.attr,	    &format_attr_pwr_evt.attr,
	&format_attr_event.attr,      &format_attr_notnt.attr,	    &format_attr_fup_on_ptw.attr,
	&format_attr_mtc.attr,	      &format_attr_tsc.attr,	    &format_attr_noretcomp.attr,
	&format_attr_ptw.attr,	      &format_attr_branch.attr,	    &format_attr_mtc_period.attr,
	&format_attr_cyc_thresh.attr, &format_attr_psb_period.attr, NULL,
};

static struct attribute_group ptpmu_format_group = {
	.name = "format",
	.attrs = ptpmu_format_attrs,
};

/*
 * max_nonturbo_ratio and tsc_art_ratio at the top level (pt.c:144-185):
 * MSR_PLATFORM_INFO[15:8] and CPUID.15H EBX:EAX of a 3.6 GHz Kaby Lake
 * (i7-7700: ratio 36, 24 MHz crystal x 300/2).
 */
static ssize_t ptpmu_timing_show(struct device *dev, struct device_attribute *attr, char *page)
{
	struct perf_pmu_events_attr *pmu_attr =
		container_of(attr, struct perf_pmu_events_attr, attr);

	if (pmu_attr->id == 0)
		return sprintf(page, "%u\n", 36);
	return sprintf(page, "%u:%u\n", 300, 2);
}

PMU_EVENT_ATTR(max_nonturbo_ratio, timing_attr_max_nonturbo_ratio, 0, ptpmu_timing_show);
PMU_EVENT_ATTR(tsc_art_ratio, timing_attr_tsc_art_ratio, 1, ptpmu_timing_show);

static struct attribute *ptpmu_timing_attrs[] = {
	&timing_attr_max_nonturbo_ratio.attr.attr,
	&timing_attr_tsc_art_ratio.attr.attr,
	NULL,
};

static struct attribute_group ptpmu_timing_group = {
	.attrs = ptpmu_timing_attrs,
};

static const struct attribute_group *ptpmu_attr_groups[] = {
	&ptpmu_cap_group,
	&ptpmu_format_group,
	&ptpmu_timing_group,
	NULL,
};

/* --- State ---------------------------------------------------------------- */

#define PTPMU_FILTERS 2 /* caps/num_address_ranges */

/* The AUX buffer: setup_aux's pages mapped as one linear range. */
struct ptpmu_buf {
	unsigned char *base;
	unsigned long size; /* bytes, a power of two */
	bool snapshot;
};

/* One event (pmu_private). seq is written only on the CPU the event runs on. */
struct ptpmu_event {
	struct list_head node; /* ptpmu_events, for debugfs */
	struct perf_event *event;
	u64 seq; /* the last sequence number used */
	bool itrace_started;
	int nr_filters;
	struct {
		unsigned long a, b;
		int config; /* 1 filter, 2 stop, as pt.c's pt_filter.config */
	} filter[PTPMU_FILTERS];
};

/* Per CPU, like pt.c's pt_ctx: the open AUX transaction and its writer. */
struct ptpmu_cpu {
	struct perf_output_handle handle;
	struct ptpkt_stream stream;
	struct ptpmu_buf *buf;
	struct hrtimer timer;
	bool writing; /* a transaction is open and the timer may write */
	bool dropped; /* PTWs were dropped: OVF before the next one */
	unsigned long long ips[2];
	int nr_ips;
};

static DEFINE_PER_CPU(struct ptpmu_cpu, ptpmu_cpu);
static LIST_HEAD(ptpmu_events);
static DEFINE_SPINLOCK(ptpmu_events_lock);
static struct pmu ptpmu_pmu;
static struct dentry *ptpmu_debugfs;

/* --- event_init: pt_event_valid ------------------------------------------- */

#define RTIT_CTL_CYC_PSB (RTIT_CTL_CYCLEACC | RTIT_CTL_CYC_THRESH | RTIT_CTL_PSB_FREQ)
#define RTIT_CTL_MTC (RTIT_CTL_MTC_EN | RTIT_CTL_MTC_RANGE)
#define RTIT_CTL_PTW (RTIT_CTL_PTW_EN | RTIT_CTL_FUP_ON_PTW)
#define RTIT_CTL_PASSTHROUGH RTIT_CTL_TRACEEN
/* pt.c:300-310 */
#define PT_CONFIG_MASK                                                                \
	(RTIT_CTL_TRACEEN | RTIT_CTL_TSC_EN | RTIT_CTL_DISRETC | RTIT_CTL_BRANCH_EN | \
	 RTIT_CTL_CYC_PSB | RTIT_CTL_MTC | RTIT_CTL_PWR_EVT_EN | RTIT_CTL_EVENT_EN |  \
	 RTIT_CTL_NOTNT | RTIT_CTL_FUP_ON_PTW | RTIT_CTL_PTW_EN)

/* pt_event_valid, pt.c:312-410, rule for rule against the caps above. */
static bool ptpmu_event_valid(struct perf_event *event)
{
	u64 config = event->attr.config;
	u64 allowed, requested;

	if ((config & PT_CONFIG_MASK) != config) /* pt.c:317 */
		return false;

	if (config & RTIT_CTL_CYC_PSB) { /* pt.c:320-335 */
		if (!cap(CAP_psb_cyc))
			return false;
		allowed = cap(CAP_psb_periods);
		requested = (config & RTIT_CTL_PSB_FREQ) >> RTIT_CTL_PSB_FREQ_OFFSET;
		if (requested && !(allowed & BIT(requested)))
			return false;
		allowed = cap(CAP_cycle_thresholds);
		requested = (config & RTIT_CTL_CYC_THRESH) >> RTIT_CTL_CYC_THRESH_OFFSET;
		if (requested && !(allowed & BIT(requested)))
			return false;
	}

	if (config & RTIT_CTL_MTC) { /* pt.c:337-357 */
		if (!cap(CAP_mtc))
			return false;
		allowed = cap(CAP_mtc_periods);
		if (!allowed)
			return false;
		requested = (config & RTIT_CTL_MTC_RANGE) >> RTIT_CTL_MTC_RANGE_OFFSET;
		if (!(allowed & BIT(requested)))
			return false;
	}

	/* pt.c:359-369 */
	if ((config & RTIT_CTL_PWR_EVT_EN) && !cap(CAP_power_event_trace))
		return false;
	if ((config & RTIT_CTL_EVENT_EN) && !cap(CAP_event_trace))
		return false;
	if ((config & RTIT_CTL_NOTNT) && !cap(CAP_tnt_disable))
		return false;

	/* pt.c:371-379: ptw (and fup_on_ptw) need caps/ptwrite, 0 here. */
	if (config & RTIT_CTL_PTW) {
		if (!cap(CAP_ptwrite))
			return false;
		if ((config & RTIT_CTL_FUP_ON_PTW) && !(config & RTIT_CTL_PTW_EN))
			return false;
	}

	/*
	 * pt.c:381-407: bit 0 ("pt") passes branch through; without it, branch
	 * is refused. Kaby Lake has no BDM106 (branch_en_always_on is false).
	 */
	if (!(config & RTIT_CTL_PASSTHROUGH) && (config & RTIT_CTL_BRANCH_EN))
		return false;

	return true;
}

static void ptpmu_event_destroy(struct perf_event *event)
{
	struct ptpmu_event *pe = event->pmu_private;
	unsigned long flags;

	spin_lock_irqsave(&ptpmu_events_lock, flags);
	list_del(&pe->node);
	spin_unlock_irqrestore(&ptpmu_events_lock, flags);
	kfree(pe);
	event->pmu_private = NULL;
}

/* pt_event_init, pt.c:1725-1746. */
static int ptpmu_event_init(struct perf_event *event)
{
	struct ptpmu_event *pe;
	unsigned long flags;

	if (event->attr.type != ptpmu_pmu.type) /* pt.c:1727-1728 */
		return -ENOENT;
	if (refuse_event_init > 0) /* fault injection */
		return -refuse_event_init;
	if (!ptpmu_event_valid(event)) /* pt.c:1730-1731 */
		return -EINVAL;
	/*
	 * pt.c:1733 also takes x86_add_exclusive(x86_lbr_exclusive_pt) (EBUSY
	 * with BTS/LBR users); not exported to modules, and this guest has
	 * none. PERF_PMU_CAP_EXCLUSIVE still keeps one intel_pt user per
	 * context, as for the real PMU.
	 */
	pe = kzalloc(sizeof(*pe), GFP_KERNEL);
	if (!pe)
		return -ENOMEM;
	pe->event = event;
	/* pt_addr_filters_init (pt.c:1356-1375): children start with the parent's filters. */
	if (event->parent && event->parent->pmu_private) {
		struct ptpmu_event *parent = event->parent->pmu_private;

		pe->nr_filters = parent->nr_filters;
		memcpy(pe->filter, parent->filter, sizeof(pe->filter));
	}
	event->pmu_private = pe;
	event->destroy = ptpmu_event_destroy;
	spin_lock_irqsave(&ptpmu_events_lock, flags);
	list_add_tail(&pe->node, &ptpmu_events);
	spin_unlock_irqrestore(&ptpmu_events_lock, flags);
	return 0;
}

/* --- Address filters: pt_event_addr_filters_validate/_sync ---------------- */

/* pt.c:1404-1423: ranges only, no "start" action, at most num_address_ranges. */
static int ptpmu_addr_filters_validate(struct list_head *filters)
{
	struct perf_addr_filter *filter;
	int range = 0;

	list_for_each_entry(filter, filters, entry)
	{
		if (!filter->size || filter->action == PERF_ADDR_FILTER_ACTION_START)
			return -EOPNOTSUPP;
		if (++range > cap(CAP_num_address_ranges))
			return -EOPNOTSUPP;
	}
	return 0;
}

/* pt.c:1425-1476: the resolved ranges (a file not mapped yet: an empty range). */
static void ptpmu_addr_filters_sync(struct perf_event *event)
{
	struct perf_addr_filters_head *head = perf_event_addr_filters(event);
	struct perf_addr_filter_range *fr = event->addr_filter_ranges;
	struct ptpmu_event *pe = event->pmu_private;
	struct perf_addr_filter *filter;
	int range = 0;

	if (!pe)
		return;
	list_for_each_entry(filter, &head->list, entry)
	{
		if (range >= PTPMU_FILTERS)
			break;
		if (filter->path.dentry && !fr[range].start) {
			pe->filter[range].a = pe->filter[range].b = 0;
		} else {
			pe->filter[range].a = fr[range].start;
			pe->filter[range].b = fr[range].start + fr[range].size - 1;
		}
		pe->filter[range].config = filter->action == PERF_ADDR_FILTER_ACTION_FILTER ? 1 : 2;
		range++;
	}
	pe->nr_filters = range;
}

/*
 * Whether tracing would be enabled at ip: with filter ranges (config 1)
 * only inside one of them, never inside a TraceStop range (config 2).
 */
static bool ptpmu_ip_traced(const struct ptpmu_event *pe, unsigned long ip)
{
	bool have_filter = false, inside = false;
	int i;

	for (i = 0; i < pe->nr_filters; i++) {
		bool in = ip >= pe->filter[i].a && ip <= pe->filter[i].b &&
			  pe->filter[i].b > pe->filter[i].a;

		if (pe->filter[i].config == 2 && in)
			return false;
		if (pe->filter[i].config == 1) {
			have_filter = true;
			inside |= in;
		}
	}
	return !have_filter || inside;
}

/* --- AUX buffer: setup_aux / free_aux -------------------------------------- */

/*
 * pt_buffer_setup_aux (pt.c:1299-1346): pages[] are the kernel addresses of
 * the AUX pages (rb_alloc_aux); mapped here as one linear buffer.
 */
static void *ptpmu_setup_aux(struct perf_event *event, void **pages, int nr_pages, bool snapshot)
{
	struct ptpmu_buf *buf;
	struct page **pg;
	int i;

	if (!nr_pages) /* pt.c:1306 */
		return NULL;
	/* pt.c:1313: AUX sampling only in snapshot mode. */
	if (event->attr.aux_sample_size && !snapshot)
		return NULL;
	if (refuse_setup_aux) /* fault injection: the AUX mmap fails */
		return NULL;
	if (max_aux_bytes && (unsigned long)nr_pages * PAGE_SIZE > max_aux_bytes)
		return NULL;

	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	pg = kmalloc_array(nr_pages, sizeof(*pg), GFP_KERNEL);
	if (!buf || !pg)
		goto fail;
	for (i = 0; i < nr_pages; i++)
		pg[i] = virt_to_page(pages[i]);
	buf->base = vmap(pg, nr_pages, VM_MAP, PAGE_KERNEL);
	if (!buf->base)
		goto fail;
	kfree(pg);
	buf->size = (unsigned long)nr_pages << PAGE_SHIFT;
	buf->snapshot = snapshot;
	return buf;
fail:
	kfree(pg);
	kfree(buf);
	return NULL;
}

static void ptpmu_free_aux(void *data)
{
	struct ptpmu_buf *buf = data;

	vunmap(buf->base);
	kfree(buf);
}

/* --- Writing ----------------------------------------------------------------- */

/*
 * The IPs an enable window is written at: the kernel's (an address in this
 * module's text) unless exclude_kernel, the task's user IP unless
 * exclude_user (pt_config, pt.c:529-532: OS and USR from the attr). A
 * kernel thread has no user IP.
 */
static void ptpmu_scope_ips(struct ptpmu_cpu *c, struct perf_event *event, unsigned long kip)
{
	struct ptpmu_event *pe = event->pmu_private;

	c->nr_ips = 0;
	if (!event->attr.exclude_kernel && ptpmu_ip_traced(pe, kip))
		c->ips[c->nr_ips++] = kip;
	if (!event->attr.exclude_user && current->mm && !(current->flags & PF_KTHREAD)) {
		unsigned long uip = task_pt_regs(current)->ip;

		if (ptpmu_ip_traced(pe, uip))
			c->ips[c->nr_ips++] = uip;
	}
}

/*
 * Opens the writer over the transaction perf_aux_output_begin gave. Where
 * the bytes go, pt_buffer_reset_offsets (pt.c:1167-1194): at handle.head,
 * which in snapshot mode is masked to the buffer (pt.c:1173-1174); full mode
 * may use handle.size bytes (pt_buffer_reset_markers, pt.c:1085).
 */
static void ptpmu_open_writer(struct ptpmu_cpu *c, struct ptpmu_buf *buf)
{
	c->buf = buf;
	c->stream.ring.base = buf->base;
	c->stream.ring.mask = buf->size - 1;
	c->stream.ring.pos = c->handle.head & (buf->size - 1);
	c->stream.ring.written = 0;
	c->stream.ring.limit = buf->snapshot ? ~0ul : c->handle.size;
}

/*
 * Ends the transaction with what was written, as pt_event_stop does
 * (pt.c:1627-1638): in snapshot mode handle.head is the write offset and the
 * size the whole buffer (pt_update_head pt.c:867-868, then the local_xchg
 * of data_size with nr_pages << PAGE_SHIFT, pt.c:1634-1637); in full mode
 * the size is the bytes written (pt.c:869-875), perf adds it to aux_head.
 */
static void ptpmu_end(struct ptpmu_cpu *c)
{
	unsigned long size;

	if (c->buf->snapshot) {
		c->handle.head = c->stream.ring.pos & c->stream.ring.mask;
		size = c->buf->size;
	} else {
		size = c->stream.ring.written;
	}
	/* The data stores before aux_head's (pt_config_stop's wmb, pt.c:563). */
	wmb();
	perf_aux_output_end(&c->handle, size);
}

/*
 * No room left in full mode: the ToPA STOP bit would have stopped the
 * hardware; pt_handle_status (pt.c:915-930) flags TRUNCATED and nothing is
 * written until the next start, as after intel_pt_interrupt's failed begin
 * (pt.c:1512-1516). perf_aux_output_end then asks for the event's disable
 * (pending_disable), which these kernels may never carry out: 6.1 stores
 * smp_processor_id() there, which is 0 on CPU 0, and checks it as a flag;
 * 6.12 never queues the irq_work that reads it. The event then stays
 * active and stopped, and only IOC_DISABLE + IOC_ENABLE restart it, as on
 * real hardware with these kernels.
 */
static void ptpmu_truncate(struct ptpmu_cpu *c)
{
	perf_aux_output_flag(&c->handle, PERF_AUX_FLAG_TRUNCATED);
	ptpmu_end(c);
	WRITE_ONCE(c->writing, false);
}

static void ptpmu_publish(struct perf_event *event, struct ptpmu_event *pe, u64 seq)
{
	WRITE_ONCE(pe->seq, seq);
	WRITE_ONCE(last_seq, seq);
	local64_set(&event->count, seq); /* read(2) on the event fd gives it */
}

/* Takes one from drop_ptws if it is positive (ticks on all CPUs share it). */
static bool ptpmu_take_drop(void)
{
	int v = READ_ONCE(drop_ptws);

	while (v > 0) {
		int old = cmpxchg(&drop_ptws, v, v - 1);

		if (old == v)
			return true;
		v = old;
	}
	return false;
}

/*
 * The tick: one PTW with the event's next sequence number, on the CPU the
 * event runs on (the timer is pinned; pmu callbacks run with IRQs off on
 * this CPU, so they and this hardirq never interleave).
 */
static enum hrtimer_restart ptpmu_tick(struct hrtimer *t)
{
	struct ptpmu_cpu *c = container_of(t, struct ptpmu_cpu, timer);
	struct perf_event *event;
	struct ptpmu_event *pe;
	u64 seq;

	if (!READ_ONCE(c->writing))
		return HRTIMER_NORESTART;
	event = c->handle.event;
	pe = event->pmu_private;
	seq = pe->seq + 1;

	if (ptpmu_take_drop()) {
		/* Fault injection: a PTW lost, its number used up. */
		WRITE_ONCE(pe->seq, seq);
		c->dropped = true;
		goto again;
	}

	if (ptpkt_tick(&c->stream, rdtsc(), seq, c->dropped) < 0) {
		if (!c->buf->snapshot) {
			ptpmu_truncate(c);
			return HRTIMER_NORESTART;
		}
		goto again; /* cannot happen: a snapshot ring has no limit */
	}
	ptpmu_publish(event, pe, seq);

	if (c->dropped) {
		c->dropped = false;
		if (drop_aux_flags & PERF_AUX_FLAG_TRUNCATED) {
			perf_aux_output_flag(&c->handle, drop_aux_flags);
			ptpmu_end(c);
			WRITE_ONCE(c->writing, false);
			return HRTIMER_NORESTART;
		}
		if (drop_aux_flags)
			perf_aux_output_flag(&c->handle, drop_aux_flags);
	}

	/*
	 * Full mode past the wakeup watermark: the ToPA INT entry's PMI,
	 * intel_pt_interrupt (pt.c:1478-1529), ends the transaction (an AUX
	 * record, a wakeup) and begins the next one where it left off.
	 */
	if (!c->buf->snapshot && c->handle.head + c->stream.ring.written >= c->handle.wakeup) {
		unsigned long done = c->stream.ring.written;
		struct ptpmu_buf *buf;

		ptpmu_end(c);
		buf = perf_aux_output_begin(&c->handle, event);
		if (!buf) { /* pt.c:1512-1516 */
			event->hw.state = PERF_HES_STOPPED;
			WRITE_ONCE(c->writing, false);
			return HRTIMER_NORESTART;
		}
		ptpmu_open_writer(c, buf);
		/* The PSB period runs on across transactions. */
		c->stream.last_psb -= done;
	}
again:
	hrtimer_forward_now(t, ns_to_ktime((u64)max(tick_us, 10u) * NSEC_PER_USEC));
	return HRTIMER_RESTART;
}

/* --- pmu callbacks ------------------------------------------------------------- */

/* pt_event_start, pt.c:1571-1599. */
static void ptpmu_start(struct perf_event *event, int mode)
{
	struct ptpmu_cpu *c = this_cpu_ptr(&ptpmu_cpu);
	struct ptpmu_event *pe = event->pmu_private;
	struct ptpmu_buf *buf;
	unsigned int psb = (event->attr.config & RTIT_CTL_PSB_FREQ) >> RTIT_CTL_PSB_FREQ_OFFSET;

	buf = perf_aux_output_begin(&c->handle, event); /* pt.c:1577-1579 */
	if (!buf) {
		event->hw.state = PERF_HES_STOPPED; /* pt.c:1598 */
		return;
	}
	/*
	 * pt_config's first round (pt.c:505-509): perf_event_itrace_started(),
	 * so that perf logs ITRACE_START once, not at every schedule-in. That
	 * function is not exported; it only sets this bit.
	 */
	if (!pe->itrace_started) {
		pe->itrace_started = true;
		event->attach_state |= PERF_ATTACH_ITRACE;
	}
	/* pt_config_filters (pt.c:468): perf_event_addr_filters_sync(). */
	perf_event_addr_filters_sync(event);

	ptpmu_open_writer(c, buf);
	c->stream.psb_period = ptpkt_psb_period_bytes(psb);
	c->stream.tsc = !!(event->attr.config & RTIT_CTL_TSC_EN);
	c->stream.cbr = cbr;
	c->dropped = false;
	event->hw.state = 0;

	ptpmu_scope_ips(c, event, _THIS_IP_);
	if (ptpkt_sched_in(&c->stream, rdtsc(), c->ips, c->nr_ips) < 0) {
		ptpmu_truncate(c); /* no room even for PSB+ */
		return;
	}
	WRITE_ONCE(c->writing, true);
	hrtimer_start(&c->timer, ns_to_ktime((u64)max(tick_us, 10u) * NSEC_PER_USEC),
		      HRTIMER_MODE_REL_PINNED_HARD);
}

/* pt_event_stop, pt.c:1601-1640. */
static void ptpmu_stop(struct perf_event *event, int mode)
{
	struct ptpmu_cpu *c = this_cpu_ptr(&ptpmu_cpu);
	bool writing = READ_ONCE(c->writing);

	WRITE_ONCE(c->writing, false);
	/* Pinned to this CPU, and IRQs are off here: it is not running now. */
	hrtimer_try_to_cancel(&c->timer);

	if (event->hw.state == PERF_HES_STOPPED) /* pt.c:1614-1615 */
		return;
	event->hw.state = PERF_HES_STOPPED; /* pt.c:1617 */

	/*
	 * pt.c ends the transaction only with PERF_EF_UPDATE (pt.c:1619); this
	 * one always does, so that no handle stays open without a writer.
	 */
	if (!writing || c->handle.event != event)
		return; /* ended already: truncated, or begin failed after a PMI */
	ptpmu_scope_ips(c, event, _THIS_IP_);
	if (ptpkt_sched_out(&c->stream, c->ips, c->nr_ips) < 0 && !c->buf->snapshot) {
		ptpmu_truncate(c);
		return;
	}
	ptpmu_end(c);
}

/* pt_event_add, pt.c:1691-1713. */
static int ptpmu_add(struct perf_event *event, int mode)
{
	struct ptpmu_cpu *c = this_cpu_ptr(&ptpmu_cpu);

	if (c->handle.event) /* pt.c:1697-1698 */
		return -EBUSY;
	if (mode & PERF_EF_START) {
		ptpmu_start(event, 0);
		if (event->hw.state == PERF_HES_STOPPED) /* pt.c:1700-1703 */
			return -EINVAL;
	} else {
		event->hw.state = PERF_HES_STOPPED;
	}
	return 0;
}

/* pt_event_del, pt.c:1686-1689. */
static void ptpmu_del(struct perf_event *event, int mode)
{
	ptpmu_stop(event, PERF_EF_UPDATE);
}

/* pt_event_read (pt.c:1715-1717) does nothing; count is kept at each PTW. */
static void ptpmu_read(struct perf_event *event)
{
}

/* --- debugfs: the sequence number of every live event ---------------------- */

static int ptpmu_events_show(struct seq_file *m, void *v)
{
	struct ptpmu_event *pe;
	unsigned long flags;

	spin_lock_irqsave(&ptpmu_events_lock, flags);
	list_for_each_entry(pe, &ptpmu_events, node)
	{
		struct perf_event *e = pe->event;

		seq_printf(m, "id %llu pid %d cpu %d seq %llu\n", (unsigned long long)e->id,
			   e->hw.target ? task_pid_nr(e->hw.target) : -1, e->cpu,
			   (unsigned long long)READ_ONCE(pe->seq));
	}
	spin_unlock_irqrestore(&ptpmu_events_lock, flags);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ptpmu_events);

/* --- Module ------------------------------------------------------------------- */

static int __init ptpmu_init(void)
{
	int cpu, i, ret;

	for (i = 0; i < ARRAY_SIZE(ptpmu_caps); i++) {
		struct dev_ext_attribute *de = &ptpmu_cap_attrs[i];

		sysfs_attr_init(&de->attr.attr);
		de->attr.attr.name = ptpmu_caps[i].name;
		de->attr.attr.mode = 0444;
		de->attr.show = ptpmu_cap_show;
		de->var = (void *)(long)i;
		ptpmu_cap_attr_ptrs[i] = &de->attr.attr;
	}

	for_each_possible_cpu(cpu)
	{
		struct ptpmu_cpu *c = per_cpu_ptr(&ptpmu_cpu, cpu);

		hrtimer_init(&c->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
		c->timer.function = ptpmu_tick;
	}

	/*
	 * pt_init, pt.c:1794-1814. Kaby Lake has topa_multiple_entries, so no
	 * PERF_PMU_CAP_AUX_NO_SG (pt.c:1794-1795). The PERF_PMU_CAP_* names
	 * used are in both kernels' headers (their values differ: 6.12 dropped
	 * HETEROGENEOUS_CPUS and added AUX_PAUSE, which its pt.c does not set).
	 */
	ptpmu_pmu = (struct pmu){
		.module = THIS_MODULE,
		.capabilities = PERF_PMU_CAP_EXCLUSIVE | PERF_PMU_CAP_ITRACE,
		.attr_groups = ptpmu_attr_groups,
		.task_ctx_nr = perf_sw_context,
		.event_init = ptpmu_event_init,
		.add = ptpmu_add,
		.del = ptpmu_del,
		.start = ptpmu_start,
		.stop = ptpmu_stop,
		.read = ptpmu_read,
		.setup_aux = ptpmu_setup_aux,
		.free_aux = ptpmu_free_aux,
		.addr_filters_sync = ptpmu_addr_filters_sync,
		.addr_filters_validate = ptpmu_addr_filters_validate,
		.nr_addr_filters = PTPMU_FILTERS,
	};
	ret = perf_pmu_register(&ptpmu_pmu, "intel_pt", -1); /* pt.c:1814 */
	if (ret) {
		pr_err("perf_pmu_register(intel_pt): %d\n", ret);
		return ret;
	}
	ptpmu_debugfs = debugfs_create_dir("ptpmu", NULL);
	debugfs_create_file("events", 0444, ptpmu_debugfs, NULL, &ptpmu_events_fops);
	pr_info("intel_pt registered, type %d (Kaby Lake caps, PTW every %u us)\n", ptpmu_pmu.type,
		tick_us);
	return 0;
}

static void __exit ptpmu_exit(void)
{
	int cpu;

	debugfs_remove_recursive(ptpmu_debugfs);
	perf_pmu_unregister(&ptpmu_pmu);
	for_each_possible_cpu(cpu) hrtimer_cancel(&per_cpu_ptr(&ptpmu_cpu, cpu)->timer);
}

module_init(ptpmu_init);
module_exit(ptpmu_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION(
	"A PMU shaped like intel_pt that writes a counted PT packet stream (ptsnap tests)");
