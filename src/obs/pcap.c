/* pcap capture through libpcap's dump API, loaded with dlopen. */
#include "pcap.h"
#include "util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <pcap/pcap.h>

int uroce_pcap_on;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pcap_t *pc;
static pcap_dumper_t *dumper;
static void (*p_dump)(u_char *, const struct pcap_pkthdr *, const u_char *);
static int (*p_flush)(pcap_dumper_t *);
static void (*p_dump_close)(pcap_dumper_t *);

static void close_at_exit(void)
{
	pthread_mutex_lock(&lock);
	if (dumper) {
		p_flush(dumper);
		p_dump_close(dumper);
		dumper = NULL;
		uroce_pcap_on = 0;
	}
	pthread_mutex_unlock(&lock);
}

static void open_once(void)
{
	const char *want = getenv("UROCE_PCAP");
	static const char *const sonames[] = { "libpcap.so.0.8", "libpcap.so.1", "libpcap.so" };
	pcap_t *(*p_open_dead)(int, int);
	pcap_dumper_t *(*p_dump_open)(pcap_t *, const char *);
	char path[512];
	void *h = NULL;

	if (!want || !*want)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(sonames) && !h; i++)
		h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		uroce_err("UROCE_PCAP: cannot load libpcap (%s); install libpcap0.8", dlerror());
		return;
	}
	p_open_dead = (pcap_t * (*)(int, int)) dlsym(h, "pcap_open_dead");
	p_dump_open = (pcap_dumper_t * (*)(pcap_t *, const char *)) dlsym(h, "pcap_dump_open");
	p_dump = (void (*)(u_char *, const struct pcap_pkthdr *, const u_char *))dlsym(h, "pcap_dump");
	p_flush = (int (*)(pcap_dumper_t *))dlsym(h, "pcap_dump_flush");
	p_dump_close = (void (*)(pcap_dumper_t *))dlsym(h, "pcap_dump_close");
	if (!p_open_dead || !p_dump_open || !p_dump || !p_flush || !p_dump_close) {
		uroce_err("UROCE_PCAP: libpcap lacks the dump API");
		return;
	}
	/* "%p" -> pid, so client and server of one run can share a pattern. */
	uroce_expand_pid(want, path, sizeof(path));
	pc = p_open_dead(DLT_EN10MB, 65535);
	dumper = pc ? p_dump_open(pc, path) : NULL;
	if (!dumper) {
		uroce_err("UROCE_PCAP: cannot write %s", path);
		return;
	}
	uroce_info("capturing to %s", path);
	atexit(close_at_exit);
	uroce_pcap_on = 1;
}

int uroce_pcap_init(void)
{
	pthread_once(&once, open_once);
	return uroce_pcap_on;
}

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

void uroce_pcap_write(const struct uroce_cap_hdr *h, const struct iovec *iov, int iovcnt)
{
	static const uint8_t zero[6];
	uint8_t frame[14 + 20 + 8 + 9216];
	struct pcap_pkthdr ph;
	size_t pay = 0, n = 42;
	struct timeval tv;
	uint16_t c;

	for (int i = 0; i < iovcnt; i++) {
		size_t l = MIN(iov[i].iov_len, sizeof(frame) - n);

		memcpy(frame + n, iov[i].iov_base, l);
		n += l;
		pay += iov[i].iov_len;
	}
	memcpy(frame, h->dmac ? h->dmac : zero, 6);
	memcpy(frame + 6, h->smac ? h->smac : zero, 6);
	frame[12] = 0x08;
	frame[13] = 0x00;
	/* IPv4: what the kernel writes for our unconnected DF sockets */
	frame[14] = 0x45;
	frame[15] = h->tos;
	frame[16] = (uint8_t)((20 + 8 + pay) >> 8);
	frame[17] = (uint8_t)(20 + 8 + pay);
	frame[18] = (uint8_t)(h->ip_id >> 8);
	frame[19] = (uint8_t)h->ip_id;
	frame[20] = 0x40;
	frame[21] = 0;
	frame[22] = h->ttl;
	frame[23] = 17;
	frame[24] = frame[25] = 0;
	memcpy(frame + 26, &h->saddr, 4);
	memcpy(frame + 30, &h->daddr, 4);
	c = fold(sum16(frame + 14, 20, 0));
	frame[24] = (uint8_t)(c >> 8);
	frame[25] = (uint8_t)c;
	/* UDP; the checksum is what the kernel (or NIC offload) fills in */
	frame[34] = (uint8_t)(h->sport >> 8);
	frame[35] = (uint8_t)h->sport;
	frame[36] = (uint8_t)(h->dport >> 8);
	frame[37] = (uint8_t)h->dport;
	frame[38] = (uint8_t)((8 + pay) >> 8);
	frame[39] = (uint8_t)(8 + pay);
	frame[40] = frame[41] = 0;
	if (n == 42 + pay) {
		uint8_t ph4[12];
		uint32_t s;

		memcpy(ph4, &h->saddr, 4);
		memcpy(ph4 + 4, &h->daddr, 4);
		ph4[8] = 0;
		ph4[9] = 17;
		ph4[10] = frame[38];
		ph4[11] = frame[39];
		s = sum16(frame + 34, 8 + pay, sum16(ph4, 12, 0));
		c = fold(s);
		if (!c)
			c = 0xffff; /* RFC 768: a computed 0 is sent as all ones */
		frame[40] = (uint8_t)(c >> 8);
		frame[41] = (uint8_t)c;
	}
	gettimeofday(&tv, NULL);
	ph.ts = tv;
	ph.caplen = (bpf_u_int32)n;
	ph.len = (bpf_u_int32)(42 + pay);
	pthread_mutex_lock(&lock);
	if (dumper)
		p_dump((u_char *)dumper, &ph, frame);
	pthread_mutex_unlock(&lock);
}
