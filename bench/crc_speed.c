/* bench/crc_speed.c: GB/s of each CRC-32 implementation uroce's ICRC can
 * use (wire_crc_select: zlib, ISA-L, the 256-bit fold) on this CPU, over
 * the piece sizes the ICRC sees (headers, 1 KiB and 4 KiB payloads, a
 * 64 KiB run), from a 1 MiB buffer (L2-sized strides), and which one
 * `auto` picks. docs/performance.md, "The ICRC without AVX-512".
 *
 *   crc_speed [SECONDS_PER_POINT]        prints a table, then one JSON line */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire.h"

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "zlib", "isal", "vpclmul" };
	static const size_t sizes[] = { 64, 256, 1024, 4096, 65536 };
	double secs = argc > 1 ? atof(argv[1]) : 0.2, gbps[3][5] = { { 0 } };
	size_t nbuf = 1 << 20;
	uint8_t *buf = malloc(nbuf);
	uint32_t seed = 1, sink = 0;
	int have[3];

	if (!buf || !(secs > 0)) {
		fprintf(stderr, "usage: crc_speed [SECONDS_PER_POINT > 0]\n");
		free(buf);
		return 2;
	}
	for (size_t i = 0; i < nbuf; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
	printf("%-8s", "bytes");
	for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
		printf(" %9zu", sizes[j]);
	printf("   (GB/s)\n");
	for (int k = 0; k < 3; k++) {
		have[k] = !wire_crc_select(names[k]);
		printf("%-8s", names[k]);
		for (size_t j = 0; have[k] && j < sizeof(sizes) / sizeof(sizes[0]); j++) {
			size_t n = sizes[j], off = 0, done = 0;
			double t0 = now_s(), t;

			do {
				for (int r = 0; r < 64; r++) {
					sink = wire_crc32(sink, buf + off, n);
					off = (off + n + 64) % (nbuf - n);
					done += n;
				}
				t = now_s() - t0;
			} while (t < secs);
			gbps[k][j] = (double)done / t / 1e9;
			printf(" %9.2f", gbps[k][j]);
		}
		printf("%s\n", have[k] ? "" : "  (not in this build or CPU)");
	}
	wire_crc_select(NULL);
	printf("auto: %s\n", wire_crc_name());
	printf("{\"auto\":\"%s\",\"sink\":%u", wire_crc_name(), (unsigned)sink);
	for (int k = 0; k < 3; k++) {
		printf(",\"%s\":", names[k]);
		if (!have[k]) {
			printf("null");
			continue;
		}
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
			printf("%s\"%zu\":%.3f", j ? "," : "{", sizes[j], gbps[k][j]);
		printf("}");
	}
	printf("}\n");
	free(buf);
	return 0;
}
