/* A small JSON reader (see mjson.h): recursive descent, RFC 8259. */
#include "mjson.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MJ_MAX_DEPTH 64

struct mj_in {
	const char *s, *p;
	char *err;
	size_t errlen;
	int failed;
};

static void fail(struct mj_in *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct mj_in *in, const char *fmt, ...)
{
	va_list ap;
	int line = 1;
	size_t n;

	if (in->failed)
		return;
	in->failed = 1;
	for (const char *c = in->s; c < in->p; c++)
		line += *c == '\n';
	if (!in->err || !in->errlen)
		return;
	n = (size_t)snprintf(in->err, in->errlen, "line %d: ", line);
	if (n >= in->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(in->err + n, in->errlen - n, fmt, ap);
	va_end(ap);
}

static void ws(struct mj_in *in)
{
	while (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r')
		in->p++;
}

static struct mj *node(struct mj_in *in, enum mj_type t)
{
	struct mj *j = calloc(1, sizeof(*j));

	if (!j)
		fail(in, "out of memory");
	else
		j->type = t;
	return j;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t utf8(unsigned cp, char *o)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A string literal at in->p (on the opening quote): a new buffer. */
static char *string(struct mj_in *in)
{
	const char *p = in->p + 1;
	size_t cap = 16, n = 0;
	char *o = malloc(cap);

	if (!o) {
		fail(in, "out of memory");
		return NULL;
	}
	for (;;) {
		unsigned char c = (unsigned char)*p;
		char tmp[4];
		size_t add = 1;

		if (!c) {
			in->p = p;
			fail(in, "unterminated string");
			free(o);
			return NULL;
		}
		if (c < 0x20) {
			in->p = p;
			fail(in, "control character in a string");
			free(o);
			return NULL;
		}
		if (c == '"')
			break;
		if (c == '\\') {
			p++;
			switch (*p) {
			case '"': tmp[0] = '"'; break;
			case '\\': tmp[0] = '\\'; break;
			case '/': tmp[0] = '/'; break;
			case 'b': tmp[0] = '\b'; break;
			case 'f': tmp[0] = '\f'; break;
			case 'n': tmp[0] = '\n'; break;
			case 'r': tmp[0] = '\r'; break;
			case 't': tmp[0] = '\t'; break;
			case 'u': {
				unsigned cp, lo;

				if (hex4(p + 1, &cp)) {
					in->p = p;
					fail(in, "bad \\u escape");
					free(o);
					return NULL;
				}
				p += 4;
				if (cp >= 0xd800 && cp < 0xdc00 && p[1] == '\\' && p[2] == 'u' &&
				    !hex4(p + 3, &lo) && lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					p += 6;
				}
				add = utf8(cp, tmp);
				break;
			}
			default:
				in->p = p;
				fail(in, "bad escape");
				free(o);
				return NULL;
			}
		} else {
			tmp[0] = (char)c;
		}
		if (n + add + 1 > cap) {
			char *no;

			cap *= 2;
			no = realloc(o, cap);
			if (!no) {
				free(o);
				fail(in, "out of memory");
				return NULL;
			}
			o = no;
		}
		memcpy(o + n, tmp, add);
		n += add;
		p++;
	}
	o[n] = 0;
	in->p = p + 1;
	return o;
}

static struct mj *value(struct mj_in *in, int depth);

static struct mj *container(struct mj_in *in, int depth, int obj)
{
	struct mj *j = node(in, obj ? MJ_OBJ : MJ_ARR), **tail;
	char close = obj ? '}' : ']';

	if (!j)
		return NULL;
	tail = &j->kid;
	in->p++;
	ws(in);
	if (*in->p == close) {
		in->p++;
		return j;
	}
	for (;;) {
		char *key = NULL;
		struct mj *v;

		ws(in);
		if (obj) {
			if (*in->p != '"') {
				fail(in, "expected a key string");
				break;
			}
			key = string(in);
			if (!key)
				break;
			ws(in);
			if (*in->p != ':') {
				free(key);
				fail(in, "expected ':'");
				break;
			}
			in->p++;
		}
		v = value(in, depth + 1);
		if (!v) {
			free(key);
			break;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		ws(in);
		if (*in->p == ',') {
			in->p++;
			continue;
		}
		if (*in->p == close) {
			in->p++;
			return j;
		}
		fail(in, "expected ',' or '%c'", close);
		break;
	}
	mj_free(j);
	return NULL;
}

static struct mj *value(struct mj_in *in, int depth)
{
	struct mj *j;

	if (depth > MJ_MAX_DEPTH) {
		fail(in, "nested too deeply");
		return NULL;
	}
	ws(in);
	switch (*in->p) {
	case '{':
		return container(in, depth, 1);
	case '[':
		return container(in, depth, 0);
	case '"':
		j = node(in, MJ_STR);
		if (j && !(j->str = string(in))) {
			free(j);
			j = NULL;
		}
		return j;
	case 't':
	case 'f':
	case 'n': {
		static const char *const lit[] = { "true", "false", "null" };

		for (int i = 0; i < 3; i++)
			if (!strncmp(in->p, lit[i], strlen(lit[i]))) {
				j = node(in, i == 2 ? MJ_NULL : MJ_BOOL);
				if (j)
					j->num = i == 0;
				in->p += strlen(lit[i]);
				return j;
			}
		fail(in, "unknown literal");
		return NULL;
	}
	default: {
		char *end;
		double d;

		if (*in->p != '-' && (*in->p < '0' || *in->p > '9')) {
			if (*in->p)
				fail(in, "unexpected character '%c'", *in->p);
			else
				fail(in, "unexpected end of the document");
			return NULL;
		}
		errno = 0;
		d = strtod(in->p, &end);
		if (end == in->p) {
			fail(in, "bad number");
			return NULL;
		}
		in->p = end;
		j = node(in, MJ_NUM);
		if (j)
			j->num = d;
		return j;
	}
	}
}

struct mj *mj_parse(const char *text, char *err, size_t errlen)
{
	struct mj_in in = { .s = text, .p = text, .err = err, .errlen = errlen };
	struct mj *j;

	if (err && errlen)
		err[0] = 0;
	j = value(&in, 0);
	if (j) {
		ws(&in);
		if (*in.p) {
			fail(&in, "text after the document");
			mj_free(j);
			j = NULL;
		}
	}
	return j;
}

struct mj *mj_parse_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n = 0, cap = 0;
	struct mj *j;

	if (!f) {
		snprintf(err, errlen, "%s", strerror(errno));
		return NULL;
	}
	for (;;) {
		size_t r;

		if (cap - n < 65536) {
			char *nb;

			cap = cap ? 2 * cap : 65536 * 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				fclose(f);
				snprintf(err, errlen, "out of memory");
				return NULL;
			}
			buf = nb;
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (!r)
			break;
	}
	fclose(f);
	buf[n] = 0;
	j = mj_parse(buf, err, errlen);
	free(buf);
	return j;
}

void mj_free(struct mj *j)
{
	while (j) {
		struct mj *next = j->next;

		mj_free(j->kid);
		free(j->str);
		free(j->key);
		free(j);
		j = next;
	}
}

const struct mj *mj_get(const struct mj *o, const char *key)
{
	if (!o || o->type != MJ_OBJ)
		return NULL;
	for (const struct mj *k = o->kid; k; k = k->next)
		if (!strcmp(k->key, key))
			return k;
	return NULL;
}

const struct mj *mj_path(const struct mj *o, const char *path)
{
	char part[256];

	while (o && *path) {
		const char *slash = strchr(path, '/');
		size_t l = slash ? (size_t)(slash - path) : strlen(path);

		if (l >= sizeof(part))
			return NULL;
		memcpy(part, path, l);
		part[l] = 0;
		o = mj_get(o, part);
		path += l + (slash != NULL);
	}
	return o;
}

double mj_num(const struct mj *o, const char *path)
{
	const struct mj *j = mj_path(o, path);

	return j && j->type == MJ_NUM ? j->num : NAN;
}

const char *mj_str(const struct mj *o, const char *path)
{
	const struct mj *j = mj_path(o, path);

	return j && j->type == MJ_STR ? j->str : NULL;
}
