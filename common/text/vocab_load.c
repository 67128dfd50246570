/* vocab_load.c: a vocabulary from a path (a directory of BPE files, a .tiktoken file or a char
 * vocab) or from memory (a checkpoint's tensors), its JSON text, and where to find one when no
 * path is given (option, $GPT_VOCAB, the HuggingFace cache, the installed data directory). */
#include "common/text/vocab.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/datadir.h"
#include "common/text/vocab_formats.h"
#include "common/text/vocab_int.h"

int gk_vocab_to_json(const gk_vocab *v, char **out, size_t *len, gk_err *e)
{
    *out = NULL;
    *len = 0;
    return v->type == GK_VOCAB_CHAR ? gk_vocab_chars_json(v, out, len, e)
                                    : gk_vocab_bpe_json(v, out, len, e);
}

/* ---------------------------------------------------------------- loading and finding */

static int file_in(const char *dir, const char *name)
{
    char p[8192];
    struct stat st;
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) return 0;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int load_dir(gk_vocab **out, const char *dir, gk_err *e)
{
    static const char *pairs[2][2] = {{"encoder.json", "vocab.bpe"}, {"vocab.json", "merges.txt"}};
    for (int k = 0; k < 2; k++) {
        int a = file_in(dir, pairs[k][0]), b = file_in(dir, pairs[k][1]);
        if (!a && !b) continue;
        char pj[8192], pm[8192];
        snprintf(pj, sizeof pj, "%s/%s", dir, pairs[k][0]);
        snprintf(pm, sizeof pm, "%s/%s", dir, pairs[k][1]);
        if (!a || !b)
            return gk_errf(e, GK_ENOTFOUND, "%s: no such file (needed with %s)", a ? pm : pj,
                           a ? pj : pm);
        return gk_vocab_load_json_dir(out, pj, pm, e);
    }
    return gk_errf(e, GK_ENOTFOUND, "%s: holds neither encoder.json + vocab.bpe nor vocab.json + "
                   "merges.txt", dir);
}

int gk_vocab_load(gk_vocab **out, const char *path, gk_err *e)
{
    struct stat st;
    *out = NULL;
    if (stat(path, &st)) return gk_errno(e, path);
    if (S_ISDIR(st.st_mode)) return load_dir(out, path, e);
    size_t pl = strlen(path);
    if (pl >= 9 && !strcmp(path + pl - 9, ".tiktoken")) return gk_vocab_load_tiktoken(out, path, e);
    FILE *f = fopen(path, "rb");
    if (!f) return gk_errno(e, path);
    int c;
    while ((c = getc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r') {}
    fclose(f);
    if (c == '[') return gk_vocab_load_chars(out, path, e);
    if (c == '{')
        return gk_errf(e, GK_EUSAGE, "%s: a JSON object: give the directory holding it and its "
                       "merges file (encoder.json + vocab.bpe or vocab.json + merges.txt)", path);
    return gk_vocab_load_tiktoken(out, path, e);
}

int gk_vocab_load_mem(gk_vocab **out, const char *vocab_json, size_t vocab_len, const char *merges,
                      size_t merges_len, const char *origin, gk_err *e)
{
    size_t i = 0;
    *out = NULL;
    while (i < vocab_len && memchr(" \t\r\n", vocab_json[i], 4)) i++;
    char c = i < vocab_len ? vocab_json[i] : '\0';
    if (c == '[' && merges && merges_len)
        return gk_errf(e, GK_EFORMAT,
                       "%s: a char vocab (JSON array) takes no merges (got %zu bytes)", origin,
                       merges_len);
    if (c == '[') return gk_vocab_parse_chars(out, vocab_json, vocab_len, origin, e);
    if (c != '{')
        return gk_errf(e, GK_EFORMAT, "%s: not a vocab: expected a JSON object (BPE token -> id) "
                       "or array (characters)", origin);
    char *mname = malloc(strlen(origin) + sizeof " (merges)");
    if (!mname) return gk_errf(e, GK_ENOMEM, "%s: out of memory", origin);
    strcat(strcpy(mname, origin), " (merges)");
    int rc = gk_vocab_parse_bpe(out, vocab_json, vocab_len, origin, merges, merges_len, mname, e);
    free(mname);
    return rc;
}

static int put_path(char *out, size_t cap, const char *p, gk_err *e)
{
    size_t n = strlen(p);
    if (n >= cap) return gk_errf(e, GK_EUSAGE, "vocab path too long: %s", p);
    memcpy(out, p, n + 1);
    return 0;
}

/* gk_vocab_set_search's: the tool's $GPT_VOCAB, $HF_HOME and $HOME (NULL: unset). */
static const char *search_vocab, *search_hf_home, *search_home;

void gk_vocab_set_search(const char *gpt_vocab, const char *hf_home, const char *home)
{
    search_vocab = gpt_vocab;
    search_hf_home = hf_home;
    search_home = home;
}

/* The snapshot refs/main names if it has vocab.json + merges.txt, else any such snapshot.
 * Returns 0 (found), 1 (none), or an error code. */
static int find_hf(char *out, size_t cap, gk_err *e)
{
    char base[4096], dir[4600], ref[128] = "";
    const char *hf = search_hf_home, *home = search_home;
    if (hf && *hf) snprintf(base, sizeof base, "%s/hub/models--gpt2", hf);
    else if (home && *home)
        snprintf(base, sizeof base, "%s/.cache/huggingface/hub/models--gpt2", home);
    else return 1;
    snprintf(dir, sizeof dir, "%s/refs/main", base);
    FILE *f = fopen(dir, "r");
    if (f) {
        if (fscanf(f, "%127s", ref) != 1) ref[0] = '\0';
        fclose(f);
    }
    snprintf(dir, sizeof dir, "%s/snapshots/%s", base, ref);
    if (ref[0] && !strchr(ref, '/') && file_in(dir, "vocab.json") && file_in(dir, "merges.txt"))
        return put_path(out, cap, dir, e);
    snprintf(dir, sizeof dir, "%s/snapshots/*/vocab.json", base);
    glob_t g;
    int found = 1;
    if (glob(dir, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && found == 1; i++) {
            char *d = g.gl_pathv[i];
            *strrchr(d, '/') = '\0';
            if (file_in(d, "merges.txt")) found = put_path(out, cap, d, e);
        }
        globfree(&g);
    }
    return found;
}

int gk_vocab_find(char *out, size_t cap, const char *option, gk_err *e)
{
    const char *env = search_vocab;
    if (option) return put_path(out, cap, option, e);
    if (env && *env) return put_path(out, cap, env, e);
    int r = find_hf(out, cap, e);
    if (r <= 0) return r;
    char data[4096];
    gk_datadir(data, sizeof data);
    if (file_in(data, "encoder.json") && file_in(data, "vocab.bpe"))
        return put_path(out, cap, data, e);
    return gk_errf(e, GK_ENOTFOUND, "no GPT-2 vocabulary found: use -V DIR or GPT_VOCAB=DIR with "
                   "DIR holding encoder.json + vocab.bpe or vocab.json + merges.txt");
}
