/* A small JSON reader for the model's calibration file and for the
 * benchmark documents it is refreshed from (build/bench/ results). The whole
 * document becomes a tree of nodes; objects keep their keys in order.
 * Strings are unescaped (\uXXXX to UTF-8, surrogate pairs joined). */
#ifndef UROCE_MJSON_H
#define UROCE_MJSON_H

#include <stddef.h>

enum mj_type { MJ_NULL, MJ_BOOL, MJ_NUM, MJ_STR, MJ_ARR, MJ_OBJ };

struct mj {
	enum mj_type type;
	double num;          /* MJ_NUM; MJ_BOOL: 0 or 1 */
	char *str;           /* MJ_STR */
	char *key;           /* the key when this node is an object member */
	struct mj *kid;      /* first element or member */
	struct mj *next;     /* next sibling */
};

/* Parses text (NUL-terminated). NULL on error, with a message in err
 * ("line 3: expected ':'"). */
struct mj *mj_parse(const char *text, char *err, size_t errlen);
/* Reads and parses a file; NULL with err set (also when it cannot be read). */
struct mj *mj_parse_file(const char *path, char *err, size_t errlen);
void mj_free(struct mj *j);

/* The member key of object o, or NULL. */
const struct mj *mj_get(const struct mj *o, const char *key);
/* Follows a path of keys separated by '/', e.g. "summary/lo/iperf3_tcp". */
const struct mj *mj_path(const struct mj *o, const char *path);
/* A number at path (NAN when missing or not a number). */
double mj_num(const struct mj *o, const char *path);
/* A string at path, or NULL. */
const char *mj_str(const struct mj *o, const char *path);

#endif
