/* uroce trace --html: the data path of a trace as one self-contained HTML
 * page (inline SVG and CSS, nothing fetched). */
#ifndef UROCE_TRACE_HTML_H
#define UROCE_TRACE_HTML_H

struct html_opts {
	const char *command;   /* what ran, shown in the page ("built-in ..." or CMD) */
	long max_events;       /* rows drawn at most (0: the default) */
};

/* Reads every DIR/trace.<pid> file (UROCE_TRACE lines), merges them by
 * time and writes the page to out. Returns 0, 2 when there is no trace,
 * -1 when out cannot be written. Prints one summary line on stderr. */
int trace_html(const char *dir, const char *out, const struct html_opts *o);

#endif
