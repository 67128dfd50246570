/* test_vocab_find.c: gk_vocab_find's lookup order (the path given, $GPT_VOCAB, the HuggingFace
 * cache under $HF_HOME or $HOME/.cache/huggingface, refs/main among several snapshots) and its
 * error naming GPT_VOCAB and -V; split from test_vocab.c (the vocab formats). */
#include <stdlib.h>
#include <unistd.h>

#include "common/text/vocab.h"
#include "test.h"

static char tmpdir[] = "/tmp/test_vocab_find.XXXXXX";
static int have_tmp;

static void tmp_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static void test_find(void)
{
    if (!have_tmp) SKIP("mkdtemp failed");
    char out[4096], hf[1024], snap[2048];
    gk_err e;
    CHECK_OK(gk_vocab_find(out, sizeof out, "/some/dir", &e), &e);
    CHECK(!strcmp(out, "/some/dir"));
    CHECK(gk_vocab_find(out, 4, "/some/dir", &e) == GK_EUSAGE);
    gk_vocab_set_search("/env/dir", NULL, NULL); /* the tool's $GPT_VOCAB */
    CHECK_OK(gk_vocab_find(out, sizeof out, NULL, &e), &e);
    CHECK(!strcmp(out, "/env/dir"));
    tmp_path(hf, sizeof hf, "hfhome");
    snprintf(snap, sizeof snap, "%s/hub/models--gpt2/snapshots/abc123", hf);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && touch '%s/vocab.json' '%s/merges.txt'", snap, snap,
             snap);
    CHECK(system(cmd) == 0);
    gk_vocab_set_search("", hf, NULL); /* $HF_HOME; an empty $GPT_VOCAB is unset */
    CHECK_OK(gk_vocab_find(out, sizeof out, NULL, &e), &e);
    CHECKF(!strcmp(out, snap), "%s", out);
    /* without $HF_HOME: $HOME/.cache/huggingface */
    char home[1024], want[4096];
    tmp_path(home, sizeof home, "home");
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/.cache' && ln -s '%s' '%s/.cache/huggingface'", home,
             hf, home);
    CHECK(system(cmd) == 0);
    gk_vocab_set_search(NULL, NULL, home);
    snprintf(want, sizeof want, "%s/.cache/huggingface/hub/models--gpt2/snapshots/abc123", home);
    CHECK_OK(gk_vocab_find(out, sizeof out, NULL, &e), &e);
    CHECKF(!strcmp(out, want), "%s", out);
    gk_vocab_set_search(NULL, hf, home); /* $HF_HOME first */
    /* refs/main picks the snapshot when there are several */
    snprintf(cmd, sizeof cmd,
             "cd '%s/hub/models--gpt2' && mkdir -p refs snapshots/000 snapshots/fff && touch "
             "snapshots/000/vocab.json snapshots/000/merges.txt snapshots/fff/vocab.json "
             "snapshots/fff/merges.txt && echo abc123 > refs/main",
             hf);
    CHECK(system(cmd) == 0);
    CHECK_OK(gk_vocab_find(out, sizeof out, NULL, &e), &e);
    CHECKF(!strcmp(out, snap), "%s", out);
    gk_vocab_set_search(NULL, tmpdir, NULL); /* no snapshot there */
    int rc = gk_vocab_find(out, sizeof out, NULL, &e);
    CHECK(rc == 0 || (rc == GK_ENOTFOUND && strstr(e.msg, "GPT_VOCAB") && strstr(e.msg, "-V")));
    gk_vocab_set_search(NULL, NULL, NULL);
}

int main(void)
{
    have_tmp = mkdtemp(tmpdir) != NULL;
    RUN(test_find);
    if (have_tmp) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return TEST_END();
}
