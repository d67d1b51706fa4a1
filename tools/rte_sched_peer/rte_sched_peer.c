/*
 * The peer of nicsched's enforcer benchmark: DPDK's hierarchical QoS scheduler
 * (rte_sched) driven in memory, with no NIC, measured the same way as
 * `nicsched bench`: enqueue+dequeue pairs per second on one core, every active
 * queue kept two packets deep, the queue whose packet left refilled.
 *
 * The closest equivalent of nicsched's two-level tree: one port, one subport,
 * P pipes, and only the best-effort traffic class (TC 12) with its 4 WRR queues per
 * pipe, so classes = 4 * P queues. rte_sched has no weights between pipes (only
 * token-bucket rates per pipe and WRR between a pipe's 4 best-effort queues) and a
 * fixed hierarchy (port, subport, pipe, 13 traffic classes): it cannot express
 * nicsched's tenants-by-weight or app priorities inside a tenant beyond its TCs.
 * Rates are set far above what one core can dequeue, so only the scheduler's CPU
 * cost is measured, mbuf handling included.
 *
 * Usage: rte_sched_peer --queues N --active F --seconds S
 * Prints one JSON line: {"pairs":..., "pairs_per_sec":..., "ns_per_pair":...,
 * "queues":..., "active_queues":..., "pipes":...}, or an error on stderr and exit
 * status 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_sched.h>

#define BE_TC (RTE_SCHED_TRAFFIC_CLASS_BE)
#define BE_QUEUES RTE_SCHED_BE_QUEUES_PER_PIPE
#define BURST 32
#define BACKLOG 2
#define PACKET_BYTES 64
/* EAL memory (malloc'd with --no-huge, touched only as used): 2^18 pipes (1M queues)
 * with two mbufs per queue need about 1.7 GB. */
#define EAL_MEMORY_MB 2048
#define EAL_MEMORY_MB_STRING "2048"
/* 100 Gbit/s, as nicsched's harness: with 64 B packets that is 195 Mpps, far above
 * what one core dequeues, so credits never bind. (Faster rates overflow rte_sched's
 * cycles-per-byte arithmetic.) */
#define RATE_BYTES (100ULL * 1000 * 1000 * 1000 / 8)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

static void fail(const char *what)
{
	fprintf(stderr, "rte_sched_peer: %s (%s)\n", what, rte_strerror(rte_errno));
	exit(1);
}

int main(int argc, char **argv)
{
	uint64_t queues = 1024;
	double active_fraction = 1.0, seconds = 1.0;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--queues"))
			queues = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--active"))
			active_fraction = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else {
			fprintf(stderr, "usage: %s --queues N --active F --seconds S\n", argv[0]);
			return 2;
		}
	}
	if (queues < BE_QUEUES || active_fraction <= 0 || active_fraction > 1 || seconds <= 0) {
		fprintf(stderr, "rte_sched_peer: need --queues >= %d, 0 < --active <= 1, --seconds > 0\n",
			BE_QUEUES);
		return 2;
	}

	char *eal_args[] = {argv[0], "--no-huge", "--no-pci", "--no-shconf", "-l", "0",
			    "-m", EAL_MEMORY_MB_STRING, "--log-level=error", "--no-telemetry"};
	int eal_argc = sizeof(eal_args) / sizeof(eal_args[0]);
	if (rte_eal_init(eal_argc, eal_args) < 0)
		fail("the EAL did not start");

	uint32_t pipes = pow2_at_least((uint32_t)((queues + BE_QUEUES - 1) / BE_QUEUES));
	uint64_t total_queues = (uint64_t)pipes * BE_QUEUES;
	uint64_t active = (uint64_t)(total_queues * active_fraction + 0.5);
	if (active < 1)
		active = 1;

	struct rte_sched_subport_profile_params subport_profile = {
		.tb_rate = RATE_BYTES,
		.tb_size = 1000000,
		.tc_period = 10,
	};
	struct rte_sched_pipe_params pipe_profile = {
		.tb_rate = RATE_BYTES,
		.tb_size = 1000000,
		.tc_period = 10,
		.tc_ov_weight = 1,
		.wrr_weights = {1, 1, 1, 1},
	};
	for (int tc = 0; tc < RTE_SCHED_TRAFFIC_CLASSES_PER_PIPE; tc++) {
		subport_profile.tc_rate[tc] = RATE_BYTES;
		pipe_profile.tc_rate[tc] = tc == BE_TC ? RATE_BYTES : 0;
	}
	struct rte_sched_subport_params subport = {
		.n_pipes_per_subport_enabled = pipes,
		.pipe_profiles = &pipe_profile,
		.n_pipe_profiles = 1,
		.n_max_pipe_profiles = 1,
	};
	subport.qsize[BE_TC] = 16;
	struct rte_sched_port_params port_params = {
		.name = "nicsched_peer",
		.socket = 0,
		.rate = RATE_BYTES,
		.mtu = 1500,
		.frame_overhead = RTE_SCHED_FRAME_OVERHEAD_DEFAULT,
		.n_subports_per_port = 1,
		.subport_profiles = &subport_profile,
		.n_subport_profiles = 1,
		.n_max_subport_profiles = 1,
		.n_pipes_per_subport = pipes,
	};
	struct rte_sched_port *port = rte_sched_port_config(&port_params);
	if (port == NULL)
		fail("rte_sched_port_config refused the port");
	int ret = rte_sched_subport_config(port, 0, &subport, 0);
	if (ret != 0) {
		/* In DPDK 22.11 the queue arrays of every pipe come from EAL memory:
		 * 2^20 pipes (4M queues) do not fit in EAL_MEMORY_MB. */
		fprintf(stderr,
			"rte_sched_peer: rte_sched_subport_config refused %u pipes (%llu queues): %s; "
			"the EAL has %d MB\n",
			pipes, (unsigned long long)total_queues, strerror(-ret), EAL_MEMORY_MB);
		return 1;
	}
	for (uint32_t p = 0; p < pipes; p++)
		if (rte_sched_pipe_config(port, 0, p, 0) != 0)
			fail("rte_sched_pipe_config refused a pipe");

	uint32_t mbufs = (uint32_t)(active * BACKLOG + 2 * BURST);
	struct rte_mempool *pool = rte_pktmbuf_pool_create(
		"peer_pool", mbufs, 0, 0, RTE_PKTMBUF_HEADROOM + PACKET_BYTES, 0);
	if (pool == NULL)
		fail("no memory for the packet pool");

	/* Active queues spread evenly over all queues, as nicsched's harness does. */
	double stride = (double)total_queues / (double)active;
	struct rte_mbuf *burst[BURST];
	uint32_t filled = 0;
	for (uint64_t i = 0; i < active; i++) {
		uint64_t q = (uint64_t)(i * stride);
		for (int b = 0; b < BACKLOG; b++) {
			struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
			if (m == NULL)
				fail("the packet pool ran dry");
			rte_pktmbuf_append(m, PACKET_BYTES);
			rte_sched_port_pkt_write(port, m, 0, (uint32_t)(q / BE_QUEUES), BE_TC,
						 (uint32_t)(q % BE_QUEUES), RTE_COLOR_GREEN);
			burst[filled++] = m;
			if (filled == BURST) {
				rte_sched_port_enqueue(port, burst, filled);
				filled = 0;
			}
		}
	}
	if (filled)
		rte_sched_port_enqueue(port, burst, filled);

	uint64_t pairs = 0;
	double started = now_s(), elapsed = 0;
	do {
		for (int round = 0; round < 1024; round++) {
			int n = rte_sched_port_dequeue(port, burst, BURST);
			/*
			 * A packet left: free it, and the sender's next packet for the same
			 * queue arrives as a new mbuf, classified onto its tree path.
			 */
			for (int k = 0; k < n; k++) {
				uint32_t subport, pipe, tc, queue;
				rte_sched_port_pkt_read_tree_path(port, burst[k], &subport, &pipe, &tc, &queue);
				rte_pktmbuf_free(burst[k]);
				struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
				if (m == NULL)
					fail("the packet pool ran dry");
				rte_pktmbuf_append(m, PACKET_BYTES);
				rte_sched_port_pkt_write(port, m, subport, pipe, tc, queue, RTE_COLOR_GREEN);
				burst[k] = m;
			}
			int admitted = rte_sched_port_enqueue(port, burst, n);
			pairs += (uint64_t)admitted;
		}
		elapsed = now_s() - started;
	} while (elapsed < seconds);

	printf("{\"pairs\":%llu,\"pairs_per_sec\":%.1f,\"ns_per_pair\":%.3f,\"queues\":%llu,\"active_queues\":%llu,\"pipes\":%u}\n",
	       (unsigned long long)pairs, pairs / elapsed, elapsed * 1e9 / (double)(pairs ? pairs : 1),
	       (unsigned long long)total_queues, (unsigned long long)active, pipes);
	rte_eal_cleanup();
	return 0;
}
