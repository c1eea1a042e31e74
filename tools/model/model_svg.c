/* A line plot as a standalone SVG (no fonts or scripts from elsewhere). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 760
#define H 460
#define ML 78   /* margins */
#define MR 170
#define MT 48
#define MB 62

static void esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else
			fputc(*s, f);
	}
}

/* A "nice" step for a linear axis from 0 to max: 1, 2 or 5 x 10^k. */
static double nice_step(double max)
{
	double raw = max / 5, p = pow(10, floor(log10(raw))), m = raw / p;

	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* kind: 0 a plain number, 1 bytes, 2 seconds */
static void tick_label(char *buf, size_t len, double v, int kind)
{
	if (kind == 1)
		model_fmt_bytes(v, buf, len);
	else if (kind == 2 && v > 0 && v < 1e-3)
		snprintf(buf, len, "%.3g us", v * 1e6);
	else if (kind == 2 && v > 0 && v < 1)
		snprintf(buf, len, "%.3g ms", v * 1e3);
	else if (kind == 2 && v > 0)
		snprintf(buf, len, "%.3g s", v);
	else
		snprintf(buf, len, "%g", v);
}

int model_svg(const char *path, const char *title, const char *xlabel, const char *ylabel,
	      int xlog10, int ylog, const struct svg_series *s, int ns, const char *footnote)
{
	double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = 0;
	double pw = W - ML - MR, ph = H - MT - MB;
	FILE *f;
	char lb[64];

	for (int i = 0; i < ns; i++)
		for (int k = 0; k < s[i].n; k++) {
			if (!(s[i].x[k] > 0) || !(s[i].y[k] > 0))
				continue;
			xmin = fmin(xmin, s[i].x[k]);
			xmax = fmax(xmax, s[i].x[k]);
			ymin = fmin(ymin, s[i].y[k]);
			ymax = fmax(ymax, s[i].y[k]);
		}
	if (!(xmax > 0) || !(ymax > 0))
		return -1;
	if (xmax <= xmin)
		xmax = xmin * 2;
	f = fopen(path, "we");
	if (!f)
		return -1;

	double lx0 = xlog10 ? log10(xmin) : log2(xmin), lx1 = xlog10 ? log10(xmax) : log2(xmax);
	double y0, y1, step;

	if (ylog) {
		y0 = floor(log10(ymin));
		y1 = ceil(log10(ymax));
		if (y1 <= y0)
			y1 = y0 + 1;
		step = 1;
	} else {
		step = nice_step(ymax);
		y0 = 0;
		y1 = ceil(ymax / step) * step;
	}
#define PX(x) (ML + ((xlog10 ? log10(x) : log2(x)) - lx0) / (lx1 - lx0) * pw)
#define PY(y) (MT + ph - ((ylog ? log10(y) : (y)) - y0) / (y1 - y0) * ph)

	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		   "font-family=\"sans-serif\" font-size=\"12\">\n",
		W, H, W, H);
	fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
	fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", ML);
	esc(f, title);
	fprintf(f, "</text>\n");
	/* grid and y ticks */
	if (ylog) {
		for (double e = y0; e <= y1 + 1e-9; e++) {
			double y = MT + ph - (e - y0) / (y1 - y0) * ph;

			fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n",
				ML, y, ML + pw, y);
			tick_label(lb, sizeof(lb), pow(10, e), 2);
			fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", ML - 6, y + 4, lb);
		}
	} else {
		for (double v = 0; v <= y1 + step / 2; v += step) {
			double y = PY(v);

			fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n",
				ML, y, ML + pw, y);
			tick_label(lb, sizeof(lb), v, 0);
			fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", ML - 6, y + 4, lb);
		}
	}
	/* x ticks: at every data point of the first series */
	for (int k = 0; ns > 0 && k < s[0].n; k++) {
		double x = PX(s[0].x[k]);

		if (xlog10 && s[0].n > 10 && k % 2)
			continue;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eeeeee\"/>\n", x, MT, x,
			MT + ph);
		tick_label(lb, sizeof(lb), s[0].x[k], xlog10);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, MT + ph + 16, lb);
	}
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#333333\"/>\n",
		ML, MT, pw, ph);
	fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", ML + pw / 2, H - 26);
	esc(f, xlabel);
	fprintf(f, "</text>\n<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">",
		MT + ph / 2);
	esc(f, ylabel);
	fprintf(f, "</text>\n");
	/* series */
	for (int i = 0; i < ns; i++) {
		int first = 1;

		fprintf(f, "<g class=\"series\" data-name=\"");
		esc(f, s[i].name);
		fprintf(f, "\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" points=\"", s[i].color);
		for (int k = 0; k < s[i].n; k++) {
			if (!(s[i].x[k] > 0) || !(s[i].y[k] > 0))
				continue;
			fprintf(f, "%s%.1f,%.1f", first ? "" : " ", PX(s[i].x[k]), PY(s[i].y[k]));
			first = 0;
		}
		fprintf(f, "\"/>\n");
		for (int k = 0; k < s[i].n; k++) {
			char t[64];

			if (!(s[i].x[k] > 0) || !(s[i].y[k] > 0))
				continue;
			tick_label(lb, sizeof(lb), s[i].x[k], xlog10);
			model_fmt_time(s[i].y[k], t, sizeof(t));
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>", PX(s[i].x[k]),
				PY(s[i].y[k]), s[i].color);
			esc(f, s[i].name);
			fprintf(f, ": %s, %s</title></circle>\n", lb, t);
		}
		fprintf(f, "</g>\n");
		/* legend */
		fprintf(f, "<line x1=\"%.0f\" y1=\"%d\" x2=\"%.0f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n",
			ML + pw + 14, MT + 14 + 22 * i, ML + pw + 40, MT + 14 + 22 * i, s[i].color);
		fprintf(f, "<text x=\"%.0f\" y=\"%d\">", ML + pw + 46, MT + 18 + 22 * i);
		esc(f, s[i].name);
		fprintf(f, "</text>\n");
	}
	if (footnote) {
		fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#555555\">", ML, H - 8);
		esc(f, footnote);
		fprintf(f, "</text>\n");
	}
	fprintf(f, "</svg>\n");
#undef PX
#undef PY
	if (ferror(f) | fclose(f))
		return -1;
	return 0;
}
