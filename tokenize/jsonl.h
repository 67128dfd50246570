/* jsonl.h: documents from JSON Lines: each line one JSON object, the document the string at a
 * field (a dotted path reaches into objects: "meta.text"). Lines come from a tk_source (plain
 * or compressed, as input.h reads), parsed by jansson one at a time; a line is bounded by
 * max_line bytes, so memory is a few times that at most. Blank lines are no documents. A line
 * that is not a JSON object, lacks the field or holds something else than a string there is an
 * error naming FILE:LINE, or with skip_bad is skipped and counted.
 * Also documents from one JSON array of objects (a .json file, as many datasets ship): streamed
 * item by item (an item's end found by a scan that skips strings and counts brackets, then the
 * item parsed by jansson), each item bounded by max_line bytes, so the array's size does not
 * matter; items are checked as lines are, errors naming FILE:LINE: item N. A leading UTF-8 byte
 * order mark is no part of the JSON (the caller skips it, tk_json_bom).
 * Owns: the line buffer and the parsed line (valid until the next call). Lifetime: open .. close;
 * the source stays the caller's. Thread safety: one reader per thread. */
#ifndef TK_JSONL_H
#define TK_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "input.h"

typedef struct tk_jsonl tk_jsonl;

typedef struct tk_jsonl_opts {
    const char *field; /* NULL: "text" */
    size_t max_line;   /* bytes; 0: TK_JSONL_MAX_LINE */
    int skip_bad;
    int array;         /* the input is one JSON array of objects (TK_JSON_ARRAY) */
} tk_jsonl_opts;

#define TK_JSONL_MAX_LINE ((size_t)64 << 20)

/* What an input whose name is name (NULL: stdin) and whose text starts with head[0..n) is, by
 * its first byte past a byte order mark and whitespace: '{' JSON Lines and '[' an array of
 * objects, when either its name ends in .jsonl, .ndjson or .json (before one compression suffix:
 * .gz .bz2 .xz .lzma .zst .lz4) or a field was asked for (field_given); a .json whose text starts
 * as a JSON string, number, true, false or null is TK_JSON_SCALAR (refused); else none (text). */
enum { TK_JSON_NONE, TK_JSON_LINES, TK_JSON_ARRAY, TK_JSON_SCALAR };
int tk_jsonl_detect(const char *name, const char *head, size_t n, int field_given);
/* 3 when head[0..n) starts with a UTF-8 byte order mark, else 0. */
size_t tk_json_bom(const char *head, size_t n);

/* Reads src (positioned at its one document) as JSON Lines (or an array, o->array); head[0..nhead)
 * are bytes already read from it (past any byte order mark). name labels messages. */
int tk_jsonl_open(tk_jsonl **out, tk_source *src, const char *name, const tk_jsonl_opts *o,
                  const char *head, size_t nhead, gk_err *e);
/* The next document's text (valid until the next call); *more = 0 at the end. */
int tk_jsonl_next(tk_jsonl *j, const char **text, size_t *len, int *more, gk_err *e);
/* Lines skipped as bad (with skip_bad), and the first one's message ("" if none). */
int64_t tk_jsonl_bad(const tk_jsonl *j);
const char *tk_jsonl_first_bad(const tk_jsonl *j);
void tk_jsonl_close(tk_jsonl *j);

#endif
